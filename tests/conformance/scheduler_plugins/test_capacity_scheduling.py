"""scheduler-plugins v0.34.7, test/integration/capacity_scheduling_test.go and the unit
tests of pkg/capacityscheduling.

batchsched does not read ElasticQuota, and its documentation maps no ElasticQuota onto
its Queues, so only the cases without ElasticQuota are translated; docs/conformance.md
lists the others and why. The test's profile enables CapacityScheduling, which
batchsched refuses by name; without ElasticQuota, CapacityScheduling's PostFilter is
kube-scheduler's default preemption, so the cases run on batchsched's default profile
serving default-scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..runner import JSON, Case, check, params
from .objects import HIGH, LOW, MID, node, pod

SOURCE = "test/integration/capacity_scheduling_test.go"
UNIT = "pkg/capacityscheduling/capacity_scheduling_test.go"
# Without ElasticQuota, CapacityScheduling's PostFilter preempts as kube-scheduler's does.
DEFAULT_PROFILE: JSON = {"schedulerNames": ["default-scheduler"]}
NODES = tuple(
    node(name, {"pods": 32, "memory": 100, "cpu": 100}) for name in ("fake-node-1", "fake-node-2")
)
# The pods the test creates after the existing ones are scheduled.
LATER = 60


def make_pod(
    name: str, namespace: str, memory: int, milli_cpu: int, priority: int, node_name: str
) -> JSON:
    """util.MakePod: memory in bytes and CPU in millicores requested; bound if
    `node_name`, else created once the existing pods run."""
    return pod(
        name,
        namespace,
        {"memory": memory, "cpu": f"{milli_cpu}m"},
        priority=priority,
        node_name=node_name or None,
        created=0 if node_name else LATER,
    )


REGULAR_PREEMPTION = Case(
    source=SOURCE,
    test="TestCapacityScheduling",
    name="regular preemption without Elastic Quota",
    objects=(
        *NODES,
        make_pod("t3-p1", "ns1", 50, 10, HIGH, "fake-node-1"),
        make_pod("t3-p2", "ns1", 50, 10, LOW, "fake-node-1"),
        make_pod("t3-p3", "ns2", 50, 10, HIGH, "fake-node-2"),
        make_pod("t3-p4", "ns2", 50, 10, LOW, "fake-node-2"),
        make_pod("t3-p5", "ns1", 50, 10, MID, ""),
        make_pod("t3-p6", "ns2", 50, 10, MID, ""),
    ),
    scheduled=frozenset({"ns1/t3-p1", "ns2/t3-p3", "ns1/t3-p5", "ns2/t3-p6"}),
    config=DEFAULT_PROFILE,
)

# TestPostFilter's PostFilter nominates node-a for t1-p1 (a victim of lower priority is
# evicted there); its node has 150 bytes of memory and st.MakeNode's 32 pods. makePod's
# request of 0 GPUs is left out: it asks for nothing, and an API server refuses an
# extended resource requested without a limit.
POST_FILTER = Case(
    source=UNIT,
    test="TestPostFilter",
    name="without elasticQuotas",
    objects=(
        node("node-a", {"memory": 150, "pods": 32}),
        *(
            pod(
                name,
                ns,
                {"memory": 50, "cpu": "0m"},
                priority=MID,
                node_name="node-a",
            )
            for name, ns in (("t1-p2", "ns1"), ("t1-p3", "ns2"), ("t1-p4", "ns2"))
        ),
        pod(
            "t1-p1",
            "ns1",
            {"memory": 50, "cpu": "0m"},
            priority=HIGH,
            created=LATER,
        ),
    ),
    scheduled=frozenset({"ns1/t1-p1"}),
    config=DEFAULT_PROFILE,
)


@pytest.mark.parametrize("case", params([REGULAR_PREEMPTION, POST_FILTER]))
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
