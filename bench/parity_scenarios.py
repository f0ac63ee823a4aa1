"""Random scenarios for checking batchsched's constraint filters against kube-scheduler.

A scenario is a small cluster (nodes with zones, hostnames, labels and taints; pods
already bound, with labels, affinities and spread constraints; in some scenarios
storage: claims, volumes, classes and CSI attach limits, mounted by the pods) and one
incoming pod that mixes every constraint the two schedulers share. batchsched's answer
comes from the simulator; kube-scheduler's from a real one (bench/parity.py asks it
through `kube_verdict`). Everything here is pure, so the generator and the comparison
can be tested without a control plane.

kube-scheduler is asked about batchsched's node with the pod pinned there by an
extended resource only that node has: resource fit is a filter of its own that no
other constraint reads, whereas a node selector or affinity would change which nodes
count for topology spread (nodeAffinityPolicy Honor).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from batchsched.config.load import default_config
from batchsched.sim.simulator import simulate

JSON = dict[str, Any]

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
RACK = "example.com/rack"
DISK = "example.com/disk"
GEN = "example.com/gen"
TEAM = "team"
# One extended resource per node, of which only that node has any (see the module doc).
PIN_DOMAIN = "parity.batchsched.io"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
REGION = "topology.kubernetes.io/region"
TAINT_KEYS = ("example.com/dedicated", "example.com/gpu")
TOPOLOGY_KEYS = (ZONE, HOSTNAME, RACK)
POD_LABELS: dict[str, tuple[str, ...]] = {
    "app": ("web", "db"),
    "tier": ("front", "back"),
    "version": ("v1", "v2"),
}
NODE_LABELS: dict[str, tuple[str, ...]] = {
    ZONE: ("z-a", "z-b", "z-c"),
    RACK: ("r1", "r2"),
    DISK: ("ssd", "hdd"),
    GEN: ("1", "2", "3", "4"),
}
KUBE_SCHEDULER = "default-scheduler"
BATCHSCHED = default_config().scheduler_name
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# Storage, in the share of scenarios that carry it.
STORAGE_SHARE = 0.35
CSI_DRIVERS = ("disk.csi.example.com", "file.csi.example.com")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = ("ReadWriteOnce",) * 3 + ("ReadWriteMany", "ReadOnlyMany", READ_WRITE_ONCE_POD)
# What the PersistentVolume controller writes on a claim it has bound; kube-scheduler
# reads it (with spec.volumeName) as "bound", so no controller needs to run.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
# The StorageObjectInUseProtection admission plugin gives every claim this finalizer, so
# a deleted claim stays, being deleted, until the finalizer is taken off.
CLAIM_FINALIZER = "kubernetes.io/pvc-protection"
# Any time will do: only its presence says the claim is being deleted.
DELETED_AT = "2026-01-01T00:00:00Z"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# Written by kube-scheduler on a claim it has chosen a node to provision for.
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True)
class Scenario:
    index: int
    namespaces: list[JSON]
    nodes: list[JSON]
    existing: list[JSON]
    # The pod to place, without spec.schedulerName.
    incoming: JSON
    # Storage classes, volumes, claims and CSINodes, in the order they are created.
    storage: tuple[JSON, ...] = ()

    @property
    def incoming_key(self) -> str:
        meta = self.incoming["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def waiting_claims(self) -> list[str]:
        """The incoming pod's claims that wait for it (unbound, of a WaitForFirstConsumer
        class): kube-scheduler writes its choice on them and on volumes, then waits in
        PreBind for a PersistentVolume controller, so the pod never gets a node."""
        waiting = {
            obj["metadata"]["name"]
            for obj in self.storage
            if obj["kind"] == "StorageClass" and obj["volumeBindingMode"] == WAIT_FOR_FIRST_CONSUMER
        }
        claims = {
            obj["metadata"]["name"]
            for obj in self.storage
            if obj["kind"] == "PersistentVolumeClaim"
            and obj["metadata"]["namespace"] == self.incoming["metadata"]["namespace"]
            and not obj["spec"].get("volumeName")
            and obj["spec"].get("storageClassName") in waiting
        }
        mounted = [
            v["persistentVolumeClaim"]["claimName"]
            for v in self.incoming["spec"].get("volumes", [])
        ]
        return [name for name in mounted if name in claims]

    def objects(self) -> list[JSON]:
        """The cluster as batchsched reads it, the incoming pod addressed to it."""
        return [
            *self.namespaces,
            *self.nodes,
            *self.storage,
            *self.existing,
            self.pod(BATCHSCHED),
        ]

    def pod(self, scheduler: str, *, pin: str | None = None) -> JSON:
        """The incoming pod for `scheduler`; with `pin`, one that fits on that node only."""
        pod = _copy(self.incoming)
        pod["spec"]["schedulerName"] = scheduler
        if pin is not None:
            pod["metadata"]["name"] += "-pinned"
            resources = pod["spec"]["containers"][0]["resources"]
            for kind in ("requests", "limits"):
                resources.setdefault(kind, {})[pin_resource(pin)] = "1"
        return pod


def pin_resource(node: str) -> str:
    return f"{PIN_DOMAIN}/{node}"


def _copy(obj: JSON) -> JSON:
    copied: JSON = yaml.safe_load(yaml.safe_dump(obj))
    return copied


# The generator. Value ranges are kept narrow so that constraints often bite: about as
# many scenarios end with the pod unschedulable as placed.


def generate(rng: random.Random, index: int) -> Scenario:
    prefix = f"s{index}"
    namespaces = [_namespace(rng, f"{prefix}-{suffix}") for suffix in "abc"]
    names = [m["metadata"]["name"] for m in namespaces]
    nodes = [_node(rng, f"{prefix}-n{i}") for i in range(rng.randint(2, 6))]
    node_names = [n["metadata"]["name"] for n in nodes]
    existing = []
    for i in range(rng.randint(0, 8)):
        labels = _pod_labels(rng)
        spec: JSON = {"nodeName": rng.choice(node_names), "schedulerName": KUBE_SCHEDULER}
        spec.update(_pod_constraints(rng, names, labels, incoming=False))
        existing.append(_pod(f"{prefix}-p{i}", rng.choice(names), labels, spec, rng))
    labels = _pod_labels(rng)
    spec = _node_constraints(rng, node_names)
    spec.update(_pod_constraints(rng, names, labels, incoming=True))
    incoming = _pod(f"{prefix}-incoming", rng.choice(names), labels, spec, rng)
    for pod in existing:
        pod["status"] = {"phase": "Running"}
    # Drawn last, so that the rest of a scenario is the same with or without storage.
    storage: tuple[JSON, ...] = ()
    if rng.random() < STORAGE_SHARE:
        storage = _storage(rng, prefix, names, node_names, existing, incoming)
    return Scenario(index, namespaces, nodes, existing, incoming, storage)


def _namespace(rng: random.Random, name: str) -> JSON:
    meta: JSON = {"name": name}
    if rng.random() < 0.6:
        meta["labels"] = {TEAM: rng.choice(("x", "y"))}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _node(rng: random.Random, name: str) -> JSON:
    labels = {HOSTNAME: name} if rng.random() < 0.9 else {}
    for key, values in NODE_LABELS.items():
        if rng.random() < (0.85 if key == ZONE else 0.5):
            labels[key] = rng.choice(values)
    spec: JSON = {}
    if rng.random() < 0.3:
        taint = {"key": rng.choice(TAINT_KEYS), "effect": _effect(rng, "PreferNoSchedule")}
        if rng.random() < 0.6:
            taint["value"] = rng.choice(("a", "b"))
        spec["taints"] = [taint]
    if rng.random() < 0.07:
        spec["unschedulable"] = True
    resources = {
        "cpu": rng.choice(("2", "4")),
        "memory": "8Gi",
        "pods": rng.choice(("110", "110", "110", "3")),
        pin_resource(name): "1",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _effect(rng: random.Random, *others: str) -> str:
    return rng.choice(("NoSchedule", "NoExecute", *others))


def _pod(name: str, namespace: str, labels: JSON, spec: JSON, rng: random.Random) -> JSON:
    cpu = rng.choice(("100m", "500m", "1", "1500m"))
    spec["containers"] = [
        {"name": "main", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu}}}
    ]
    meta: JSON = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _pod_labels(rng: random.Random) -> JSON:
    return {k: rng.choice(v) for k, v in POD_LABELS.items() if rng.random() < 0.7}


def _node_constraints(rng: random.Random, node_names: list[str]) -> JSON:
    """nodeSelector, node affinity and tolerations."""
    spec: JSON = {}
    if rng.random() < 0.25:
        key = rng.choice((ZONE, RACK, DISK))
        spec["nodeSelector"] = {key: rng.choice(NODE_LABELS[key])}
    affinity: JSON = {}
    if rng.random() < 0.4:
        terms = [_node_term(rng, node_names) for _ in range(rng.randint(1, 2))]
        affinity[REQUIRED] = {"nodeSelectorTerms": terms}
    if rng.random() < 0.3:
        affinity[PREFERRED] = [
            {"weight": rng.randint(1, 100), "preference": _node_term(rng, node_names)}
        ]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    if rng.random() < 0.5:
        spec["tolerations"] = [_toleration(rng) for _ in range(rng.randint(1, 2))]
    return spec


def _node_term(rng: random.Random, node_names: list[str]) -> JSON:
    if rng.random() < 0.1:
        # The API server allows a single value in a field selector.
        chosen = [rng.choice(node_names)]
        field = {"key": "metadata.name", "operator": rng.choice(("In", "NotIn")), "values": chosen}
        return {"matchFields": [field]}
    expressions = []
    for _ in range(rng.randint(1, 2)):
        key = rng.choice((ZONE, RACK, DISK, GEN, HOSTNAME))
        operators = ["In", "NotIn", "Exists", "DoesNotExist", *(("Gt", "Lt") if key == GEN else ())]
        operator = rng.choice(operators)
        expression: JSON = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            values = NODE_LABELS.get(key) or tuple(node_names)
            expression["values"] = rng.sample(values, rng.randint(1, 2))
        elif operator in ("Gt", "Lt"):
            expression["values"] = [rng.choice(("1", "2", "3"))]
        expressions.append(expression)
    return {"matchExpressions": expressions}


def _toleration(rng: random.Random) -> JSON:
    if rng.random() < 0.05:
        return {"operator": "Exists"}
    toleration: JSON = {"key": rng.choice((*TAINT_KEYS, UNSCHEDULABLE_TAINT))}
    if rng.random() < 0.5:
        toleration["operator"] = "Exists"
    else:
        toleration["value"] = rng.choice(("a", "b"))
    effect = rng.choice(("", "NoSchedule", "NoExecute", "PreferNoSchedule"))
    if effect:
        toleration["effect"] = effect
    return toleration


def _pod_constraints(
    rng: random.Random, namespaces: list[str], labels: JSON, *, incoming: bool
) -> JSON:
    """Pod affinity, anti-affinity and topology spread constraints; the incoming pod
    states them more often than the pods already bound."""
    often = 0.35 if incoming else 0.15
    spec: JSON = {}
    affinity: JSON = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        section: JSON = {}
        if rng.random() < often:
            count = rng.choice((1, 1, 2))
            section[REQUIRED] = [_pod_term(rng, namespaces, labels) for _ in range(count)]
        if rng.random() < often:
            section[PREFERRED] = [
                {
                    "weight": rng.randint(1, 100),
                    "podAffinityTerm": _pod_term(rng, namespaces, labels),
                }
            ]
        if section:
            affinity[kind] = section
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < (0.5 if incoming else 0.15):
        spec["topologySpreadConstraints"] = _spread(rng)
    return spec


def _selector(rng: random.Random) -> JSON:
    if rng.random() < 0.1:
        return {}
    selector: JSON = {}
    for key in rng.sample(sorted(POD_LABELS), rng.randint(1, 2)):
        operator = rng.choice(("In", "In", "NotIn", "Exists", "DoesNotExist"))
        if operator == "In" and rng.random() < 0.5:
            selector.setdefault("matchLabels", {})[key] = rng.choice(POD_LABELS[key])
            continue
        expression: JSON = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            expression["values"] = rng.sample(POD_LABELS[key], rng.randint(1, 2))
        selector.setdefault("matchExpressions", []).append(expression)
    return selector


def _selector_keys(selector: JSON) -> set[str]:
    return set(selector.get("matchLabels", {})) | {
        e["key"] for e in selector.get("matchExpressions", [])
    }


def _label_keys(rng: random.Random, taken: set[str]) -> list[str]:
    """A matchLabelKeys (or mismatchLabelKeys) list, of keys the selector does not name."""
    free = sorted(set(POD_LABELS) - taken)
    return rng.sample(free, 1) if free else []


def _pod_term(rng: random.Random, namespaces: list[str], labels: JSON) -> JSON:
    term: JSON = {"topologyKey": rng.choice(TOPOLOGY_KEYS)}
    if rng.random() < 0.05:
        return term  # no labelSelector: the term selects no pod
    selector = term["labelSelector"] = _selector(rng)
    taken = _selector_keys(selector)
    for field in ("matchLabelKeys", "mismatchLabelKeys"):
        if rng.random() < 0.2:
            keys = _label_keys(rng, taken)
            if keys:
                term[field] = keys
                taken.update(keys)
    choice = rng.random()
    if choice < 0.25:
        term["namespaces"] = rng.sample(namespaces, rng.randint(1, 2))
    elif choice < 0.4:
        term["namespaceSelector"] = {}
    elif choice < 0.55:
        term["namespaceSelector"] = {"matchLabels": {TEAM: rng.choice(("x", "y"))}}
    elif choice < 0.6:
        term["namespaces"] = [rng.choice(namespaces)]
        term["namespaceSelector"] = {"matchLabels": {TEAM: "x"}}
    return term


def _spread(rng: random.Random) -> list[JSON]:
    constraints: list[JSON] = []
    used: set[tuple[str, str]] = set()
    for _ in range(rng.randint(1, 2)):
        key = rng.choice(TOPOLOGY_KEYS)
        when = rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"))
        if (key, when) in used:
            continue
        used.add((key, when))
        constraint: JSON = {"maxSkew": rng.randint(1, 2), "topologyKey": key}
        constraint["whenUnsatisfiable"] = when
        if rng.random() < 0.9:
            selector = constraint["labelSelector"] = _selector(rng)
            if rng.random() < 0.25:
                keys = _label_keys(rng, _selector_keys(selector))
                if keys:
                    constraint["matchLabelKeys"] = keys
        if when == "DoNotSchedule" and rng.random() < 0.3:
            constraint["minDomains"] = rng.randint(1, 4)
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if rng.random() < 0.4:
                constraint[policy] = rng.choice(("Honor", "Ignore"))
        constraints.append(constraint)
    return constraints


# Storage, as kube-scheduler sees it without a PersistentVolume controller or a
# provisioner, neither of which runs: claims bound (spec.volumeName and the
# bind-completed annotation) to volumes that exist or not; claims that are missing, lost,
# being deleted, or unbound with no class, a missing one or an Immediate one; unbound
# claims of a WaitForFirstConsumer class, with available volumes (some pre-bound to
# them) that may fit them, and a class that may provision.


def _storage(
    rng: random.Random,
    prefix: str,
    namespaces: list[str],
    node_names: list[str],
    existing: list[JSON],
    incoming: JSON,
) -> tuple[JSON, ...]:
    """Classes, claims (with their volumes) and CSINodes; adds volumes to the pods."""
    immediate, delayed = f"{prefix}-now", f"{prefix}-wait"
    classes = [
        _storage_class(rng, immediate, wait=False),
        _storage_class(rng, delayed, wait=True),
    ]
    volumes: list[JSON] = []
    claims: list[JSON] = []
    by_namespace: dict[str, list[str]] = {name: [] for name in namespaces}
    # Claims are mostly in the incoming pod's namespace, so that it often mounts some and
    # shares them with pods already bound.
    home = incoming["metadata"]["namespace"]
    for i in range(rng.randint(1, 6)):
        namespace = home if rng.random() < 0.7 else rng.choice(namespaces)
        claim, volume = _claim(rng, f"{prefix}-c{i}", namespace, (immediate, delayed), node_names)
        claims.append(claim)
        by_namespace[namespace].append(claim["metadata"]["name"])
        if volume is not None:
            volumes.append(volume)
    waiting = [
        c
        for c in claims
        if c["spec"].get("storageClassName") == delayed and "volumeName" not in c["spec"]
    ]
    for j in range(rng.randint(1, 4)):
        name = f"{prefix}-free{j}"
        volumes.append(_available(rng, name, (immediate, delayed), waiting, node_names))
    for pod in existing:
        if rng.random() < 0.5:
            _mount(rng, pod, by_namespace, most=2, missing=None)
    _mount(rng, incoming, by_namespace, most=2, missing=f"{prefix}-absent")
    csi_nodes = [_csi_node(rng, name) for name in node_names if rng.random() < 0.6]
    return (*classes, *volumes, *claims, *csi_nodes)


def _storage_class(rng: random.Random, name: str, *, wait: bool) -> JSON:
    """A class of a CSI driver, or of none (its volumes are only those made by hand); one
    that waits for the first consumer may provision only in some zones."""
    found: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": rng.choice((*CSI_DRIVERS, NO_PROVISIONER)),
        "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER if wait else "Immediate",
    }
    if wait and rng.random() < 0.3:
        zones = rng.sample(NODE_LABELS[ZONE], rng.randint(1, 2))
        found["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return found


def _claim(
    rng: random.Random,
    name: str,
    namespace: str,
    classes: tuple[str, str],
    node_names: list[str],
) -> tuple[JSON, JSON | None]:
    """A claim, and the volume it is bound to when that exists.

    Most claims are bound; some are bound to a volume that is gone (sometimes marked
    Lost), are being deleted, are pre-bound (volumeName without the annotation), are
    unbound with no class, a class that does not exist, or an Immediate one, or wait for
    their first consumer.
    """
    modes = [rng.choice(ACCESS_MODES)]
    size = rng.choice(("1Gi", "2Gi", "5Gi"))
    meta: JSON = {"name": name, "namespace": namespace}
    spec: JSON = {"accessModes": modes, "resources": {"requests": {"storage": size}}}
    claim: JSON = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta}
    claim["spec"] = spec
    kind = rng.random()
    if kind > 0.75:
        spec["storageClassName"] = classes[1]
        return claim, None
    if kind < 0.04:
        unbound = rng.choice((None, classes[0], f"{name}-no-class"))
        if unbound is not None:
            spec["storageClassName"] = unbound
        return claim, None
    storage_class = rng.choice((*classes, None))
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    volume = _volume(rng, f"{name}-pv", meta, modes, storage_class, node_names)
    spec["volumeName"] = volume["metadata"]["name"]
    if kind < 0.055:
        return claim, volume  # pre-bound: the controller has not finished binding it
    meta["annotations"] = {BIND_COMPLETED: "yes"}
    if kind < 0.09:
        if rng.random() < 0.5:
            claim["status"] = {"phase": "Lost"}
        return claim, None
    if kind < 0.11:
        meta["deletionTimestamp"] = DELETED_AT
        meta["finalizers"] = [CLAIM_FINALIZER]
    return claim, volume


def _available(
    rng: random.Random,
    name: str,
    classes: tuple[str, str],
    waiting: list[JSON],
    node_names: list[str],
) -> JSON:
    """An available volume, mostly of the class that waits for the first consumer, now
    and then pre-bound (claimRef without uid) to a claim that waits, which is then
    taken off `waiting`: of two volumes pre-bound to one claim, kube-scheduler takes
    whichever its cache lists first."""
    claim = (
        waiting.pop(rng.randrange(len(waiting)))["metadata"]
        if waiting and rng.random() < 0.2
        else None
    )
    storage_class = rng.choice((classes[1], classes[1], classes[1], classes[0], None))
    modes = [rng.choice(ACCESS_MODES)]
    volume = _volume(rng, name, claim, modes, storage_class, node_names)
    volume["status"] = {"phase": "Available"}
    return volume


def _volume(
    rng: random.Random,
    name: str,
    claim: JSON | None,
    modes: list[str],
    storage_class: str | None,
    node_names: list[str],
) -> JSON:
    """A volume, made for `claim` if given: CSI or host path, sometimes with node affinity
    and zone or region labels."""
    spec: JSON = {
        "capacity": {"storage": rng.choice(("1Gi", "5Gi", "10Gi"))},
        "accessModes": modes,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim["namespace"], "name": claim["name"]}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if rng.random() < 0.6:
        # A handle shared by two volumes is one attachment to the driver.
        handle = name if rng.random() < 0.8 else "shared"
        spec["csi"] = {"driver": rng.choice(CSI_DRIVERS), "volumeHandle": handle}
    else:
        spec["hostPath"] = {"path": f"/data/{name}"}
    if rng.random() < 0.3:
        terms = [_volume_term(rng, node_names) for _ in range(rng.randint(1, 2))]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    meta: JSON = {"name": name}
    if rng.random() < 0.35:
        zones = NODE_LABELS[ZONE]
        meta["labels"] = {
            ZONE: rng.choice((zones[0], "__".join(rng.sample(zones, 2)), "")),
        }
        if rng.random() < 0.15:
            meta["labels"][REGION] = "region-1"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def _volume_term(rng: random.Random, node_names: list[str]) -> JSON:
    expressions = []
    for _ in range(rng.randint(1, 2)):
        key = rng.choice((HOSTNAME, ZONE, RACK))
        operator = rng.choice(("In", "In", "NotIn", "Exists"))
        expression: JSON = {"key": key, "operator": operator}
        if operator != "Exists":
            values = NODE_LABELS.get(key) or tuple(node_names)
            expression["values"] = rng.sample(values, min(len(values), rng.randint(1, 2)))
        expressions.append(expression)
    return {"matchExpressions": expressions}


def _mount(
    rng: random.Random,
    pod: JSON,
    by_namespace: dict[str, list[str]],
    *,
    most: int,
    missing: str | None,
) -> None:
    """Adds up to `most` claims of the pod's namespace to its volumes and, with
    `missing`, sometimes a claim of that name, which does not exist."""
    offered = by_namespace[pod["metadata"]["namespace"]]
    names = rng.sample(offered, min(len(offered), rng.randint(1, most)))
    if missing is not None and rng.random() < 0.06:
        names.append(missing)
    if names:
        pod["spec"]["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}}
            for i, name in enumerate(names)
        ]


def _csi_node(rng: random.Random, node: str) -> JSON:
    """A node's CSI drivers, most with an attach limit small enough to be reached."""
    drivers = []
    for driver in CSI_DRIVERS:
        if rng.random() < 0.7:
            entry: JSON = {"name": driver, "nodeID": node}
            if rng.random() < 0.85:
                entry["allocatable"] = {"count": rng.randint(0, 3)}
            drivers.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": drivers},
    }


