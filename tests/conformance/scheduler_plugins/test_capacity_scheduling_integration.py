"""scheduler-plugins v0.34.7, test/integration/capacity_scheduling_test.go.

batchsched does not read ElasticQuota, and its documentation maps no ElasticQuota onto
its Queues, so only the case without ElasticQuota is translated; docs/conformance.md
lists the others and why. The test's profile enables CapacityScheduling, which
batchsched refuses by name; without ElasticQuota, CapacityScheduling's PostFilter is
kube-scheduler's default preemption, so the case runs on batchsched's default profile
serving default-scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..runner import JSON, Case, check, params
from .objects import HIGH, LOW, MID, node, pod

SOURCE = "test/integration/capacity_scheduling_test.go"
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
    config={"schedulerNames": ["default-scheduler"]},
)


@pytest.mark.parametrize("case", params([REGULAR_PREEMPTION]))
def test_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(case, tmp_path, capsys)
