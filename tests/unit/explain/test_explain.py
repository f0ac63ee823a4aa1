"""`batchsched explain -f`: each situation a new user meets is named, with a remedy, in
the first three lines (summary, cause, remedy), and `-o json` carries the same."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from batchsched.cache.cluster import ClusterCache
from batchsched.cli import main
from batchsched.config.load import load_config
from batchsched.explain.analysis import explain as analyse
from batchsched.explain.render import to_text
from batchsched.explain.session import run_once
from batchsched.explain.target import parse_target

from tests.support.objects import cache_of, clocks_of

SCHEDULER = "schedulerName: batch-scheduler"


def node(name: str, *, gpus: int = 0, labels: str = "{}", taints: str = "[]") -> str:
    gpu = f', nvidia.com/gpu: "{gpus}"' if gpus else ""
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
spec: {{taints: {taints}}}
status: {{allocatable: {{cpu: "32", memory: 128Gi, pods: "110"{gpu}}}}}
"""


def group(name: str, min_member: int, *, queue: str = "default") -> str:
    return f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, creationTimestamp: "2026-01-01T00:00:00Z"}}
spec: {{minMember: {min_member}, queue: {queue}}}
"""


def pod(
    name: str,
    *,
    group: str | None = None,
    cpu: int = 1,
    gpus: int = 0,
    node: str | None = None,
    spec: str = "",
    created: str = "2026-01-01T00:00:00Z",
) -> str:
    notes = f"annotations: {{scheduling.k8s.io/group-name: {group}}}, " if group else ""
    gpu = f', nvidia.com/gpu: "{gpus}"' if gpus else ""
    bound = f"  nodeName: {node}\n" if node else ""
    status = "status: {phase: Running}\n" if node else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, {notes}creationTimestamp: "{created}"}}
spec:
  {SCHEDULER}
{bound}{spec}  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"{gpu}}}}}}}]
{status}"""


def explain(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    text: str,
    *args: str,
    config: str | None = None,
) -> tuple[int, list[str]]:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    argv = ["explain", *args, "-f", str(path)]
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
        argv += ["--config", str(tmp_path / "config.yaml")]
    code = main(argv)
    return code, capsys.readouterr().out.splitlines()


def test_a_gang_short_of_gpus_names_the_job_whose_end_frees_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (
        node("gpu-a", gpus=8)
        + node("gpu-b", gpus=8)
        + group("other", 2)
        + pod("other-0", group="other", gpus=6, node="gpu-a")
        + pod("other-1", group="other", gpus=6, node="gpu-b")
        + group("train", 2)
        + pod("train-0", group="train", gpus=4)
        + pod("train-1", group="train", gpus=4)
    )
    code, lines = explain(capsys, tmp_path, text, "pg/train")
    assert code == 0
    assert "0 of minMember 2 bound, 2 pending" in lines[0]
    assert lines[1].startswith("cause: needs room for 2 members at once, each 4 nvidia.com/gpu")
    assert lines[2] == "remedy: node(s) gpu-a, gpu-b qualify once job default/other finishes"
    assert any("Insufficient nvidia.com/gpu" in line for line in lines[3:])


def test_one_pod_short_of_gpus_needs_one_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = node("gpu-a", gpus=8) + pod("hog", gpus=6, node="gpu-a") + pod("solo", gpus=4)
    _, lines = explain(capsys, tmp_path, text, "pod/solo")
    assert lines[1].startswith("cause: needs one node with 4 nvidia.com/gpu, 1 cpu free")
    assert lines[2] == "remedy: node(s) gpu-a qualify once pod default/hog finishes"


