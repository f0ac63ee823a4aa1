"""Bad input: the simulator says what is wrong and where, and schedules the rest."""

from pathlib import Path

import pytest

from batchsched.plugins import PLUGINS

from .harness import simulate

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi}}
"""


def a_pod(name: str, *, amount: str = "1", group: str | None = None, field: str = "cpu") -> str:
    notes = f"annotations: {{scheduling.batchsched.io/group-name: {group}}}" if group else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, {notes}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{{field}: "{amount}"}}}}}}]
"""


def write(tmp_path: Path, *documents: str, name: str = "input.yaml") -> Path:
    path = tmp_path / name
    path.write_text("\n---\n".join(documents))
    return path


@pytest.mark.parametrize(
    ("text", "problem"),
    [("kind: Node\nmetadata: {name: [\n", "not valid YAML"), (None, "cannot read")],
    ids=["broken-yaml", "missing-file"],
)
def test_unreadable_input_stops(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str | None, problem: str
) -> None:
    good = write(tmp_path, NODE, a_pod("ok"), name="good.yaml")
    bad = tmp_path / "bad.yaml"
    if text is not None:
        bad.write_text(text)
    run = simulate(capsys, good, bad)
    assert run.code != 0
    assert run.stdout == ""
    assert run.stderr.startswith(f"batchsched: {bad}: {problem}")


def test_unknown_kind_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: web}\n"
    path = write(tmp_path, NODE, config_map, "just a string\n", a_pod("ok"))
    run = simulate(capsys, path)
    assert run.code == 0
    assert run.stderr.splitlines() == [
        f"warning: {path} document 2: ignored ConfigMap web/cm: kind 'ConfigMap' is not simulated",
        f"warning: {path} document 3: ignored, not a Kubernetes object",
    ]
    assert run.bound() == {"default/ok": "n1"}


@pytest.mark.parametrize(
    ("workload", "warning"),
    [
        (
            "kind: Deployment\nmetadata: {name: web}\n"
            "spec: {replicas: 2, template: {metadata: {labels: oops}}}\n",
            "Deployment default/web.spec.template.metadata.labels: expected a map, got 'oops'",
        ),
        (
            "kind: TFJob\nmetadata: {name: train}\n"
            "spec: {tfReplicaSpecs: {Worker: {replicas: 1, template: {spec: [x]}}}}\n",
            "TFJob default/train.spec.tfReplicaSpecs.Worker.template.spec: "
            "expected a map, got ['x']",
        ),
        (
            "kind: StatefulSet\nmetadata: {name: db}\nspec: {replicas: -1}\n",
            "StatefulSet default/db.spec.replicas: -1 is below the minimum of 0",
        ),
    ],
    ids=["deployment-labels", "tfjob-spec", "statefulset-replicas"],
)
def test_malformed_workload_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, workload: str, warning: str
) -> None:
    path = write(tmp_path, NODE, workload, a_pod("ok"))
    run = simulate(capsys, path)
    assert run.code == 0
    assert run.stderr.splitlines() == [f"warning: {path} document 2: {warning}"]
    assert run.bound() == {"default/ok": "n1"}


def test_podgroup_with_min_member_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    group = """
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {name: zero, namespace: default}
spec: {minMember: 0}
"""
    run = simulate(capsys, write(tmp_path, NODE, group, a_pod("member", group="zero"), a_pod("ok")))
    message = "PodGroup default/zero.spec.minMember: 0 is below the minimum of 1"
    assert run.code == 0
    assert f"error: {message}" in run.stderr.splitlines()
    assert run.pods["default/member"] == {
        "namespace": "default",
        "name": "member",
        "node": None,
        "group": "default/zero",
        "reason": message,
    }
    assert run.bound() == {"default/ok": "n1"}


@pytest.mark.parametrize(
    ("amount", "field", "problem"),
    [
        ("-1", "cpu", "cpu: '-1' is negative"),
        ("2 cores", "cpu", "cpu: '2 cores' is not a quantity"),
        ("12Qi", "memory", "memory: '12Qi' is not a quantity"),
        ("1e30", "memory", "memory: '1e30' is too large"),
    ],
)
def test_bad_quantity_names_pod_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, amount: str, field: str, problem: str
) -> None:
    run = simulate(
        capsys, write(tmp_path, NODE, a_pod("bad", amount=amount, field=field), a_pod("ok"))
    )
    message = f"Pod default/bad.spec.containers[0].resources.requests.{problem}"
    assert run.code == 0
    assert run.stderr.splitlines() == [f"error: {message}"]
    assert run.pods["default/bad"]["node"] is None
    assert run.pods["default/bad"]["reason"] == message
    assert run.bound() == {"default/ok": "n1"}


def test_missing_podgroup(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = simulate(capsys, write(tmp_path, NODE, a_pod("lost", group="x"), a_pod("ok")))
    assert run.code == 0
    assert run.pods["default/lost"]["reason"] == "PodGroup default/x does not exist"
    assert run.pods["default/lost"]["group"] == "default/x"
    assert run.bound() == {"default/ok": "n1"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "tiers:\n- plugins: [{name: gang}, {name: fairshare}]\n",
            "tiers[0].plugins[1].name: unknown plugin 'fairshare' "
            f"(allowed: {', '.join(sorted(PLUGINS))})",
        ),
        ("actions: allocate, evict\n", "actions: unknown action 'evict'"),
        ("schedulePeriod: 1s\nperiod: 2s\n", "unknown key 'period'"),
    ],
)
def test_bad_config_stops(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: str, message: str
) -> None:
    config_path = tmp_path / "scheduler.yaml"
    config_path.write_text(config)
    run = simulate(capsys, write(tmp_path, NODE, a_pod("ok")), config=str(config_path))
    assert run.code != 0
    assert run.stdout == ""
    assert run.stderr.startswith(f"batchsched: {config_path}.{message}") or run.stderr.startswith(
        f"batchsched: {config_path}: {message}"
    )
