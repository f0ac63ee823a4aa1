"""Random scenarios for checking batchsched's constraint filters against kube-scheduler.

A scenario is a small cluster (nodes with zones, hostnames, labels and taints; pods
already bound, with labels, affinities and spread constraints) and one incoming pod
that mixes every constraint the two schedulers share. batchsched's answer comes from
the simulator; kube-scheduler's from a real one (bench/parity.py asks it through
`kube_verdict`). Everything here is pure, so the generator and the comparison can be
tested without a control plane.

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

from batchsched.framework.config import default_config
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


@dataclass(frozen=True)
class Scenario:
    index: int
    namespaces: list[JSON]
    nodes: list[JSON]
    existing: list[JSON]
    # The pod to place, without spec.schedulerName.
    incoming: JSON

    @property
    def incoming_key(self) -> str:
        meta = self.incoming["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def objects(self) -> list[JSON]:
        """The cluster as batchsched reads it, the incoming pod addressed to it."""
        return [*self.namespaces, *self.nodes, *self.existing, self.pod(BATCHSCHED)]

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
    return Scenario(index, namespaces, nodes, existing, incoming)


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


@dataclass(frozen=True)
class Ours:
    """batchsched's answer: the node it chose, or why the pod waits."""

    node: str | None
    reason: str | None


@dataclass(frozen=True)
class Theirs:
    """kube-scheduler's answer: whether some node will do, and whether batchsched's
    choice will (None when batchsched chose none)."""

    feasible: bool
    accepts_ours: bool | None
    # Where it placed the pod (None when it found no node).
    node: str | None
    message: str


# Creates the incoming pod (pinned to a node, or free), waits for kube-scheduler and
# returns the node it bound the pod to (None: Unschedulable) and its message.
Ask = Callable[[str | None], tuple[str | None, str]]


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
        return Ours(task.node_name, None)
    return Ours(None, sim.decisions.pending.get(key, "not scheduled"))


def kube_verdict(ours: Ours, ask: Ask) -> Theirs:
    """Ask kube-scheduler about batchsched's node first: a pod it binds there settles
    both questions at once. Otherwise ask again with the pod free."""
    message = ""
    if ours.node is not None:
        node, message = ask(ours.node)
        if node is not None:
            return Theirs(True, True, node, "")
    node, free_message = ask(None)
    return Theirs(
        feasible=node is not None,
        accepts_ours=None if ours.node is None else False,
        node=node,
        message=message or free_message,
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
    return None


def case_yaml(scenario: Scenario, *, seed: int, finding: str) -> str:
    """A multi-document YAML of the scenario that `batchsched simulate -f` reads."""
    header = [
        f"# Scenario {scenario.index} of bench/parity.py --seed {seed}.",
        f"# {finding}",
        f"# Reproduce: batchsched simulate -f <this file> (pod {scenario.incoming_key}).",
    ]
    body = yaml.safe_dump_all(scenario.objects(), sort_keys=False)
    return "\n".join(header) + "\n" + body
