"""Random scenarios for checking batchsched's allocation of DRA devices
(`resource.k8s.io/v1`) against kube-scheduler's DynamicResources plugin.

A scenario is a few nodes whose devices are published as drivers publish them: GPUs on
node-local ResourceSlices (one pool per node, devices with a model, an index, a compute
capability, a PCIe root and memory; some tainted), some of them partitionable (a slice
of shared counters per GPU and a slice of the whole GPU and its partitions, consuming
them), NICs on a slice per rack (a node selector) and virtual functions on an all-nodes
slice; now and then a pool being updated (fewer slices than it says) or an older
generation left behind. DeviceClasses select the driver's GPUs, partitions and NICs by
CEL. Some devices are already in use: claims allocated to pods bound by spec.nodeName.
Then one unit arrives: a pod, or a gang of pods (a Kubernetes PodGroup whose minCount is
its size), with claims from a template or by name (new, or one already allocated and
shared), whose requests mix ExactCount and All, firstAvailable, selectors on attributes,
capacity and versions, matchAttribute and distinctAttribute constraints and tolerations.
Last, one kind of scenario drawn by weight (KINDS) may add to it: admin access,
consumable capacity, devices with binding conditions, per-device node selection, a
DeviceTaintRule, a claim being deleted.

bench/dra_parity.py runs the scenario through both schedulers on one API server. Each
side has its own copy: nodes named apart and labelled with the side (every pod selects
them), and its own drivers (`gpu.<side>.example.com`), so that classes, slices and
claims of one side never reach the other's devices. Everything here is pure.
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import yaml

from batchsched.api.dra import ADMIN_ACCESS_LABEL, TAINT_RULE_API

from bench.gang_scenarios import OURS, OWN, Side
from tests.support.kube import JSON
from tests.support.objects import (
    claim_template,
    device,
    device_class,
    exactly,
    first_available,
    member,
    native_pod_group,
    node,
    pod,
    resource_claim,
    resource_slice,
)

# The drivers' domain; each side's copy names its own drivers under it (Scenario.for_side).
DOMAIN = "example.com"
GPU = f"gpu.{DOMAIN}"
NIC = f"nic.{DOMAIN}"
GPU_CLASS = GPU
MIG_CLASS = f"mig.{GPU}"
NIC_CLASS = NIC
VF_CLASS = f"vf.{NIC}"
# A class no scenario creates: a claim naming it waits.
MISSING_CLASS = f"tpu.{DOMAIN}"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
TAINT_KEY = f"{GPU}/unhealthy"
RACK = "topology.example.io/rack"
SIDE_LABEL = "draconf.batchsched.io/side"
# Each node has as many of its own pin resource as any unit has pods: a pod asking for
# one goes to that node alone, without a selector that would change anything else.
PIN = "pin.draconf.batchsched.io"
PIN_CAPACITY = "8"
MODELS = {"H100": ("80Gi", "9.0.0"), "A100": ("40Gi", "8.0.0"), "L4": ("24Gi", "8.9.0")}
# A whole GPU of a partitionable node, and its partitions: (name, multiprocessors, memory).
PARTITIONS = (("3g", 3, "40Gi"), ("3g", 3, "40Gi"), ("1g", 1, "10Gi"))
WHOLE_GPU = (7, "80Gi")
# The claim name a pod's spec.resourceClaims gives its devices.
POD_CLAIM = "devices"
# The first claim in use, which a unit may share.
SHARED = "used-0"
# The kind of a scenario none of KINDS changed.
PLAIN = "plain"
# GPUs several claims share, each consuming part of their memory (consumable capacity).
SHARED_CLASS = f"shared.{GPU}"
SHARED_MEMORY = "40Gi"
MEMORY_POLICY = {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}
# What a device with binding conditions waits for (set by its driver, never here).
BINDING_CONDITION = "Attached"
BINDING_FAILURE = "AttachFailed"
# Keeps a deleted claim, being deleted, until the run's teardown takes it off.
HOLD_FINALIZER = "draconf.batchsched.io/hold"
DELETED_AT = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class Scenario:
    """Side-neutral objects; `for_side` gives each side's copy. `cluster` holds nodes,
    slices and classes, `existing` the devices in use (claims allocated, their pods bound;
    each claim's allocation goes in through its status), `unit` what arrives."""

    index: int
    cluster: tuple[JSON, ...]
    existing: tuple[JSON, ...]
    unit: tuple[JSON, ...]
    # What the unit asks, for the report (e.g. "gang of 3, template, firstAvailable").
    traits: tuple[str, ...] = ()
    # The unit asks for All the devices of a kind.
    all_mode: bool = False
    round: int = 0
    # Labels of the scenario's namespace (admin access needs one).
    namespace_labels: tuple[tuple[str, str], ...] = ()
    # Claims deleted as soon as they are made (a finalizer keeps them, being deleted).
    deleted: tuple[str, ...] = ()
    # The kind of scenario (KINDS), for the report.
    kind: str = PLAIN

    @property
    def pods(self) -> list[str]:
        return [o["metadata"]["name"] for o in self.unit if o["kind"] == "Pod"]

    def namespace(self, side: Side) -> str:
        suffix = f"-r{self.round}" if self.round else ""
        return f"d{self.index}{suffix}-{side.name}"

    def domain(self, side: Side) -> str:
        return f"{self.namespace(side)}.{DOMAIN}"

    def node_name(self, side: Side, name: str) -> str:
        return f"{self.namespace(side)}-{name}"

    def for_side(self, obj: JSON, side: Side) -> JSON:
        """The object as `side` creates it: its drivers, classes and slices renamed under
        its domain, nodes and node names prefixed, pods in its namespace naming its
        scheduler and selecting its nodes."""
        text = json.dumps(obj).replace(f".{DOMAIN}", f".{self.domain(side)}")
        found: JSON = json.loads(text)
        meta, spec = found["metadata"], found.get("spec") or {}
        kind = found["kind"]
        if kind == "Node":
            meta["name"] = self.node_name(side, meta["name"])
            meta["labels"] = {**meta["labels"], SIDE_LABEL: self.namespace(side)}
            meta["labels"]["kubernetes.io/hostname"] = meta["name"]
        elif kind == "ResourceSlice":
            meta["name"] = f"{self.namespace(side)}-{meta['name']}"
            # Under perDeviceNodeSelection each device says which nodes it reaches.
            for reach in (spec, *spec.get("devices", ())):
                if "nodeName" in reach:
                    reach["nodeName"] = self.node_name(side, reach["nodeName"])
                for term in (reach.get("nodeSelector") or {}).get("nodeSelectorTerms", ()):
                    term["matchExpressions"].append(self._side_requirement(side))
        elif kind == "DeviceTaintRule":
            meta["name"] = f"{self.namespace(side)}-{meta['name']}"
        elif kind != "DeviceClass":
            meta["namespace"] = self.namespace(side)
        if kind == "Pod":
            if spec["schedulerName"] == OWN:
                spec["schedulerName"] = side.scheduler
            spec["nodeSelector"] = {SIDE_LABEL: self.namespace(side)}
            if "nodeName" in spec:
                spec["nodeName"] = self.node_name(side, spec["nodeName"])
        if kind == "ResourceClaim" and "status" in found:
            allocation = found["status"]["allocation"]
            for term in allocation["nodeSelector"]["nodeSelectorTerms"]:
                for field_ in term.get("matchFields", ()):
                    field_["values"] = [self.node_name(side, v) for v in field_["values"]]
        return found

    def _side_requirement(self, side: Side) -> JSON:
        return {"key": SIDE_LABEL, "operator": "In", "values": [self.namespace(side)]}

    def neutral_node(self, side: Side, name: str) -> str:
        return name.removeprefix(f"{self.namespace(side)}-")

    def neutral_driver(self, side: Side, driver: str) -> str:
        return driver.replace(f".{self.domain(side)}", f".{DOMAIN}")

    def pinned(self, answer: Answer) -> Scenario:
        """The scenario with each pod of the unit asking for the pin resource of the node
        `answer` put it on: the question whether another scheduler would place it there."""
        unit = []
        for obj in self.unit:
            found = copy.deepcopy(obj)
            placed = answer.get(obj["metadata"]["name"]) if obj["kind"] == "Pod" else None
            if placed is not None and placed.node is not None:
                pin = {f"{PIN}/{placed.node}": "1"}
                resources = found["spec"]["containers"][0]["resources"]
                resources["requests"] = {**resources["requests"], **pin}
                resources["limits"] = pin
            unit.append(found)
        return replace(self, unit=tuple(unit), round=self.round + 1)

    def again(self) -> Scenario:
        """The same scenario under new names, to run it a second time."""
        return replace(self, round=self.round + 1)

    def namespace_object(self, side: Side) -> JSON:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace(side), "labels": dict(self.namespace_labels)},
        }

    def case_objects(self, side: Side) -> list[JSON]:
        """The scenario as one input for `batchsched simulate`: the namespace, the
        cluster, the devices in use and the unit."""
        found = [self.for_side(o, side) for o in (*self.cluster, *self.existing, *self.unit)]
        for obj in found:
            if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] in self.deleted:
                # As the API server shows it once deleted, its finalizer holding it.
                obj["metadata"]["deletionTimestamp"] = DELETED_AT
        return [self.namespace_object(side), *found]


