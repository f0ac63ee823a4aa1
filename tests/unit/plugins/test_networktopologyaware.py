"""network-topology-aware: Volcano's HyperNode binpack of pods placed outside a domain,
beside node binpack; its arguments in our configuration and in Volcano's."""

import logging

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config
from batchsched.framework.session import Session
from batchsched.plugins.networktopologyaware import NetworkTopologyAware

from tests.support.objects import (
    Obj,
    decide,
    hypernode,
    hypernode_member,
    node,
    pending_task,
    placements,
    pod,
    pod_group,
    snapshot_of,
)

RACK = "topology.kubernetes.io/rack"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}\n"
BASE = "tiers:\n- plugins:\n  - {name: predicates}\n  - {name: binpack}\n"


def with_term(arguments: str) -> str:
    return f"{TIERS}{BASE}  - {{name: network-topology-aware, arguments: {arguments}}}\n"


def two_racks() -> list[Obj]:
    """Rack r1's two nodes hold 5 of 8 CPUs each (10 of 16), rack r2's b1 6 of 8 and b2
    none (6 of 16): b1 is the fullest node, r1 the fullest rack."""
    objects: list[Obj] = []
    for rack, nodes in (("r1", ("a1", "a2")), ("r2", ("b1", "b2"))):
        objects += [node(name, cpu="8", labels={RACK: rack}) for name in nodes]
    used = {"a1": "5", "a2": "5", "b1": "6"}
    objects += [
        pod(f"busy-{n}", {"cpu": cpu}, node_name=n, scheduler="other") for n, cpu in used.items()
    ]
    return [*objects, pod("p", {"cpu": "1"})]


def test_a_pod_goes_to_the_fuller_rack_over_a_fuller_node_elsewhere() -> None:
    """Node binpack gives b1 13 points more than a1; the term gives rack r1 (11 of 16
    CPUs with the pod) 25 points of fill more than r2 (7 of 16), over tier weights 1
    (rack) and 0.8 (the whole cluster): 13.9 points a unit of weight."""
    assert placements(decide(two_racks(), f"{TIERS}{BASE}")) == {"default/p": "b1"}
    assert placements(decide(two_racks(), with_term("{weight: 3}"))) == {"default/p": "a1"}


def test_weight_0_places_as_without_the_term() -> None:
    assert placements(decide(two_racks(), with_term("{weight: 0}"))) == {"default/p": "b1"}


SPINE = "topology.kubernetes.io/spine"


def test_members_placed_in_their_domain_are_not_scored_by_domain() -> None:
    """A hard gang of four 3-CPU pods that no rack holds (r1 has room for two, r2 for
    three) takes spine s1; inside it node binpack alone ranks, as Volcano scores pods
    with a network topology by their job's HyperNode instead: the first member goes to
    b1, the fullest node (5 + 3 of 8), not to a1 in the fuller rack r1."""
    config = (
        f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}, "
        f"{{name: spine, nodeLabel: {SPINE}}}]}}\n{BASE}"
        "  - {name: network-topology-aware, arguments: {weight: 10}}\n"
    )
    objects: list[Obj] = []
    for rack, nodes in (("r1", ("a1", "a2")), ("r2", ("b1", "b2"))):
        labels = {RACK: rack, SPINE: "s1"}
        objects += [node(name, cpu="8", labels=labels) for name in nodes]
    used = {"a1": "4", "a2": "4", "b1": "5"}
    objects += [
        pod(f"busy-{n}", {"cpu": cpu}, node_name=n, scheduler="other") for n, cpu in used.items()
    ]
    ask = {"mode": "hard", "highestTierName": "spine"}
    objects += [pod_group("g", 4, networkTopology=ask)]
    objects += [pod(f"g-{i}", {"cpu": "3"}, group="g") for i in range(4)]
    placed = placements(decide(objects, config))
    assert placed["default/g-0"] == "b1"
    assert sorted(placed.values()) == ["a1", "a2", "b1", "b2"]


# Volcano v1.15.1's TestBatchNodeOrderFn (network_topology_aware_test.go): two spines
# s1 {s3, s4} and s2 {s5, s6} under s0, each tier-1 HyperNode of two nodes.
SIZES = {"s3": ("2", "4G", 8), "s4": ("4", "4G", 8), "s5": ("2", "8G", 16), "s6": ("4", "8G", 16)}


def volcano_cluster() -> list[Obj]:
    def exact(kind: str, name: str) -> Obj:
        return hypernode_member(kind, exactMatch={"name": name})

    objects: list[Obj] = []
    for rack, (cpu, memory, foo) in SIZES.items():
        names = [f"{rack}-n1", f"{rack}-n2"]
        objects += [
            node(n, cpu=cpu, memory=memory, extra={"example.com/foo": str(foo)}) for n in names
        ]
        objects.append(hypernode(rack, 1, [exact("Node", n) for n in names]))
    objects.append(hypernode("s1", 2, [exact("HyperNode", "s3"), exact("HyperNode", "s4")]))
    objects.append(hypernode("s2", 2, [exact("HyperNode", "s5"), exact("HyperNode", "s6")]))
    objects.append(hypernode("s0", 3, [exact("HyperNode", "s1"), exact("HyperNode", "s2")]))
    return objects


def volcano_scores(objects: list[Obj], config: str) -> dict[str, int]:
    snapshot = snapshot_of(objects)
    session = Session(snapshot, tiers=load_config(config).tiers)
    [scorer] = [s for s, _ in session.normalized_scorers if isinstance(s, NetworkTopologyAware)]
    scores = scorer.normalized_scores(pending_task(snapshot, "default/p1"), session.all_nodes >= 0)
    assert scores is not None
    return dict(zip([n.name for n in snapshot.nodes], scores.tolist(), strict=True))


