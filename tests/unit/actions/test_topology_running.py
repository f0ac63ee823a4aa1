"""Where a gang's members already are decides its domain: a part of a gang (a Volcano
sub-group, a Kueue slice) whose members run keeps its new members in the domain holding
them, as Volcano recovers a sub-job's HyperNode from its tasks' nodes; a gang nominated
in a domain takes that one; and its PodGroup's status names the domain holding it."""

from typing import Any

from batchsched.model.decisions import TopologyDomain

from tests.support.objects import (
    Obj,
    at,
    decide,
    hypernode,
    hypernode_member,
    native_pod_group,
    node,
    placements,
    pod,
    pod_group,
)
from tests.support.objects import member as native_member

RACK = "topology.kubernetes.io/rack"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}\n"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def cluster() -> list[Obj]:
    """Racks r1 and r2 of two 4-CPU nodes; r1 is the fuller (3 CPUs taken on r1-0), so
    a part with no member running goes there first."""
    nodes = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in range(2)]
    busy = pod("busy", {"cpu": "3"}, node_name="r1-0", phase="Running", scheduler="other")
    return [*nodes, busy]


def member(name: str, running_on: str | None = None, **options: Any) -> Obj:
    phase = "Running" if running_on else None
    return pod(name, {"cpu": "2"}, node_name=running_on, phase=phase, **options)


def test_a_sub_group_with_a_member_running_stays_in_its_rack() -> None:
    policy = [
        {
            "name": "stage",
            "subGroupSize": 2,
            "matchLabelKeys": ["stage"],
            "networkTopology": {"mode": "hard", "highestTierName": "rack"},
        }
    ]
    notes = {"scheduling.k8s.io/group-name": "g"}
    members = [
        member(f"g-{i}", "r2-0" if i == 0 else None, labels={"stage": "0"}, annotations=notes)
        for i in range(2)
    ]
    group = pod_group("g", 2, api_version=VOLCANO, subGroupPolicy=policy)
    assert placements(decide([*cluster(), group, *members], TIERS)) == {"default/g-1": "r2-0"}


def test_a_slice_with_a_member_running_stays_in_its_rack() -> None:
    """Slices of 2 in name order, running members with the pending: k-0 runs in r2, so
    k-1 joins it there (r1 being the fuller rack, where it would go alone); the second
    slice, k-2 and k-3, shares a rack."""
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        "kueue.x-k8s.io/podset-slice-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-size": "2",
    }
    labels = {"kueue.x-k8s.io/podset": "workers"}
    members = [
        member(f"k-{i}", "r2-0" if i == 0 else None, labels=labels, annotations=notes)
        for i in range(4)
    ]
    where = placements(decide([*cluster(), pod_group("k", 4), *members], TIERS))
    assert where["default/k-1"].startswith("r2-")
    assert len({where["default/k-2"][:2], where["default/k-3"][:2]}) == 1


def test_a_gang_nominated_in_a_rack_takes_that_rack() -> None:
    """Its preemption made room on r2's nodes: it goes there, not to the fuller r1, whose
    room another preemptor may have made."""
    members = [member(f"g-{i}", group="g") for i in range(2)]
    for i, obj in enumerate(members):
        obj["status"] = {"phase": "Pending", "nominatedNodeName": f"r2-{i}"}
    group = pod_group("g", 2, networkTopology={"highestTierName": "rack"})
    where = placements(decide([*cluster(), group, *members], TIERS))
    assert where == {"default/g-0": "r2-0", "default/g-1": "r2-1"}


def test_each_slice_nominated_in_a_rack_takes_that_rack() -> None:
    """A gang of slices, each nominated where its preemption made room (the first in r2,
    the second in r1): each goes there, not the first to the fuller r1, which would push
    the second onto nodes another preemptor may have been given."""
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        "kueue.x-k8s.io/podset-slice-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-size": "2",
    }
    labels = {"kueue.x-k8s.io/podset": "workers"}
    held = ("r2-0", "r2-1", "r1-1", "r1-1")
    members = [member(f"k-{i}", labels=labels, annotations=notes) for i in range(4)]
    for obj, node_name in zip(members, held, strict=True):
        obj["status"] = {"phase": "Pending", "nominatedNodeName": node_name}
    where = placements(decide([*cluster(), pod_group("k", 4), *members], TIERS))
    assert where == {f"default/k-{i}": node_name for i, node_name in enumerate(held)}


def test_a_gang_placed_in_a_domain_names_it_in_its_status() -> None:
    """By configured tier (the label's value) and by HyperNode (its name); a running
    gang's status keeps naming it in later sessions, from its members' nodes."""
    group = pod_group("g", 2, networkTopology={"highestTierName": "rack"})
    members = [member(f"g-{i}", group="g") for i in range(2)]
    status = decide([*cluster(), group, *members], TIERS).jobs["default/g"]
    assert status.domain == TopologyDomain("rack", "r1")
    assert status.condition is not None
    assert status.condition.message == "2/2 members scheduled in rack r1"
    for obj, where in zip(members, ("r2-0", "r2-1"), strict=True):
        obj["spec"]["nodeName"] = where
        obj["status"] = {"phase": "Running"}
    tree = [
        hypernode(r, 1, [hypernode_member("Node", regexMatch={"pattern": f"^{r}-"})], "rack")
        for r in ("r1", "r2")
    ]
    status = decide([*cluster(), *tree, group, *members]).jobs["default/g"]
    assert status.domain == TopologyDomain("rack", "r2")