# What a side answered, per pod of the unit.

Result = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class PodAnswer:
    """Where a pod went (None: not placed) and the devices of its claims there, each as
    (pod claim, request, driver, pool, device), side-neutral and sorted."""

    node: str | None
    devices: tuple[Result, ...] = ()
    message: str = ""


Answer = dict[str, PodAnswer]


@dataclass(frozen=True)
class Verdict:
    """How two answers compare: `same`, or placed by both on different nodes (to be
    checked for uniqueness), or the difference in a sentence."""

    same: bool = False
    nodes_differ: bool = False
    difference: str = ""


def compare(kube: Answer, ours: Answer) -> Verdict:
    """Per pod: placed or not; then, the unit's pods being alike (a gang's members are
    interchangeable), the nodes of the placed ones as a multiset, and their devices: a
    lone pod's exactly; a gang's as the devices it holds, and per member its node and
    the requests (subrequests) it got devices of. Which member holds which of the
    devices several nodes reach (all-nodes, node-selector slices) follows the order
    the members are placed in, which neither scheduler promises."""
    placed_k = {p for p, a in kube.items() if a.node}
    placed_o = {p for p, a in ours.items() if a.node}
    if len(placed_k) != len(placed_o) or (len(placed_k) < len(kube) and placed_k != placed_o):
        return Verdict(
            difference=f"placed: kube-scheduler {_placed(kube)}, batchsched {_placed(ours)}"
        )
    where_k = Counter(a.node for a in kube.values() if a.node)
    where_o = Counter(a.node for a in ours.values() if a.node)
    if where_k != where_o:
        return Verdict(
            nodes_differ=True,
            difference=f"nodes: kube-scheduler {_nodes(kube)}, batchsched {_nodes(ours)}",
        )
    if len(kube) == 1:
        alike = _held(kube) == _held(ours)
    else:
        alike = Counter(_shapes(kube)) == Counter(_shapes(ours)) and sorted(
            r[2:] for a in kube.values() for r in a.devices
        ) == sorted(r[2:] for a in ours.values() for r in a.devices)
    if not alike:
        return Verdict(
            difference=f"devices: kube-scheduler {_devices(kube)}, batchsched {_devices(ours)}"
        )
    return Verdict(same=True)