def test_volcano_table_default_arguments() -> None:
    """ "score empty nodes for single task with no network topology and default plugin
    arguments": 25.8, 21.6, 19.9, 15.7 there; our points are those rounded (tiers 1-3
    and the cluster's top, fading 0.8, CPU and memory weighing 1)."""
    objects = [*volcano_cluster(), pod("p1", {"cpu": "2", "memory": "4G"})]
    config = "tiers:\n- plugins:\n  - {name: predicates}\n  - {name: network-topology-aware}\n"
    expected = {"s3": 26, "s4": 22, "s5": 20, "s6": 16}
    assert volcano_scores(objects, config) == {
        f"{rack}-{n}": points for rack, points in expected.items() for n in ("n1", "n2")
    }


BUSY = {"cpu": "2", "memory": "4G", "example.com/foo": "8"}
CUSTOMIZED = (
    "tiers:\n- plugins:\n  - {name: predicates}\n"
    "  - name: network-topology-aware\n    arguments:\n"
    "      weight: 10\n"
    "      hypernode.binpack.cpu: 1\n"
    "      hypernode.binpack.memory: 4\n"
    "      hypernode.binpack.resources: nvidia.com/gpu, example.com/foo\n"
    "      hypernode.binpack.resources.nvidia.com/gpu: 2\n"
    "      hypernode.binpack.resources.example.com/foo: 3\n"
    "      hypernode.binpack.normal-pod.enable: true\n"
    "      hypernode.binpack.normal-pod.fading: 0\n"
)


@pytest.mark.parametrize(
    ("running", "expected"),
    [
        # "score empty nodes ... and customized plugin arguments": 500, 468.75, 281.3, 250.
        ([], {"s3": 500, "s4": 469, "s5": 281, "s6": 250}),
        # "score non-empty nodes ...": s3's two nodes full, so s3 would be overfull: 0.
        (["s3-n1", "s3-n2"], {"s3": 0, "s4": 469, "s5": 281, "s6": 250}),
    ],
)
def test_volcano_table_customized_arguments_from_a_volcano_configuration(
    running: list[str], expected: dict[str, int]
) -> None:
    """Its arguments given as Volcano's; fading 0 leaves tier 1 alone; the resources
    weigh CPU 1, memory 4 and example.com/foo 3 (the pod asks no GPU)."""
    objects = [*volcano_cluster(), pod("p1", BUSY)]
    objects += [
        pod(f"p{i + 2}", BUSY, node_name=n, scheduler="other") for i, n in enumerate(running)
    ]
    assert volcano_scores(objects, CUSTOMIZED) == {
        f"{rack}-{n}": points for rack, points in expected.items() for n in ("n1", "n2")
    }


def test_volcano_table_no_hypernode_binpacking() -> None:
    """ "... and no hypernode-level binpacking" (normal-pod.enable false): no score."""
    snapshot = snapshot_of([*volcano_cluster(), pod("p1", {"cpu": "2", "memory": "4G"})])
    config = load_config(
        "tiers:\n- plugins:\n  - {name: predicates}\n  - name: network-topology-aware\n"
        "    arguments: {hypernode.binpack.normal-pod.enable: false}\n"
    )
    session = Session(snapshot, tiers=config.tiers)
    assert not session.normalized_scorers


def volcano_plugin(arguments: str) -> NetworkTopologyAware:
    config = load_config(
        "tiers:\n- plugins:\n  - {name: predicates}\n"
        f"  - {{name: network-topology-aware, arguments: {arguments}}}\n",
        source="c",
    )
    [plugin] = [p for tier in config.tiers for p in tier if isinstance(p, NetworkTopologyAware)]
    return plugin


def test_volcano_arguments_are_read_as_volcano_reads_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Resources not listed keep no weight; a negative weight or fading is Volcano's
    default; the normal-pod switch off is weight 0; the eviction cap is logged."""
    plugin = volcano_plugin(
        "{weight: -2, hypernode.binpack.memory: 3, hypernode.binpack.normal-pod.fading: -1}"
    )
    assert (plugin.weight, plugin.fading) == (1, 0.8)
    assert plugin.resources == {"cpu": 1, "memory": 3}
    off = volcano_plugin("{weight: 10, hypernode.binpack.normal-pod.enable: 'false'}")
    assert off.weight == 0
    with caplog.at_level(logging.WARNING):
        volcano_plugin("{hypernode.gradient.evict.max-hypernodes: 4}")
    assert (
        "c.tiers[0].plugins[1].arguments.hypernode.gradient.evict.max-hypernodes has no "
        "effect here: preempt and reclaim look closely at the first 16 domains of a gang's "
        "tiers, fullest first, whatever the value"
    ) in caplog.text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{hypernode.binpack.cpu: 1, fading: 0.5}", r"arguments\.fading: unknown"),
        ("{weight: high, fading: 0.5}", r"weight must be a whole number, got 'high'"),
        ("{fading: -0.5}", r"fading must be a finite number >= 0, got -0.5"),
        ("{resources: {cpu: -1}}", r"resources\.cpu must be >= 0, got -1"),
        ("{depth: 2}", r"unknown argument 'depth'"),
    ],
)
def test_bad_arguments_are_refused_by_name(arguments: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        volcano_plugin(arguments)
