"""Volcano HyperNodes through `batchsched run` on a real API server, with Volcano's
released HyperNode and PodGroup CRDs: members chosen by each selector Volcano defines
(exactMatch, regexMatch, labelMatch by labels and by expressions; Volcano's
`GetMembers` in pkg/scheduler/api/hyper_node_info.go, v1.15.1), placement following
the topology as it changes while the operator runs (a node relabelled into a labelMatch
HyperNode, a HyperNode deleted and another created), and a member's bind refused.
"""

from __future__ import annotations

from functools import partial

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_proxy_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from .test_topology import DROP_IN, RACK, VOLCANO_API, group, member
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import hypernode, hypernode_member, node, pod

pytestmark = pytest.mark.integration

HARD_TIER_1 = {"mode": "hard", "highestTierAllowed": 1}
# Where Volcano's scheduler records the HyperNode a job was placed in.
ALLOCATED = "volcano.sh/job-allocated-hypernode"


def gang(kube: Kube, namespace: str, name: str, size: int) -> list[str]:
    """A Volcano PodGroup of `size` 4-CPU pods (a whole node each) asking for one tier-1
    HyperNode; its pods' names."""
    objects = [group(VOLCANO_API, name, size, HARD_TIER_1)]
    objects += [member(f"{name}-{i}", name, volcano=True) for i in range(size)]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    return [f"{name}-{i}" for i in range(size)]


def nodes_of(kube: Kube, namespace: str, members: list[str]) -> set[str] | None:
    """The nodes `members` are bound to, once all are."""
    where = placements(kube, namespace)
    return {str(where[m]) for m in members} if all(where.get(m) for m in members) else None


def allocated(kube: Kube, namespace: str, name: str) -> str | None:
    path = f"/apis/{VOLCANO_API}/namespaces/{namespace}/podgroups/{name}"
    notes = kube.get(path).expect(200)["metadata"].get("annotations") or {}
    return notes.get(ALLOCATED)


