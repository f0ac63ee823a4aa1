"""The deployable pieces agree with the code: the ConfigMap holds a valid configuration
where the Deployment reads it, and the dashboard plots only metrics that exist."""

import json
import re
from pathlib import Path
from typing import Any

import yaml

import batchsched.metrics
from batchsched.framework.config import load_config

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
