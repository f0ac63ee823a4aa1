"""charts/batchsched: what `helm template` renders is accepted by the real API server,
with the default values and with others, and manifests/ is exactly that chart rendered.

helm is built from the module pinned in hack/helm/go.mod (hack/helm.sh, cached; `make
test` builds it before pytest starts). Each rendered object is sent as a create with
`dryRun=All`, as `kubectl apply --dry-run=server` does for a new object, and with
`fieldValidation=Strict`, so that a misspelt or misplaced field is refused rather than
silently dropped. The release's namespace is created for real (as `helm install
--create-namespace` would): a dry run in a missing namespace fails.
"""

from __future__ import annotations

import difflib
import os
import secrets
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.config.load import load_config

from .operator_support import REPO
from tests.support import ControlPlane, Kube
from tests.support.kube import JSON
from tests.support.objects import load_manifests

pytestmark = pytest.mark.integration

CHART = REPO / "charts" / "batchsched"

# A stand-in for the Prometheus Operator's ServiceMonitor CRD: the fields the chart
# writes, typed as in the operator's own CRD (monitoring.coreos.com_servicemonitors.yaml,
# v0.84), nothing else, so that with strict field validation anything else is refused.
SERVICE_MONITOR_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["selector"],
                                "properties": {
                                    "selector": {
                                        "type": "object",
                                        "x-kubernetes-map-type": "atomic",
                                        "properties": {
                                            "matchLabels": {
                                                "type": "object",
                                                "additionalProperties": {"type": "string"},
                                            }
                                        },
                                    },
                                    "endpoints": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "port": {"type": "string"},
                                                "path": {"type": "string"},
                                                "interval": {
                                                    "type": "string",
                                                    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?"
                                                    r"(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                                    r"(([0-9]+)s)?(([0-9]+)ms)?)$",
                                                },
                                                "bearerTokenFile": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def helm() -> str:
    """The pinned helm, built on first use (instant once cached)."""
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "helm.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"hack/helm.sh failed:\n{done.stderr}", pytrace=False)
    return done.stdout.strip().splitlines()[-1]