def test_a_native_group_names_the_value_of_its_topology_key() -> None:
    group = native_pod_group("g", 2, schedulingConstraints={"topology": [{"key": RACK}]})
    members = [native_member(f"g-{i}", "g", {"cpu": "2"}) for i in range(2)]
    status = decide([*cluster(), group, *members]).jobs["default/g"]
    assert status.domain == TopologyDomain(RACK, "r1")


def kueue_members(count: int, podsets: tuple[str, ...] = ("workers",)) -> list[Obj]:
    """Members of our PodGroup `k` asking, by Kueue's pod-set annotation, one rack for
    their pod set (member i in pod set i modulo the sets)."""
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        "kueue.x-k8s.io/podset-required-topology": RACK,
    }
    return [
        member(
            f"k-{i}", labels={"kueue.x-k8s.io/podset": podsets[i % len(podsets)]}, annotations=notes
        )
        for i in range(count)
    ]


def test_a_gang_of_one_kueue_pod_set_names_its_domain_in_its_status() -> None:
    """The pod set is the whole gang: its group names the domain of the label asked, as
    for a group's own ask, and keeps naming it once its members run."""
    members = kueue_members(2)
    status = decide([*cluster(), pod_group("k", 2), *members]).jobs["default/k"]
    assert status.domain == TopologyDomain(RACK, "r1")
    assert status.condition is not None
    assert status.condition.message == f"2/2 members scheduled in {RACK} r1"
    for obj, where in zip(members, ("r2-0", "r2-1"), strict=True):
        obj["spec"]["nodeName"] = where
        obj["status"] = {"phase": "Running"}
    status = decide([*cluster(), pod_group("k", 2), *members]).jobs["default/k"]
    assert status.domain == TopologyDomain(RACK, "r2")


def test_a_gang_of_two_kueue_pod_sets_names_no_domain() -> None:
    """Each pod set asks one rack of its own, not the gang as a whole: no domain is the
    gang's, even when both land in one."""
    members = kueue_members(2, ("leader", "workers"))
    decisions = decide([*cluster(), pod_group("k", 2), *members])
    assert len(placements(decisions)) == 2
    assert decisions.jobs["default/k"].domain is None


def pod_set_beside_a_running_one(kind: str) -> list[Obj]:
    """Racks r1 and r2 of two 4-CPU nodes (r2-1 busy); a gang of two Kueue pod sets: b's
    one member runs on r2-0, a's two are pending and ask (`kind`: required or preferred)
    one rack."""
    objects: list[Obj] = [
        node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in range(2)
    ]
    objects.append(pod("hog", {"cpu": "4"}, node_name="r2-1", scheduler="other"))
    objects.append(pod_group("k", 3, created=0))
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        f"kueue.x-k8s.io/podset-{kind}-topology": RACK,
    }
    objects += [
        pod(
            f"k-{i}",
            {"cpu": "4"},
            labels={"kueue.x-k8s.io/podset": "a"},
            annotations=notes,
            created=0,
        )
        for i in range(2)
    ]
    running = {"kueue.x-k8s.io/podset": "b"}
    notes = {"scheduling.batchsched.io/group-name": "k"}
    objects.append(
        pod(
            "k-b",
            {"cpu": "4"},
            labels=running,
            annotations=notes,
            node_name="r2-0",
            phase="Running",
            created=0,
        )
    )
    return objects


def test_a_pod_set_whose_gang_runs_another_elsewhere_is_a_part_of_it() -> None:
    """Every pending member is in pod set a, but b's member runs in rack r2: a's ask is
    its own, not the gang's, so b's node does not bind a to r2 and a takes the free r1."""
    where = placements(decide(pod_set_beside_a_running_one("required"), TIERS))
    assert sorted(where.values()) == ["r1-0", "r1-1"]


def test_a_preferred_pod_set_beside_a_running_one_waits_as_a_part() -> None:
    """With r1-1 busy too no node but r1-0 is free, and no rack has room for a: it waits
    as a part (not for r2, where b runs). It could not start across racks either, so its
    softWait does not start (it is woken by the starvation threshold); had it started,
    it is woken when the wait ends."""
    objects = pod_set_beside_a_running_one("preferred")
    objects.append(pod("hog-r1", {"cpu": "4"}, node_name="r1-1", scheduler="other"))
    rack = f"{{name: rack, nodeLabel: {RACK}}}"
    config = f"starvationThreshold: 1h\ntopology: {{tiers: [{rack}], softWait: 10m}}"
    decisions = decide(objects, config, now=at(60))
    assert not placements(decisions)
    assert "pod set a: " in decisions.pending["default/k-0"].message
    assert not decisions.span_clocks
    assert decisions.unplaced["default/k"].until == at(3600)
    decisions = decide(objects, config, now=at(60), span_clocks={"default/k": at(0)})
    assert decisions.unplaced["default/k"].until == at(600)