def probe_scenario() -> Scenario:
    """One plain node and one plain pod, which any working kube-scheduler places."""
    name = "probe"
    namespace: JSON = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    resources = {"cpu": "1", "memory": "1Gi", "pods": "10"}
    node: JSON = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }
    pod: JSON = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": {}}]},
    }
    return Scenario(-1, [namespace], [node], [], pod)


# The two answers and their comparison.


# The volume each claim that waits for the pod gets where the pod goes, by claim name:
# an existing volume's name, or "" for one to be provisioned.
Volumes = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Ours:
    """batchsched's answer: the node it chose, or why the pod waits."""

    node: str | None
    reason: str | None
    volumes: Volumes = ()


@dataclass(frozen=True)
class Answer:
    """kube-scheduler's answer to one pod: the node it placed the pod on (None:
    Unschedulable), its message, and the volumes of the claims that wait for the pod."""

    node: str | None
    message: str = ""
    volumes: Volumes = ()


@dataclass(frozen=True)
class Theirs:
    """kube-scheduler's answer: whether some node will do, and whether batchsched's
    choice will (None when batchsched chose none)."""

    feasible: bool
    accepts_ours: bool | None
    # Where it placed the pod (None when it found no node).
    node: str | None
    message: str
    # On batchsched's node, when it accepts it.
    volumes: Volumes = ()