def render(release: str, namespace: str, *args: str) -> list[JSON]:
    done = subprocess.run(
        [helm(), "template", release, str(CHART), "--namespace", namespace, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def dry_run_create(kube: Kube, docs: Sequence[JSON]) -> list[JSON]:
    """Each object as the API server would store it; any refusal fails the test."""
    accepted, refused = [], []
    for doc in docs:
        res = kube.resource_for(doc["apiVersion"], doc["kind"])
        namespace = doc["metadata"].get("namespace") if res.namespaced else None
        reply = kube.request(
            "POST",
            res.path(namespace),
            doc,
            query={"dryRun": "All", "fieldValidation": "Strict", "fieldManager": "helm"},
        )
        if reply.status == 201:
            accepted.append(reply.body)
        else:
            refused.append((doc["kind"], doc["metadata"]["name"], reply.status, reply.body))
    assert refused == []
    return accepted


def by_kind(docs: Sequence[JSON], kind: str) -> list[JSON]:
    return [d for d in docs if d["kind"] == kind]


@pytest.fixture
def release() -> str:
    return f"r{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def service_monitor_crd(kube: Kube) -> Iterator[None]:
    kube.apply_crds([SERVICE_MONITOR_CRD])
    yield
    kube.delete_object(SERVICE_MONITOR_CRD)


def test_manifests_are_the_chart_rendered_with_its_defaults(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "render-manifests.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rendered = {p.name: p.read_text() for p in sorted(tmp_path.glob("*.yaml"))}
    committed = {p.name: p.read_text() for p in sorted((REPO / "manifests").glob("*.yaml"))}
    diff = [
        line
        for name in sorted(rendered.keys() | committed.keys())
        for line in difflib.unified_diff(
            committed.get(name, "").splitlines(),
            rendered.get(name, "").splitlines(),
            f"manifests/{name}",
            f"rendered/{name}",
            lineterm="",
        )
    ]
    assert not diff, (
        "manifests/ differs from charts/batchsched; run hack/render-manifests.sh:\n"
        + "\n".join(diff)
    )


def test_the_charts_crds_are_the_repositorys() -> None:
    """One source: the chart's crds/ is the repository's crds/ (a link), so Helm
    installs exactly what `kubectl apply -f crds/` does."""
    assert (CHART / "crds").resolve() == (REPO / "crds").resolve()
    shown = by_kind(render("batchsched", "default", "--include-crds"), "CustomResourceDefinition")
    assert sorted(shown, key=str) == sorted(load_manifests(REPO / "crds"), key=str)


def test_the_default_release_passes_a_server_side_dry_run(
    kube: Kube, namespace: str, release: str
) -> None:
    docs = render(release, namespace, "--include-crds")
    crds = by_kind(docs, "CustomResourceDefinition")
    assert len(crds) == len(load_manifests(REPO / "crds"))
    # The CRDs are already installed: an update's dry run (server-side apply) checks them.
    for crd in crds:
        res = kube.resource_for(crd["apiVersion"], crd["kind"])
        kube.request(
            "PATCH",
            res.path(None, crd["metadata"]["name"]),
            crd,
            query={"dryRun": "All", "fieldManager": "helm", "force": "true"},
            content_type="application/apply-patch+yaml",
        ).expect(200)
    objects = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    assert sorted(d["kind"] for d in objects) == sorted(
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )  # no Namespace (helm install --create-namespace) and no ServiceMonitor by default
    accepted = dry_run_create(kube, objects)
    assert all(
        o["metadata"].get("namespace") == namespace
        for o in accepted
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding")
    )
    (deployment,) = by_kind(accepted, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    # Nothing was created.
    assert kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments").expect(200)["items"] == []


def test_non_default_values_pass_a_server_side_dry_run(
    kube: Kube, namespace: str, release: str, service_monitor_crd: None, tmp_path: Path
) -> None:
    config = {
        "schedulerName": None,  # replaced by schedulerNames (they may not both be given)
        "schedulerNames": ["research-scheduler", "volcano"],
        "schedulePeriod": "2s",
        "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "binpack"}]}],
    }
    values: dict[str, Any] = {
        "image": {
            "repository": "registry.example/batchsched",
            "tag": "9.9.9",
            "pullPolicy": "Always",
        },
        "replicas": 3,
        "config": config,
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
        "metrics": {"port": 9090, "auth": True},
        "serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "prom"}},
        "podDisruptionBudget": {"maxUnavailable": 2},
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "extraArgs": ["--peer-status=skip", "--log-format=json"],
    }
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    accepted = dry_run_create(kube, render(release, namespace, "-f", str(file)))

    (config_map,) = by_kind(accepted, "ConfigMap")
    loaded = load_config(config_map["data"]["config.yaml"], source="the chart's ConfigMap")
    assert loaded.scheduler_names == ("research-scheduler", "volcano")
    assert yaml.safe_load(config_map["data"]["config.yaml"]) == {
        **{k: v for k, v in config.items() if v is not None},
        "burstWindow": "5ms",
        "starvationThreshold": "5m",
    }  # maps merge with the defaults, lists are replaced
    # Without `actions`, the default list less preempt and reclaim, whose plugins the
    # tiers leave out.
    assert loaded.actions == ("enqueue", "allocate", "backfill")
    (role,) = by_kind(accepted, "Role")
    assert [r.get("resourceNames") for r in role["rules"]] == [None, ["research-scheduler"]]

    (deployment,) = by_kind(accepted, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == values["nodeSelector"]
    assert pod["tolerations"] == values["tolerations"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/batchsched:9.9.9"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == values["resources"]
    assert container["args"][2:] == [
        "--metrics-bind-address=:9090",
        "--metrics-auth",
        "--leader-elect",
        "--peer-status=skip",
        "--log-format=json",
    ]
    assert container["ports"][0]["containerPort"] == 9090

    (budget,) = by_kind(accepted, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 2
    (monitor,) = by_kind(accepted, "ServiceMonitor")
    (service,) = by_kind(accepted, "Service")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["bearerTokenFile"]  # --metrics-auth wants a token


def test_the_values_schema_refuses_a_misspelt_value() -> None:
    done = subprocess.run(
        [helm(), "template", "x", str(CHART), "--set", "replica=3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "replica" in done.stderr


def test_helm_install_and_uninstall_on_the_real_control_plane(
    control_plane: ControlPlane, kube: Kube, namespace: str, release: str, tmp_path: Path
) -> None:
    """Helm's own path, objects created for real: the CRDs (already there, so skipped),
    then the templates in Helm's install order. No controller runs here, so the
    Deployment makes no pods; uninstall removes the cluster-scoped objects too."""
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    env.update({f"HELM_{d}_HOME": str(tmp_path / d.lower()) for d in ("CACHE", "CONFIG", "DATA")})

    def run(*args: str) -> str:
        done = subprocess.run(
            [helm(), *args, "--namespace", namespace],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("install", release, str(CHART), "--set", "replicas=1")
    try:
        deployment = kube.get(
            f"/apis/apps/v1/namespaces/{namespace}/deployments/{release}-batchsched"
        ).expect(200)
        assert deployment["spec"]["replicas"] == 1
        kube.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}-batchsched").expect(
            200
        )
        assert "STATUS: deployed" in run("status", release)
    finally:
        run("uninstall", release)
    cluster_role = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}-batchsched"
    assert kube.get(cluster_role).status == 404
