"""Volcano's network topology user guide run as written: the three Volcano Jobs of
docs/user-guide/how_to_use_network_topology_aware_scheduling.md (section 3.3, read from
Volcano's released module, unchanged) on the topology its figure draws (HyperNode0 of
node0-node3 and HyperNode1 of node4-node7 at tier 1 under HyperNode2 at tier 2), with
Volcano's released CRDs, its own job controller turning each Job into a PodGroup
(networkTopology, and subGroupPolicy from a task's partitionPolicy) and its pods, and
`batchsched run` in place of vc-scheduler. Each expectation is the scheduling result the
guide prints under its example.
"""

from __future__ import annotations

import re

import pytest
import yaml

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)
from .test_volcano_jobs import (  # noqa: F401 (fixtures)
    DROP_IN,
    all_bound,
    control_plane,
    kube_fixture,
    namespace_fixture,
    pod_group_of,
    submit,
    volcano,
)
from tests.support import JSON, ClusterObjects, Kube, peer_source
from tests.support.objects import hypernode, hypernode_member, node

pytestmark = pytest.mark.integration

GUIDE = "docs/user-guide/how_to_use_network_topology_aware_scheduling.md"
# The pod label Volcano's job controller numbers a task's partitions by.
PARTITION = "volcano.sh/partition-id"


def guide_jobs() -> list[JSON]:
    """The guide's example Jobs, in the order of its sections 3.3.1-3.3.3."""
    text = (peer_source("volcano") / GUIDE).read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    found = [yaml.safe_load(_dedent(block)) for block in blocks]
    return [doc for doc in found if isinstance(doc, dict) and doc.get("kind") == "Job"]


def _dedent(block: str) -> str:
    """A code block indented under a list item, moved to the margin."""
    lines = block.splitlines()
    margin = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[margin:] for line in lines)


def figure_topology(
    kube: Kube, cluster_objects: ClusterObjects, suffix: str
) -> tuple[list[str], list[str]]:
    """The guide's figure: eight nodes of 4 CPUs (its pods each ask a whole node),
    HyperNode0 and HyperNode1 of four each at tier 1, HyperNode2 over both at tier 2. The
    nodes of each tier-1 HyperNode, named after `suffix` (nodes and HyperNodes are
    cluster-wide)."""
    names = [f"node{i}-{suffix}" for i in range(8)]
    for name in names:
        ready_node(cluster_objects, kube, node(name, cpu="4"))
    halves = (names[:4], names[4:])
    leaves = [f"hypernode{i}-{suffix}" for i in range(2)]
    for leaf, members in zip(leaves, halves, strict=True):
        exact = [hypernode_member("Node", exactMatch={"name": n}) for n in members]
        cluster_objects.create(hypernode(leaf, 1, exact))
    spine = [hypernode_member("HyperNode", exactMatch={"name": leaf}) for leaf in leaves]
    cluster_objects.create(hypernode(f"hypernode2-{suffix}", 2, spine))
    return halves


def test_a_hard_tier_1_job_runs_its_minimum_in_one_hypernode(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """3.3.1: eight pods, minAvailable 4, `mode: hard, highestTierAllowed: 1`. The Job
    may not cross tier-1 HyperNodes, so four pods run in one of them and four stay
    Pending (the guide's run shows HyperNode1's; both are empty, either is right)."""
    halves = figure_topology(kube, cluster_objects, namespace)
    job = guide_jobs()[0]
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    scheduler = start_scheduler(config=DROP_IN)
    name = submit(kube, namespace, job)
    group = eventually(lambda: pod_group_of(kube, namespace, name), what="the job's PodGroup")
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}

    def four_bound_four_told() -> dict[str, JSON] | None:
        found = pods(kube, namespace)
        placed = [p for p in found.values() if p["spec"].get("nodeName")]
        waiting = [p for p in found.values() if unschedulable_message(p)]
        return found if len(found) == 8 and len(placed) == 4 and len(waiting) == 4 else None

    found = eventually(four_bound_four_told, what="four pods bound, four told why they wait")
    where = {p["spec"]["nodeName"] for p in found.values() if p["spec"].get("nodeName")}
    assert where in (set(halves[0]), set(halves[1]))
    # Later sessions keep the rest pending: the other HyperNode's free nodes are not in
    # the job's.
    ticks_pass(scheduler)
    assert sum(1 for v in placements(kube, namespace).values() if v) == 4


