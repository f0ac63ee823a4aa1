"""A gang past its PodGroup's schedule timeout: waited for by default, Failed on request."""

from pathlib import Path

import pytest

from .harness import simulate

# The bound pod created an hour after the gang sets the simulator's clock: the gang has
# waited an hour against its 30s timeout, on a node with room for it.
INPUT = """---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: clock, creationTimestamp: "2025-01-01T01:00:00Z"}
spec: {schedulerName: batch-scheduler, nodeName: n1, containers: [{name: c}]}
---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {name: g, creationTimestamp: "2025-01-01T00:00:00Z"}
spec: {minMember: 2, scheduleTimeoutSeconds: 30}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata:
  name: g-{i}
  creationTimestamp: "2025-01-01T00:00:00Z"
  annotations: {{scheduling.batchsched.io/group-name: g}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""
    for i in range(2)
)

CONFIG = """
tiers:
- plugins: [{{name: gang, arguments: {{scheduleTimeoutAction: {action}}}}}]
- plugins: [{{name: predicates}}]
"""
FAILED = (
    "gang default/g: did not reach minMember 2 within its schedule timeout "
    "(waited over 30s, 0 bound); its pending pods are no longer tried"
)


@pytest.mark.parametrize(
    ("action", "phase", "bound"),
    [
        ("Wait", "Running", ["default/clock", "default/g-0", "default/g-1"]),
        ("Fail", "Failed", ["default/clock"]),
    ],
)
def test_the_report_shows_what_the_timeout_did(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, action: str, phase: str, bound: list[str]
) -> None:
    (tmp_path / "input.yaml").write_text(INPUT)
    (tmp_path / "config.yaml").write_text(CONFIG.format(action=action))
    run = simulate(capsys, tmp_path / "input.yaml", config=str(tmp_path / "config.yaml"))
    assert run.code == 0, run.stderr
    assert run.podgroups["default/g"]["phase"] == phase
    assert sorted(run.bound()) == bound
    if action == "Fail":
        assert [run.pods[f"default/g-{i}"]["reason"] for i in range(2)] == [FAILED, FAILED]