# Creates the incoming pod (pinned to a node, or free) and waits for kube-scheduler's answer.
Ask = Callable[[str | None], Answer]


def batchsched_verdict(scenario: Scenario) -> Ours:
    sim = simulate(scenario.objects(), default_config())
    if sim.errors:
        raise ValueError(f"scenario {scenario.index}: batchsched refused it: {sim.errors}")
    key = scenario.incoming_key
    task = sim.cache.tasks.get(key)
    if task is None:
        _, message = sim.cache.rejected_pods[key]
        return Ours(None, message)
    if task.node_name:
        # The simulator settles the claims of a pod it binds: each names the volume it
        # was given, or one it made for the claim (not one of the scenario's).
        given = {
            obj["metadata"]["name"] for obj in scenario.storage if obj["kind"] == "PersistentVolume"
        }
        namespace = scenario.incoming["metadata"]["namespace"]
        volumes = []
        for name in scenario.waiting_claims():
            volume = sim.cache.claims[f"{namespace}/{name}"].volume_name
            volumes.append((name, volume if volume in given else ""))
        return Ours(task.node_name, None, tuple(volumes))
    return Ours(None, sim.decisions.pending.get(key, "not scheduled"))


def kube_verdict(ours: Ours, ask: Ask) -> Theirs:
    """Ask kube-scheduler about batchsched's node first: a pod it binds there settles
    both questions at once. Otherwise ask again with the pod free."""
    message = ""
    if ours.node is not None:
        pinned = ask(ours.node)
        if pinned.node is not None:
            return Theirs(True, True, pinned.node, "", pinned.volumes)
        message = pinned.message
    free = ask(None)
    return Theirs(
        feasible=free.node is not None,
        accepts_ours=None if ours.node is None else False,
        node=free.node,
        message=message or free.message,
    )


