"""scheduler-plugins v0.34.7, the unit test tables of pkg/coscheduling whose cases decide
where, or whether, a pod is placed, as whole scenarios.

A unit test calls one function of the plugin; its case becomes the smallest cluster in
which that function's answer decides the pod's fate, with the test's own objects:
- PreFilter and Permit: their success means the pod is scheduled (the pods request
  nothing, and the nodes have room), their failure, or Wait with no sibling to come, that
  it is not.
- CheckClusterResource: the group's pending members (enough for minMember, requesting
  nothing) are scheduled exactly when the cluster has the group's minResources free.
- Less (the queue's order): both pods want the one node's only CPU; the pod Less puts
  first holds it at the end. A pod enters the queue when it is created, so
  `InitialAttemptTimestamp` is its creation, and a group's `Time` its creation.
The profile is the integration tests' (Coscheduling serving default-scheduler), without
arguments. `st.MakeNode().Capacity` gives a node 32 pods beside the resources named.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..runner import JSON, Case, check, params
from .objects import coscheduling_config, node, pod, pod_group

CORE = "pkg/coscheduling/core/core_test.go"
PLUGIN = "pkg/coscheduling/coscheduling_test.go"
# In the unit tests, both priorities of TestLess.
LOW, HIGH = 10, 100
# The plugin as the integration tests configure it, serving default-scheduler.
PROFILE = coscheduling_config()
# The simulator replays objects as they are created; Less compares two pods with both
# groups present.
GROUP_PRIORITY = (
    "decided (docs/drop-in.md): the simulator takes a creationTimestamp as the moment an "
    "object arrives, so p1 is placed when pg1 exists, a second before pg2; Less compares "
    "the two with both groups present"
)


def nodes(*names: str, cpu: int = 4) -> tuple[JSON, ...]:
    return tuple(node(name, {"cpu": cpu, "pods": 32}) for name in names)


def decides(
    source: str,
    test: str,
    name: str,
    objects: tuple[JSON, ...],
    subject: str,
    success: bool,
    defect: str | None = None,
) -> Case:
    """A case whose assertion is the success of the call for pod `subject`."""
    key = frozenset({subject})
    return Case(
        source=source,
        test=test,
        name=name,
        objects=objects,
        scheduled=key if success else frozenset(),
        unscheduled=frozenset() if success else key,
        config=PROFILE,
        defect=defect,
    )


def ns_pod(
    name: str,
    group: str | None = None,
    *,
    requests: dict[str, int] | None = None,
    node_name: str | None = None,
    gates: tuple[str, ...] = (),
) -> JSON:
    return pod(name, "ns", requests, group=group, node_name=node_name, gates=gates)


PREFILTER_NODES = nodes("node-a", "node-b")
PRE_FILTER = [
    decides(
        CORE,
        "TestPreFilter",
        "pod does not belong to any pg",
        (
            *PREFILTER_NODES,
            pod("p", "default"),
            ns_pod("p1", "pg1"),
            ns_pod("p2", "pg2"),
            pod_group("pg1", "ns", 1, timeout=None),
            pod_group("pg2", "ns", 1, timeout=None),
        ),
        "default/p",
        True,
    ),
    decides(
        CORE,
        "TestPreFilter",
        "pod count less than minMember",
        (
            *PREFILTER_NODES,
            ns_pod("pg2-1", "pg2"),
            ns_pod("p", "pg1"),
            pod_group("pg1", "ns", 2, timeout=None),
            pod_group("pg2", "ns", 2, timeout=None),
        ),
        "ns/p",
        False,
    ),
    *(
        decides(
            CORE,
            "TestPreFilter",
            name,
            (
                *PREFILTER_NODES,
                ns_pod("p1b", "pg1"),
                ns_pod("p1c", "pg1"),
                ns_pod("p1a", "pg1"),
                pod_group("pg1", "ns", 2, timeout=None),
                pod_group("pg2", "ns", 2, timeout=None),
            ),
            "ns/p1a",
            True,
        )
        # The test gives both cases the same objects.
        for name in ("pod count equal minMember", "pod count more than minMember")
    ),
    decides(
        CORE,
        "TestPreFilter",
        "gated pods but still meeting quorum (minMember < replicas)",
        (
            *PREFILTER_NODES,
            ns_pod("p1b", "pg1"),
            ns_pod("p1c", "pg1", gates=("example-gate",)),
            ns_pod("p1a", "pg1"),
            pod_group("pg1", "ns", 2, timeout=None),
        ),
        "ns/p1a",
        True,
    ),
    decides(
        CORE,
        "TestPreFilter",
        "gated pods push group below quorum",
        (
            *PREFILTER_NODES,
            ns_pod("p1b", "pg1", gates=("example-gate",)),
            ns_pod("p1c", "pg1"),
            ns_pod("p1a", "pg1"),
            pod_group("pg1", "ns", 3, timeout=None),
        ),
        "ns/p1a",
        False,
    ),
    decides(
        CORE,
        "TestPreFilter",
        "all sibling pods are gated",
        (
            *PREFILTER_NODES,
            ns_pod("p1b", "pg1", gates=("example-gate",)),
            ns_pod("p1c", "pg1", gates=("example-gate",)),
            ns_pod("p1a", "pg1"),
            pod_group("pg1", "ns", 2, timeout=None),
        ),
        "ns/p1a",
        False,
    ),
    *(
        decides(
            CORE,
            "TestPreFilter",
            name,
            (
                *PREFILTER_NODES,
                ns_pod("p1b", "pg1"),
                ns_pod("p1c", "pg1"),
                ns_pod("p1a", "pg1"),
                pod_group("pg1", "ns", 2, min_resources={"cpu": cpu}, timeout=None),
            ),
            "ns/p1a",
            success,
        )
        for name, cpu, success in (
            ("cluster's resource satisfies minResource", 6, True),
            ("cluster's resource cannot satisfy minResource", 10, False),
        )
    ),
]

PERMIT = [
    decides(
        CORE,
        "TestPermit",
        "pod does not belong to any pg",
        (*nodes("node"), ns_pod("p"), pod_group("pg1", "ns", 2, timeout=None)),
        "ns/p",
        True,
    ),
    decides(
        CORE,
        "TestPermit",
        "pod specifies a non-existent pg",
        (
            *nodes("node"),
            ns_pod("p", "pg-non-existent"),
            pod_group("pg1", "ns", 2, timeout=None),
        ),
        "ns/p",
        False,
    ),
    decides(
        CORE,
        "TestPermit",
        "pod belongs to a pg that doesn't have quorum",
        (*nodes("node"), ns_pod("p", "pg1"), pod_group("pg1", "ns", 2, timeout=None)),
        "ns/p",
        False,
    ),
    decides(
        CORE,
        "TestPermit",
        "pod belongs to a pg that have quorum satisfied",
        (
            *nodes("node"),
            ns_pod("p1b", "pg1", node_name="node"),
            ns_pod("p1a", "pg1"),
            pod_group("pg1", "ns", 2, timeout=None),
        ),
        "ns/p1a",
        True,
    ),
    *(
        decides(
            PLUGIN,
            "TestPermit",
            name,
            (
                *nodes("node"),
                ns_pod("p", group),
                pod_group("pg1", "ns", 1, timeout=None),
                pod_group("pg2", "ns", 2, timeout=None),
            ),
            "ns/p",
            success,
        )
        for name, group, success in (
            ("pods do not belong to any podGroup", None, True),
            ("pods belong to a pg1, but quorum not satisfied", "pg2", False),
            ("pods belong to a podGroup, and quorum satisfied", "pg1", True),
        )
    ),
]


def cluster_resource(name: str, bound: tuple[JSON, ...], members: int, enough: bool) -> Case:
    """pg1 asks for 4 CPUs of two 3-CPU nodes; `members` of its minMember 2 are pending."""
    pending = tuple(ns_pod(f"pg1-{i}", "pg1") for i in range(members))
    keys = frozenset(f"ns/pg1-{i}" for i in range(members))
    return Case(
        source=CORE,
        test="TestCheckClusterResource",
        name=name,
        objects=(
            *nodes("node-a", "node-b", cpu=3),
            *bound,
            *pending,
            pod_group("pg1", "ns", 2, min_resources={"cpu": 4}, timeout=None),
        ),
        scheduled=keys if enough else frozenset(),
        unscheduled=frozenset() if enough else keys,
        config=PROFILE,
    )


CHECK_CLUSTER_RESOURCE = [
    cluster_resource(
        "Cluster resource enough",
        (ns_pod("p1", requests={"cpu": 2}, node_name="node-a"),),
        2,
        True,
    ),
    cluster_resource(
        "Cluster resource not enough",
        (
            ns_pod("p1", requests={"cpu": 2}, node_name="node-a"),
            ns_pod("p2", requests={"cpu": 1}, node_name="node-b"),
        ),
        2,
        False,
    ),
    cluster_resource(
        "Cluster resource enough as p1's resource needs to be excluded from minResources",
        (
            ns_pod("p1", "pg1", requests={"cpu": 2}, node_name="node-a"),
            ns_pod("p2", requests={"cpu": 1}, node_name="node-b"),
        ),
        1,
        True,
    ),
]


def queued(name: str, namespace: str, priority: int, group: str | None, at: int) -> JSON:
    return pod(name, namespace, {"cpu": 1}, priority=priority, group=group, created=at)


def sorted_first(
    name: str,
    p1: tuple[str, int, str | None, int],
    p2: tuple[str, int, str | None, int],
    groups: tuple[tuple[str, str, int], ...],
    first: str,
    defect: str | None = None,
) -> Case:
    """A TestLess case: p1 and p2 (namespace, priority, group label, queued at), the
    groups (name, namespace, created at, without minMember as tu.MakePodGroup makes
    them), and the pod the test's `want` puts first."""
    second = "p2" if first == "p1" else "p1"
    (ns1, prio1, group1, at1), (ns2, prio2, group2, at2) = p1, p2
    return Case(
        source=PLUGIN,
        test="TestLess",
        name=name,
        objects=(
            node("node", {"cpu": 1, "pods": 32}),
            *(
                {**pod_group(g, ns, 0, timeout=None, created=at), "spec": {}}
                for g, ns, at in groups
            ),
            queued("p1", ns1, prio1, group1, at1),
            queued("p2", ns2, prio2, group2, at2),
        ),
        scheduled=frozenset({f"{(ns1 if first == 'p1' else ns2)}/{first}"}),
        unscheduled=frozenset({f"{(ns2 if first == 'p1' else ns1)}/{second}"}),
        config=PROFILE,
        defect=defect,
    )


