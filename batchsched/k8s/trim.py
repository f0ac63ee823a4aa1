"""Watched objects cut down to the fields the scheduling core reads.

What the cache parses stays small this way, and updates that touch nothing the core
reads (kubelet heartbeats, container statuses, managed fields) compare equal to the
previous version and are dropped before parsing. The fields kept here mirror what
`batchsched.api` parses; tests/unit/k8s/test_trim.py checks that a trimmed object parses
exactly like the whole one.
"""

from collections.abc import Mapping
from typing import Any

from batchsched.api.gpu import GPU_INDEX_ANNOTATION
from batchsched.api.groups import WAITING_TIME_ANNOTATIONS
from batchsched.api.placement import PLACEMENT_ANNOTATION
from batchsched.api.pods import (
    GROUP_ANNOTATIONS,
    OUR_QUEUE_KEY,
    PREEMPTABLE_KEYS,
    TASK_ROLE_KEY,
    VOLCANO_QUEUE_KEY,
)
from batchsched.api.unsupported import NODE_BOUND_VOLUMES, UNSUPPORTED_SPEC_FIELDS
from batchsched.api.volumes import (
    BETA_CLASS_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    BINDING_SINCE_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
)

JSON = dict[str, Any]

POD_ANNOTATIONS = (
    *GROUP_ANNOTATIONS,
    OUR_QUEUE_KEY,
    VOLCANO_QUEUE_KEY,
    GPU_INDEX_ANNOTATION,
    PLACEMENT_ANNOTATION,
    *PREEMPTABLE_KEYS,
    TASK_ROLE_KEY,
)
# Every field that constrains placement, including those the core refuses: a pod that
# asks for something unsupported must still say so after trimming.
POD_SPEC = (
    "schedulerName",
    "nodeName",
    "priority",
    "priorityClassName",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "resources",
    "hostNetwork",
    "schedulingGates",
    "topologySpreadConstraints",
    "activeDeadlineSeconds",
    *UNSUPPORTED_SPEC_FIELDS,
)
CONTAINER = ("resources", "restartPolicy")
# The volume sources a pod's placement depends on: its claims, and in-tree disks.
POD_VOLUME_SOURCES = ("persistentVolumeClaim", "ephemeral", *NODE_BOUND_VOLUMES)
CLAIM_ANNOTATIONS = (
    SELECTED_NODE_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    BETA_CLASS_ANNOTATION,
    BINDING_SINCE_ANNOTATION,
)
CLAIM_SPEC = (
    "storageClassName",
    "volumeName",
    "accessModes",
    "volumeMode",
    "volumeAttributesClassName",
    "selector",
)
VOLUME_SPEC = (
    "storageClassName",
    "accessModes",
    "volumeMode",
    "volumeAttributesClassName",
    "nodeAffinity",
)


# How the API server writes an object's managedFields, and what follows them in any
# object whose metadata comes right before its spec (pods, nodes).
MANAGED_FIELDS = b',"managedFields":['
MANAGED_FIELDS_END = b']},"spec":{'


def without_managed_fields(data: bytes) -> bytes:
    """`data` (JSON as the API server sends it) without the objects' managedFields, cut
    out before decoding: they are a third of a pod's bytes and most of its small
    objects, so a page of pods decodes in 60 % of the time, and more in clusters where
    the kubelet and controllers each own fields.

    Exact for any JSON, because the cut is only made where it cannot go wrong: from the
    key to the first `]` after it, when that `]` is followed by `},"spec":{`. An entry
    holds no arrays, so the first `]` outside a string ends the list; and that sequence
    cannot lie inside a string, where its `"` would be escaped. Where the list is last in
    its object (ObjectMeta's field order) and its object is followed by a spec, which is
    every pod and node, it goes; elsewhere (a `]` inside a field name, custom resources,
    whose keys come sorted) the data is left as it is.
    """
    pieces: list[bytes] = []
    kept_from = 0
    start = data.find(MANAGED_FIELDS)
    while start >= 0:
        first = data.find(b"]", start + len(MANAGED_FIELDS))
        if first < 0:
            break
        if data.startswith(MANAGED_FIELDS_END, first):
            pieces.append(data[kept_from:start])
            kept_from = first + 1
        start = data.find(MANAGED_FIELDS, first)
    if not pieces:
        return data
    pieces.append(data[kept_from:])
    return b"".join(pieces)