def disagreement(ours: Ours, theirs: Theirs) -> str | None:
    """What the two schedulers disagree on, in a sentence; None when they agree."""
    if ours.node is None and theirs.feasible:
        return f"kube-scheduler placed the pod on {theirs.node}; batchsched: {ours.reason}"
    if ours.node is not None and not theirs.feasible:
        return (
            f"batchsched placed the pod on {ours.node}; kube-scheduler found no node: "
            f"{theirs.message}"
        )
    if theirs.accepts_ours is False:
        return (
            f"batchsched placed the pod on {ours.node}, which kube-scheduler refuses "
            f"({theirs.message}); it placed it on {theirs.node}"
        )
    if theirs.accepts_ours and ours.volumes != theirs.volumes:
        return (
            f"on {ours.node}, batchsched gives the claims {_volumes(ours.volumes)}, "
            f"kube-scheduler {_volumes(theirs.volumes)}"
        )
    return None


def _volumes(volumes: Volumes) -> str:
    return ", ".join(f"{claim}: {volume or 'to provision'}" for claim, volume in volumes)


def case_yaml(scenario: Scenario, *, seed: int, finding: str) -> str:
    """A multi-document YAML of the scenario that `batchsched simulate -f` reads."""
    header = [
        f"# Scenario {scenario.index} of bench/parity.py --seed {seed}.",
        f"# {finding}",
        f"# Reproduce: batchsched simulate -f <this file> (pod {scenario.incoming_key}).",
    ]
    body = yaml.safe_dump_all(scenario.objects(), sort_keys=False)
    return "\n".join(header) + "\n" + body