def test_a_queue_at_its_capability(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    queue = """---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {weight: 1, capability: {cpu: "8"}}
"""
    text = (
        node("n1")
        + queue
        + group("big", 1, queue="research")
        + pod("big-0", group="big", cpu=8, node="n1")
        + group("more", 1, queue="research")
        + pod("more-0", group="more", cpu=2)
    )
    _, lines = explain(capsys, tmp_path, text, "pg/more")
    assert lines[1] == "cause: queue research is at its capability for cpu (8 of 8 in use)"
    assert "spec.capability.cpu to at least 10" in lines[2]
    code, lines = explain(capsys, tmp_path, text, "queue/research")
    assert code == 0
    assert lines[1] == "cause: queue research is at its capability for cpu (8 of 8 in use)"


def test_a_selector_matching_no_node(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = node("n1", labels="{pool: a}") + pod("p", spec="  nodeSelector: {pool: x}\n")
    _, lines = explain(capsys, tmp_path, text, "pod/p")
    assert lines[1] == "cause: nodeSelector pool=x matches no node"
    assert lines[2].startswith("remedy: nodes have pool=a: fix the pod's nodeSelector")


def test_a_taint_not_tolerated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    taint = "[{key: dedicated, value: gpu, effect: NoSchedule}]"
    text = node("n1", taints=taint) + node("n2", taints=taint) + pod("p")
    _, lines = explain(capsys, tmp_path, text, "pod/p")
    assert lines[1] == "cause: untolerated taint dedicated=gpu:NoSchedule on node(s) n1, n2"
    assert "operator: Equal, value: gpu, effect: NoSchedule" in lines[2]
    assert "kubectl taint nodes n1 dedicated=gpu:NoSchedule-" in lines[2]


def test_a_podgroup_missing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = node("n1") + pod("p", group="ghost")
    for target in ("pod/p", "pg/ghost"):
        _, lines = explain(capsys, tmp_path, text, target)
        assert lines[1] == "cause: PodGroup default/ghost does not exist"
        assert lines[2].startswith("remedy: create PodGroup default/ghost")


def test_an_invalid_queue_is_not_taken_for_a_missing_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The queue the pod names exists; its parent does not. The remedy is to fix the
    queue, not to create it (the words "does not exist" are in both messages)."""
    child = """---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: child}
spec: {weight: 1, parent: ghost}
"""
    lone = pod("p").replace(
        "metadata: {name: p, ",
        "metadata: {name: p, annotations: {scheduling.batchsched.io/queue-name: child}, ",
    )
    _, lines = explain(capsys, tmp_path, node("n1") + child + lone, "pod/p")
    assert lines[1] == (
        "cause: queue 'child' is invalid: Queue child.spec.parent: queue 'ghost' does not "
        "exist (named by Pod default/p's annotation scheduling.batchsched.io/queue-name)"
    )
    assert lines[2] == "remedy: fix the object as the message says"


def test_a_starving_gang_is_told_where_room_is_held(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The hog, bound since 00:02, makes the gang created at 00:00 wait past the 60s
    threshold: its room is held on n1 until the hog ends."""
    small = node("n1").replace('cpu: "32"', 'cpu: "4"')
    text = (
        small
        + pod("hog", cpu=2, node="n1", created="2026-01-01T00:02:00Z")
        + group("g", 3)
        + "".join(pod(f"g-{i}", group="g") for i in range(3))
        + pod("late", cpu=2, created="2026-01-01T00:02:00Z")
    )
    config = "starvationThreshold: 60s\n"
    _, lines = explain(capsys, tmp_path, text, "pg/g", config=config)
    assert lines[1] == (
        "cause: starving: it waited past starvationThreshold and room is held for it on node(s) n1"
    )
    assert lines[2].startswith("remedy: it binds once pod default/hog finishes there;")
    _, lines = explain(capsys, tmp_path, text, "pod/late", config=config)
    assert lines[1].startswith("cause: starving gang(s) default/g hold the room it needs")


def test_a_running_pod_shows_its_nodes_scores(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = node("n1") + node("n2") + pod("busy", cpu=16, node="n1") + pod("p", cpu=8, node="n1")
    _, lines = explain(capsys, tmp_path, text, "pod/p")
    assert lines[0] == "pod default/p: running on node n1"
    assert lines[1].startswith("cause: placed where it scored best for its shape: n1 scores")
    assert any(line.startswith("  n1 (its node): ") for line in lines)


def test_json_has_stable_keys_and_a_missing_target_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, lines = explain(capsys, tmp_path, node("n1") + pod("p"), "pg/nope", "-o", "json")
    report = json.loads("\n".join(lines))
    assert code == 1
    assert report["found"] is False
    assert set(report) == {
        "target", "found", "summary", "cause", "remedy", "reason", "group", "queue",
        "nodes", "node", "scores", "waiting",
    }  # fmt: skip
    assert report["cause"] == "PodGroup default/nope does not exist"


def test_a_target_not_written_kind_slash_name_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _ = explain(capsys, tmp_path, node("n1"), "deployment/x")
    assert code == 2


def test_a_bound_pod_not_started_is_not_called_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bound = pod("p", cpu=8, node="n1").replace("status: {phase: Running}\n", "")
    _, lines = explain(capsys, tmp_path, node("n1") + bound, "pod/p")
    assert lines[0] == "pod default/p: bound to node n1, not running yet (phase Pending)"


def test_a_gang_too_big_for_every_node_is_told_how_many_to_add(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = node("n1") + group("big", 3) + "".join(pod(f"b{i}", group="big", cpu=40) for i in "012")
    _, lines = explain(capsys, tmp_path, text, "pg/big")
    assert "add 3 nodes with 40 cpu allocatable" in lines[2], lines


def test_a_gangs_spread_refusals_beside_its_own_members_are_listed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Zone a has room for both members, zone b for none: the member tried second is
    refused zone a by its spread constraint, beside the first."""
    spread = (
        "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, "
        "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: g}}}]\n"
    )
    members = "".join(
        pod(f"g-{i}", group="g", spec=spread).replace(
            "metadata: {", "metadata: {labels: {app: g}, "
        )
        for i in range(2)
    )
    text = (
        node("a1", labels="{zone: a}")
        + node("b1", labels="{zone: b}")
        + pod("hog", cpu=32, node="b1")
        + group("g", 2)
        + members
    )
    for target in ("pg/g", "pod/g-1"):
        _, lines = explain(capsys, tmp_path, text, target)
        assert (
            lines[2] == "remedy: see the refusals below: each names the filter and how many nodes"
        )
        refused = "\n".join(lines[3:])
        assert "Insufficient cpu" in refused
        assert "TopologySpread" in refused, lines


def test_a_queue_kept_from_reclaim_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    queues = """---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: keep}
spec: {weight: 1, reclaimable: false}
---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: want}
spec: {weight: 1}
"""
    text = (
        node("n1")
        + queues
        + group("held", 1, queue="keep")
        + pod("held-0", group="held", cpu=32, node="n1")
        + group("small", 1, queue="want")
        + pod("small-0", group="small", cpu=1)
    )
    config = (
        'actions: "enqueue, allocate, preempt, reclaim, backfill"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: binpack}]\n"
    )
    _, lines = explain(capsys, tmp_path, text, "pod/small-0", config=config)
    assert "held by queue(s) keep, which are reclaimable: false" in lines[1], lines
    assert lines[2].endswith("set spec.reclaimable: true on Queue keep")


def test_a_queue_at_its_fair_share_is_told_to_raise_its_weight(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Queue big uses 24 of 32 CPUs while queue other asks for 16: big is past its
    deserved share, so its new job waits for the share, not for room."""
    queues = """---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: big}
spec: {weight: 1}
---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: other}
spec: {weight: 1}
"""
    text = (
        node("n1")
        + queues
        + group("running", 1, queue="big")
        + pod("running-0", group="running", cpu=24, node="n1")
        + group("more", 1, queue="big")
        + pod("more-0", group="more", cpu=1)
        + group("wants", 1, queue="other")
        + pod("wants-0", group="wants", cpu=16)
    )
    config = (
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: binpack}]\n"
    )
    _, lines = explain(capsys, tmp_path, text, "pod/more-0", config=config)
    assert lines[1] == "cause: queue big is at its fair share"
    assert lines[2].endswith("raise Queue big's spec.weight for a larger share")


