"""The topology model: label domains and Volcano's HyperNode tree resolved over nodes,
with a HyperNode left out (and named) where the tree is broken."""

from typing import Any

import numpy as np
import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.hypernodes import hypernode_from_object
from batchsched.api.nodes import node_from_object
from batchsched.model.topology import NO_DOMAIN, Topology

from tests.support.objects import hypernode, hypernode_member, node

RACK = "topology.kubernetes.io/rack"


NODES = [
    node_from_object(node(name, labels={RACK: name[:2]} if name != "x-0" else {}))
    for name in ("a-0", "a-1", "b-0", "b-1", "x-0")
]


def topology_of(*objects: dict[str, Any]) -> Topology:
    return Topology(NODES, {o["metadata"]["name"]: hypernode_from_object(o) for o in objects})


def test_label_domains() -> None:
    tier = Topology(NODES).label(RACK)
    assert tier.domains == ("a-", "b-")
    assert tier.ids.tolist() == [0, 0, 1, 1, NO_DOMAIN]
    assert Topology(NODES).ids(RACK).tolist() == [0, 0, 1, 1, 2]


def test_nested_domains_are_told_apart_by_the_labels_above() -> None:
    """Rack r1 of spine s1 and r1 of s2 are two domains, named by their path since the
    value repeats; r2, in one spine only, keeps its value as its name; a node without
    the rack label is in none, one without the spine label in its own, named `-` at
    the spine's place."""
    spine = "example.com/spine"
    labels = [
        {RACK: "r1", spine: "s1"},
        {RACK: "r1", spine: "s2"},
        {RACK: "r2", spine: "s1"},
        {RACK: "r1", spine: "s1"},
        {spine: "s1"},
        {RACK: "r1"},
    ]
    nodes = [node_from_object(node(f"n{i}", labels=at)) for i, at in enumerate(labels)]
    tier = Topology(nodes).nested(RACK, [spine])
    assert tier.ids.tolist() == [0, 1, 2, 0, NO_DOMAIN, 3]
    assert tier.domains == ("s1/r1", "s2/r1", "r2", "-/r1")
    flat = Topology(nodes)
    assert flat.nested(RACK, []) is flat.label(RACK)


def test_nested_domains_keep_each_level_in_place() -> None:
    """Rack r1 of spine s1 in no zone and r1 of zone s1 in no spine are two domains of
    two names (with the missing label dropped, both were `s1/r1`); a zone label whose
    value is empty is not a zone label missing."""
    zone, spine = "example.com/zone", "example.com/spine"
    labels = [
        {spine: "s1", RACK: "r1"},
        {zone: "z1", spine: "s1", RACK: "r1"},
        {zone: "s1", RACK: "r1"},
        {zone: "", spine: "s1", RACK: "r1"},
    ]
    nodes = [node_from_object(node(f"n{i}", labels=at)) for i, at in enumerate(labels)]
    tier = Topology(nodes).nested(RACK, [zone, spine])
    assert tier.ids.tolist() == [0, 1, 2, 3]
    assert tier.domains == ("-/s1/r1", "z1/s1/r1", "s1/-/r1", "/s1/r1")


def test_hypernode_tree_by_name_pattern_and_labels() -> None:
    topology = topology_of(
        hypernode("ra", 1, [hypernode_member("Node", regexMatch={"pattern": "^a-"})], "rack"),
        hypernode(
            "rb", 1, [hypernode_member("Node", labelMatch={"matchLabels": {RACK: "b-"}})], "rack"
        ),
        hypernode("rx", 1, [hypernode_member("Node", exactMatch={"name": "x-0"})], "rack"),
        hypernode(
            "s",
            2,
            [hypernode_member("HyperNode", exactMatch={"name": n}) for n in ("ra", "rb")],
            "spine",
        ),
    )
    assert topology.errors == {}
    racks, spines = topology.tiers
    assert (racks.number, racks.name, racks.domains) == (1, "rack", ("ra", "rb", "rx"))
    assert racks.ids.tolist() == [0, 0, 1, 1, 2]
    assert (spines.name, spines.domains, spines.ids.tolist()) == ("spine", ("s",), [0, 0, 0, 0, -1])


@pytest.mark.parametrize(
    ("objects", "broken", "message"),
    [
        (
            [
                hypernode("a", 1, [hypernode_member("HyperNode", exactMatch={"name": "b"})]),
                hypernode("b", 2, [hypernode_member("HyperNode", exactMatch={"name": "a"})]),
            ],
            "a",
            "HyperNode a: spec.members form a cycle: a -> b -> a",
        ),
        (
            [hypernode("s", 2, [hypernode_member("HyperNode", exactMatch={"name": "gone"})])],
            "s",
            "HyperNode s: spec.members names HyperNode gone, which does not exist",
        ),
        (
            [
                hypernode("r", 1, [hypernode_member("Node", exactMatch={"name": "a-0"})]),
                hypernode("s1", 2, [hypernode_member("HyperNode", exactMatch={"name": "r"})]),
                hypernode("s2", 2, [hypernode_member("HyperNode", exactMatch={"name": "r"})]),
            ],
            "s2",
            "HyperNode s2: spec.members names HyperNode r, also a member of HyperNode s1",
        ),
    ],
)
def test_broken_trees_name_the_hypernode(
    objects: list[dict[str, Any]], broken: str, message: str
) -> None:
    topology = topology_of(*objects)
    assert topology.errors[broken] == message
    reached = {d for tier in topology.tiers for d in tier.domains}
    assert broken not in reached


