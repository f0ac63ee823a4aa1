"""A pod whose constraints the scheduler does not honour yet waits and names them; a
gated pod waits, and so does its gang while it lacks the members it needs."""

from pathlib import Path

import pytest

from batchsched.api.unsupported import GATED_MESSAGE

from .harness import Run, group, simulate_text

NODES = "".join(
    f"""---
apiVersion: v1
kind: Node
metadata: {{name: n{i}}}
status: {{allocatable: {{cpu: "4", memory: 8Gi}}}}
"""
    for i in range(4)
)


def member(name: str, group: str, *, gated: bool = False) -> str:
    gates = "schedulingGates: [{name: example.com/quota}]" if gated else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {{scheduling.batchsched.io/group-name: {group}}}}}
spec:
  schedulerName: batch-scheduler
  {gates}
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def simulate_nodes_and(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Run:
    return simulate_text(capsys, tmp_path, NODES + text)


def test_a_gang_waits_for_its_gated_member(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_nodes_and(
        capsys,
        tmp_path,
        group("whole", 4)
        + "".join(member(f"whole-{i}", "whole", gated=i == 3) for i in range(4))
        + group("spare", 3)
        + "".join(member(f"spare-{i}", "spare", gated=i == 0) for i in range(4)),
    )
    assert sorted(run.bound()) == [f"default/spare-{i}" for i in (1, 2, 3)]
    pods = run.pods
    assert pods["default/spare-0"]["reason"] == GATED_MESSAGE
    assert pods["default/whole-3"]["reason"] == GATED_MESSAGE
    for i in range(3):
        assert pods[f"default/whole-{i}"]["reason"] == (
            f"gang default/whole: 3 of 4 members may be placed; default/whole-3: {GATED_MESSAGE}"
        )
    assert run.podgroups["default/whole"]["scheduled"] == 0


def test_unhonoured_constraints_leave_the_pod_pending_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_nodes_and(
        capsys,
        tmp_path,
        """---
apiVersion: v1
kind: Pod
metadata: {name: disk}
spec:
  schedulerName: batch-scheduler
  containers: [{name: c}]
  volumes: [{name: data, gcePersistentDisk: {pdName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  schedulerName: batch-scheduler
  containers: [{name: c}]
""",
    )
    assert list(run.bound()) == ["default/plain"]
    assert run.pods["default/disk"]["reason"] == (
        "spec.volumes[0].gcePersistentDisk is not supported yet"
    )
