"""More of the issue's bad input through `batchsched run`, on a real API server with
Volcano's released HyperNode and PodGroup CRDs: HyperNodes Volcano accepts but that do
not form a tree (two naming each other, a name pattern that is not a regular
expression, a rack two spines list), a sub-group's tier name that no tier has, Kueue
slice sizes that are not sizes and a slice topology without one. Each waits with a
reason naming the object and field; the lone pods, plain gangs and the gangs asking for
a HyperNode of the healthy part of the tree are bound in the same run (test_topology.py
has the first cases).
"""

from __future__ import annotations

from typing import Any

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
    waiting_saying,
)
from .test_topology import DROP_IN, OUR_API, RACK, VOLCANO_API, group, member
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import hypernode, hypernode_member, node, pod

pytestmark = pytest.mark.integration

SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
HOSTNAME = "kubernetes.io/hostname"


def gang(
    api: str, name: str, size: int, *, notes: dict[str, str] | None = None, **spec: Any
) -> list[JSON]:
    """A PodGroup of `api` and its `size` 4-CPU members (Kueue's pod set label on each)."""
    volcano = api == VOLCANO_API
    objects = [{**group(api, name, size, {}), "spec": {"minMember": size, **spec}}]
    for i in range(size):
        manifest = member(f"{name}-{i}", name, volcano=volcano, notes=notes)
        manifest["metadata"]["labels"] = {"kueue.x-k8s.io/podset": "workers"}
        objects.append(manifest)
    return objects