def trim_pod(pod: Mapping[str, Any]) -> JSON:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    kept: JSON = {key: spec[key] for key in POD_SPEC if spec.get(key) is not None}
    host_network = bool(spec.get("hostNetwork"))
    for section in ("containers", "initContainers"):
        if spec.get(section):
            kept[section] = [_container(c, host_network=host_network) for c in spec[section]]
    if spec.get("volumes"):
        # In place, so a refusal names the volume by its index; each reduced to the
        # sources that constrain the node (the token volume's name differs per pod).
        kept["volumes"] = [_volume(v) for v in spec["volumes"]]
    return {
        "kind": "Pod",
        "metadata": {
            **_identity(meta),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            # All of them: any label may be what another pod's affinity selects.
            "labels": meta.get("labels") or {},
            "annotations": _annotations(meta, POD_ANNOTATIONS),
        },
        "spec": kept,
        "status": _pod_status(pod.get("status") or {}),
    }


def _pod_status(status: Mapping[str, Any]) -> JSON:
    """The phase, the node a preemption holds for the pod and when it started (which,
    with its activeDeadlineSeconds, says when it ends at the latest): each kept only
    when set, so that pods without them trim as they always did."""
    kept: JSON = {"phase": status.get("phase")}
    for key in ("nominatedNodeName", "startTime"):
        if status.get(key):
            kept[key] = status[key]
    return kept


def _volume(volume: Mapping[str, Any]) -> JSON:
    kept = {key: volume[key] for key in POD_VOLUME_SOURCES if key in volume}
    if "ephemeral" in kept:
        # An ephemeral volume's claim is named after the pod and the volume.
        kept["name"] = volume.get("name")
    return kept


def _container(container: Mapping[str, Any], *, host_network: bool) -> JSON:
    kept = {key: container[key] for key in CONTAINER if key in container}
    # On the host's network every container port is a host port.
    ports = [
        {"hostPort": p.get("hostPort") or p.get("containerPort"), "protocol": p.get("protocol")}
        for p in container.get("ports") or []
        if p.get("hostPort") or host_network
    ]
    if ports:
        kept["ports"] = ports
    return kept


def trim_node(node: Mapping[str, Any]) -> JSON:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return {
        "kind": "Node",
        "metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}},
        "spec": {"taints": spec.get("taints"), "unschedulable": spec.get("unschedulable")},
        "status": {
            "allocatable": status.get("allocatable"),
            "capacity": None if status.get("allocatable") else status.get("capacity"),
            "conditions": [
                {"type": "Ready", "status": c.get("status")}
                for c in status.get("conditions") or []
                if c.get("type") == "Ready"
            ],
        },
    }


def trim_namespace(namespace: Mapping[str, Any]) -> JSON:
    meta = namespace.get("metadata") or {}
    return {
        "kind": "Namespace",
        "metadata": {
            "name": meta.get("name"),
            "labels": meta.get("labels") or {},
            "annotations": _annotations(meta, (OUR_QUEUE_KEY,)),
        },
    }


def trim_pod_group(group: Mapping[str, Any]) -> JSON:
    return {
        "apiVersion": group.get("apiVersion"),
        "kind": "PodGroup",
        "metadata": {
            **_identity(group.get("metadata") or {}),
            "annotations": _annotations(group.get("metadata") or {}, WAITING_TIME_ANNOTATIONS),
        },
        "spec": group.get("spec"),
        "status": {"phase": (group.get("status") or {}).get("phase")},
    }


def trim_budget(budget: Mapping[str, Any]) -> JSON:
    """A PodDisruptionBudget as preemption reads it: whom it protects, and how many of
    them may go now (the disruption controller keeps that count in its status)."""
    meta = budget.get("metadata") or {}
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "spec": {"selector": (budget.get("spec") or {}).get("selector")},
        "status": {"disruptionsAllowed": (budget.get("status") or {}).get("disruptionsAllowed", 0)},
    }


def trim_queue(queue: Mapping[str, Any]) -> JSON:
    """The apiVersion stays: a Queue of one name may exist in our API and Volcano's."""
    return {
        "apiVersion": queue.get("apiVersion"),
        "kind": "Queue",
        "metadata": {"name": (queue.get("metadata") or {}).get("name")},
        "spec": queue.get("spec"),
    }


