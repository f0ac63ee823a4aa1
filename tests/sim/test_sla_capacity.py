"""Volcano's sla and capacity plugins, as `batchsched simulate` runs them."""

from pathlib import Path

import pytest

from .harness import simulate

NODE = """---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "1", memory: 1Gi, pods: "10"}}
"""


def job(name: str, created: str, queue: str = "default", annotations: str = "{}") -> str:
    """A Volcano PodGroup of one member and its pod, asking for the node's whole CPU."""
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, creationTimestamp: "{created}", annotations: {annotations}}}
spec: {{minMember: 1, queue: {queue}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-0
  creationTimestamp: "{created}"
  annotations: {{scheduling.k8s.io/group-name: {name}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def queue(name: str, spec: str) -> str:
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {name}}}
spec: {spec}
status: {{state: Open}}
"""


def config(plugin: str) -> str:
    return (
        'actions: "enqueue, allocate"\nschedulerNames: [volcano]\ntiers:\n'
        f"- plugins: [{{name: priority}}, {{name: gang}}{plugin}]\n"
        "- plugins: [{name: predicates}, {name: proportion}]\n"
    )


@pytest.mark.parametrize(
    ("plugin", "placed"),
    [("", "default/first-0"), (", {name: sla}", "default/urgent-0")],
)
def test_a_job_stating_its_waiting_time_goes_first_under_sla(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, plugin: str, placed: str
) -> None:
    objects = tmp_path / "objects.yaml"
    objects.write_text(
        NODE
        + job("first", "2026-01-01T00:00:00Z")
        + job("urgent", "2026-01-01T00:00:00Z", annotations="{volcano.sh/sla-waiting-time: 1h}")
    )
    conf = tmp_path / "config.yaml"
    conf.write_text(config(plugin))
    run = simulate(capsys, objects, config=str(conf))
    assert run.code == 0, run.stderr
    assert set(run.bound()) == {placed}


def test_a_bad_waiting_time_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = tmp_path / "objects.yaml"
    objects.write_text(
        NODE + job("bad", "2026-01-01T00:00:00Z", annotations="{volcano.sh/sla-waiting-time: soon}")
    )
    run = simulate(capsys, objects)
    assert run.code == 0, run.stderr
    assert "sla-waiting-time]: 'soon' is not a duration" in str(run.report)
    assert not run.bound()


def test_capacity_keeps_a_queue_within_its_capability(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Capacity's deserved is what a queue states, but its capability still holds."""
    objects = tmp_path / "objects.yaml"
    objects.write_text(
        NODE
        + queue("q1", "{weight: 1, deserved: {cpu: '1'}, capability: {cpu: 500m}}")
        + job("a", "2026-01-01T00:00:00Z", queue="q1")
    )
    conf = tmp_path / "config.yaml"
    conf.write_text(
        'actions: "enqueue, allocate"\nschedulerNames: [volcano]\ntiers:\n'
        "- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: capacity}]\n"
    )
    run = simulate(capsys, objects, config=str(conf))
    assert run.code == 0, run.stderr
    assert not run.bound()
