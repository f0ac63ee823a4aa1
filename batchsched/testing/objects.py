"""Manifests: read from YAML files, or made for the objects tests create most,
schedulable Nodes, pending Pods and PodGroups.

There is no kubelet, so a Node is only what its manifest claims: it is created
Ready, with the allocatable resources given, and stays that way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from batchsched.api.groups import OUR_API
from batchsched.api.yamlload import load_all
from batchsched.testing.kube import JSON

SCHEDULER_NAME = "batch-scheduler"


def load_manifests(*paths: Path) -> list[JSON]:
    """Every YAML document in the given files and directories (``*.yaml``, by name)."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    docs: list[JSON] = []
    for file in files:
        docs.extend(doc for doc in load_all(file.read_text()) if doc)
    return docs


def node(
    name: str,
    allocatable: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
) -> JSON:
    resources = {"pods": "110", **allocatable}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def pod(
    name: str,
    requests: Mapping[str, str],
    *,
    scheduler_name: str = SCHEDULER_NAME,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": dict(requests)},
                }
            ],
        },
    }


def pod_group(name: str, min_member: int, *, api_version: str = OUR_API, **spec: object) -> JSON:
    """A PodGroup of ours, or of the kind `api_version` names; extra keywords (queue,
    minResources, ...) go into its spec."""
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, **spec},
    }
