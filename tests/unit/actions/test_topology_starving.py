"""The room held for a starving gang that asks for a topology domain is inside one
domain that fits it, not scattered over the nodes with most room."""

import re
from collections.abc import Sequence

from tests.support.objects import at, decide, node, placements, pod, pod_group

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
