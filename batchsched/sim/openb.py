"""The openb GPU trace (Alibaba cluster-trace-gpu-v2023) as Kubernetes objects.

README's "Replaying the openb GPU trace" says how it is replayed.

Rows become the Node and Pod objects a real cluster would hold, so replay goes through
the same parsing as the operator: GPU models become the `nvidia.com/gpu.product` label
and a pod's gpu_spec ("V100M16|V100M32") a required node affinity on it; a share of a
card becomes the gpu-milli extended resource, whole cards `nvidia.com/gpu`.
"""

import csv
from pathlib import Path
from typing import Any

from batchsched.api.errors import InvalidObject, UnreadableInput
from batchsched.api.gpu import CARD_MILLI, GPU_MILLI, GPU_MODEL_LABEL
from batchsched.api.resources import GPU

NAMESPACE = "openb"

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def read_nodes(path: str | Path) -> list[dict[str, Any]]:
    nodes = []
    for where, row in _rows(path, NODE_COLUMNS):
        cards = _number(row, "gpu", where)
        allocatable = {
            "cpu": f"{_number(row, 'cpu_milli', where)}m",
            "memory": f"{_number(row, 'memory_mib', where)}Mi",
        }
        if cards:
            allocatable[GPU] = str(cards)
            allocatable[GPU_MILLI] = str(cards * CARD_MILLI)
        model = (row.get("model") or "").strip()
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": row["sn"],
                    "labels": {GPU_MODEL_LABEL: model} if model else {},
                },
                "status": {"allocatable": allocatable},
            }
        )
    return nodes


def read_pods(path: str | Path, *, scheduler_name: str) -> list[dict[str, Any]]:
    pods = []
    for where, row in _rows(path, POD_COLUMNS):
        requests = {
            "cpu": f"{_number(row, 'cpu_milli', where)}m",
            "memory": f"{_number(row, 'memory_mib', where)}Mi",
        }
        cards, milli = _number(row, "num_gpu", where), _number(row, "gpu_milli", where)
        if cards and milli == CARD_MILLI:
            requests[GPU] = str(cards)
        elif cards == 1 and 0 < milli < CARD_MILLI:
            requests[GPU_MILLI] = str(milli)
        elif cards or milli:
            raise InvalidObject(
                f"{where}: num_gpu={cards} with gpu_milli={milli}: only whole cards "
                f"(gpu_milli {CARD_MILLI}) or a share of one card can be asked for"
            )
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "containers": [{"name": "main", "resources": {"requests": requests}}],
        }
        models = sorted({m for m in (row.get("gpu_spec") or "").split("|") if m})
        if models:
            spec["affinity"] = _model_affinity(models)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": row["name"], "namespace": NAMESPACE},
                "spec": spec,
            }
        )
    return pods


def _model_affinity(models: list[str]) -> dict[str, Any]:
    requirement = {"key": GPU_MODEL_LABEL, "operator": "In", "values": models}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
            }
        }
    }


def _rows(path: str | Path, columns: tuple[str, ...]) -> list[tuple[str, dict[str, str]]]:
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise UnreadableInput(f"{path}: missing column(s) {', '.join(missing)}")
            return [(f"{path} line {n}", row) for n, row in enumerate(reader, start=2)]
    except OSError as error:
        raise UnreadableInput(f"{path}: cannot read: {error.strerror}") from None


def _number(row: dict[str, str], column: str, where: str) -> int:
    text = (row.get(column) or "").strip()
    if not text.isdigit():
        raise InvalidObject(f"{where}: {column} {text!r} is not a whole number")
    return int(text)
