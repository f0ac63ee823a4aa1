"""Nodes as the scheduler sees them."""

from batchsched.api.meta import Obj, describe, labels_of, mapping, name_of, sequence
from batchsched.api.objects import Node, Taint
from batchsched.api.reads import reads
from batchsched.api.resources import DEFAULT_MAX_PODS, PODS, parse_resource_list

# What node_from_object reads (api/reads.py); of the conditions, only their type and
# status, so that heartbeats leave a node unchanged.
NODE_READS = reads(
    "Node",
    "metadata.labels",
    "spec.taints",
    "spec.unschedulable",
    "status.allocatable",
    "status.capacity",
    "status.conditions[].type",
    "status.conditions[].status",
)


def node_from_object(obj: Obj) -> Node:
    """Parse a Node; allocatable falls back to capacity, pods to the kubelet default.

    A node without conditions is taken as Ready: that is how hand-written simulator
    nodes look, while real kubelets always report the condition.
    """
    where = describe(obj, kind="Node")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    status = mapping(obj.get("status"), where=f"{where}.status")
    raw = status.get("allocatable") or status.get("capacity")
    allocatable = parse_resource_list(raw, where=f"{where}.status.allocatable")
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
    ready = True
    for condition in sequence(status.get("conditions"), where=f"{where}.status.conditions"):
        entry = mapping(condition, where=f"{where}.status.conditions")
        if entry.get("type") == "Ready":
            ready = entry.get("status") == "True"
    taints = tuple(
        Taint(
            key=str(mapping(t, where=where).get("key") or ""),
            value=str(mapping(t, where=where).get("value") or ""),
            effect=str(mapping(t, where=where).get("effect") or ""),
        )
        for t in sequence(spec.get("taints"), where=f"{where}.spec.taints")
    )
    return Node(
        name=name_of(obj),
        allocatable=allocatable,
        labels=labels_of(obj),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )
