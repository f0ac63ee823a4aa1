"""Gangs placed in one topology domain, asked for in each peer's way, through
`batchsched simulate`: our PodGroup with configured label tiers, Volcano's PodGroup
with HyperNodes (networkTopology, subGroupPolicy), Kueue's pod-set annotations, and
the semantics kube-scheduler's topology-aware workload scheduling states (KEP-5732):
fuller domains first, nodes without the label never used, a running gang's new members
kept to its domain. Bad input names the object and field, and the rest is scheduled."""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.api.spanclock import OWNER_ANNOTATION, SINCE_ANNOTATION

from .harness import Run, simulate
from tests.support.objects import (
    gang,
    hypernode,
    hypernode_member,
    member,
    native_pod_group,
    node,
    pod,
    pod_group,
    stamp,
)

RACK = "topology.kubernetes.io/rack"
SPINE = "example.com/spine"
VOLCANO = "scheduling.volcano.sh/v1beta1"
RACK_TIERS = f"""
topology:
  tiers:
  - {{name: rack, nodeLabel: {RACK}}}
  - {{name: spine, nodeLabel: {SPINE}}}
"""


def run(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    objects: Iterable[Mapping[str, Any]],
    config: str | None = None,
) -> Run:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(list(objects)))
    config_path = None
    if config is not None:
        config_path = tmp_path / "config.yaml"
        config_path.write_text(config)
    result = simulate(capsys, path, config=None if config_path is None else str(config_path))
    assert result.code == 0, result.stderr
    return result


def racks(sizes: Mapping[str, int], *, cpu: str = "4", spine: str = "s1") -> list[dict[str, Any]]:
    """`sizes[rack]` nodes named rack-i, labelled with their rack and spine."""
    return [
        node(f"{rack}-{i}", cpu=cpu, labels={RACK: rack, SPINE: spine})
        for rack, count in sizes.items()
        for i in range(count)
    ]


def domains_of(run: Run, prefix: str) -> set[str]:
    """The racks (node name prefixes) the bound pods named `prefix`-* are on."""
    return {node.rsplit("-", 1)[0] for key, node in run.bound().items() if key.startswith(prefix)}


def exact(kind: str, name: str) -> dict[str, Any]:
    return hypernode_member(kind, exactMatch={"name": name})


def volcano_gang(name: str, size: int, cpu: str, **spec: Any) -> list[dict[str, Any]]:
    group = pod_group(name, size, api_version=VOLCANO, **spec)
    members = [
        pod(f"{name}-{i}", {"cpu": cpu}, annotations={"scheduling.k8s.io/group-name": name})
        for i in range(size)
    ]
    return [group, *members]


# The rack/spine tree of HyperNodes over racks r1 (3 nodes) and r2 (5 nodes): r1 by a
# name pattern, r2 by labels, the spine by exact names.
TREE = [
    hypernode("r1", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^r1-"}}}], "rack"),
    hypernode(
        "r2",
        1,
        [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: "r2"}}}}],
        "rack",
    ),
    hypernode("s1", 2, [exact("HyperNode", "r1"), exact("HyperNode", "r2")], "spine"),
]