def valid_there(pinned: Answer, answer: Answer) -> bool:
    """Whether a scheduler, each pod pinned to the node `answer` put it on, placed them
    all there and chose the same devices (first-fit on a node decides them)."""
    return compare(pinned, answer).same


def _held(answer: Answer) -> list[tuple[str | None, tuple[Result, ...]]]:
    return [(a.node, a.devices) for a in answer.values() if a.node]


def _shapes(answer: Answer) -> list[tuple[str | None, tuple[str, ...]]]:
    return [(a.node, tuple(sorted(r[1] for r in a.devices))) for a in answer.values() if a.node]


def _placed(answer: Answer) -> str:
    return ", ".join(f"{p}={'yes' if a.node else 'no'}" for p, a in sorted(answer.items()))


def _nodes(answer: Answer) -> str:
    return ", ".join(f"{p}->{a.node}" for p, a in sorted(answer.items()))


def _devices(answer: Answer) -> str:
    return "; ".join(
        f"{p}@{a.node}: " + ",".join(f"{r[1]}={r[3]}/{r[4]}" for r in a.devices)
        for p, a in sorted(answer.items())
    )


# The generator.


@dataclass
class _Cluster:
    """What the generator has built so far: devices in use are taken from it."""

    rng: random.Random
    objects: list[JSON] = field(default_factory=list)
    # Per node: its GPUs' and partitions' device names (physical GPU -> names), whether
    # partitionable, its rack.
    gpus: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    racks: dict[str, str] = field(default_factory=dict)