def test_partitions_each_in_a_tier_1_hypernode_of_one_tier_2(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """3.3.2: the same eight pods under `highestTierAllowed: 2`, cut by the task's
    partitionPolicy into two partitions of four, each `highestTierAllowed: 1`. All eight
    run: each partition fills one tier-1 HyperNode, the two different ones of HyperNode2."""
    halves = figure_topology(kube, cluster_objects, namespace)
    job = guide_jobs()[1]
    assert job["spec"]["tasks"][0]["partitionPolicy"]["partitionSize"] == 4
    start_scheduler(config=DROP_IN)
    name = submit(kube, namespace, job)
    group = eventually(lambda: pod_group_of(kube, namespace, name), what="the job's PodGroup")
    (policy,) = group["spec"]["subGroupPolicy"]
    assert policy["subGroupSize"] == 4 and policy["matchLabelKeys"] == [PARTITION]

    found = eventually(lambda: all_bound(kube, namespace, 8), what="all eight pods bound")
    by_partition: dict[str, set[str]] = {}
    for pod in found.values():
        partition = pod["metadata"]["labels"][PARTITION]
        by_partition.setdefault(partition, set()).add(pod["spec"]["nodeName"])
    assert sorted(by_partition) == ["0", "1"]
    assert sorted(map(sorted, by_partition.values())) == sorted(map(sorted, halves))


def test_a_job_without_topology_fills_the_hypernode_in_use(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """3.3.3: two pods of a whole node each and no networkTopology. The first may go
    anywhere; the second goes to a node of the same tier-1 HyperNode, the one already
    in use (HyperNode-level bin packing of pods without a network topology)."""
    halves = figure_topology(kube, cluster_objects, namespace)
    job = guide_jobs()[2]
    assert "networkTopology" not in job["spec"]
    start_scheduler(config=DROP_IN)
    submit(kube, namespace, job)

    found = eventually(lambda: all_bound(kube, namespace, 2), what="both pods bound")
    where = {p["spec"]["nodeName"] for p in found.values()}
    assert len(where) == 2
    assert any(where <= set(half) for half in halves), where


def test_the_design_jobs_partitions_start_at_its_minimum(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """The Job of the "Volcano Job Controller" section of Volcano's design (its module's
    docs/design/Network Topology Aware Scheduling.md): minAvailable 3 under
    `highestTierAllowed: 2`, task0's six pods in two partitions of three and task1's
    eight in four of two, every partition `highestTierAllowed: 1` (the design leaves the
    pod template out: here each pod asks a whole node). On tier-1 HyperNodes of three,
    three and two nodes under one tier-2, not all fourteen pods fit: the Job starts
    with what does, each partition whole in one tier-1 HyperNode, its other pods
    Pending (a partition is gang-scheduled on its own; the Job needs its minAvailable)."""
    sizes = {"s0": 3, "s1": 3, "s2": 2}
    names = {leaf: [f"{leaf}-{i}-{namespace}" for i in range(n)] for leaf, n in sizes.items()}
    for leaf, members in names.items():
        for name in members:
            ready_node(cluster_objects, kube, node(name, cpu="4"))
        exact = [hypernode_member("Node", exactMatch={"name": n}) for n in members]
        cluster_objects.create(hypernode(f"{leaf}-{namespace}", 1, exact))
    spine = [hypernode_member("HyperNode", exactMatch={"name": f"{s}-{namespace}"}) for s in sizes]
    cluster_objects.create(hypernode(f"spine-{namespace}", 2, spine))
    partition = {"mode": "hard", "highestTierAllowed": 1}
    container = {"name": "c0", "image": "nginx", "resources": {"requests": {"cpu": "4"}}}
    tasks = [
        {
            "name": name,
            "replicas": replicas,
            "partitionPolicy": {
                "totalPartitions": replicas // size,
                "partitionSize": size,
                "networkTopology": partition,
            },
            "template": {"spec": {"containers": [container]}},
        }
        for name, replicas, size in (("task0", 6, 3), ("task1", 8, 2))
    ]
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "network-topology-job"},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 3,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "tasks": tasks,
        },
    }
    start_scheduler(config=DROP_IN)
    submit(kube, namespace, job)

    def started() -> dict[str, JSON] | None:
        found = pods(kube, namespace)
        placed = [p for p in found.values() if p["spec"].get("nodeName")]
        return found if len(found) == 14 and len(placed) >= 3 else None

    found = eventually(started, what="the Job started with its minimum")
    leaf_of = {n: leaf for leaf, members in names.items() for n in members}
    parts: dict[tuple[str, str], list[str]] = {}
    for pod in found.values():
        key = (
            pod["metadata"]["labels"]["volcano.sh/task-spec"],
            pod["metadata"]["labels"][PARTITION],
        )
        if pod["spec"].get("nodeName"):
            parts.setdefault(key, []).append(leaf_of[pod["spec"]["nodeName"]])
    for (task, _), leaves in parts.items():
        assert len(leaves) == {"task0": 3, "task1": 2}[task], parts
        assert len(set(leaves)) == 1, parts
