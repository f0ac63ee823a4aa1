"""The room held for a starving gang that asks for a topology domain is inside one
domain that fits it, not scattered over the nodes with most room."""

import re

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
