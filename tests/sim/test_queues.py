"""Queues named by namespaces and pods: a namespace mapped to a queue is held to that
queue's capability, pods naming another queue are not, and bad names are reported."""

from pathlib import Path

import pytest

from .harness import simulate_text


def lone_pod(name: str, namespace: str, notes: str = "") -> str:
    """A pod of ours asking for one CPU, with `notes` as its annotations' entries."""
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}, annotations: {{{notes}}}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


INPUT = (
    """---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 16Gi}}
---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {capability: {cpu: "2"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {scheduling.batchsched.io/queue-name: team-a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: typo, annotations: {scheduling.batchsched.io/queue-name: ""}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec: {minMember: 2, queue: research}
"""
    + "".join(lone_pod(name, "ml") for name in ("a", "b", "c"))
    + lone_pod("r", "ml", "scheduling.volcano.sh/queue-name: research")
    + lone_pod("lost", "ml", "scheduling.batchsched.io/queue-name: nowhere")
    + "".join(lone_pod(f"train-{i}", "ml", "scheduling.k8s.io/group-name: train") for i in range(2))
    + lone_pod("t", "typo")
)


def test_namespace_and_pod_queues(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = simulate_text(capsys, tmp_path, INPUT)
    # team-a holds two of ml's three lone pods; the pod and the gang naming research, and
    # the pod of the namespace whose queue setting was refused (default queue), all run.
    assert set(run.bound()) == {"ml/a", "ml/b", "ml/r", "ml/train-0", "ml/train-1", "typo/t"}
    reasons = {key: pod["reason"] for key, pod in run.pods.items() if not pod["node"]}
    assert reasons == {
        "ml/c": "queue team-a: pod ml/c would exceed its capability for cpu (2 of 2 in use)",
        "ml/lost": "queue 'nowhere' does not exist (named by Pod ml/lost's annotation "
        "scheduling.batchsched.io/queue-name)",
    }
    assert run.report["errors"] == [
        "Namespace typo: annotation scheduling.batchsched.io/queue-name='' must name a queue"
    ]
