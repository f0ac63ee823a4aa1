"""Pods written for another scheduler: served when the configuration lists its name,
and pointed out when it does not."""

from pathlib import Path

import pytest

from .harness import EXAMPLES, simulate

DROP_IN = str(EXAMPLES / "config" / "drop-in.yaml")


def pods(*names: tuple[str, str]) -> str:
    return "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: {scheduler}
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""
        for name, scheduler in names
    )


NODE = """---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 8Gi}}
"""


def test_the_drop_in_configuration_serves_every_peers_scheduler_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(
        NODE
        + pods(
            ("ours", "batch-scheduler"),
            ("batch", "kube-batch"),
            ("vc", "volcano"),
            ("plugins", "scheduler-plugins-scheduler"),
            ("theirs", "default-scheduler"),
        )
    )
    run = simulate(capsys, path, config=DROP_IN)
    assert run.code == 0, run.stderr
    assert set(run.bound()) == {f"default/{n}" for n in ("ours", "batch", "vc", "plugins")}
    # kube-scheduler still serves default-scheduler's pods; nothing says otherwise.
    assert "hint" not in run.stderr or "default-scheduler" in run.stderr


def test_pods_of_a_name_not_served_get_a_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(NODE + pods(("a", "kube-batch"), ("b", "kube-batch"), ("c", "volcano")))
    run = simulate(capsys, path)
    assert run.bound() == {}
    assert (
        "hint: pods this configuration does not serve were left alone (2 name 'kube-batch', "
        "1 name 'volcano'); to schedule them, list their names in schedulerNames "
        "(see examples/config/drop-in.yaml)"
    ) in run.stderr