def test_hypernode_members_of_every_selector_kind(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Three tier-1 HyperNodes of 2, 3 and 4 nodes under one tier-2 HyperNode: the first
    selects its nodes by a name pattern matching inside the name (Go's MatchString is
    not anchored), the second by matchLabels, the third by matchExpressions; a fourth,
    with an empty labelMatch, selects no node (Volcano). Gangs of 4, 3 and 2 whole-node
    pods, each asking for one tier-1 HyperNode, fill the nine nodes: each can only be
    bound in the HyperNode of its own size."""
    sizes = {"pattern": 2, "labels": 3, "expressions": 4}
    nodes: dict[str, list[str]] = {}
    for kind, count in sizes.items():
        nodes[kind] = [f"n{i}-{kind}-{namespace}" for i in range(count)]
        for name in nodes[kind]:
            labels = {RACK: f"{kind}-{namespace}"}
            ready_node(cluster_objects, kube, node(name, cpu="4", labels=labels))
    selectors: dict[str, JSON] = {
        "pattern": {"regexMatch": {"pattern": f"-pattern-{namespace}$"}},
        "labels": {"labelMatch": {"matchLabels": {RACK: f"labels-{namespace}"}}},
        "expressions": {
            "labelMatch": {
                "matchExpressions": [
                    {"key": RACK, "operator": "In", "values": [f"expressions-{namespace}"]}
                ]
            }
        },
        "empty": {"labelMatch": {}},
    }
    racks = {kind: f"{kind}-{namespace}" for kind in selectors}
    for kind, selector in selectors.items():
        cluster_objects.create(hypernode(racks[kind], 1, [hypernode_member("Node", **selector)]))
    spine = [hypernode_member("HyperNode", exactMatch={"name": r}) for r in racks.values()]
    cluster_objects.create(hypernode(f"spine-{namespace}", 2, spine))
    members = {kind: gang(kube, namespace, kind, size) for kind, size in sizes.items()}
    start_scheduler(config=DROP_IN)

    for kind, names in members.items():
        where = eventually(partial(nodes_of, kube, namespace, names), what=f"gang {kind} bound")
        assert where == set(nodes[kind]), kind
        assert eventually(partial(allocated, kube, namespace, kind)) == racks[kind]


def test_placement_follows_relabelled_nodes_and_changed_hypernodes(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """While the operator runs: HyperNode x selects nodes labelled rack x (two of them),
    HyperNode y names n2-n4 by pattern, n2 runs a pod. A gang of three asking for one
    tier-1 HyperNode waits (the best holds 2 of 3); once n5 is relabelled into rack x, it
    is bound in x. A second gang of three waits on y the same way; once y is deleted
    its reason no longer names y, and once HyperNode w lists n3, n4 and n6 by name it is
    bound there."""
    names = [f"n{i}-{namespace}" for i in range(7)]
    racks = ["x", "x", "y", "y", "y", "z", "z"]
    for name, rack in zip(names, racks, strict=True):
        labels = {RACK: f"{rack}-{namespace}"}
        ready_node(cluster_objects, kube, node(name, cpu="4", labels=labels))
    x, y, w = (f"{h}-{namespace}" for h in ("x", "y", "w"))
    by_label = {"labelMatch": {"matchLabels": {RACK: x}}}
    cluster_objects.create(hypernode(x, 1, [hypernode_member("Node", **by_label)]))
    pattern = {"regexMatch": {"pattern": f"^n[2-4]-{namespace}$"}}
    cluster_objects.create(hypernode(y, 1, [hypernode_member("Node", **pattern)]))
    busy = pod("busy", {"cpu": "4"})
    busy["spec"]["nodeName"] = names[2]
    busy["metadata"]["namespace"] = namespace
    kube.create(busy)
    set_running(kube, namespace, {"busy": names[2]})
    start_scheduler(config=DROP_IN)

    def waits_on(members: list[str], hypernode_name: str) -> str | None:
        said = unschedulable_message(pods(kube, namespace)[members[0]]) or ""
        return said if f"{hypernode_name}, holds 2 of 3" in said else None

    first = gang(kube, namespace, "first", 3)
    eventually(lambda: waits_on(first, ""), what="the first gang waiting, held 2 of 3")
    kube.patch(f"/api/v1/nodes/{names[5]}", {"metadata": {"labels": {RACK: x}}}).expect(200)
    where = eventually(lambda: nodes_of(kube, namespace, first), what="the first gang bound")
    assert where == {names[0], names[1], names[5]}
    assert eventually(lambda: allocated(kube, namespace, "first")) == x

    second = gang(kube, namespace, "second", 3)
    eventually(lambda: waits_on(second, y), what="the second gang waiting, y the closest")
    kube.delete(f"/apis/topology.volcano.sh/v1alpha1/hypernodes/{y}").expect(200)

    def forgot_y() -> str | None:
        said = unschedulable_message(pods(kube, namespace)[second[0]]) or ""
        return said if said and y not in said else None

    eventually(forgot_y, what="the second gang's reason no longer naming y")
    assert not any(placements(kube, namespace)[m] for m in second)
    listed = [hypernode_member("Node", exactMatch={"name": names[i]}) for i in (3, 4, 6)]
    cluster_objects.create(hypernode(w, 1, listed))
    where = eventually(lambda: nodes_of(kube, namespace, second), what="the second gang bound")
    assert where == {names[3], names[4], names[6]}
    assert eventually(lambda: allocated(kube, namespace, "second")) == w


def two_racks(kube: Kube, cluster_objects: ClusterObjects, suffix: str) -> dict[str, list[str]]:
    """Tier-1 HyperNodes h1 of two 4-CPU nodes and h2 of three, by name."""
    racks = {f"h1-{suffix}": 2, f"h2-{suffix}": 3}
    names = {rack: [f"{rack}-{i}" for i in range(n)] for rack, n in racks.items()}
    for rack, members in names.items():
        for name in members:
            ready_node(cluster_objects, kube, node(name, cpu="4"))
        listed = [hypernode_member("Node", exactMatch={"name": n}) for n in members]
        cluster_objects.create(hypernode(rack, 1, listed))
    return names


def test_a_member_whose_bind_fails_is_placed_again_in_its_gangs_hypernode(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    start_proxy: StartProxy,
    scheduler_accounts: SchedulerAccounts,
) -> None:
    """The API server refuses the first bind of one member of a gang asking for one
    tier-1 HyperNode: its other members are bound, and the member is bound later in
    the same HyperNode, though the other one has room too."""
    racks = two_racks(kube, cluster_objects, namespace)
    proxy = start_proxy()
    refused = proxy.fail(f"/api/v1/namespaces/{namespace}/pods/train-1/binding")
    members = gang(kube, namespace, "train", 2)
    kubeconfig = scheduler_accounts.kubeconfig("scheduler", server=proxy.url)
    start_scheduler(kubeconfig=kubeconfig, config=DROP_IN)
    eventually(lambda: refused.failed >= 1, what="the member's bind refused")
    refused.release()
    where = eventually(partial(nodes_of, kube, namespace, members), what="the gang bound")
    assert any(where <= set(nodes) for nodes in racks.values()), where


def test_a_sub_group_waits_for_its_members_then_is_placed_whole(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """A Volcano gang of minMember 2 whose sub-groups of two (by `stage`) each ask for one
    tier-1 HyperNode, with one member of stage 1 created so far (a job controller makes
    pods one by one): stage 0 is bound, stage 1's member waits saying one of its two
    members exists (a Volcano sub-job is ready only at its subGroupSize); once the second
    is created, both are bound in one HyperNode."""
    racks = two_racks(kube, cluster_objects, namespace)
    policy = [
        {
            "name": "stage",
            "subGroupSize": 2,
            "matchLabelKeys": ["stage"],
            "networkTopology": HARD_TIER_1,
        }
    ]
    train = {
        **group(VOLCANO_API, "train", 2, {}),
        "spec": {"minMember": 2, "subGroupPolicy": policy},
    }

    def stage_member(index: int) -> JSON:
        manifest = member(f"train-{index}", "train", volcano=True)
        manifest["metadata"] |= {"namespace": namespace, "labels": {"stage": str(index // 2)}}
        return manifest

    train["metadata"]["namespace"] = namespace
    for obj in (train, *(stage_member(i) for i in range(3))):
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    first = eventually(partial(nodes_of, kube, namespace, ["train-0", "train-1"]), what="stage 0")
    assert any(first <= set(nodes) for nodes in racks.values()), first
    waits = "sub-group stage 1: 1 of its 2 members exist"
    eventually(
        lambda: waits in (unschedulable_message(pods(kube, namespace)["train-2"]) or ""),
        what="stage 1's member waiting for the other",
    )
    assert placements(kube, namespace)["train-2"] is None
    kube.create(stage_member(3))
    second = eventually(partial(nodes_of, kube, namespace, ["train-2", "train-3"]), what="stage 1")
    assert any(second <= set(nodes) for nodes in racks.values()), second


def test_a_limit_above_every_hypernode_tier_spans_the_cluster(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Tier-1 HyperNodes h1 (two nodes) and h2 (three) and none above: a gang of four
    allowed up to tier 2 is bound across both, as Volcano's cluster-top HyperNode (every
    node, a tier above the highest; addClusterTopHyperNode, v1.15.1) lets it; no
    HyperNode holds it, so none is recorded as its own."""
    racks = two_racks(kube, cluster_objects, namespace)
    objects = [group(VOLCANO_API, "wide", 4, {"mode": "hard", "highestTierAllowed": 2})]
    objects += [member(f"wide-{i}", "wide", volcano=True) for i in range(4)]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)
    members = [f"wide-{i}" for i in range(4)]
    where = eventually(partial(nodes_of, kube, namespace, members), what="the gang bound")
    assert all(where & set(nodes) for nodes in racks.values()), where
    assert allocated(kube, namespace, "wide") is None
