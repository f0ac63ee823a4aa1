"""The room held for a starving gang that asks for a topology domain is inside one
domain that fits it, not scattered over the nodes with most room."""

import re
from collections.abc import Sequence

from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.framework.topology import LabelTier

from tests.support.objects import (
    at,
    decide,
    node,
    placements,
    pod,
    pod_group,
    priority_class,
    snapshot_of,
)

RACK = "topology.kubernetes.io/rack"
CONFIG = f"""
starvationThreshold: 60s
topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}
"""


def held_nodes(message: str) -> set[str]:
    found = re.search(r"room is held for it on node\(s\) ([^.]+)\.", message)
    assert found, message
    return set(found.group(1).split(", "))


def test_a_starving_gang_asking_for_a_rack_holds_room_in_one_rack() -> None:
    """Racks r1 and r2 each have a node with 4 CPUs free and one with 1: the gang of two
    4-CPU pods fits no rack now; the nodes with most room free (r1-1, r2-1) span racks,
    so its room is held on both nodes of one rack. A small pod still runs elsewhere."""
    objects = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    objects += [
        pod(f"hog-{r}", {"cpu": "3"}, node_name=f"{r}-0", scheduler="other") for r in ("r1", "r2")
    ]
    objects.append(pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"}))
    objects += [pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in range(2)]
    objects.append(pod("small", {"cpu": "1"}, created=110))
    decisions = decide(objects, CONFIG, now=at(120))
    held = held_nodes(decisions.pending["default/big-0"].message)
    assert held in ({"r1-0", "r1-1"}, {"r2-0", "r2-1"})
    assert placements(decisions)["default/small"] not in held


def test_a_starving_gang_no_rack_could_hold_holds_nothing() -> None:
    """Racks of one 4-CPU node: a gang of two 4-CPU pods asking for a rack never fits,
    so no room is held for it (the cluster's total would have held it)."""
    objects = [node(f"r{r}-0", cpu="4", labels={RACK: f"r{r}"}) for r in (1, 2)]
    objects.append(pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"}))
    objects += [pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in range(2)]
    objects.append(pod("small", {"cpu": "1"}, created=110))
    decisions = decide(objects, CONFIG, now=at(120))
    assert "room is held" not in decisions.pending["default/big-0"].message
    assert "default/small" in placements(decisions)


def starving_pair(running: Sequence[tuple[str, str, str, str | None]], nodes: int = 2) -> set[str]:
    """The nodes held for a starving gang of two 4-CPU pods asking for a rack, on two
    racks (r1, r2) of `nodes` 4-CPU nodes running `running`: (pod, node, CPU, gang)."""
    objects = [
        node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in range(nodes)
    ]
    for gang in sorted({g for *_, g in running if g is not None}):
        objects.append(pod_group(gang, 1, created=0))
    objects += [
        pod(name, {"cpu": cpu}, node_name=host, group=gang, created=0)
        for name, host, cpu, gang in running
    ]
    objects.append(pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"}))
    objects += [pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in range(2)]
    decisions = decide(objects, CONFIG, now=at(120))
    return held_nodes(decisions.pending["default/big-0"].message)


def test_a_starving_gang_holds_the_rack_the_fewest_running_jobs_must_leave() -> None:
    """Rack r1 has the most room free (5 CPUs), but three jobs must end there before the
    gang fits; r2 has 4 CPUs free and one gang of two pods to end. Room is held in r2:
    what frees in the held rack idles until the last of those jobs ends."""
    running = [
        ("a", "r1-0", "1", None),
        ("b", "r1-0", "1", None),
        ("c", "r1-1", "1", None),
        ("wide-0", "r2-0", "2", "wide"),
        ("wide-1", "r2-1", "2", "wide"),
    ]
    assert starving_pair(running) == {"r2-0", "r2-1"}


def test_of_racks_one_job_from_ready_the_one_with_least_room_free_now_is_held() -> None:
    """One job must end in either rack: in r1, a 1-CPU pod with 7 CPUs free beside it;
    in r2, a gang using both nodes whole. Room is held in r2: r1's free room would idle
    for as long as it waits, r2 idles nothing."""
    running = [
        ("a", "r1-0", "1", None),
        ("wide-0", "r2-0", "4", "wide"),
        ("wide-1", "r2-1", "4", "wide"),
    ]
    assert starving_pair(running) == {"r2-0", "r2-1"}


def test_two_jobs_from_ready_with_nothing_free_beat_one_with_most_room_free() -> None:
    """r1 is one 1-CPU pod from ready with 7 CPUs free; r2 is two whole-node pods from
    ready with none. Were run times memoryless, r1 idles 7 CPUs for a mean run time
    while held, r2 its first node freed for half of one (the last of two ends at 1.5
    run times, each at 1): room is held in r2."""
    running = [
        ("a", "r1-0", "1", None),
        ("x", "r2-0", "4", None),
        ("y", "r2-1", "4", None),
    ]
    assert starving_pair(running) == {"r2-0", "r2-1"}


def test_an_overcommitted_rack_counts_no_room_free_not_less_than_none() -> None:
    """r1 is one gang's end from ready, nothing free; r2 two jobs', its pods asking more
    than r2-0 holds (its allocatable shrank under them). Room is held in r1: r2's room
    in deficit is no room free, not a saving."""
    running = [
        ("wide-0", "r1-0", "4", "wide"),
        ("wide-1", "r1-1", "4", "wide"),
        ("x", "r2-0", "12", None),
        ("y", "r2-1", "4", None),
    ]
    assert starving_pair(running) == {"r1-0", "r1-1"}


def test_the_jobs_counted_are_those_the_members_need_gone() -> None:
    """Racks of three nodes, none with room free. r2 runs six jobs, but ending the two
    whole-node ones (x, y) frees two nodes for the gang's two 4-CPU pods; r1 runs five,
    and three of them must end (t, and both of one node). Room is held in r2, though
    it runs more jobs."""
    running = [
        ("p", "r1-0", "2", None),
        ("q", "r1-0", "2", None),
        ("r", "r1-1", "2", None),
        ("s", "r1-1", "2", None),
        ("t", "r1-2", "4", None),
        ("x", "r2-0", "4", None),
        ("y", "r2-1", "4", None),
        *((f"small-{i}", "r2-2", "1", None) for i in range(4)),
    ]
    assert starving_pair(running, nodes=3) == {"r2-0", "r2-1"}


def _pods_on_two_racks(w_bound: bool) -> list[dict[str, object]]:
    """r1 runs jobs a, b and c (1 CPU each on 4-CPU nodes); r2 runs x on r2-0, and
    w (4 CPUs, high priority) is bound on r2-1 or pending. A gang of two 4-CPU pods
    asks for a rack and starves."""
    objects = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    objects.append(priority_class("high", 1000))
    objects += [
        pod("a", {"cpu": "1"}, node_name="r1-0", created=0),
        pod("b", {"cpu": "1"}, node_name="r1-0", created=0),
        pod("c", {"cpu": "1"}, node_name="r1-1", created=0),
        pod("x", {"cpu": "4"}, node_name="r2-0", created=0),
    ]
    high = {"priorityClassName": "high", "priority": 1000}
    objects.append(
        pod("w", {"cpu": "4"}, node_name="r2-1", created=110, spec=high)
        if w_bound
        else pod("w", {"cpu": "4"}, created=110, spec=high)
    )
    objects.append(pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"}))
    return objects + [pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in range(2)]


def test_a_pod_placed_earlier_in_the_session_is_a_job_that_must_end() -> None:
    """Placed by this session or bound before it, w is a job that must end in r2: r2
    needs two jobs gone (x, w), r1 three (a, b, c), so r2 is held either way."""
    for w_bound in (True, False):
        decisions = decide(_pods_on_two_racks(w_bound), CONFIG, now=at(120))
        if not w_bound:
            assert placements(decisions)["default/w"] == "r2-1"
        held = held_nodes(decisions.pending["default/big-0"].message)
        assert held == {"r2-0", "r2-1"}, (w_bound, held)


def test_jobs_are_counted_for_the_members_the_gang_needs() -> None:
    """Four 4-CPU pods with minMember 2 are held room for two. In r1 one job (a, on
    two whole nodes) must end for two members; in r2 two (d and e, half of every
    node). Counted for all four pending pods, r1 would need three jobs gone (a, b, c)
    and r2 two; counted for the two the gang needs, r1 is held."""
    objects = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in range(4)]
    objects += [pod_group(name, size, created=0) for name, size in (("a", 2), ("d", 4), ("e", 4))]
    objects += [
        pod(f"a-{i}", {"cpu": "4"}, group="a", node_name=f"r1-{i}", created=0) for i in (0, 1)
    ]
    objects += [
        pod(name, {"cpu": "4"}, node_name=f"r1-{i}", created=0) for i, name in ((2, "b"), (3, "c"))
    ]
    for job in ("d", "e"):
        objects += [
            pod(f"{job}-{i}", {"cpu": "2"}, group=job, node_name=f"r2-{i}", created=0)
            for i in range(4)
        ]
    objects.append(pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"}))
    objects += [pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in range(4)]
    held = held_nodes(decide(objects, CONFIG, now=at(120)).pending["default/big-0"].message)
    assert len(held) == 2 and all(n.startswith("r1-") for n in held), held


def _victim_session(objects: list[dict[str, object]]) -> Session:
    return Session(
        snapshot_of(objects),
        tiers=default_config().tiers,
        topology_tiers=[LabelTier("rack", RACK)],
    )


def _first_rack(session: Session) -> str:
    """The rack a starving `default/big` would be held room in first."""
    job = session.snapshot.jobs["default/big"]
    layout = session.topology.plan(job, job.pending)
    assert layout is not None and layout.ask is not None
    found, error = session.topology.domains(
        layout.ask, job.pending, [], None, roomiest=True, draining=True
    )
    assert error is None
    first = next(found)
    return session.snapshot.nodes[int(first.nodes.nonzero()[0][0])].name.split("-")[0]


def _victim_index(session: Session, key: str) -> int:
    return [session.victims.info(i).key for i in range(len(session.victims.rows))].index(key)


def _big_gang() -> list[dict[str, object]]:
    group = pod_group("big", 2, created=0, networkTopology={"highestTierName": "rack"})
    return [group, *(pod(f"big-{i}", {"cpu": "4"}, group="big", created=0) for i in (0, 1))]


def test_a_victim_evicted_and_put_back_is_one_running_pod() -> None:
    """r1 runs jobs v and w, r2 one job z over both nodes: r2 needs one job gone, r1
    two. A preempt try evicting v and undoing it leaves that so."""
    objects = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    objects += [
        pod("v", {"cpu": "4"}, node_name="r1-0", created=0),
        pod("w", {"cpu": "4"}, node_name="r1-1", created=0),
        pod_group("z", 2, created=0),
    ]
    objects += [
        pod(f"z-{i}", {"cpu": "4"}, group="z", node_name=f"r2-{i}", created=0) for i in (0, 1)
    ]
    session = _victim_session(objects + _big_gang())
    assert _first_rack(session) == "r2"
    index = _victim_index(session, "default/v")
    session.evict(index)
    session.restore(index)
    assert _first_rack(session) == "r2"


def test_an_evicted_pod_frees_its_room_once() -> None:
    """r1: job V (v-0 whole r1-0, v-1 half of r1-1) and y (the other half); r2: one
    job z over both nodes. With v-0 evicted, r1 still needs V and y gone for r1-1, two
    jobs; r2 one."""
    objects = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("r1", "r2") for i in (0, 1)]
    objects += [pod_group("V", 2, created=0), pod_group("z", 2, created=0)]
    objects += [
        pod("v-0", {"cpu": "4"}, group="V", node_name="r1-0", created=0),
        pod("v-1", {"cpu": "2"}, group="V", node_name="r1-1", created=0),
        pod("y", {"cpu": "2"}, node_name="r1-1", created=0),
    ]
    objects += [
        pod(f"z-{i}", {"cpu": "4"}, group="z", node_name=f"r2-{i}", created=0) for i in (0, 1)
    ]
    session = _victim_session(objects + _big_gang())
    session.evict(_victim_index(session, "default/v-0"))
    assert _first_rack(session) == "r2"