def test_a_member_of_two_hypernodes_is_left_out_with_both_and_those_above() -> None:
    """Which of s1 and s2 holds rack r is unknown: r, both and the zone above s1 are left
    out, each naming r; rack q of s1 alone keeps its place (so that no placement goes
    across a boundary that depends on whose claim is taken)."""
    topology = topology_of(
        hypernode("r", 1, [hypernode_member("Node", exactMatch={"name": "a-0"})]),
        hypernode("q", 1, [hypernode_member("Node", exactMatch={"name": "b-0"})]),
        hypernode("s1", 2, [hypernode_member("HyperNode", exactMatch={"name": n}) for n in "qr"]),
        hypernode("s2", 2, [hypernode_member("HyperNode", exactMatch={"name": "r"})]),
        hypernode("z", 3, [hypernode_member("HyperNode", exactMatch={"name": "s1"})]),
    )
    assert topology.errors == {
        "r": "HyperNode r: a member of several HyperNodes: s1, s2",
        "s1": "HyperNode s1: spec.members names HyperNode r, also a member of HyperNode s2",
        "s2": "HyperNode s2: spec.members names HyperNode r, also a member of HyperNode s1",
        "z": "HyperNode z: its member HyperNode s1 is left out",
    }
    assert [tier.domains for tier in topology.tiers] == [("q",)]
    assert topology.tiers[0].ids.tolist() == [NO_DOMAIN, NO_DOMAIN, 0, NO_DOMAIN, NO_DOMAIN]


def test_a_node_two_hypernodes_of_a_tier_reach_is_in_neither() -> None:
    """Rack ra's pattern, rack rb's labels and rack rx's name all select b-0: which
    holds it is not known, so it is in no rack (named, with all three), and the racks
    keep their other nodes. Spine s above ra and rb holds it whichever rack does, but
    spine t reaches it too, through rx: at the spine tier it is in neither s nor t."""
    topology = topology_of(
        hypernode("ra", 1, [hypernode_member("Node", regexMatch={"pattern": "^(a-|b-0)"})]),
        hypernode("rb", 1, [hypernode_member("Node", labelMatch={"matchLabels": {RACK: "b-"}})]),
        hypernode("rx", 1, [hypernode_member("Node", exactMatch={"name": "b-0"})]),
        hypernode(
            "s", 2, [hypernode_member("HyperNode", exactMatch={"name": n}) for n in ("ra", "rb")]
        ),
        hypernode("t", 2, [hypernode_member("HyperNode", exactMatch={"name": "rx"})]),
    )
    assert topology.errors == {}
    assert topology.shared == {
        (1, "b-0"): "Node b-0: a member of several HyperNodes of tier 1: ra, rb, rx",
        (2, "b-0"): "Node b-0: a member of several HyperNodes of tier 2: s, t",
    }
    racks, spines = topology.tiers
    assert racks.domains == ("ra", "rb", "rx")
    assert racks.ids.tolist() == [0, 0, NO_DOMAIN, 1, NO_DOMAIN]
    assert (spines.domains, spines.ids.tolist()) == (("s", "t"), [0, 0, NO_DOMAIN, 0, NO_DOMAIN])


def test_a_rejected_member_leaves_its_parent_out() -> None:
    parent = hypernode_from_object(
        hypernode("s", 2, [hypernode_member("HyperNode", exactMatch={"name": "r"})])
    )
    topology = Topology(NODES, {"s": parent}, rejected={"r": "HyperNode r: spec.tier is required"})
    assert topology.errors["s"] == "HyperNode s: its member HyperNode r: spec.tier is required"
    assert topology.tiers == ()


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([hypernode_member("Node")], "spec.members[0].selector: exactly one of exactMatch"),
        (
            [hypernode_member("HyperNode", regexMatch={"pattern": "r.*"})],
            "spec.members[0].selector.regexMatch: a HyperNode member is named by exactMatch",
        ),
        (
            [hypernode_member("Node", regexMatch={"pattern": "("})],
            "spec.members[0].selector.regexMatch.pattern",
        ),
        ([hypernode_member("Switch", exactMatch={"name": "a"})], "spec.members[0].type: 'Switch'"),
    ],
)
def test_bad_hypernodes_are_refused(members: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InvalidObject) as error:
        hypernode_from_object(hypernode("h", 1, members))
    assert str(error.value).startswith(f"HyperNode h.{message}")


def test_empty_label_match_selects_no_node() -> None:
    """As Volcano's GetMembers: an empty labelMatch selects nothing, not everything."""
    (tier,) = topology_of(hypernode("r", 1, [hypernode_member("Node", labelMatch={})])).tiers
    assert np.all(tier.ids == NO_DOMAIN)