AFFINITY_POOL_A = (
    "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
    "{nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [a]}]}]}}}\n"
)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("  nodeSelector: {pool: a}\n", "nodeSelector pool=a"),
        (AFFINITY_POOL_A, "required node affinity (pool In [a])"),
    ],
    ids=["nodeSelector", "nodeAffinity"],
)
def test_a_gang_kept_to_few_nodes_is_told_what_keeps_it_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, named: str
) -> None:
    pools = "".join(node(f"a{i}", labels="{pool: a}") for i in range(2)) + "".join(
        node(f"b{i}", labels="{pool: b}") for i in range(3)
    )
    gang = group("train", 3) + "".join(
        pod(f"t{i}", group="train", cpu=20, spec=spec) for i in range(3)
    )
    busy = group("other", 2) + "".join(
        pod(f"o{i}", group="other", cpu=20, node=f"a{i}") for i in range(2)
    )
    _, lines = explain(capsys, tmp_path, pools + gang, "pg/train")
    assert lines[1] == (
        "cause: needs room for 3 members at once, each 20 cpu; 2 fit(s) now on the 2 of 5 "
        f"nodes its {named} leaves it"
    )
    assert lines[2] == (
        "remedy: even empty, the nodes it may use hold 2 (largest: 32 cpu): add 1 node with "
        f"20 cpu allocatable that its {named} admits, relax it, or ask for less"
    )
    _, lines = explain(capsys, tmp_path, pools + gang + busy, "pg/train")
    assert lines[1].endswith(f"0 fit(s) now on the 2 of 5 nodes its {named} leaves it")