def generate(rng: random.Random, index: int) -> Scenario:
    """Narrow ranges, so that devices often run out and constraints often bite."""
    cluster = _Cluster(rng)
    classes = [
        device_class(
            GPU_CLASS, f'device.driver == "{GPU}"', f'device.attributes["{GPU}"].type == "gpu"'
        ),
        device_class(
            MIG_CLASS, f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "mig"'
        ),
        device_class(
            NIC_CLASS, f'device.driver == "{NIC}" && device.attributes["{NIC}"].type == "nic"'
        ),
        device_class(
            VF_CLASS, f'device.driver == "{NIC}" && device.attributes["{NIC}"].type == "vf"'
        ),
    ]
    cluster.objects.extend(classes)
    for i in range(rng.randint(2, 4)):
        _add_node(cluster, f"n{i}")
    for rack in sorted(set(cluster.racks.values())):
        if rng.random() < 0.7:
            cluster.objects.append(_nic_slice(rng, rack))
    vf = rng.random() < 0.5
    if vf:
        vfs = [
            device(f"vf-{i}", attributes={"type": {"string": "vf"}})
            for i in range(rng.randint(1, 3))
        ]
        cluster.objects.append(
            resource_slice("vf-cluster", driver=NIC, pool="cluster", devices=vfs, all_nodes=True)
        )
    existing = _existing(cluster)
    shared = any(o["metadata"]["name"] == SHARED for o in existing)
    unit, traits, all_mode = _unit(rng, shared, vf)
    draft = _Draft(cluster, existing, unit, list(traits))
    # Drawn from a stream of its own, so that adding a kind leaves the scenarios of the
    # others as they were.
    kind = _add_kind(random.Random(rng.random()), draft)
    return Scenario(
        index,
        tuple(cluster.objects),
        tuple(existing),
        tuple(unit),
        tuple(draft.traits),
        all_mode,
        namespace_labels=tuple(sorted(draft.labels.items())),
        deleted=tuple(draft.deleted),
        kind=kind,
    )


def _add_node(cluster: _Cluster, name: str) -> None:
    rng = cluster.rng
    rack = rng.choice(("r0", "r1"))
    cluster.racks[name] = rack
    pins = {f"{PIN}/{name}": PIN_CAPACITY}
    cluster.objects.append(node(name, cpu="8", memory="64Gi", extra=pins, labels={RACK: rack}))
    model = rng.choice(tuple(MODELS))
    partitionable = model != "L4" and rng.random() < 0.3
    count = rng.randint(1, 2) if partitionable else rng.randint(2, 4)
    devices: list[JSON] = []
    counters: dict[str, dict[str, str]] = {}
    cluster.gpus[name] = {}
    for g in range(count):
        whole = _gpu(rng, f"gpu-{g}", model, g)
        cluster.gpus[name][g] = [f"gpu-{g}"]
        if partitionable:
            mp, memory = WHOLE_GPU
            counters[f"gpu-{g}-counters"] = {"multiprocessors": str(mp), "memory": memory}
            whole["consumesCounters"] = [_consumes(f"gpu-{g}-counters", mp, memory)]
            devices.append(whole)
            for p, (size, mp_part, mem_part) in enumerate(PARTITIONS):
                part = _gpu(rng, f"gpu-{g}-mig-{size}-{p}", model, g, kind="mig", memory=mem_part)
                part["consumesCounters"] = [_consumes(f"gpu-{g}-counters", mp_part, mem_part)]
                devices.append(part)
                cluster.gpus[name][g].append(part["name"])
        else:
            devices.append(whole)
    slice_count = 2 if partitionable else 1
    generation = 1
    if rng.random() < 0.1:
        # Left behind by the driver's update: only the newer generation counts.
        old = [_gpu(rng, "gpu-old", model, 9)]
        cluster.objects.append(
            resource_slice(f"{name}-gpu-old", driver=GPU, pool=name, devices=old, node_name=name)
        )
        generation = 2
    if rng.random() < 0.07:
        # Being updated: the pool says one slice more than there is.
        slice_count += 1
    gpu_slice = resource_slice(
        f"{name}-gpu",
        driver=GPU,
        pool=name,
        devices=devices,
        node_name=name,
        generation=generation,
        slice_count=slice_count,
    )
    cluster.objects.append(gpu_slice)
    if partitionable:
        shared = resource_slice(
            f"{name}-gpu-counters",
            driver=GPU,
            pool=name,
            counters=counters,
            generation=generation,
            slice_count=slice_count,
        )
        shared["spec"]["nodeName"] = name
        cluster.objects.append(shared)