def trim_priority_class(priority_class: Mapping[str, Any]) -> JSON:
    return {
        "kind": "PriorityClass",
        "metadata": {"name": (priority_class.get("metadata") or {}).get("name")},
        "value": priority_class.get("value"),
        "globalDefault": priority_class.get("globalDefault"),
    }


def trim_claim(claim: Mapping[str, Any]) -> JSON:
    meta = claim.get("metadata") or {}
    spec = claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    kept: JSON = {key: spec[key] for key in CLAIM_SPEC if spec.get(key) is not None}
    if storage is not None:
        kept["resources"] = {"requests": {"storage": storage}}
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            "annotations": _annotations(meta, CLAIM_ANNOTATIONS),
            # The controller alone: an ephemeral claim belongs to the pod it was made for.
            "ownerReferences": [
                {"controller": True, "uid": owner.get("uid")}
                for owner in meta.get("ownerReferences") or []
                if owner.get("controller") is True
            ],
        },
        "spec": kept,
        "status": {"phase": (claim.get("status") or {}).get("phase")},
    }


def trim_volume(volume: Mapping[str, Any]) -> JSON:
    meta = volume.get("metadata") or {}
    spec = volume.get("spec") or {}
    kept: JSON = {key: spec[key] for key in VOLUME_SPEC if spec.get(key) is not None}
    storage = (spec.get("capacity") or {}).get("storage")
    if storage is not None:
        kept["capacity"] = {"storage": storage}
    ref = spec.get("claimRef")
    if ref is not None:
        kept["claimRef"] = {key: ref.get(key) for key in ("namespace", "name", "uid")}
    csi = spec.get("csi")
    if csi is not None:
        kept["csi"] = {key: csi.get(key) for key in ("driver", "volumeHandle")}
    return {
        "kind": "PersistentVolume",
        "metadata": {
            "name": meta.get("name"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            # All of them, as the core keeps them: zone and region labels confine it.
            "labels": meta.get("labels") or {},
            "annotations": _annotations(meta, (BETA_CLASS_ANNOTATION, BINDING_SINCE_ANNOTATION)),
        },
        "spec": kept,
        "status": {"phase": (volume.get("status") or {}).get("phase")},
    }


def trim_storage_class(storage_class: Mapping[str, Any]) -> JSON:
    return {
        "kind": "StorageClass",
        "metadata": {"name": (storage_class.get("metadata") or {}).get("name")},
        "provisioner": storage_class.get("provisioner"),
        "volumeBindingMode": storage_class.get("volumeBindingMode"),
        "allowedTopologies": storage_class.get("allowedTopologies"),
    }


def trim_csi_node(csi_node: Mapping[str, Any]) -> JSON:
    drivers = ((csi_node.get("spec") or {}).get("drivers")) or []
    return {
        "kind": "CSINode",
        "metadata": {"name": (csi_node.get("metadata") or {}).get("name")},
        "spec": {
            "drivers": [
                {"name": driver.get("name"), "allocatable": driver["allocatable"]}
                for driver in drivers
                if driver.get("allocatable") is not None
            ]
        },
    }


def trim_csi_driver(csi_driver: Mapping[str, Any]) -> JSON:
    return {
        "kind": "CSIDriver",
        "metadata": {"name": (csi_driver.get("metadata") or {}).get("name")},
        "spec": {"storageCapacity": (csi_driver.get("spec") or {}).get("storageCapacity")},
    }


def trim_storage_capacity(capacity: Mapping[str, Any]) -> JSON:
    meta = capacity.get("metadata") or {}
    largest = capacity.get("maximumVolumeSize")
    return {
        "kind": "CSIStorageCapacity",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "storageClassName": capacity.get("storageClassName"),
        "nodeTopology": capacity.get("nodeTopology"),
        "maximumVolumeSize": largest,
        # Read only without the largest size, as node capacity without allocatable.
        "capacity": None if largest is not None else capacity.get("capacity"),
    }


def _annotations(meta: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, str]:
    annotations = meta.get("annotations") or {}
    return {key: annotations[key] for key in keys if key in annotations}


def _identity(meta: Mapping[str, Any]) -> JSON:
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "creationTimestamp": meta.get("creationTimestamp"),
    }
