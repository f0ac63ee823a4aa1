"""Queues named by namespaces and pods: a namespace mapped to a queue is held to that
queue's capability, pods naming another queue are not, and bad names are reported.
Volcano's guarantee (against weights and reclaim) and tree of parents, through the
simulator as users run it."""

from collections import Counter
from pathlib import Path

import pytest

from .harness import Run, simulate_text


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


def queue_doc(name: str, spec: str = "{}") -> str:
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {name}}}
spec: {spec}
"""


def cpu_node(name: str, cpu: int, labels: str = "{}") -> str:
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 64Gi}}}}
"""


def queue_pods(queue: str, count: int, *, minute: int = 0, spec: str = "") -> str:
    """`count` one-CPU pods naming `queue`, created `minute` minutes in; `spec` is
    appended to their spec's map."""
    return "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {queue}-{i}
  namespace: default
  creationTimestamp: "2024-01-01T00:{minute:02d}:00Z"
  annotations: {{scheduling.volcano.sh/queue-name: {queue}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
  {spec}
"""
        for i in range(count)
    )


def per_queue(run: Run) -> Counter[str]:
    """Bound pods by the queue their names start with."""
    return Counter(key.split("/")[1].rsplit("-", 1)[0] for key in run.bound())


def test_a_guarantee_holds_against_a_heavier_queue(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Weighted 1:3, g would get 2 of 8 CPUs; its guarantee of 4 gives it 4."""
    run = simulate_text(
        capsys,
        tmp_path,
        cpu_node("n1", 8)
        + queue_doc("g", '{weight: 1, guarantee: {resource: {cpu: "4"}}}')
        + queue_doc("h", "{weight: 3}")
        + queue_pods("g", 8)
        + queue_pods("h", 8),
    )
    assert per_queue(run) == {"g": 4, "h": 4}


def test_reclaim_leaves_a_queue_its_guarantee(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """b fills the node; a minute later a's pods arrive. Weighted alike, a would
    reclaim 4 CPUs, but b's guarantee of 5 leaves a 3."""
    run = simulate_text(
        capsys,
        tmp_path,
        cpu_node("n1", 8)
        + queue_doc("a")
        + queue_doc("b", '{guarantee: {resource: {cpu: "5"}}}')
        + queue_pods("b", 8)
        + queue_pods("a", 8, minute=1),
    )
    assert per_queue(run) == {"a": 3, "b": 5}
    evicted = [key for key, pod in run.pods.items() if pod.get("evicted_at") is not None]
    assert len(evicted) == 3
    assert all(key.startswith("default/b-") for key in evicted)
    assert run.pods[evicted[0]]["reason"].startswith("reclaimed for queue a")


def test_children_split_their_parents_share(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On an 8-CPU pool of a larger cluster, org and solo (1:1) get 4 CPUs each, and
    org's children x and y (1:3) split its 4 into 1 and 3."""
    pool = "nodeSelector: {pool: train}"
    run = simulate_text(
        capsys,
        tmp_path,
        cpu_node("pool-0", 4, "{pool: train}")
        + cpu_node("pool-1", 4, "{pool: train}")
        + cpu_node("serve", 64)
        + queue_doc("org", "{weight: 1}")
        + queue_doc("solo", "{weight: 1, parent: root}")
        + queue_doc("x", "{weight: 1, parent: org}")
        + queue_doc("y", "{weight: 3, parent: org}")
        + "".join(queue_pods(q, 8, spec=pool) for q in ("x", "y", "solo")),
    )
    assert per_queue(run) == {"x": 1, "y": 3, "solo": 4}
    assert set(run.bound().values()) == {"pool-0", "pool-1"}


def test_queues_on_a_cycle_keep_their_pods_waiting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(
        capsys,
        tmp_path,
        cpu_node("n1", 8)
        + queue_doc("a", "{parent: b}")
        + queue_doc("b", "{parent: a}")
        + queue_doc("c")
        + queue_pods("a", 1)
        + queue_pods("c", 1),
    )
    assert run.bound() == {"default/c-0": "n1"}
    assert run.pods["default/a-0"]["reason"] == (
        "queue 'a' is invalid: Queue a.spec.parent: the parents form a cycle, a -> b -> a "
        "(named by Pod default/a-0's annotation scheduling.volcano.sh/queue-name)"
    )


def test_pods_sent_to_a_parent_queue_wait(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(
        capsys,
        tmp_path,
        cpu_node("n1", 8)
        + queue_doc("org")
        + queue_doc("x", "{parent: org}")
        + queue_doc("y", "{parent: org}")
        + queue_pods("org", 1),
    )
    assert run.bound() == {}
    assert run.pods["default/org-0"]["reason"] == (
        "queue 'org' has child queues; submit to one of them: x, y"
    )