def _gpu(
    rng: random.Random,
    name: str,
    model: str,
    index: int,
    *,
    kind: str = "gpu",
    memory: str | None = None,
) -> JSON:
    full_memory, capability = MODELS[model]
    taints = []
    if kind == "gpu" and rng.random() < 0.12:
        effect = rng.choice(("NoSchedule", "NoSchedule", "NoExecute", "None"))
        taints.append({"key": TAINT_KEY, "value": "ecc", "effect": effect})
    return device(
        name,
        attributes={
            "type": {"string": kind},
            "model": {"string": model},
            "index": {"int": index},
            "cudaComputeCapability": {"version": capability},
            PCIE_ROOT: {"string": f"pci{index // 2}"},
        },
        capacity={"memory": memory or full_memory},
        taints=taints,
    )


def _consumes(counter_set: str, multiprocessors: int, memory: str) -> JSON:
    counters = {"multiprocessors": {"value": str(multiprocessors)}, "memory": {"value": memory}}
    return {"counterSet": counter_set, "counters": counters}


def _nic_slice(rng: random.Random, rack: str) -> JSON:
    nics = [
        device(
            f"nic-{i}",
            attributes={
                "type": {"string": "nic"},
                "rdma": {"bool": rng.random() < 0.7},
                PCIE_ROOT: {"string": f"pci{i}"},
            },
        )
        for i in range(rng.randint(1, 3))
    ]
    return resource_slice(
        f"{rack}-nic", driver=NIC, pool=f"rack-{rack}", devices=nics, node_selector={RACK: rack}
    )


def _existing(cluster: _Cluster) -> list[JSON]:
    """Claims already allocated, each to one node's GPUs or partitions (at most one
    device of a physical GPU, so that the counters hold), reserved for a pod bound there."""
    rng = cluster.rng
    found: list[JSON] = []
    for i in range(rng.randint(0, 3)):
        name = rng.choice(sorted(cluster.gpus))
        free = [names for names in cluster.gpus[name].values() if names]
        if not free:
            continue
        picked = []
        for names in rng.sample(free, rng.randint(1, len(free))):
            chosen = rng.choice(names)
            picked.append(chosen)
            names.clear()
        partitions = ["mig" in d for d in picked]
        klass = MIG_CLASS if all(partitions) else GPU_CLASS
        if any(partitions) and not all(partitions):
            picked = [d for d in picked if "mig" not in d]
        results = [{"request": "gpu", "driver": GPU, "pool": name, "device": d} for d in picked]
        request = exactly("gpu", klass, count=len(picked))
        found.extend(_in_use(f"used-{i}", f"user-{i}", name, request, results))
    return found


def _in_use(
    claim: str, holder: str, node_name: str, request: JSON, results: list[JSON]
) -> list[JSON]:
    """A pod bound to `node_name` and its claim of `request`, allocated `results` there."""
    allocation = {
        "devices": {"results": results},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        },
    }
    return [
        _pod(holder, node_name=node_name, claims={POD_CLAIM: {"resourceClaimName": claim}}),
        resource_claim(claim, request, status={"allocation": allocation}),
    ]


def _unit(rng: random.Random, shared: bool, vf: bool) -> tuple[list[JSON], tuple[str, ...], bool]:
    """The pod or gang that arrives, its claims' objects, and what it asks; with
    `shared`, a pod may join the claim SHARED, already allocated; with `vf`, ask for a
    virtual function now and then."""
    requests, constraints, traits, all_mode = _requests(rng, vf)
    size = 1 if rng.random() < 0.6 else rng.randint(2, 3)
    objects: list[JSON] = []
    how = rng.random()
    if shared and size == 1 and how < 0.15:
        # Joins a claim already allocated to a pod bound on some node: it must go there.
        source = {"resourceClaimName": SHARED}
        traits = (f"shares {SHARED}",)
        all_mode = False
    elif size == 1 and how < 0.4:
        objects.append(resource_claim("mine", *requests, constraints=constraints))
        source = {"resourceClaimName": "mine"}
        traits = ("claim by name", *traits)
    else:
        template = claim_template("per-pod", *requests)
        if constraints:
            template["spec"]["spec"]["devices"]["constraints"] = constraints
        objects.append(template)
        source = {"resourceClaimTemplateName": "per-pod"}
        traits = ("template", *traits)
    claims = {POD_CLAIM: source}
    if size == 1:
        objects.append(_pod("p", claims=claims))
        return objects, traits, all_mode
    objects.append(native_pod_group("gang", size))
    objects.extend(_pod(f"gang-{i}", claims=claims, group="gang") for i in range(size))
    return objects, (f"gang of {size}", *traits), all_mode


