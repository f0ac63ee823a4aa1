"""Every YAML scenario the repository holds, and the parser of each watched kind.

Scenarios are the examples, every YAML file under tests/, and every YAML text written
into a test module (a string constant holding documents with a `kind`). Each is read as
`batchsched simulate` reads it, workloads expanded into their pods.
"""

import ast
import functools
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import batchsched.api
from batchsched.api.budgets import budget_from_object
from batchsched.api.dra import (
    class_from_object,
    resource_claim_from_object,
    slice_from_object,
    taint_rule_from_object,
    template_from_object,
)
from batchsched.api.errors import UnreadableInput
from batchsched.api.groups import pod_group_from_object
from batchsched.api.hypernodes import hypernode_from_object
from batchsched.api.namespaces import namespace_from_object
from batchsched.api.nativegroups import workload_from_object
from batchsched.api.nodes import node_from_object
from batchsched.api.pods import task_from_pod
from batchsched.api.queues import priority_class_from_object, queue_from_object
from batchsched.api.reads import Reads
from batchsched.api.volumes import (
    claim_from_object,
    csi_driver_from_object,
    csi_node_from_object,
    storage_capacity_from_object,
    storage_class_from_object,
    volume_from_object,
)
from batchsched.k8s.trim import trimmer
from batchsched.k8s.watch import WATCHED
from batchsched.sim.loader import load_files

REPO = Path(__file__).resolve().parents[2]

# Each watched kind's parser, as the cache calls it (cache/cluster.py).
PARSERS: dict[str, Callable[[Any], object]] = {
    "Pod": task_from_pod,
    "Node": node_from_object,
    "Namespace": namespace_from_object,
    "PodGroup": pod_group_from_object,
    "Queue": queue_from_object,
    "PriorityClass": priority_class_from_object,
    "PodDisruptionBudget": budget_from_object,
    "PersistentVolumeClaim": claim_from_object,
    "PersistentVolume": volume_from_object,
    "StorageClass": storage_class_from_object,
    "CSINode": csi_node_from_object,
    "CSIDriver": csi_driver_from_object,
    "CSIStorageCapacity": storage_capacity_from_object,
    "Workload": workload_from_object,
    "ResourceSlice": slice_from_object,
    "DeviceClass": class_from_object,
    "ResourceClaim": resource_claim_from_object,
    "ResourceClaimTemplate": template_from_object,
    "DeviceTaintRule": taint_rule_from_object,
    "HyperNode": hypernode_from_object,
}


def scenario_files() -> list[Path]:
    tests = REPO / "tests"
    return sorted(
        [*(REPO / "examples").glob("*.yaml"), *tests.rglob("*.yaml"), *tests.rglob("*.yml")]
    )


@functools.cache
def embedded_scenarios() -> list[tuple[str, str]]:
    """(module:line, text) of each string constant in a test module that is YAML
    holding at least one object with a kind."""
    found = []
    for module in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if "kind:" in node.value and _has_objects(node.value):
                found.append((f"{module.relative_to(REPO)}:{node.lineno}", node.value))
    return found


def _has_objects(text: str) -> bool:
    try:
        return any(isinstance(doc, dict) and "kind" in doc for doc in yaml.safe_load_all(text))
    except yaml.YAMLError:
        return False


def scenario_ids() -> list[str]:
    return [
        *(str(path.relative_to(REPO)) for path in scenario_files()),
        *(where for where, _ in embedded_scenarios()),
    ]


def scenario_objects(scenario: str, scratch: Path) -> list[dict[str, Any]]:
    """The objects of the scenario named by one of scenario_ids(), of watched kinds."""
    path = REPO / scenario
    if not path.is_file():
        text = dict(embedded_scenarios())[scenario]
        path = scratch / "scenario.yaml"
        path.write_text(text)
    try:
        objects = load_files([str(path)]).objects
    except UnreadableInput:
        return []
    return [obj for obj in objects if obj.get("kind") in PARSERS]


def outcome(kind: str, obj: Any) -> object:
    """What the cache gets of `obj`: the parsed record, or the error it is refused with."""
    try:
        return PARSERS[kind](obj)
    except Exception as error:  # any failure must be the same on both paths
        return (type(error).__name__, str(error))


def label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{obj.get('kind')} {name}"


def declarations() -> dict[str, Reads]:
    """Every kind's declaration in the api package, by kind, found there rather than
    listed: a kind added later is checked as well."""
    found: dict[str, Reads] = {}
    for module in pkgutil.iter_modules(batchsched.api.__path__):
        loaded = importlib.import_module(f"{batchsched.api.__name__}.{module.name}")
        found.update({v.kind: v for v in vars(loaded).values() if isinstance(v, Reads)})
    return found


def trimmers() -> dict[str, Callable[[Any], Any]]:
    """How the operator trims each kind: as its watch does, and a kind declared but not
    watched yet (DRA's) as its declaration says."""
    return {
        **{kind: trimmer(declared) for kind, declared in declarations().items()},
        **{watched.kind: watched.trim for watched in WATCHED},
    }
