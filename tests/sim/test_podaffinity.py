"""Pod affinity in the simulator: Namespaces read from YAML, bad terms named, the rest placed."""

from pathlib import Path

import pytest

from .harness import simulate, web_pod

CLUSTER = """
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: sales}}
---
apiVersion: v1
kind: Node
metadata: {name: n0, labels: {kubernetes.io/hostname: n0}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: front, namespace: shop, labels: {app: web}}
spec: {nodeName: n0, containers: [{name: c}]}
"""


def anti_pod(name: str, selector: str, namespaces: str) -> str:
    return web_pod(
        name,
        f"""  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {{labelSelector: {selector}, topologyKey: kubernetes.io/hostname, {namespaces}}}
""",
    )


def test_namespace_labels_come_from_the_yaml_and_bad_terms_are_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        CLUSTER
        + anti_pod(
            "away", "{matchLabels: {app: web}}", "namespaceSelector: {matchLabels: {team: sales}}"
        )
        + anti_pod(
            "broken", "{matchExpressions: [{key: app, operator: Equals, values: [web]}]}", ""
        )
    )
    run = simulate(capsys, path)
    assert run.code == 0
    assert run.bound() == {"default/away": "n1"}
    where = (
        "Pod default/broken.spec.affinity.podAntiAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]"
    )
    message = f"{where}.operator: 'Equals' is not one of DoesNotExist, Exists, In, NotIn"
    assert run.pods["default/broken"]["reason"] == message
    assert message in run.stderr


def test_preferred_anti_affinity_is_scored_with_the_plugin_and_waits_without(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    preferring = """---
apiVersion: v1
kind: Pod
metadata: {name: spread, labels: {app: web}}
spec:
  schedulerName: batch-scheduler
  containers: [{name: c}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          labelSelector: {matchLabels: {app: web}}
          namespaceSelector: {}
          topologyKey: kubernetes.io/hostname
"""
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER + preferring)
    scored = tmp_path / "scored.yaml"
    scored.write_text("tiers:\n- plugins: [{name: predicates}, {name: interpodaffinity}]\n")
    assert simulate(capsys, path, config=str(scored)).bound() == {"default/spread": "n1"}
    unscored = tmp_path / "unscored.yaml"
    unscored.write_text("tiers:\n- plugins: [{name: predicates}]\n")
    reason = simulate(capsys, path, config=str(unscored)).pods["default/spread"]["reason"]
    assert reason == (
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution "
        "is not scored: the configuration does not list the interpodaffinity plugin"
    )