def _requests(rng: random.Random, vf: bool) -> tuple[list[JSON], list[JSON], tuple[str, ...], bool]:
    """A claim's requests and constraints, and words for them."""
    requests: list[JSON] = []
    constraints: list[JSON] = []
    traits: list[str] = []
    all_mode = False
    shape = rng.random()
    tolerations = [{"key": TAINT_KEY, "operator": "Exists"}] if rng.random() < 0.25 else []
    if tolerations:
        traits.append("tolerates the taint")
    if shape < 0.35:
        count = rng.randint(1, 3)
        requests.append(
            exactly(
                "gpu", GPU_CLASS, count=count, selectors=_selectors(rng), tolerations=tolerations
            )
        )
        traits.append(f"{count} GPU")
        if count > 1 and rng.random() < 0.4:
            kind, attribute = rng.choice(
                (
                    ("matchAttribute", f"{GPU}/model"),
                    ("matchAttribute", PCIE_ROOT),
                    ("distinctAttribute", PCIE_ROOT),
                )
            )
            constraints.append({kind: attribute})
            traits.append(f"{kind} {attribute}")
    elif shape < 0.5:
        requests.append(
            exactly(
                "gpu", GPU_CLASS, mode="All", selectors=_selectors(rng), tolerations=tolerations
            )
        )
        traits.append("All GPUs")
        all_mode = True
    elif shape < 0.7:
        first = rng.choice(tuple(MODELS))
        subrequests = [
            exactly(
                model.lower(),
                GPU_CLASS,
                count=rng.randint(1, 2),
                selectors=[f'device.attributes["{GPU}"].model == "{model}"'],
                tolerations=tolerations,
            )
            for model in (first, *(m for m in MODELS if m != first))[: rng.randint(2, 3)]
        ]
        if rng.random() < 0.4:
            subrequests.append(exactly("partition", MIG_CLASS, count=1))
        requests.append(first_available("gpu", *subrequests))
        traits.append("firstAvailable " + ",".join(s["name"] for s in subrequests))
    elif shape < 0.82:
        count = rng.randint(1, 3)
        selectors = (
            [f'device.capacity["{GPU}"].memory.compareTo(quantity("20Gi")) >= 0']
            if rng.random() < 0.4
            else []
        )
        requests.append(exactly("partition", MIG_CLASS, count=count, selectors=selectors))
        traits.append(f"{count} partitions")
    else:
        requests.append(exactly("gpu", GPU_CLASS, count=rng.randint(1, 2), tolerations=tolerations))
        requests.append(
            exactly(
                "nic",
                NIC_CLASS,
                selectors=[f'device.attributes["{NIC}"].rdma'] if rng.random() < 0.5 else [],
            )
        )
        traits.append("GPU and NIC")
        if rng.random() < 0.5:
            constraints.append({"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT})
            traits.append("matchAttribute pcieRoot across GPU and NIC")
    if vf and rng.random() < 0.3:
        requests.append(exactly("vf", VF_CLASS))
        traits.append("a VF")
    if rng.random() < 0.03:
        requests.append(exactly("tpu", MISSING_CLASS))
        traits.append("a missing class")
    return requests, constraints, tuple(traits), all_mode


def _selectors(rng: random.Random) -> list[str]:
    roll = rng.random()
    if roll < 0.2:
        return [f'device.attributes["{GPU}"].model == "{rng.choice(tuple(MODELS))}"']
    if roll < 0.32:
        return [f'device.attributes["{GPU}"].cudaComputeCapability.isGreaterThan(semver("8.5.0"))']
    if roll < 0.42:
        return [f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0']
    if roll < 0.47:
        # Every device lacks it: a runtime error on the first device tried.
        return [f'device.attributes["{GPU}"].nvlink == 4']
    if roll < 0.52:
        return [f'"{GPU}" in device.attributes && device.attributes["{GPU}"].index % 2 == 0']
    return []


# Kinds of scenario beyond the plain one, each a change to a drafted scenario.


@dataclass
class _Draft:
    """A scenario being built: the lists are changed in place."""

    cluster: _Cluster
    existing: list[JSON]
    unit: list[JSON]
    traits: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return sorted(self.cluster.racks)

    def unit_devices(self) -> JSON | None:
        """The `devices` of the unit's own claim or template (None: it shares a claim in
        use)."""
        for obj in self.unit:
            if obj["kind"] == "ResourceClaim":
                found: JSON = obj["spec"]["devices"]
                return found
            if obj["kind"] == "ResourceClaimTemplate":
                found = obj["spec"]["spec"]["devices"]
                return found
        return None


def _admin_access(rng: random.Random, draft: _Draft) -> str | None:
    """A request with admin access to GPUs, which may take devices in use."""
    devices = draft.unit_devices()
    if devices is None:
        return None
    if rng.random() < 0.3:
        request = exactly("watch", GPU_CLASS, mode="All", admin=True)
    else:
        request = exactly("watch", GPU_CLASS, count=rng.randint(1, 2), admin=True)
    devices["requests"].append(request)
    # The API server refuses a claim asking admin access in a namespace without it.
    draft.labels[ADMIN_ACCESS_LABEL] = "true"
    return "admin access"


def _consumable_capacity(rng: random.Random, draft: _Draft) -> str | None:
    """GPUs shared by several claims (allowMultipleAllocations), each claim consuming
    part of their memory, rounded by a requestPolicy; some already partly consumed."""
    devices = draft.unit_devices()
    if devices is None:
        return None
    draft.cluster.objects.append(
        device_class(
            SHARED_CLASS,
            f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "shared"',
        )
    )
    for i, name in enumerate(draft.nodes):
        if rng.random() < 0.4:
            continue
        pool = f"{name}-shared"
        shared = [
            device(
                f"shared-{d}",
                attributes={"type": {"string": "shared"}, "index": {"int": d}},
                capacity={"memory": SHARED_MEMORY},
                multiple=True,
                policies={"memory": MEMORY_POLICY},
            )
            for d in range(rng.randint(1, 2))
        ]
        draft.cluster.objects.append(
            resource_slice(pool, driver=GPU, pool=pool, devices=shared, node_name=name)
        )
        if rng.random() < 0.5:
            used = rng.choice(("10Gi", "20Gi", "30Gi"))
            result = {
                "request": "share",
                "driver": GPU,
                "pool": pool,
                "device": "shared-0",
                "shareID": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "consumedCapacity": {"memory": used},
            }
            request = exactly("share", SHARED_CLASS, capacity={"memory": used})
            draft.existing.extend(_in_use(f"sharing-{i}", f"sharer-{i}", name, request, [result]))
    amount = rng.choice(("5Gi", "10Gi", "15Gi", "30Gi", "40Gi", ""))
    count = rng.randint(1, 2)
    devices["requests"] = [
        exactly(
            "share",
            SHARED_CLASS,
            count=count,
            capacity={"memory": amount} if amount else None,
        )
    ]
    devices.pop("constraints", None)
    return f"instead, consumable capacity: {count} x {amount or 'the default'}"


def _binding_conditions(rng: random.Random, draft: _Draft) -> str | None:
    """One node's whole GPUs (some or all) wait for their driver's conditions before
    a pod may use them."""
    name = rng.choice(draft.nodes)
    gpu_slice = next(o for o in draft.cluster.objects if o["metadata"]["name"] == f"{name}-gpu")
    for d in gpu_slice["spec"]["devices"]:
        if d["attributes"]["type"] == {"string": "gpu"} and rng.random() < 0.7:
            d["bindingConditions"] = [BINDING_CONDITION]
            d["bindingFailureConditions"] = [BINDING_FAILURE]
    return f"binding conditions on {name}"


def _per_device_nodes(rng: random.Random, draft: _Draft) -> str | None:
    """A NIC pool whose devices each say which nodes they reach (perDeviceNodeSelection):
    a node, a rack, or all; and a request for one of its kind."""
    devices = draft.unit_devices()
    if devices is None:
        return None
    links = []
    for i in range(rng.randint(2, 4)):
        link = device(
            f"link-{i}",
            attributes={
                "type": {"string": "nic"},
                "rdma": {"bool": True},
                PCIE_ROOT: {"string": f"pci{i % 2}"},
            },
        )
        roll = rng.random()
        if roll < 0.5:
            link["nodeName"] = rng.choice(draft.nodes)
        elif roll < 0.8:
            rack = rng.choice(("r0", "r1"))
            terms = [{"matchExpressions": [{"key": RACK, "operator": "In", "values": [rack]}]}]
            link["nodeSelector"] = {"nodeSelectorTerms": terms}
        else:
            link["allNodes"] = True
        links.append(link)
    fabric = resource_slice("fabric", driver=NIC, pool="fabric", devices=links)
    del fabric["spec"]["allNodes"]
    fabric["spec"]["perDeviceNodeSelection"] = True
    draft.cluster.objects.append(fabric)
    count = rng.randint(1, 2)
    alone = rng.random() < 0.5
    if alone:
        # Links alone, so that which nodes they reach decides.
        devices["requests"] = []
        devices.pop("constraints", None)
    devices["requests"].append(exactly("link", NIC_CLASS, count=count))
    return f"{'instead, ' if alone else ''}{count} link(s) of per-device node selection"


def _taint_rule(rng: random.Random, draft: _Draft) -> str | None:
    """A DeviceTaintRule tainting one node's GPU pool, or one device of it."""
    name = rng.choice(draft.nodes)
    selector = {"driver": GPU, "pool": name}
    if rng.random() < 0.5:
        selector["device"] = "gpu-0"
    effect = rng.choice(("NoSchedule", "NoSchedule", "NoExecute", "None"))
    draft.cluster.objects.append(
        {
            "apiVersion": TAINT_RULE_API,
            "kind": "DeviceTaintRule",
            "metadata": {"name": "taint"},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": TAINT_KEY, "value": "rule", "effect": effect},
            },
        }
    )
    return f"DeviceTaintRule {effect} on {'/'.join(selector.values())}"


def _claim_deleted(rng: random.Random, draft: _Draft) -> str | None:
    """A claim being deleted (a finalizer holds it): the unit's own claim, which its
    pods may not use, or one in use, whose devices stay taken."""
    candidates = [o for o in draft.unit if o["kind"] == "ResourceClaim"]
    if not candidates or rng.random() < 0.4:
        candidates.extend(o for o in draft.existing if o["kind"] == "ResourceClaim")
    if not candidates:
        return None
    claim = rng.choice(candidates)
    claim["metadata"]["finalizers"] = [HOLD_FINALIZER]
    draft.deleted.append(claim["metadata"]["name"])
    return f"claim {claim['metadata']['name']} being deleted"


Kind = Callable[[random.Random, _Draft], str | None]
# Each kind by name, and its weight; the plain scenario (None) changes nothing. A kind
# that does not apply to the unit drawn (e.g. one sharing a claim in use) leaves it plain.
KINDS: dict[str, tuple[Kind | None, float]] = {
    PLAIN: (None, 0.5),
    "admin access": (_admin_access, 0.08),
    "consumable capacity": (_consumable_capacity, 0.09),
    "binding conditions": (_binding_conditions, 0.07),
    "per-device node selection": (_per_device_nodes, 0.09),
    "DeviceTaintRule": (_taint_rule, 0.09),
    "claim being deleted": (_claim_deleted, 0.08),
}


def _add_kind(rng: random.Random, draft: _Draft) -> str:
    """Apply a kind drawn by weight to `draft`; its name, PLAIN if it did not apply."""
    (name,) = rng.choices(list(KINDS), weights=[w for _, w in KINDS.values()])
    change = KINDS[name][0]
    said = change(rng, draft) if change is not None else None
    if said is None:
        return PLAIN
    draft.traits.append(said)
    return name


def _pod(
    name: str, *, claims: Mapping[str, JSON], node_name: str | None = None, group: str | None = None
) -> JSON:
    """A pod asking for 100m CPU and the devices of its claims (`claims`: pod claim
    name -> resourceClaimName or resourceClaimTemplateName), naming the side's own
    scheduler."""
    entries = [{"name": n, **source} for n, source in claims.items()]
    spec: JSON = {"resourceClaims": entries}
    requests = {"cpu": "100m"}
    if group is None:
        found = pod(name, requests, node_name=node_name, scheduler=OWN, spec=spec)
    else:
        found = member(name, group, requests, scheduler=OWN, spec=spec, node_name=node_name)
    found["spec"]["containers"][0]["resources"]["claims"] = [{"name": n} for n in claims]
    return found


def case_yaml(scenario: Scenario, *, seed: int, finding: str, kube: Answer, ours: Answer) -> str:
    """The scenario, as batchsched's side creates it, for `batchsched simulate -f`; the
    header says what each side answered."""
    header = [
        f"# Scenario {scenario.index} of bench/dra_parity.py --seed {seed}.",
        f"# The unit: {', '.join(scenario.traits)}.",
        f"# {finding}",
        f"#   kube-scheduler: {_devices(kube) or _placed(kube)}",
        f"#   batchsched:     {_devices(ours) or _placed(ours)}",
    ]
    body = yaml.safe_dump_all(scenario.case_objects(OURS), sort_keys=False)
    return "\n".join(header) + "\n" + body