def test_a_gang_waiting_for_a_rack_names_the_tier_the_best_rack_and_what_it_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Racks r1 (two nodes) and r2 (one) of 32 CPUs; a gang of three 32-CPU pods asking
    for one rack: r1 holds 2 of 3."""
    rack = "topology.kubernetes.io/rack"
    text = "".join(
        node(name, labels=f"{{{rack}: {name[:2]}}}") for name in ("r1-0", "r1-1", "r2-0")
    )
    text += group("train", 3).replace(
        "spec: {minMember: 3,", "spec: {networkTopology: {highestTierName: rack}, minMember: 3,"
    )
    text += "".join(pod(f"train-{i}", group="train", cpu=32) for i in range(3))
    config = f"topology: {{tiers: [{{name: rack, nodeLabel: {rack}}}]}}\n"
    code, lines = explain(capsys, tmp_path, text, "pg/train", config=config)
    assert code == 0
    assert lines[1].startswith(
        "cause: gang default/train: PodGroup default/train.spec.networkTopology asks its "
        "members in one domain of rack (hard); the best, rack r1, holds 2 of 3"
    )
    assert lines[2] == (
        "remedy: it runs once rack r1 has room for 1 more member(s) (as its pods end, or "
        "nodes are added to it), or loosen PodGroup default/train.spec.networkTopology (a "
        "higher tier, or mode soft)"
    )


def test_a_gang_allowed_the_whole_cluster_waits_for_room_not_for_a_domain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As above with a limit above the one tier, which allows the whole cluster, and
    another pod on r2-0: the gang is short of room, not of a domain; explain says what
    frees room, neither naming the cluster as a domain nor telling it to loosen its ask."""
    rack = "topology.kubernetes.io/rack"
    text = "".join(
        node(name, labels=f"{{{rack}: {name[:2]}}}") for name in ("r1-0", "r1-1", "r2-0")
    )
    text += pod("busy", cpu=32, node="r2-0")
    text += group("train", 3).replace(
        "spec: {minMember: 3,", "spec: {networkTopology: {highestTierAllowed: 2}, minMember: 3,"
    )
    text += "".join(pod(f"train-{i}", group="train", cpu=32) for i in range(3))
    config = f"topology: {{tiers: [{{name: rack, nodeLabel: {rack}}}]}}\n"
    code, lines = explain(capsys, tmp_path, text, "pg/train", config=config)
    assert code == 0
    assert lines[1].startswith("cause: needs room for 3 members at once"), lines
    assert lines[2] == "remedy: node(s) r2-0 qualify once pod default/busy finishes", lines
    assert "asks its members in one domain of rack, or anywhere (hard)" in lines[3], lines
    assert not any("cluster" in line for line in lines[:4]), lines


def started_at(text: str, since: float) -> ClusterCache:
    """The objects' cache, gang default/train's softWait started at `since` (by an
    earlier session that found it could start across domains)."""
    cache = cache_of(yaml.safe_load_all(text))
    cache.span_clocks = clocks_of(cache, {"default/train": since})
    return cache


def test_a_soft_gang_waiting_for_a_rack_says_when_it_spans_racks() -> None:
    """Rack r1 (two nodes, one busy) could hold the gang of two 32-CPU pods, r2 (one node)
    could not: within its softWait the soft ask waits for r1 rather than span both. Read
    a minute after its creation, as from a cluster: `-f` simulates past the wait."""
    rack = "topology.kubernetes.io/rack"
    text = "".join(
        node(name, labels=f"{{{rack}: {name[:2]}}}") for name in ("r1-0", "r1-1", "r2-0")
    )
    text += pod("busy", cpu=32, node="r1-1")
    text += group("train", 2).replace(
        "spec: {minMember: 2,", "spec: {networkTopology: {mode: soft}, minMember: 2,"
    )
    text += "".join(pod(f"train-{i}", group="train", cpu=32) for i in range(2))
    config = load_config(f"topology: {{tiers: [{{name: rack, nodeLabel: {rack}}}], softWait: 10m}}")
    created = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    ran = run_once(started_at(text, created), config, now=created + 60)
    lines = to_text(analyse(ran, parse_target("pg/train", namespace="default"))).splitlines()
    assert "asks its members in one domain of rack (soft) and waits" in lines[1], lines[1]
    assert lines[2].startswith(
        "remedy: it runs once rack r1 has room for 1 more member(s) (as its pods end, or "
        "nodes are added to it), or it spans domains in "
    ), lines[2]
    assert lines[2].endswith(" 540s (topology.softWait)"), lines[2]


