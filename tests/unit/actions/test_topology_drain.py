"""While a gang waits for a domain, pods placed elsewhere steer away from the domain it
is closest to holding when other nodes have room for them, so that it drains for the
gang; they still go there when nothing else has room (no room is held)."""

from typing import Any

import numpy as np

from batchsched.framework.topology import Domain, LabelTier, TopologyPlanner

from tests.support.objects import at, decide, node, placements, pod, pod_group, snapshot_of

RACK = "topology.kubernetes.io/rack"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}"


def cluster(room_in_r2: bool) -> list[dict[str, Any]]:
    """Racks r1 to r4 of two 4-CPU, 8Gi nodes (a rack is a quarter of the cluster, the
    most the domains waited for may cover). r1-0 is full (of memory most); r1-1 is empty,
    room for one member of the gang below (two pods of 4 CPUs, one rack), which so waits
    for r1. r2-1 is full, r2-0 empty when `room_in_r2`; r3 and r4 are full."""
    objects: list[dict[str, Any]] = []
    for rack in ("r1", "r2", "r3", "r4"):
        objects += [node(f"{rack}-{i}", cpu="4", memory="8Gi", labels={RACK: rack}) for i in (0, 1)]
    used = {"r1-0": "7Gi", "r2-1": "1Gi"} | {
        f"{r}-{i}": "1Gi" for r in ("r3", "r4") for i in (0, 1)
    }
    if not room_in_r2:
        used["r2-0"] = "1Gi"
    for name, memory in used.items():
        objects.append(
            pod(f"hog-{name}", {"cpu": "4", "memory": memory}, node_name=name, scheduler="other")
        )
    objects.append(pod_group("g", 2, created=0, networkTopology={"mode": "hard"}))
    objects += [pod(f"g-{i}", {"cpu": "4", "memory": "1Gi"}, group="g", created=0) for i in (0, 1)]
    return objects


SMALL = {"cpu": "2", "memory": "1Gi"}


def test_a_lone_pod_steers_off_the_rack_a_gang_waits_for() -> None:
    """r1-1 and r2-0 score alike for the small pod, and r1 is the fuller rack (by
    memory), which it would take; the gang, holding one of two members there, waits for
    r1, so the pod goes to r2, and r1-1 keeps its room for the gang's member."""
    objects = [*cluster(room_in_r2=True), pod("small", SMALL, created=10)]
    decisions = decide(objects, TIERS, now=at(20))
    assert placements(decisions)["default/small"] == "r2-0"
    message = decisions.pending["default/g-0"].message
    assert "the best, rack r1, holds 1 of 2" in message, message
    # Nothing waiting for r1: the fuller rack, as before.
    alone = [o for o in objects if not o["metadata"]["name"].startswith("g")]
    assert placements(decide(alone, TIERS, now=at(20)))["default/small"] == "r1-1"


def test_a_pod_with_room_only_in_that_rack_still_takes_it() -> None:
    """r2 has no room for the small pod: the preference holds no room, it runs in r1."""
    objects = [*cluster(room_in_r2=False), pod("small", SMALL, created=10)]
    decisions = decide(objects, TIERS, now=at(20))
    assert placements(decisions)["default/small"] == "r1-1"
    assert "default/g-0" in decisions.pending


def test_a_gang_choosing_among_racks_leaves_the_awaited_one_last() -> None:
    """A gang of two 1-CPU pods fits either rack; r1 is the fuller (first by the
    fullest-first order), but the older gang waits for it, so the new one takes r2."""
    objects = [*cluster(room_in_r2=True), pod_group("h", 2, created=10, networkTopology={})]
    objects += [pod(f"h-{i}", {"cpu": "1", "memory": "1Gi"}, group="h", created=10) for i in (0, 1)]
    where = placements(decide(objects, TIERS, now=at(20)))
    assert {where["default/h-0"], where["default/h-1"]} == {"r2-0"}


def planner_of_racks(count: int) -> TopologyPlanner:
    """A planner over `count` racks of one node each (none runs anything)."""
    snapshot = snapshot_of([node(f"r{i}-0", labels={RACK: f"r{i}"}) for i in range(count)])
    requested = snapshot.used.copy()
    return TopologyPlanner(
        snapshot, requested, snapshot.allocatable - requested, [LabelTier("rack", RACK)]
    )


def rack(planner: TopologyPlanner, index: int) -> Domain:
    tier = planner.tiers[0]
    return Domain(tier, list(tier.domains).index(f"r{index}"), tier.ids)


def test_the_domains_waited_for_cover_at_most_a_quarter_of_the_nodes() -> None:
    """Eight racks of one node: the first two gangs' racks are steered off, a third's
    is not, until a gang tried again gives its own up."""
    planner = planner_of_racks(8)
    for job, index in (("a", 0), ("b", 1), ("c", 2), ("d", 1)):
        planner.wait_for(job, rack(planner, index))
    assert sorted(planner.draining) == ["a", "b", "d"]
    assert planner.drained is not None
    assert planner.drained.nonzero()[0].tolist() == [0, 1]
    # Rack 1 stays marked while gang d still waits for it.
    planner.tried("b")
    assert planner.drained.nonzero()[0].tolist() == [0, 1]
    planner.tried("d")
    planner.wait_for("c", rack(planner, 2))
    assert planner.drained is not None
    assert planner.drained.nonzero()[0].tolist() == [0, 2]


def test_steering_takes_a_node_elsewhere_only_among_those_scoring_alike() -> None:
    """Rack r0 is waited for: of the nodes tied for the best score, one elsewhere is
    taken, and r0's node only when it is the one tied (a better node in r0 is still
    taken over a worse one elsewhere: no spreading onto emptier nodes)."""
    planner = planner_of_racks(8)
    planner.wait_for("a", rack(planner, 0))
    both = np.array([True, False, True, False, False, False, False, False])
    best, tied = planner.steer(both, 0)
    assert (best, tied.nonzero()[0].tolist()) == (2, [2])
    alone = np.array([True, False, False, False, False, False, False, False])
    best, tied = planner.steer(alone, 0)
    assert (best, tied.nonzero()[0].tolist()) == (0, [0])
    # The best elsewhere: a node of a rack waited for tied with it is not passed on
    # to the tie-break among racks.
    planner = planner_of_racks(8)
    planner.wait_for("b", rack(planner, 2))
    best, tied = planner.steer(both, 0)
    assert (best, tied.nonzero()[0].tolist()) == (0, [0])