def test_a_broken_hypernode_leaves_the_rest_of_the_tree_in_use(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Racks h1 (two nodes, by name) and h2 (three, by pattern) at tier 1; HyperNodes c1
    and c2 naming each other, and bad with a pattern that is not a regular expression
    (Volcano's CRD takes both). A gang of two asking for one tier-1 HyperNode is bound
    in h1 or h2: the broken HyperNodes are no part of them. A gang of four, which no healthy
    HyperNode holds, waits naming what is broken; so does a sub-group asking a tier
    name none has. Kueue pod sets whose slice size is not a whole number above 0, or
    whose slice topology has no size, or whose pods ask different labels, wait naming
    the annotation. A lone pod and a plain gang are bound."""
    names = {
        rack: [f"{rack}-{i}-{namespace}" for i in range(n)]
        for rack, n in (("h1", 2), ("h2", 3), ("free", 2))
    }
    for rack, members in names.items():
        for name in members:
            ready_node(
                cluster_objects, kube, node(name, cpu="4", labels={RACK: f"{rack}-{namespace}"})
            )
    h1, h2, c1, c2, bad = (f"{h}-{namespace}" for h in ("h1", "h2", "c1", "c2", "bad"))
    cluster_objects.create(
        hypernode(
            h1, 1, [hypernode_member("Node", exactMatch={"name": n}) for n in names["h1"]], "rack"
        )
    )
    cluster_objects.create(
        hypernode(
            h2,
            1,
            [hypernode_member("Node", regexMatch={"pattern": f"^h2-.*-{namespace}$"})],
            "rack",
        )
    )
    cluster_objects.create(
        hypernode(c1, 1, [hypernode_member("HyperNode", exactMatch={"name": c2})])
    )
    cluster_objects.create(
        hypernode(c2, 2, [hypernode_member("HyperNode", exactMatch={"name": c1})])
    )
    cluster_objects.create(
        hypernode(bad, 1, [hypernode_member("Node", regexMatch={"pattern": "free-(["})])
    )
    hard_1 = {"mode": "hard", "highestTierAllowed": 1}
    workers = [
        {"name": "workers", "subGroupSize": 2, "networkTopology": {"highestTierName": "zone"}}
    ]
    objects = [
        *gang(VOLCANO_API, "healthy", 2, networkTopology=hard_1),
        *gang(VOLCANO_API, "big", 4, networkTopology={"mode": "hard", "highestTierAllowed": 2}),
        *gang(VOLCANO_API, "zoned", 2, subGroupPolicy=workers),
        *gang(OUR_API, "plain", 2),
        *gang(OUR_API, "zero", 2, notes={SLICE_TOPOLOGY: RACK, SLICE_SIZE: "0"}),
        *gang(OUR_API, "words", 2, notes={SLICE_TOPOLOGY: RACK, SLICE_SIZE: "two"}),
        *gang(OUR_API, "sizeless", 2, notes={SLICE_TOPOLOGY: RACK}),
        pod("lone", {"cpu": "1"}),
    ]
    # A pod set whose second pod asks another label than its first.
    mixed = gang(OUR_API, "mixed", 2, notes={REQUIRED: RACK})
    mixed[2]["metadata"]["annotations"][REQUIRED] = HOSTNAME
    objects += mixed
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    def bound(*members: str) -> set[str] | None:
        where = placements(kube, namespace)
        return {str(where[m]) for m in members} if all(where.get(m) for m in members) else None

    healthy = eventually(lambda: bound("healthy-0", "healthy-1"), what="the healthy gang bound")
    assert healthy <= set(names["h1"]) or healthy <= set(names["h2"])
    eventually(
        lambda: bound("lone", "plain-0", "plain-1"), what="the lone pod and plain gang bound"
    )
    annotations = f"Pod {namespace}/{{}}-0.metadata.annotations"
    reasons = {
        "big": (
            f"(left out: HyperNode {bad}.spec.members[0].selector.regexMatch.pattern: "
            "'free-([' is not a pattern"
        ),
        "zoned": (
            f"PodGroup {namespace}/zoned.spec.subGroupPolicy[0].networkTopology.highestTierName: "
            "no tier is named 'zone'"
        ),
        "zero": f"{annotations.format('zero')}[{SLICE_SIZE}]: 0 is below the minimum of 1",
        "words": f"{annotations.format('words')}[{SLICE_SIZE}]: 'two' is not a whole number",
        "mixed": (
            f"Pod {namespace}/mixed-1.metadata.annotations: its Kueue topology ask differs "
            f"from that of Pod {namespace}/mixed-0, in the same pod set workers"
        ),
        "sizeless": (
            f"{annotations.format('sizeless')}: {SLICE_TOPOLOGY} and {SLICE_SIZE} go together"
        ),
    }
    waiting_saying(kube, namespace, {f"{n}-0": reason for n, reason in reasons.items()})
    now = placements(kube, namespace)
    assert not any(v for k, v in now.items() if k.split("-")[0] in reasons)


def test_a_rack_listed_by_two_spines_is_placed_across_by_neither(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Rack r2 (three nodes) is listed by spine s1 (with r1) and by spine a0 (with r3),
    both of tier 2, which Volcano's CRD takes; r1 and r3 have two nodes each. Which
    spine holds r2 is unknown: r2 and both spines are left out. A hard gang of five
    allowed up to tier 2, which either spine's claim would hold, waits naming the
    dispute; a gang of two allowed tier 1 is bound in r1 or r3, never in r2."""
    sizes = {"r1": 2, "r2": 3, "r3": 2}
    names = {rack: [f"{rack}-{i}-{namespace}" for i in range(n)] for rack, n in sizes.items()}
    racks = {rack: f"{rack}-{namespace}" for rack in sizes}
    for rack, members in names.items():
        for name in members:
            ready_node(cluster_objects, kube, node(name, cpu="4", labels={RACK: racks[rack]}))
        exact = [hypernode_member("Node", exactMatch={"name": n}) for n in members]
        cluster_objects.create(hypernode(racks[rack], 1, exact, "rack"))
    s1, a0 = f"s1-{namespace}", f"a0-{namespace}"
    for spine, listed in ((s1, ("r1", "r2")), (a0, ("r2", "r3"))):
        below = [hypernode_member("HyperNode", exactMatch={"name": racks[r]}) for r in listed]
        cluster_objects.create(hypernode(spine, 2, below, "spine"))
    objects = [
        *gang(VOLCANO_API, "wide", 5, networkTopology={"mode": "hard", "highestTierAllowed": 2}),
        *gang(VOLCANO_API, "fits", 2, networkTopology={"mode": "hard", "highestTierAllowed": 1}),
    ]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    def fits() -> set[str] | None:
        where = placements(kube, namespace)
        hosts = {where.get(f"fits-{i}") for i in range(2)}
        return None if None in hosts else {str(h) for h in hosts}

    hosts = eventually(fits, what="the gang of two bound")
    assert hosts <= set(names["r1"]) or hosts <= set(names["r3"])
    reason = (
        f"(left out: HyperNode {a0}: spec.members names HyperNode {racks['r2']}, "
        f"also a member of HyperNode {s1})"
    )
    said: list[str | None] = []

    def told() -> bool:
        said.append(unschedulable_message(pods(kube, namespace)["wide-0"]))
        return reason in (said[-1] or "")

    try:
        eventually(told, what="the gang of five waiting, naming the disputed rack")
    except AssertionError as error:
        raise AssertionError(f"{error}; it says {said[-1]}") from None
    assert not any(placements(kube, namespace).get(f"wide-{i}") for i in range(5))