def test_a_soft_sub_group_waiting_for_a_rack_names_the_part_and_when_it_spans() -> None:
    """As above, the soft ask on the gang's one sub-group: explain names the part, the
    rack that came closest and what it lacks, and when the part may span racks."""
    rack = "topology.kubernetes.io/rack"
    text = "".join(
        node(name, labels=f"{{{rack}: {name[:2]}}}") for name in ("r1-0", "r1-1", "r2-0")
    )
    text += pod("busy", cpu=32, node="r1-1")
    policy = "[{name: workers, subGroupSize: 2, networkTopology: {mode: soft}}]"
    text += group("train", 2).replace(
        "spec: {minMember: 2,", f"spec: {{subGroupPolicy: {policy}, minMember: 2,"
    )
    text += "".join(pod(f"train-{i}", group="train", cpu=32) for i in range(2))
    config = load_config(f"topology: {{tiers: [{{name: rack, nodeLabel: {rack}}}], softWait: 10m}}")
    created = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    ran = run_once(started_at(text, created), config, now=created + 60)
    lines = to_text(analyse(ran, parse_target("pg/train", namespace="default"))).splitlines()
    assert (
        "sub-group workers: PodGroup default/train.spec.subGroupPolicy[0].networkTopology "
        "asks its members in one domain of rack (soft) and waits 540s more"
    ) in lines[1], lines[1]
    assert lines[2] == (
        "remedy: it runs once rack r1 has room for 1 more member(s) of sub-group workers "
        "(as its pods end, or nodes are added to it), or it spans domains in 540s "
        "(topology.softWait)"
    ), lines[2]


def test_a_soft_sub_group_waiting_inside_its_gangs_zone_names_the_parts_wait() -> None:
    """The gang asks hard for one zone and zone z1 has room for it (a node free in each
    rack); only its sub-group waits, softly, for a rack. Explain speaks of the part's
    wait, not of loosening the gang's ask."""
    rack, zone = "topology.kubernetes.io/rack", "topology.kubernetes.io/zone"
    names = ("r1-0", "r1-1", "r2-0", "r2-1")
    text = "".join(node(n, labels=f"{{{rack}: {n[:2]}, {zone}: z1}}") for n in names)
    text += pod("busy-1", cpu=32, node="r1-1") + pod("busy-2", cpu=32, node="r2-1")
    policy = "[{name: workers, subGroupSize: 2, networkTopology: {mode: soft}}]"
    ask = "networkTopology: {mode: hard, highestTierName: zone}"
    text += group("train", 2).replace(
        "spec: {minMember: 2,", f"spec: {{{ask}, subGroupPolicy: {policy}, minMember: 2,"
    )
    text += "".join(pod(f"train-{i}", group="train", cpu=32) for i in range(2))
    tiers = f"[{{name: rack, nodeLabel: {rack}}}, {{name: zone, nodeLabel: {zone}}}]"
    config = load_config(f"topology: {{tiers: {tiers}, softWait: 10m}}")
    created = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    ran = run_once(started_at(text, created), config, now=created + 60)
    lines = to_text(analyse(ran, parse_target("pg/train", namespace="default"))).splitlines()
    assert lines[1].startswith(
        "cause: gang default/train: sub-group workers: PodGroup "
        "default/train.spec.subGroupPolicy[0].networkTopology asks its members in one domain "
        "of rack (soft) and waits 540s more"
    ), lines[1]
    assert lines[2] == (
        "remedy: it runs once rack r1 has room for 1 more member(s) of sub-group workers "
        "(as its pods end, or nodes are added to it), or it spans domains in 540s "
        "(topology.softWait)"
    ), lines[2]
