"""The deployable pieces agree with the code: the ConfigMap holds a valid configuration
where the Deployment reads it, and the dashboard plots only metrics that exist."""

import json
import re
from pathlib import Path
from typing import Any

import yaml

import batchsched.metrics
from batchsched.config.load import load_config

REPO = Path(__file__).resolve().parents[3]


def manifest(name: str, kind: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((REPO / "manifests" / name).read_text())
    return next(d for d in docs if d and d["kind"] == kind)


def test_the_deployment_reads_a_valid_configuration_from_the_config_map() -> None:
    config_map = manifest("config.yaml", "ConfigMap")
    deployment = manifest("deployment.yaml", "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    flag = next(a for a in container["args"] if a.startswith("--config="))
    directory, _, key = flag.removeprefix("--config=").rpartition("/")
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == directory)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    config = load_config(config_map["data"][key], source="manifests/config.yaml")
    assert config.scheduler_name == "batch-scheduler"
    assert "--leader-elect" in container["args"]
    assert deployment["spec"]["replicas"] == 2


def test_the_dashboard_plots_only_exported_metrics() -> None:
    dashboard = json.loads((REPO / "manifests" / "dashboards" / "batchsched.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {
        re.sub(r"_(bucket|total)$", "", name)
        for query in queries
        for name in re.findall(r"batchsched_\w+", query)
    }
    exported = {
        metric._name
        for metric in vars(batchsched.metrics).values()
        if hasattr(metric, "_name") and str(metric._name).startswith("batchsched_")
    }
    assert used and used <= exported


def test_the_lease_role_grants_exactly_the_schedulers_own_lease_in_its_namespace() -> None:
    """The Lease is named after the scheduler and lives in POD_NAMESPACE (operator.py),
    so the Role must name the ConfigMap's schedulerName in the Deployment's namespace."""
    config = load_config(manifest("config.yaml", "ConfigMap")["data"]["config.yaml"])
    deployment = manifest("deployment.yaml", "Deployment")
    role = manifest("rbac.yaml", "Role")
    binding = manifest("rbac.yaml", "RoleBinding")
    account = manifest("rbac.yaml", "ServiceAccount")
    namespace = deployment["metadata"]["namespace"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == namespace
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": namespace}
    ]
    grants = {
        (verb, tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for verb in rule["verbs"]
    }
    name = (config.scheduler_name,)
    assert grants == {("create", ()), ("get", name), ("update", name)}
    cluster_role = manifest("rbac.yaml", "ClusterRole")
    assert all("leases" not in rule["resources"] for rule in cluster_role["rules"])