def test_hard_tier_takes_the_rack_that_holds_the_gang(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """KEP-5732's first case: racks with room for 3 and 5, a gang of 4 lands in the
    second; and Volcano's: hard highestTierAllowed 1 never spans two tier-1 HyperNodes."""
    objects = [*racks({"r1": 3, "r2": 5}), *TREE]
    objects += volcano_gang("g", 4, "4", networkTopology={"mode": "hard", "highestTierAllowed": 1})
    result = run(capsys, tmp_path, objects)
    assert len(result.bound()) == 4
    assert domains_of(result, "default/g-") == {"r2"}


def test_native_pod_group_topology_key_keeps_its_gang_in_one_rack(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Kubernetes' own PodGroup states its one key in spec.schedulingConstraints: a gang
    of 4 takes the rack of 5 (racks with room for 3 and 5), never the unlabelled node
    with room for all, and a gang of 6 that no rack holds waits, naming the key."""
    objects = [*racks({"r1": 3, "r2": 5}), node("big", cpu="64")]
    constraints = {"topology": [{"key": RACK}]}
    for name, size in (("g", 4), ("wide", 6)):
        objects.append(native_pod_group(name, size, schedulingConstraints=constraints))
        objects += [member(f"{name}-{i}", name, {"cpu": "4"}) for i in range(size)]
    result = run(capsys, tmp_path, objects)
    assert domains_of(result, "default/g-") == {"r2"}
    assert not [key for key in result.bound() if key.startswith("default/wide-")]
    assert result.pods["default/wide-0"]["reason"].startswith(
        "gang default/wide: PodGroup default/wide.spec.schedulingConstraints.topology[0].key "
        f"asks its members in one domain of {RACK} (hard)"
    )


def test_a_basic_native_group_takes_what_its_rack_holds_and_counts_all_its_members(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A basic PodGroup asking for a rack places the members the rack holds (any number
    is enough), and the one left waits saying how many of all of them the rack holds,
    not of its minimum of 0."""
    constraints = {"topology": [{"key": RACK}]}
    objects = [
        *racks({"r1": 2}),
        native_pod_group("basic", None, schedulingConstraints=constraints),
        *(member(f"basic-{i}", "basic", {"cpu": "4"}) for i in range(3)),
    ]
    result = run(capsys, tmp_path, objects)
    assert sorted(result.bound()) == ["default/basic-0", "default/basic-1"]
    assert f"the best, {RACK} r1, holds 2 of 3;" in result.pods["default/basic-2"]["reason"]


def test_hard_tier_waits_where_no_rack_holds_the_gang(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two racks of 3: a hard gang of 4 waits, saying its tier and the closest rack; a
    soft one is placed across both; the highest tier by name (spine) is one domain."""
    base = [*racks({"r1": 3, "r2": 3}), *TREE[:1]]
    base.append(hypernode("r2", 1, [exact("Node", f"r2-{i}") for i in range(3)], "rack"))
    base.append(TREE[2])
    hard = volcano_gang("hard", 4, "4", networkTopology={"mode": "hard", "highestTierAllowed": 1})
    result = run(capsys, tmp_path, [*base, *hard])
    assert result.bound() == {}
    reason = result.pods["default/hard-0"]["reason"]
    assert (
        "PodGroup default/hard.spec.networkTopology asks its members in one domain of rack (hard)"
        in reason
    )
    assert "the best, rack r1, holds 3 of 4" in reason
    for ask in ({"mode": "soft", "highestTierAllowed": 1}, {"highestTierName": "spine"}):
        placed = run(capsys, tmp_path, [*base, *volcano_gang("g", 4, "4", networkTopology=ask)])
        assert len(placed.bound()) == 4
        assert domains_of(placed, "default/g-") == {"r1", "r2"}


def test_fuller_rack_first(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """KEP-5732's second case: both racks fit, the more allocated one wins."""
    objects = [*racks({"r1": 4, "r2": 4}), pod("busy", {"cpu": "2"}, node_name="r2-0")]
    objects += gang("g", 2, requests={"cpu": "2"}, networkTopology={"highestTierName": "rack"})
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert domains_of(result, "default/g-") == {"r2"}


def test_pod_asking_no_domain_fills_the_fuller_rack_among_equal_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Empty nodes score alike; a pod that asks for no domain takes one in the rack
    already in use, leaving rack r1 whole for a gang that needs a rack; then a gang
    of 2 asking for one rack finds it."""
    objects = [*racks({"r1": 2, "r2": 2}), pod("busy", {"cpu": "4"}, node_name="r2-0")]
    objects.append(pod("lone", {"cpu": "2"}))
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert result.pods["default/lone"]["node"] == "r2-1"
    objects += gang("g", 2, requests={"cpu": "4"}, networkTopology={"highestTierAllowed": 1})
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert domains_of(result, "default/g-") == {"r1"}


def test_fuller_rack_counts_pods_placed_earlier_in_the_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """r2 is the fuller rack when the session starts; once pod a is placed in r1 (its
    node selector sends it there), r1 is, and pod b, free to go anywhere, follows it."""
    objects = [*racks({"r1": 3, "r2": 3}), pod("busy", {"cpu": "1"}, node_name="r2-0")]
    objects.append(pod("a", {"cpu": "4"}, spec={"nodeSelector": {RACK: "r1"}}))
    objects.append(pod("b", {"cpu": "4"}))
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert result.pods["default/a"]["node"] == "r1-0"
    assert result.pods["default/b"]["node"] == "r1-1"


def test_nodes_without_the_label_are_never_used(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """KEP-5732's fourth case: the one node large enough lacks the rack label."""
    objects = [*racks({"r1": 1, "r2": 1}), node("big", cpu="64")]
    objects += gang("g", 2, requests={"cpu": "4"}, networkTopology={"highestTierAllowed": 1})
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert result.bound() == {}
    # Soft, it may span racks, or use the unlabelled node: whatever packs best.
    objects[-3]["spec"]["networkTopology"]["mode"] = "soft"
    assert len(run(capsys, tmp_path, objects, RACK_TIERS).bound()) == 2


def test_running_gang_keeps_its_new_members_in_its_rack(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """KEP-5732's fifth case: with 2 members running in r2, a new member with no room in
    r2 stays pending although r1 has room."""
    objects = [*racks({"r1": 2, "r2": 2})]
    objects += [
        pod_group("g", 2, networkTopology={"highestTierAllowed": 1}),
        *(
            pod(f"g-{i}", {"cpu": "4"}, group="g", node_name=f"r2-{i}", phase="Running")
            for i in range(2)
        ),
        pod("g-2", {"cpu": "4"}, group="g"),
    ]
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    assert result.pods["default/g-2"]["node"] is None
    objects.append(node("r2-2", cpu="4", labels={RACK: "r2", SPINE: "s1"}))
    assert run(capsys, tmp_path, objects, RACK_TIERS).pods["default/g-2"]["node"] == "r2-2"


def test_sub_groups_each_in_a_rack_of_their_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Volcano's subGroupPolicy: pods grouped by their `stage` label, each stage of 2 in
    one rack; the job as a whole within the spine."""
    objects = [*racks({"r1": 2, "r2": 2, "r3": 2}), *TREE[:1]]
    objects += [
        hypernode("r2", 1, [exact("Node", "r2-0"), exact("Node", "r2-1")], "rack"),
        hypernode("r3", 1, [exact("Node", "r3-0"), exact("Node", "r3-1")], "rack"),
        hypernode("s1", 2, [exact("HyperNode", r) for r in ("r1", "r2", "r3")], "spine"),
    ]
    policy = [
        {
            "name": "stage",
            "subGroupSize": 2,
            "matchLabelKeys": ["stage"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    group = pod_group("g", 4, api_version=VOLCANO, subGroupPolicy=policy)
    # One busy node in each rack but r2: a stage of 2 fits only where 2 nodes are free.
    busy = [pod(f"busy-{r}", {"cpu": "4"}, node_name=f"{r}-0", scheduler="other") for r in ("r1",)]
    members = [
        pod(
            f"g-{i}",
            {"cpu": "4"},
            labels={"stage": str(i // 2)},
            annotations={"scheduling.k8s.io/group-name": "g"},
        )
        for i in range(4)
    ]
    result = run(capsys, tmp_path, [*objects, group, *busy, *members])
    bound = result.bound()
    assert len(bound) == 4
    for stage in ("0", "1"):
        nodes = {bound[f"default/g-{i}"] for i in range(4) if str(i // 2) == stage}
        assert len({n.rsplit("-", 1)[0] for n in nodes}) == 1
    assert "r1" not in {n.rsplit("-", 1)[0] for n in bound.values()}


def test_a_limit_above_every_tier_lets_a_gang_span_the_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Racks r1 (three nodes) and r2 (five) under spine s1 (tiers 1 and 2), and a node
    in no HyperNode. Volcano adds a cluster-top HyperNode of every node a tier above
    the highest (addClusterTopHyperNode, v1.15.1): a hard gang of nine whole-node pods
    allowed up to tier 3 spans the cluster, and one allowed up to tier 2 waits."""
    objects = [*racks({"r1": 3, "r2": 5}), node("lone-0", cpu="4"), *TREE]
    objects += volcano_gang("wide", 9, "4", networkTopology={"highestTierAllowed": 3})
    objects += volcano_gang("tight", 9, "4", networkTopology={"highestTierAllowed": 2})
    result = run(capsys, tmp_path, objects)
    bound = result.bound()
    assert sorted(k for k in bound) == [f"default/wide-{i}" for i in range(9)]
    assert "PodGroup default/tight.spec.networkTopology asks" in str(
        result.pods["default/tight-0"]["reason"]
    )


def _wide_on_a_full_cluster(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The tree and lone node above, one node of the nine full of another scheduler's
    pod: a gang of nine whole-node pods fits nowhere, not even spanning the cluster."""
    objects = [*racks({"r1": 3, "r2": 5}), node("lone-0", cpu="4"), *TREE]
    objects.append(pod("hog", {"cpu": "4"}, node_name="lone-0", scheduler="other", created=0))
    return objects + volcano_gang("wide", 9, "4", networkTopology=spec)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_a_gang_allowed_the_cluster_waits_for_room_not_for_a_cluster_domain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str
) -> None:
    """The whole cluster a limit above every tier allows is no domain: a gang short of
    room is not said to wait for a domain of it, and a soft one does not wait by choice
    (its softWait, for a domain of a tier no domain of which could hold it, is moot)."""
    objects = _wide_on_a_full_cluster({"mode": mode, "highestTierAllowed": 3})
    result = run(capsys, tmp_path, objects, "topology: {softWait: 10m}\n")
    reason = str(result.pods["default/wide-0"]["reason"])
    assert f"in one domain of rack or spine, or anywhere ({mode})" in reason, reason
    assert "cluster" not in reason and "softWait" not in reason, reason


def test_a_rack_listed_by_two_spines_is_placed_across_by_neither(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rack r2 is listed by spine s1 (with r1) and by spine a0 (with r3): which spine
    holds it is unknown, so r2 and both spines are left out. A hard gang of seven whole
    nodes allowed up to tier 2 fits only r2 + r3 (a0's claim, the first by name): it
    waits, naming them; a gang rack r3 holds is placed there."""
    objects = [*racks({"r1": 3, "r2": 5, "r3": 2})]
    objects += [
        hypernode(rack, 1, [exact("Node", f"{rack}-{i}") for i in range(size)], "rack")
        for rack, size in (("r1", 3), ("r2", 5), ("r3", 2))
    ]
    objects += [
        hypernode("s1", 2, [exact("HyperNode", "r1"), exact("HyperNode", "r2")], "spine"),
        hypernode("a0", 2, [exact("HyperNode", "r2"), exact("HyperNode", "r3")], "spine"),
    ]
    objects += volcano_gang("g", 7, "4", networkTopology={"highestTierAllowed": 2})
    objects += volcano_gang("fits", 2, "4", networkTopology={"highestTierAllowed": 1})
    result = run(capsys, tmp_path, objects)
    assert set(result.bound()) == {"default/fits-0", "default/fits-1"}
    assert domains_of(result, "default/fits-") == {"r3"}
    reason = str(result.pods["default/g-0"]["reason"])
    assert (
        "(left out: HyperNode a0: spec.members names HyperNode r2, also a member of HyperNode s1)"
        in reason
    ), reason


def test_a_node_two_racks_select_is_in_neither(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rack r1 names its three nodes; rack r2's pattern selects its two and r1-2 as well:
    which rack holds r1-2 is not known, so it is in neither. A hard gang of three whole
    nodes in one rack, which only r1 with r1-2 counted in it holds, waits, naming the
    node and both racks; a hard gang of two is placed in one rack without it, and a gang
    asking no topology is placed on the rest, r1-2 among them."""
    objects = [
        *racks({"r1": 3, "r2": 2}),
        hypernode("r1", 1, [exact("Node", f"r1-{i}") for i in range(3)], "rack"),
        hypernode("r2", 1, [hypernode_member("Node", regexMatch={"pattern": "^r2-|^r1-2$"})]),
    ]
    hard = {"mode": "hard", "highestTierAllowed": 1}
    objects += volcano_gang("g", 3, "4", networkTopology=hard)
    objects += volcano_gang("fits", 2, "4", networkTopology=hard)
    objects += volcano_gang("free", 3, "4")
    result = run(capsys, tmp_path, objects)
    bound = result.bound()
    assert set(bound) == {
        f"default/{n}" for n in ("fits-0", "fits-1", "free-0", "free-1", "free-2")
    }
    assert len(domains_of(result, "default/fits-")) == 1
    assert "r1-2" not in {bound["default/fits-0"], bound["default/fits-1"]}
    reason = str(result.pods["default/g-0"]["reason"])
    assert "(left out: Node r1-2: a member of several HyperNodes of tier 1: r1, r2)" in reason, (
        reason
    )


@pytest.mark.parametrize(("limit", "named"), [(1, False), (2, True)])
def test_a_node_in_two_spines_is_named_to_the_gangs_allowed_spines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: int, named: bool
) -> None:
    """Spine s1 holds rack r1; spine s2 holds rack r2 and names node r1-2 as well, so
    r1-2 is in rack r1 but in no spine. A gang that no domain holds, allowed up to
    tier 1, is not told of it; allowed up to tier 2, it names the node and both spines."""
    objects = [
        *racks({"r1": 3, "r2": 2}),
        hypernode("r1", 1, [exact("Node", f"r1-{i}") for i in range(3)], "rack"),
        hypernode("r2", 1, [exact("Node", f"r2-{i}") for i in range(2)], "rack"),
        hypernode("s1", 2, [exact("HyperNode", "r1")], "spine"),
        hypernode("s2", 2, [exact("HyperNode", "r2"), exact("Node", "r1-2")], "spine"),
    ]
    objects += volcano_gang("g", 6, "4", networkTopology={"highestTierAllowed": limit})
    result = run(capsys, tmp_path, objects)
    reason = str(result.pods["default/g-0"]["reason"])
    note = "(left out: Node r1-2: a member of several HyperNodes of tier 2: s1, s2)"
    assert (note in reason) is named, reason
    assert ("left out" in reason) is named, reason


@pytest.mark.parametrize(("limit", "named"), [(1, False), (2, True)])
def test_a_broken_hypernode_is_named_to_the_gangs_whose_tiers_lost_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: int, named: bool
) -> None:
    """Zone z (tier 3) names a HyperNode that does not exist; spine x (tier 2) lists one
    too. A gang that no domain holds, allowed up to tier 1, lost no HyperNode of its
    tiers: its reason does not name them; allowed up to tier 2, it names spine x."""
    objects = [*racks({"r1": 3, "r2": 5}), *TREE]
    objects += [
        hypernode("z", 3, [exact("HyperNode", "gone")], "zone"),
        hypernode("x", 2, [exact("HyperNode", "missing")], "spine"),
    ]
    objects += volcano_gang("g", 9, "4", networkTopology={"highestTierAllowed": limit})
    result = run(capsys, tmp_path, objects)
    reason = str(result.pods["default/g-0"]["reason"])
    assert ("(left out: HyperNode x: spec.members names HyperNode missing" in reason) is named
    assert ("left out" in reason) is named, reason


def test_any_tier_name_of_a_tier_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two tier-1 HyperNodes whose tierNames differ ("leaf" for r1, "rack" for r2): each
    name asks for tier 1, as Volcano maps every HyperNode's tierName to its tier
    (HyperNodesInfo.HyperNodeTierNameMap, v1.15.1). A gang of three asking "rack" and
    one of four asking "leaf" are both placed, each in one HyperNode."""
    objects = [
        *racks({"r1": 3, "r2": 5}),
        hypernode("r1", 1, [exact("Node", f"r1-{i}") for i in range(3)], "leaf"),
        hypernode("r2", 1, [exact("Node", f"r2-{i}") for i in range(5)], "rack"),
        *volcano_gang("g", 3, "4", networkTopology={"highestTierName": "rack"}),
        *volcano_gang("h", 4, "4", networkTopology={"highestTierName": "leaf"}),
    ]
    result = run(capsys, tmp_path, objects)
    assert len(result.bound()) == 7
    assert domains_of(result, "default/g-") == {"r1"}
    assert domains_of(result, "default/h-") == {"r2"}


def test_a_sub_group_short_of_its_size_waits_for_its_members(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Volcano sub-job is ready only at its subGroupSize (SubJobInfo.IsReady, v1.15.1):
    a gang of minMember 2 whose stage 1 has one of its two members yet runs stage 0,
    and stage 1's member waits, where a rack of three free nodes
    would hold it alone; once its second member is created (at 60s), stage 1 is placed
    whole in one rack."""
    objects = [*racks({"r1": 3, "r2": 3}), *TREE[:1]]
    objects += [hypernode("r2", 1, [exact("Node", f"r2-{i}") for i in range(3)], "rack")]
    policy = [
        {
            "name": "stage",
            "subGroupSize": 2,
            "matchLabelKeys": ["stage"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    group = pod_group("g", 2, api_version=VOLCANO, created=0, subGroupPolicy=policy)
    members = [
        pod(
            f"g-{i}",
            {"cpu": "4"},
            labels={"stage": str(i // 2)},
            annotations={"scheduling.k8s.io/group-name": "g"},
            created=0 if i < 3 else 60,
        )
        for i in range(4)
    ]
    result = run(capsys, tmp_path, [*objects, group, *members])
    times = {key: p.get("bound_at") for key, p in result.pods.items()}
    assert times["default/g-0"] == times["default/g-1"] == 0.0
    assert times["default/g-2"] == times["default/g-3"] == 60.0
    bound = result.bound()
    assert len({bound[f"default/g-{i}"].rsplit("-", 1)[0] for i in (2, 3)}) == 1


def kueue_pod(name: str, notes: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    return pod(
        name,
        {"cpu": "4"},
        labels={"kueue.x-k8s.io/podset": "workers"},
        annotations={"scheduling.batchsched.io/group-name": "k", **notes},
        **extra,
    )


def test_kueue_required_and_preferred_topology(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = [*racks({"r1": 3, "r2": 5}), pod_group("k", 4)]
    required = {"kueue.x-k8s.io/podset-required-topology": RACK}
    result = run(capsys, tmp_path, [*objects, *(kueue_pod(f"k-{i}", required) for i in range(4))])
    assert domains_of(result, "default/k-") == {"r2"}
    # Six members fit no rack: required waits, preferred spreads.
    objects[-1] = pod_group("k", 6)
    result = run(capsys, tmp_path, [*objects, *(kueue_pod(f"k-{i}", required) for i in range(6))])
    assert result.bound() == {}
    assert (
        "[kueue.x-k8s.io/podset-required-topology] asks its members in one domain of "
        "topology.kubernetes.io/rack (hard)" in (result.pods["default/k-0"]["reason"])
    )
    preferred = {"kueue.x-k8s.io/podset-preferred-topology": RACK}
    result = run(capsys, tmp_path, [*objects, *(kueue_pod(f"k-{i}", preferred) for i in range(6))])
    assert len(result.bound()) == 6


def test_a_kueue_pod_set_ranks_racks_by_requests_not_pod_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rack r1 runs 50 pods requesting nothing, r2 one of 2 CPUs: r2 is the fuller by
    what is requested there, and the tighter fit (1 slot of 4 CPUs against 2), so a
    Kueue pod set asking one rack goes there as Kueue's BestFit sends it, as a gang
    asking one rack by `networkTopology` does. With the pod count averaged in, r1 was
    the fuller for the Kueue pod set."""
    objects = racks({"r1": 1, "r2": 1}, cpu="8")
    objects += [pod(f"tiny-{i}", node_name="r1-0", scheduler="other") for i in range(50)]
    objects.append(pod("busy", {"cpu": "2"}, node_name="r2-0", scheduler="other"))
    kueue = [pod_group("k", 1), kueue_pod("k-0", {"kueue.x-k8s.io/podset-required-topology": RACK})]
    volcano = gang("g", 1, requests={"cpu": "4"}, networkTopology={"highestTierAllowed": 1})
    for name, asks in (("k", kueue), ("g", volcano)):
        result = run(capsys, tmp_path, [*objects, *asks], RACK_TIERS)
        assert result.bound() == {f"default/{name}-0": "r2-0"}


def test_a_pod_asking_no_rack_goes_to_the_rack_fuller_by_requests_not_pod_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """r1-0 runs 50 pods requesting next to nothing, r2-0 one of 2 CPUs; a lone pod of 8
    CPUs fits r1-1, r1-2 and r2-1 alike (node binpack ties them). r2 is the fuller by
    what is requested there, so the pod goes there and r1 keeps two whole nodes for a
    gang. With the pod count averaged in, r1 was the fuller."""
    objects = [*racks({"r1": 3, "r2": 2}, cpu="8")]
    tiny = {"cpu": "1m", "memory": "1"}
    objects += [pod(f"tiny-{i}", tiny, node_name="r1-0", scheduler="other") for i in range(50)]
    objects.append(pod("busy", {"cpu": "2"}, node_name="r2-0", scheduler="other"))
    objects.append(pod("lone", {"cpu": "8"}))
    assert run(capsys, tmp_path, objects, RACK_TIERS).bound() == {"default/lone": "r2-1"}


@pytest.mark.parametrize(
    ("binpack", "domain_binpack", "rack"),
    [
        ({"cpu": 1}, None, "r1"),
        ({"memory": 1}, None, "r2"),
        # Volcano ranks HyperNodes by network-topology-aware's weights, whatever binpack's.
        ({"memory": 1}, {"cpu": 1}, "r1"),
        ({"cpu": 1}, {"memory": 1}, "r2"),
    ],
)
def test_racks_are_ranked_by_the_configured_resource_weights(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    binpack: dict[str, int],
    domain_binpack: dict[str, int] | None,
    rack: str,
) -> None:
    """With the gang of 2 x (2 CPUs, 1Gi) in, r1 is the fuller by CPU (8 of 16 against
    5) and r2 by memory (8Gi of 16Gi against 3Gi); alike weighted, r2 (0.41 against
    0.34). The rack the gang asking one takes is the fuller by the resources the
    configuration weighs."""
    objects = [
        node(f"{name}-{i}", cpu="8", memory="8Gi", labels={RACK: name, SPINE: "s1"})
        for name in ("r1", "r2")
        for i in range(2)
    ]
    objects.append(pod("cpu-heavy", {"cpu": "4", "memory": "1Gi"}, node_name="r1-0"))
    objects.append(pod("memory-heavy", {"cpu": "1", "memory": "6Gi"}, node_name="r2-0"))
    objects += gang(
        "g",
        2,
        requests={"cpu": "2", "memory": "1Gi"},
        networkTopology={"mode": "hard", "highestTierName": "rack"},
    )
    plugins = [{"name": "predicates"}, {"name": "binpack", "arguments": {"resources": binpack}}]
    if domain_binpack is not None:
        arguments = {"resources": domain_binpack}
        plugins.append({"name": "network-topology-aware", "arguments": arguments})
    config = yaml.safe_dump(
        {"tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}, {"plugins": plugins}]}
    )
    result = run(capsys, tmp_path, objects, config + RACK_TIERS)
    assert domains_of(result, "default/g-") == {rack}


def test_kueue_slices_each_in_one_rack(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Slices of 2, each in one rack; four racks of 1 free pair each but r4."""
    objects = [*racks({"r1": 3, "r2": 3, "r3": 3}), pod_group("k", 4)]
    objects += [
        pod(f"busy-{r}", {"cpu": "4"}, node_name=f"{r}-0", scheduler="other")
        for r in ("r1", "r2", "r3")
    ]
    objects += [
        pod(f"busy2-{r}", {"cpu": "4"}, node_name=f"{r}-1", scheduler="other") for r in ("r1",)
    ]
    slices = {
        "kueue.x-k8s.io/podset-slice-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-size": "2",
    }
    result = run(capsys, tmp_path, [*objects, *(kueue_pod(f"k-{i}", slices) for i in range(4))])
    bound = result.bound()
    assert len(bound) == 4
    for first in (0, 2):
        pair = {bound[f"default/k-{first}"], bound[f"default/k-{first + 1}"]}
        assert len({n.rsplit("-", 1)[0] for n in pair}) == 1
    assert "r1" not in {n.rsplit("-", 1)[0] for n in bound.values()}


def test_a_rack_named_alike_in_two_spines_is_two_racks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Racks are told apart by their spine as well, as Kueue's Topology levels tell
    them: rack r1 of spine s1 (2 nodes) and r1 of s2 (2 nodes) hold no gang of 3 asking
    one rack (by our tiers or Kueue's annotation), though their label's value is one; a
    gang of 2 takes one of them. The native PodGroup's key is a label, whose value is
    the domain, as kube-scheduler groups nodes by it: its gang of 3 is placed."""
    objects = [*racks({"r1": 2}, spine="s1"), *racks({"r1": 2}, spine="s2")]
    for rename, member_node in enumerate(objects):
        member_node["metadata"]["name"] = f"n{rename}"
        member_node["metadata"]["labels"]["kubernetes.io/hostname"] = f"n{rename}"
    spines = {n["metadata"]["name"]: n["metadata"]["labels"][SPINE] for n in objects}
    rack = {"kueue.x-k8s.io/podset-required-topology": RACK}
    for name, size in (("three", 3), ("two", 2)):
        objects.append(pod_group(name, size, networkTopology={"highestTierName": "rack"}))
        objects += [pod(f"{name}-{i}", {"cpu": "4"}, group=name) for i in range(size)]
    objects.append(pod_group("k", 3))
    objects += [kueue_pod(f"k-{i}", rack) for i in range(3)]
    result = run(capsys, tmp_path, objects, RACK_TIERS)
    bound = result.bound()
    assert not [key for key in bound if key.startswith(("default/three-", "default/k-"))]
    assert len({bound[f"default/two-{i}"] for i in range(2)}) == 2
    assert len({spines[bound[f"default/two-{i}"]] for i in range(2)}) == 1
    assert "holds 2 of 3" in result.pods["default/three-0"]["reason"]
    native = [
        *objects[:4],
        native_pod_group("n", 3, schedulingConstraints={"topology": [{"key": RACK}]}),
    ]
    native += [member(f"n-{i}", "n", {"cpu": "4"}) for i in range(3)]
    assert len(run(capsys, tmp_path, native, RACK_TIERS).bound()) == 3


def test_kueue_node_selector_is_honoured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Kueue assigns nodes by the node selector it injects: kept, never fought, even
    where the rack it names is not the fullest."""
    objects = [
        *racks({"r1": 2, "r2": 2}),
        pod_group("k", 2),
        pod("busy", {"cpu": "2"}, node_name="r2-0"),
    ]
    required = {"kueue.x-k8s.io/podset-required-topology": RACK}
    members = [
        kueue_pod(f"k-{i}", required, spec={"nodeSelector": {"kubernetes.io/hostname": f"r1-{i}"}})
        for i in range(2)
    ]
    bound = run(capsys, tmp_path, [*objects, *members]).bound()
    assert {key: bound[key] for key in ("default/k-0", "default/k-1")} == {
        "default/k-0": "r1-0",
        "default/k-1": "r1-1",
    }


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("cycle", "HyperNode r1: spec.members form a cycle: r1 -> s1 -> r1"),
        # HyperNodes that all form a cycle leave no tier: the cycle is named, not "none".
        ("cycle alone", "HyperNode r1: spec.members form a cycle: r1 -> s1 -> r1"),
        (
            "tier name",
            "PodGroup default/bad.spec.networkTopology.highestTierName: no tier is named 'zone'",
        ),
        (
            "key",
            "[kueue.x-k8s.io/podset-required-topology]: no node has the label example.com/none",
        ),
        ("slice", "[kueue.x-k8s.io/podset-slice-size]: slice size 3 does not divide the 4 members"),
        (
            "asks differ",
            "Pod default/k-3.metadata.annotations: its Kueue topology ask differs from that of "
            "Pod default/k-0, in the same pod set workers",
        ),
    ],
)
def test_bad_input_is_named_and_the_rest_scheduled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str, message: str
) -> None:
    objects: list[dict[str, Any]] = [*racks({"r1": 3, "r2": 5}), pod("lone", {"cpu": "1"})]
    if case == "cycle":
        # r1 and s1 are left out; r2 still serves: a gang it holds is placed there, one
        # it cannot hold (six whole nodes) waits naming the cycle.
        objects += [hypernode("r1", 1, [exact("HyperNode", "s1")], "rack"), TREE[1], TREE[2]]
        objects += volcano_gang("bad", 6, "4", networkTopology={"highestTierAllowed": 2})
        objects += volcano_gang("fits", 2, "4", networkTopology={"highestTierAllowed": 1})
    elif case == "cycle alone":
        objects += [hypernode("r1", 1, [exact("HyperNode", "s1")], "rack")]
        objects += [hypernode("s1", 2, [exact("HyperNode", "r1")], "spine")]
        objects += volcano_gang("bad", 2, "1", networkTopology={"highestTierAllowed": 2})
    elif case == "tier name":
        objects += TREE
        objects += volcano_gang("bad", 2, "1", networkTopology={"highestTierName": "zone"})
    else:
        notes = (
            {"kueue.x-k8s.io/podset-required-topology": "example.com/none"}
            if case == "key"
            else {"kueue.x-k8s.io/podset-required-topology": RACK}
            if case == "asks differ"
            else {
                "kueue.x-k8s.io/podset-slice-required-topology": RACK,
                "kueue.x-k8s.io/podset-slice-size": "3",
            }
        )
        objects += [pod_group("k", 4), *(kueue_pod(f"k-{i}", notes) for i in range(3))]
        if case == "asks differ":
            # One pod of the pod set asking another level: kept neither way.
            notes = {"kueue.x-k8s.io/podset-required-topology": SPINE}
        objects.append(kueue_pod("k-3", notes))
    result = run(capsys, tmp_path, objects)
    placed = {"default/lone", *(f"default/fits-{i}" for i in range(2) if case == "cycle")}
    assert all(result.pods[key]["node"] is not None for key in placed)
    assert domains_of(result, "default/fits-") <= {"r2"}
    waiting = [p["reason"] for key, p in result.pods.items() if key not in placed]
    assert waiting and all(message in reason for reason in waiting), waiting


def test_a_soft_gang_spans_racks_once_its_soft_wait_runs_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each of three racks has one node free: a soft gang of two waits its softWait for
    one rack, and the simulator wakes it when the wait ends to place it across racks,
    as the operator's keeper does; nothing else happens in between to wake it."""
    objects: list[dict[str, Any]] = [*racks({"r1": 2, "r2": 2, "r3": 2})]
    objects += [
        pod(f"hog-{rack}", {"cpu": "4"}, node_name=f"{rack}-0", scheduler="other", created=0)
        for rack in ("r1", "r2", "r3")
    ]
    objects.append(pod_group("g", 2, created=0, networkTopology={"mode": "soft"}))
    objects += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=0) for i in range(2)]
    result = run(capsys, tmp_path, objects, f"{RACK_TIERS}  softWait: 10m\n")
    assert len(domains_of(result, "default/g-")) == 2
    assert {result.pods[f"default/g-{i}"]["bound_at"] for i in range(2)} == {600.0}


def test_a_soft_gang_counts_its_soft_wait_from_the_clock_its_group_keeps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The same gang, its PodGroup keeping the clock an operator started five minutes
    before the input's time (docs/topology.md): the simulator takes it back at its start
    as the operator does, and the 10-minute wait ends five minutes in. A clock kept for
    another object (its uid) is not this gang's, and one started after the input's time
    counts from it: each waits the whole 10 minutes."""
    objects: list[dict[str, Any]] = [*racks({"r1": 2, "r2": 2, "r3": 2})]
    objects += [
        pod(f"hog-{rack}", {"cpu": "4"}, node_name=f"{rack}-0", scheduler="other", created=0)
        for rack in ("r1", "r2", "r3")
    ]
    group = pod_group("g", 2, created=0, networkTopology={"mode": "soft"})
    objects += [group, *(pod(f"g-{i}", {"cpu": "4"}, group="g", created=0) for i in range(2))]
    kept = ((-300, "uid-g", 300.0), (-300, "uid-before", 600.0), (3000, "uid-g", 600.0))
    for since, owner, bound_at in kept:
        group["metadata"]["uid"] = "uid-g"
        group["metadata"]["annotations"] = {
            SINCE_ANNOTATION: stamp(since),
            OWNER_ANNOTATION: owner,
        }
        result = run(capsys, tmp_path, objects, f"{RACK_TIERS}  softWait: 10m\n")
        assert len(domains_of(result, "default/g-")) == 2
        assert {result.pods[f"default/g-{i}"]["bound_at"] for i in range(2)} == {bound_at}


def test_soft_parts_span_racks_once_their_soft_wait_runs_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The same wait for the soft ask of a part. A Volcano sub-group of two (HyperNode
    racks, the gang asking nothing as a whole) where each rack has one node free, and a
    Kueue pod set preferring a rack beside another that has one: each part waits its
    softWait for one rack, its gang with it, and the simulator wakes the gang when the
    wait ends to place the part across racks."""
    hogs = [
        pod(f"hog-{rack}", {"cpu": "4"}, node_name=f"{rack}-0", scheduler="other", created=0)
        for rack in ("r1", "r2", "r3")
    ]
    objects: list[dict[str, Any]] = [*racks({"r1": 2, "r2": 2, "r3": 2}), *hogs, *TREE[:2]]
    objects.append(hypernode("r3", 1, [exact("Node", "r3-0"), exact("Node", "r3-1")], "rack"))
    policy = [{"name": "workers", "subGroupSize": 2, "networkTopology": {"mode": "soft"}}]
    objects.append(pod_group("g", 2, api_version=VOLCANO, created=0, subGroupPolicy=policy))
    notes = {"scheduling.k8s.io/group-name": "g"}
    objects += [pod(f"g-{i}", {"cpu": "4"}, annotations=notes, created=0) for i in range(2)]
    result = run(capsys, tmp_path, objects, "topology: {softWait: 10m}\n")
    assert len(domains_of(result, "default/g-")) == 2
    assert {result.pods[f"default/g-{i}"]["bound_at"] for i in range(2)} == {600.0}

    preferred = {"kueue.x-k8s.io/podset-preferred-topology": RACK}
    objects = [*racks({"r1": 2, "r2": 2, "r3": 2}), *hogs[1:], pod_group("k", 4, created=0)]
    for i in range(4):
        objects.append(kueue_pod(f"k-{i}", preferred, created=0))
        objects[-1]["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "ab"[i // 2]
    result = run(capsys, tmp_path, objects, f"{RACK_TIERS}  softWait: 10m\n")
    assert domains_of(result, "default/k-0") | domains_of(result, "default/k-1") == {"r1"}
    assert domains_of(result, "default/k-2") | domains_of(result, "default/k-3") == {"r2", "r3"}
    assert {result.pods[f"default/k-{i}"]["bound_at"] for i in range(4)} == {600.0}


def test_a_soft_gang_on_a_full_cluster_counts_its_soft_wait_from_when_it_could_span(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every node is taken when the soft gang of two arrives, long before room comes: one
    node of each rack frees at 3000s, past its softWait since creation. It does not
    span racks then: its softWait starts, and rack r1 frees whole at 3300s, within it,
    so the gang takes r1. Had r1 not freed, it would span racks at 3600s."""

    def hogs(ends: Mapping[str, str]) -> list[dict[str, Any]]:
        return [
            pod(
                f"hog-{name}",
                {"cpu": "4"},
                annotations={"simulation.batchsched.io/duration": ends.get(name, "10h")},
                spec={"nodeSelector": {"kubernetes.io/hostname": name}},
                created=0,
            )
            for name in (f"{rack}-{i}" for rack in ("r1", "r2", "r3") for i in range(2))
        ]

    gang = [pod_group("g", 2, created=1, networkTopology={"mode": "soft"})]
    gang += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=1) for i in range(2)]
    config = f"{RACK_TIERS}  softWait: 10m\n"
    first = {"r1-0": "3000s", "r2-0": "3000s", "r3-0": "3000s"}
    nodes = racks({"r1": 2, "r2": 2, "r3": 2})
    result = run(capsys, tmp_path, [*nodes, *hogs({**first, "r1-1": "3300s"}), *gang], config)
    assert domains_of(result, "default/g-") == {"r1"}
    assert {result.pods[f"default/g-{i}"]["bound_at"] for i in range(2)} == {3300.0}
    result = run(capsys, tmp_path, [*nodes, *hogs(first), *gang], config)
    assert len(domains_of(result, "default/g-")) == 2
    assert {result.pods[f"default/g-{i}"]["bound_at"] for i in range(2)} == {3600.0}