LESS = [
    sorted_first(
        "p1.priority less than p2.priority", ("ns1", LOW, None, 0), ("ns2", HIGH, None, 0), (), "p2"
    ),
    sorted_first(
        "p1.priority greater than p2.priority",
        ("ns1", HIGH, None, 0),
        ("ns2", LOW, None, 0),
        (),
        "p1",
    ),
    sorted_first(
        "equal priority. p1 is added to schedulingQ earlier than p2",
        ("ns1", HIGH, None, 1),
        ("ns2", HIGH, None, 2),
        (),
        "p1",
    ),
    sorted_first(
        "equal priority. p2 is added to schedulingQ earlier than p1",
        ("ns1", HIGH, None, 2),
        ("ns2", HIGH, None, 1),
        (),
        "p2",
    ),
    sorted_first(
        "p1.priority less than p2.priority, p1 belongs to pg1",
        ("ns1", LOW, "pg1", 0),
        ("ns2", HIGH, None, 0),
        (("pg1", "ns1", 0),),
        "p2",
    ),
    sorted_first(
        "p1.priority greater than p2.priority, p1 belongs to pg1",
        ("ns1", HIGH, "pg1", 0),
        ("ns2", LOW, None, 0),
        (("pg1", "ns1", 0),),
        "p1",
    ),
    sorted_first(
        "equal priority. p1 is added to schedulingQ earlier than p2, p1 belongs to pg1",
        ("ns1", HIGH, "pg1", 1),
        ("ns2", HIGH, None, 2),
        (("pg1", "ns1", 1),),
        "p1",
    ),
    sorted_first(
        "equal priority. p2 is added to schedulingQ earlier than p1, p1 belongs to pg1",
        ("ns1", HIGH, "pg1", 2),
        ("ns2", HIGH, None, 1),
        (("pg1", "ns1", 2),),
        "p2",
    ),
    sorted_first(
        "p1.priority less than p2.priority, p1 belongs to pg1 and p2 belongs to pg2",
        ("ns1", LOW, "pg1", 0),
        ("ns2", HIGH, "pg2", 0),
        (("pg1", "ns1", 1), ("pg2", "ns2", 2)),
        "p2",
        GROUP_PRIORITY,
    ),
    sorted_first(
        "p1.priority greater than p2.priority, p1 belongs to pg1 and and p2 belongs to pg2",
        ("ns1", HIGH, "pg1", 0),
        ("ns2", LOW, "pg1", 0),
        (("pg1", "ns1", 1), ("pg2", "ns2", 2)),
        "p1",
    ),
    sorted_first(
        "equal priority. p1 is added to schedulingQ earlier than p2, p1 belongs to pg1 and p2 "
        "belongs to pg2",
        ("ns1", HIGH, "pg1", 1),
        ("ns2", HIGH, "pg2", 2),
        (("pg1", "ns1", 1), ("pg2", "ns2", 2)),
        "p1",
    ),
    sorted_first(
        "equal priority. p2 is added to schedulingQ earlier than p1, p1 belongs to pg2 and p2 "
        "belongs to pg1",
        ("ns", LOW, "pg2", 1),
        ("ns", HIGH, "pg1", 2),
        (("pg1", "ns", 1), ("pg2", "ns", 2)),
        "p2",
    ),
    sorted_first(
        "equal priority and creation time, and p2 belong to pg2",
        ("ns1", HIGH, None, 1),
        ("ns2", HIGH, "pg2", 1),
        (("pg2", "ns2", 2),),
        "p1",
    ),
]


@pytest.mark.parametrize("case", params([*PRE_FILTER, *PERMIT, *CHECK_CLUSTER_RESOURCE, *LESS]))
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
