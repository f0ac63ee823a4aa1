"""Dynamic Resource Allocation (resource.k8s.io/v1): ResourceSlices, DeviceClasses,
ResourceClaims and their templates, read as kube-scheduler's DynamicResources plugin
reads them (v1.36), and what a pod's spec.resourceClaims name.

Consumable capacity (DRAConsumableCapacity, beta and on in 1.36) is read whole: a
device's `allowMultipleAllocations` and each capacity's `requestPolicy`, a request's
`capacity.requests`, and the `shareID` and `consumedCapacity` of allocated results.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Literal

from batchsched.api.celfuncs import Version
from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    creation_of,
    describe,
    flag,
    mapping,
    name_of,
    namespace_of,
    sequence,
    text,
    whole_number,
)
from batchsched.api.objects import (
    BLOCKING_EFFECTS,
    ContainerExtended,
    PodResourceClaim,
    Taint,
    Task,
    Toleration,
)
from batchsched.api.quantity import parse_quantity
from batchsched.api.reads import reads
from batchsched.api.selectors import Requirement, node_selector_term

# Set by the resource-claim controller on a claim it makes from a template: which of the
# pod's spec.resourceClaims it stands for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# A namespace must carry this label for its claims to ask for admin access.
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
# resourceapi.AllocationResultsMaxSize: at most this many devices in one claim's result.
MAX_RESULTS = 32
# resourceapi.ResourceClaimReservedForMaxSize: at most this many consumers of a claim.
MAX_CONSUMERS = 256
# Every DeviceClass backs the extended resource of this prefix and its name (DRA's
# extended resources, KEP-5004, on by default in 1.36), besides its extendedResourceName.
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
# Marks the claim kube-scheduler makes for a pod's extended resources backed by devices.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
EXACT_COUNT = "ExactCount"
ALL = "All"
AllocationMode = Literal["ExactCount", "All"]

SLICE_READS = reads(
    "ResourceSlice",
    "spec.driver",
    "spec.pool",
    "spec.nodeName",
    "spec.nodeSelector",
    "spec.allNodes",
    "spec.perDeviceNodeSelection",
    "spec.sharedCounters",
    *(
        f"spec.devices[].{part}"
        for part in (
            "name",
            "attributes",
            "capacity",
            "consumesCounters",
            "taints",
            "nodeName",
            "nodeSelector",
            "allNodes",
            "bindingConditions",
            "allowMultipleAllocations",
        )
    ),
)
CLASS_READS = reads(
    "DeviceClass",
    "metadata.creationTimestamp",
    "spec.selectors",
    "spec.extendedResourceName",
    "spec.config",
)
CLAIM_SPEC_FIELDS = ("devices.requests", "devices.constraints")
RESOURCE_CLAIM_READS = reads(
    "ResourceClaim",
    "metadata.deletionTimestamp",
    ("metadata", "annotations", EXTENDED_RESOURCE_CLAIM_ANNOTATION),
    "metadata.ownerReferences[].controller",
    "metadata.ownerReferences[].kind",
    "metadata.ownerReferences[].name",
    "metadata.ownerReferences[].uid",
    *(f"spec.{part}" for part in CLAIM_SPEC_FIELDS),
    "status.allocation.devices.results",
    "status.allocation.nodeSelector",
    "status.reservedFor[].uid",
)
TEMPLATE_READS = reads("ResourceClaimTemplate", *(f"spec.spec.{p}" for p in CLAIM_SPEC_FIELDS))
TAINT_RULE_READS = reads("DeviceTaintRule", "apiVersion", "spec.deviceSelector", "spec.taint")
# The one version serving DeviceTaintRules in Kubernetes 1.36 (with the
# DRADeviceTaintRules gate and this version switched on, both off by default).
TAINT_RULE_API = "resource.k8s.io/v1beta2"

NodeTerms = tuple[tuple[Requirement, ...], ...]
AttributeKind = Literal["int", "bool", "string", "version"]


class SelectorError(Exception):
    """A CEL selector that does not compile, or fails when evaluated on a device."""


@dataclass(frozen=True, slots=True)
class Attribute:
    """A device attribute: its type matters as much as its value (matchAttribute)."""

    kind: AttributeKind
    value: int | bool | str


@dataclass(frozen=True, slots=True)
class NodeScope:
    """Which nodes a slice's (or, with perDeviceNodeSelection, a device's) devices are
    reachable from: one node by name, those a selector term picks, or all."""

    node_name: str = ""
    terms: NodeTerms | None = None
    all_nodes: bool = False


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """How a request consumes one capacity of a device allowing multiple allocations
    (capacity.requestPolicy): `default` for a request not naming it, then either the
    request rounded up to one of `valid_values`, or to `minimum + n * step` within
    `maximum` (validRange)."""

    default: Decimal | None = None
    valid_values: tuple[Decimal, ...] = ()
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    step: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    # Keys as the driver wrote them: unqualified names belong to the driver's domain.
    attributes: Mapping[str, Attribute]
    capacity: Mapping[str, Decimal]
    taints: tuple[Taint, ...] = ()
    # (counter set, ((counter, amount), ...)) it takes from its pool's shared counters.
    consumes: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...] = ()
    # Set only under perDeviceNodeSelection.
    scope: NodeScope | None = None
    # The driver must confirm conditions before a pod may use it (bindingConditions).
    binding_conditions: bool = False
    # allowMultipleAllocations: several claims may share it, each consuming capacity.
    multiple: bool = False
    # Per capacity name, its requestPolicy (only those that state one).
    policies: Mapping[str, RequestPolicy] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"

    def attribute(self, qualified: str) -> Attribute | None:
        """The attribute by its fully qualified name, found unqualified too where the
        domain is the device's driver."""
        found = self.attributes.get(qualified)
        if found is not None:
            return found
        domain, _, name = qualified.rpartition("/")
        return self.attributes.get(name) if domain == self.driver else None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    # None under perDeviceNodeSelection, and for slices of shared counters alone.
    scope: NodeScope | None
    devices: tuple[Device, ...]
    # Counter set -> counter -> amount.
    counters: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """Its selectors, the extended resource it backs besides its implicit one, and its
    config, which allocation copies into a claim's status for the drivers (never read
    here)."""

    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None = None
    # metadata.creationTimestamp: the newest class stating an extendedResourceName wins it.
    created: float = 0.0
    # spec.config entries as written (each an opaque driver configuration).
    config: tuple[Obj, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One `exactly` request, or one subrequest of `firstAvailable` (named `req/sub`)."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    # capacity.requests: (capacity name, amount) pairs, names as the request gives them.
    capacity: tuple[tuple[str, Decimal], ...] = ()

    def blocked_by(self, device: Device) -> bool:
        """Whether an untolerated NoSchedule/NoExecute taint keeps the device from it;
        other effects (None, and any a later API adds) are informational, as upstream
        treats them."""
        return any(
            taint.effect in BLOCKING_EFFECTS
            and not any(t.tolerates(taint) for t in self.tolerations)
            for taint in device.taints
        )


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A claim's request: `exactly` one kind of device, or the first of `alternatives`
    (firstAvailable) that can be had, tried in order."""

    name: str
    alternatives: tuple[DeviceRequest, ...]
    first_available: bool = False


@dataclass(frozen=True, slots=True)
class Constraint:
    # Request names it applies to ("req" or "req/sub"); empty: all.
    requests: tuple[str, ...]
    attribute: str
    distinct: bool = False

    def applies(self, request: str) -> bool:
        parent = request.partition("/")[0]
        return not self.requests or request in self.requests or parent in self.requests


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    # Set where the device allows multiple allocations: this share's identity and the
    # capacity it consumes.
    share_id: str = ""
    consumed: tuple[tuple[str, Decimal], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    # Where the devices can be used; None: everywhere.
    terms: NodeTerms | None = None


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()
    deleting: bool = False
    # The uid of its controller (the pod a template's claim was made for).
    controller: str = ""
    # The name of the pod it was made for as the claim for that pod's extended
    # resources backed by devices (annotated so, the pod its controller); else "".
    extended_for: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """A DeviceTaintRule: its taint added to every device its selector picks by
    driver, pool and device name (each left out matches any), as kube-scheduler's
    ResourceSlice tracker adds it."""

    name: str
    taint: Taint
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def applies(self, found: Device) -> bool:
        return (
            (self.driver is None or self.driver == found.driver)
            and (self.pool is None or self.pool == found.pool)
            and (self.device is None or self.device == found.name)
        )


@dataclass(slots=True)
class Devices:
    """Everything the allocation of a session reads: kept apart from the pods so that a
    session opens it only when some pending pod has claims."""

    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ClaimSpec] = field(default_factory=dict)
    taint_rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    # "Kind key" -> why the object could not be read.
    rejected: dict[str, str] = field(default_factory=dict)


def slice_from_object(obj: Obj) -> ResourceSlice:
    name = name_of(obj, kind="ResourceSlice")
    where = describe(obj, kind="ResourceSlice")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    driver = _required(spec.get("driver"), where=f"{where}.spec.driver")
    pool = mapping(spec.get("pool"), where=f"{where}.spec.pool")
    pool_name = _required(pool.get("name"), where=f"{where}.spec.pool.name")
    generation = whole_number(
        pool.get("generation", 0), where=f"{where}.spec.pool.generation", minimum=0
    )
    count = whole_number(
        pool.get("resourceSliceCount", 1), where=f"{where}.spec.pool.resourceSliceCount", minimum=1
    )
    per_device = bool(spec.get("perDeviceNodeSelection"))
    counters = _counter_sets(spec.get("sharedCounters"), where=f"{where}.spec.sharedCounters")
    scope = None if per_device or counters else _scope(spec, where=f"{where}.spec")
    # Devices named twice make the pool invalid (framework/devices.py), not the slice
    # unreadable: the pool's other slices still count toward its completeness.
    devices = [
        _device(raw, driver, pool_name, per_device=per_device, where=f"{where}.spec.devices[{i}]")
        for i, raw in enumerate(sequence(spec.get("devices"), where=f"{where}.spec.devices"))
    ]
    return ResourceSlice(
        name, driver, pool_name, generation, count, scope, tuple(devices), counters
    )


def _device(raw: object, driver: str, pool: str, *, per_device: bool, where: str) -> Device:
    entry = mapping(raw, where=where)
    name = _required(entry.get("name"), where=f"{where}.name")
    attributes = {
        str(key): _attribute(value, where=f"{where}.attributes[{key}]")
        for key, value in mapping(entry.get("attributes"), where=f"{where}.attributes").items()
    }
    capacity = {}
    policies = {}
    for key, value in mapping(entry.get("capacity"), where=f"{where}.capacity").items():
        at = f"{where}.capacity[{key}]"
        raw_capacity = mapping(value, where=at)
        capacity[str(key)] = parse_quantity(raw_capacity.get("value"), where=f"{at}.value")
        if raw_capacity.get("requestPolicy") is not None:
            policies[str(key)] = _request_policy(
                raw_capacity["requestPolicy"], where=f"{at}.requestPolicy"
            )
    multiple = entry.get("allowMultipleAllocations")
    taints = []
    for i, item in enumerate(sequence(entry.get("taints"), where=f"{where}.taints")):
        taint = mapping(item, where=f"{where}.taints[{i}]")
        taints.append(
            Taint(
                key=_required(taint.get("key"), where=f"{where}.taints[{i}].key"),
                value=text(taint.get("value"), where=f"{where}.taints[{i}].value", default=""),
                effect=_required(taint.get("effect"), where=f"{where}.taints[{i}].effect"),
            )
        )
    consumes = []
    for i, item in enumerate(
        sequence(entry.get("consumesCounters"), where=f"{where}.consumesCounters")
    ):
        here = f"{where}.consumesCounters[{i}]"
        use = mapping(item, where=here)
        counters = _counters(use.get("counters"), where=f"{here}.counters")
        consumes.append((_required(use.get("counterSet"), where=f"{here}.counterSet"), counters))
    conditions = sequence(entry.get("bindingConditions"), where=f"{where}.bindingConditions")
    return Device(
        driver=driver,
        pool=pool,
        name=name,
        attributes=attributes,
        capacity=capacity,
        taints=tuple(taints),
        consumes=tuple((s, tuple(sorted(c.items()))) for s, c in consumes),
        scope=_scope(entry, where=where) if per_device else None,
        binding_conditions=bool(conditions),
        multiple=False
        if multiple is None
        else flag(multiple, where=f"{where}.allowMultipleAllocations"),
        policies=policies,
    )


def _request_policy(raw: object, *, where: str) -> RequestPolicy:
    """A capacity's requestPolicy: at most one of validValues and validRange, as the
    API server validates it."""
    entry = mapping(raw, where=where)
    values, bounds = entry.get("validValues"), entry.get("validRange")
    if values is not None and bounds is not None:
        raise InvalidObject(f"{where}: at most one of validValues, validRange may be set")
    default = entry.get("default")
    policy = RequestPolicy(
        default=None if default is None else parse_quantity(default, where=f"{where}.default"),
        valid_values=tuple(
            parse_quantity(v, where=f"{where}.validValues[{i}]")
            for i, v in enumerate(sequence(values, where=f"{where}.validValues"))
        ),
    )
    if bounds is None:
        return policy
    limits = mapping(bounds, where=f"{where}.validRange")
    found = {
        part: None
        if limits.get(part) is None
        else parse_quantity(limits.get(part), where=f"{where}.validRange.{part}")
        for part in ("min", "max", "step")
    }
    if found["min"] is None:
        raise InvalidObject(f"{where}.validRange.min: required")
    if found["step"] is not None and found["step"] <= 0:
        raise InvalidObject(f"{where}.validRange.step: must be positive, got {found['step']}")
    return replace(policy, minimum=found["min"], maximum=found["max"], step=found["step"])


def _attribute(raw: object, *, where: str) -> Attribute:
    value = mapping(raw, where=where)
    if len(value) != 1:
        raise InvalidObject(f"{where}: exactly one of int, bool, string, version must be set")
    kind, given = next(iter(value.items()))
    if kind == "int" and isinstance(given, int) and not isinstance(given, bool):
        return Attribute("int", given)
    if kind == "bool" and isinstance(given, bool):
        return Attribute("bool", given)
    if kind == "string" and isinstance(given, str):
        return Attribute("string", given)
    if kind == "version" and isinstance(given, str):
        if isinstance(Version.parse(given), str):
            raise InvalidObject(f"{where}.version: {given!r} is not a semantic version")
        return Attribute("version", given)
    raise InvalidObject(f"{where}.{kind}: {given!r} is not a valid {kind} attribute")


def _counter_sets(raw: object, *, where: str) -> dict[str, dict[str, Decimal]]:
    sets: dict[str, dict[str, Decimal]] = {}
    for i, item in enumerate(sequence(raw, where=where)):
        entry = mapping(item, where=f"{where}[{i}]")
        name = _required(entry.get("name"), where=f"{where}[{i}].name")
        sets[name] = _counters(entry.get("counters"), where=f"{where}[{i}].counters")
    return sets


def _counters(raw: object, *, where: str) -> dict[str, Decimal]:
    return {
        str(key): parse_quantity(
            mapping(value, where=f"{where}[{key}]").get("value"), where=f"{where}[{key}].value"
        )
        for key, value in mapping(raw, where=where).items()
    }


def _scope(raw: Obj, *, where: str) -> NodeScope:
    """Exactly one of nodeName, nodeSelector (one term), allNodes."""
    node_name = text(raw.get("nodeName"), where=f"{where}.nodeName", default="")
    all_nodes = bool(raw.get("allNodes"))
    selector = raw.get("nodeSelector")
    terms: NodeTerms | None = None
    if selector is not None:
        raw_terms = sequence(
            mapping(selector, where=f"{where}.nodeSelector").get("nodeSelectorTerms"),
            where=f"{where}.nodeSelector.nodeSelectorTerms",
        )
        if len(raw_terms) != 1:
            raise InvalidObject(f"{where}.nodeSelector: must have exactly one term")
        terms = (
            node_selector_term(raw_terms[0], where=f"{where}.nodeSelector.nodeSelectorTerms[0]"),
        )
    if sum((bool(node_name), all_nodes, terms is not None)) != 1:
        raise InvalidObject(f"{where}: exactly one of nodeName, nodeSelector, allNodes must be set")
    return NodeScope(node_name=node_name, terms=terms, all_nodes=all_nodes)


def taint_rule_from_object(obj: Obj) -> DeviceTaintRule:
    name = name_of(obj, kind="DeviceTaintRule")
    where = describe(obj, kind="DeviceTaintRule")
    version = obj.get("apiVersion")
    if version is not None and version != TAINT_RULE_API:
        raise InvalidObject(
            f"{where}: apiVersion {version!r} is not served by Kubernetes 1.36 for "
            f"DeviceTaintRules; use {TAINT_RULE_API}"
        )
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    selector = mapping(spec.get("deviceSelector"), where=f"{where}.spec.deviceSelector")
    for gone in ("deviceClassName", "selectors"):
        if gone in selector:
            raise InvalidObject(
                f"{where}.spec.deviceSelector.{gone}: removed from the API in Kubernetes 1.35 "
                "(only driver, pool and device select devices)"
            )
    at = f"{where}.spec.deviceSelector"
    picks = [
        None if selector.get(part) is None else _required(selector.get(part), where=f"{at}.{part}")
        for part in ("driver", "pool", "device")
    ]
    taint = mapping(spec.get("taint"), where=f"{where}.spec.taint")
    return DeviceTaintRule(
        name=name,
        taint=Taint(
            key=_required(taint.get("key"), where=f"{where}.spec.taint.key"),
            value=text(taint.get("value"), where=f"{where}.spec.taint.value", default=""),
            effect=_required(taint.get("effect"), where=f"{where}.spec.taint.effect"),
        ),
        driver=picks[0],
        pool=picks[1],
        device=picks[2],
    )


def with_taint_rules(found: ResourceSlice, rules: Iterable[DeviceTaintRule]) -> ResourceSlice:
    """The slice with the rules' taints added to the devices they pick (the slice
    itself when none applies)."""
    rules = tuple(rules)
    devices = []
    for device in found.devices:
        added = tuple(rule.taint for rule in rules if rule.applies(device))
        devices.append(replace(device, taints=device.taints + added) if added else device)
    if all(a is b for a, b in zip(devices, found.devices, strict=True)):
        return found
    return replace(found, devices=tuple(devices))


def class_from_object(obj: Obj) -> DeviceClass:
    name = name_of(obj, kind="DeviceClass")
    where = describe(obj, kind="DeviceClass")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    extended = spec.get("extendedResourceName")
    config = tuple(
        mapping(entry, where=f"{where}.spec.config[{i}]")
        for i, entry in enumerate(sequence(spec.get("config"), where=f"{where}.spec.config"))
    )
    return DeviceClass(
        name=name,
        selectors=_selectors(spec.get("selectors"), where=f"{where}.spec.selectors"),
        extended_resource=None
        if extended is None
        else _required(extended, where=f"{where}.spec.extendedResourceName"),
        created=creation_of(obj, default=0.0, kind="DeviceClass"),
        config=config,
    )


def extended_resource_classes(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass backing it, as kube-scheduler's
    extended resource cache resolves it: every class its implicit name; a stated
    extendedResourceName goes to the newest class stating it (ties: the first name)."""
    found: dict[str, DeviceClass] = {}
    backing: dict[str, str] = {}
    for device_class in classes:
        backing[f"{DEVICE_CLASS_RESOURCE_PREFIX}{device_class.name}"] = device_class.name
        name = device_class.extended_resource
        if name is None:
            continue
        kept = found.get(name)
        if kept is None or (-device_class.created, device_class.name) < (-kept.created, kept.name):
            found[name] = device_class
    backing.update((name, c.name) for name, c in found.items())
    return backing


def container_extended(spec: Obj, *, where: str) -> tuple[ContainerExtended, ...]:
    """The pod's containers with integer requests of extended resources (requests, or
    limits where a request is not stated, as the API server defaults them)."""
    found = []
    index = 0
    for section in ("initContainers", "containers"):
        for position, raw in enumerate(sequence(spec.get(section), where=f"{where}.spec")):
            at = f"{where}.spec.{section}[{position}]"
            container = mapping(raw, where=at)
            resources = mapping(container.get("resources"), where=f"{at}.resources")
            wanted = {
                **mapping(resources.get("limits"), where=f"{at}.resources.limits"),
                **mapping(resources.get("requests"), where=f"{at}.resources.requests"),
            }
            counts = []
            for name, value in sorted(wanted.items()):
                if not is_extended_resource(str(name)):
                    continue
                amount = parse_quantity(value, where=f"{at}.resources.requests[{name}]")
                if amount > 0 and amount == amount.to_integral_value():
                    counts.append((str(name), int(amount)))
            if counts:
                found.append(
                    ContainerExtended(
                        index=index,
                        name=str(container.get("name") or ""),
                        short_lived=section == "initContainers"
                        and container.get("restartPolicy") != "Always",
                        names=tuple(sorted(str(n) for n in wanted)),
                        counts=tuple(counts),
                    )
                )
            index += 1
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ExtendedMapping:
    """pod.status.extendedResourceClaimStatus.requestMappings[]: which request of the
    pod's claim serves a container's extended resource."""

    container: str
    resource: str
    request: str


def extended_claim(
    containers: Sequence[ContainerExtended], needed: Mapping[str, str]
) -> tuple[ClaimSpec, tuple[ExtendedMapping, ...]]:
    """The requests of the claim kube-scheduler makes for a pod's extended resources
    that a node gives through devices (`needed`: resource -> DeviceClass), and which
    request serves each container. A container that runs alone before the others (an
    init container, not a sidecar) reuses the requests of the containers after it
    first; of such containers' own requests only the largest is kept, and they all map
    to it."""
    requests: list[ClaimRequest] = []
    mappings: list[ExtendedMapping] = []
    for resource in sorted(needed):
        class_name = needed[resource]
        own: dict[int, DeviceRequest] = {}
        longer: list[ExtendedMapping] = []
        for container in containers:
            count = dict(container.counts).get(resource)
            if count is None or container.short_lived:
                continue
            made = _extended_request(container, resource, class_name, count)
            own[container.index] = made
            longer.append(ExtendedMapping(container.name, resource, made.name))
        largest: DeviceRequest | None = None
        shorter: list[ExtendedMapping] = []
        names: set[str] = set()
        for container in containers:
            count = dict(container.counts).get(resource)
            if count is None or not container.short_lived:
                continue
            reused = 0
            for index in sorted(i for i in own if i >= container.index):
                reused += own[index].count
                shorter.append(ExtendedMapping(container.name, resource, own[index].name))
                if reused >= count:
                    break
            if reused >= count:
                continue
            made = _extended_request(container, resource, class_name, count - reused)
            shorter.append(ExtendedMapping(container.name, resource, made.name))
            names.add(made.name)
            if largest is None or largest.count < made.count:
                largest = made
        if largest is not None:
            shorter = [
                replace(m, request=largest.name) if m.request in names else m for m in shorter
            ]
            requests.append(ClaimRequest(largest.name, (largest,)))
        requests += [ClaimRequest(r.name, (r,)) for _, r in sorted(own.items())]
        mappings += longer + shorter
    return ClaimSpec(tuple(sorted(requests, key=lambda r: r.name))), tuple(mappings)


def _extended_request(
    container: ContainerExtended, resource: str, class_name: str, count: int
) -> DeviceRequest:
    position = container.names.index(resource)
    return DeviceRequest(f"container-{container.index}-request-{position}", class_name, count=count)


def extended_claim_of(status: Obj, *, where: str) -> str:
    """The claim kube-scheduler made for the pod's extended resources, if any."""
    at = f"{where}.status.extendedResourceClaimStatus"
    made = mapping(status.get("extendedResourceClaimStatus"), where=at)
    return text(made.get("resourceClaimName"), where=f"{at}.resourceClaimName", default="")


def is_extended_resource(name: str) -> bool:
    """Kubernetes' extended resource names (a domain outside kubernetes.io), and the
    implicit names of DeviceClasses."""
    if name.startswith(DEVICE_CLASS_RESOURCE_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def resource_claim_from_object(obj: Obj) -> ResourceClaim:
    namespace, name = namespace_of(obj, kind="ResourceClaim"), name_of(obj, kind="ResourceClaim")
    where = describe(obj, kind="ResourceClaim")
    meta = mapping(obj.get("metadata"), where=f"{where}.metadata")
    status = mapping(obj.get("status"), where=f"{where}.status")
    raw_allocation = status.get("allocation")
    reserved = sequence(status.get("reservedFor"), where=f"{where}.status.reservedFor")
    controller, controller_pod = "", ""
    for i, owner in enumerate(sequence(meta.get("ownerReferences"), where=f"{where}.metadata")):
        entry = mapping(owner, where=f"{where}.metadata.ownerReferences[{i}]")
        if entry.get("controller"):
            controller = str(entry.get("uid") or "")
            controller_pod = str(entry.get("name") or "") if entry.get("kind") == "Pod" else ""
    notes = mapping(meta.get("annotations"), where=f"{where}.metadata.annotations")
    # kube-scheduler's findExtendedResourceClaim: the annotation's one valid value.
    extended = notes.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
    return ResourceClaim(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        spec=claim_spec(obj.get("spec"), where=f"{where}.spec"),
        allocation=None
        if raw_allocation is None
        else _allocation(raw_allocation, where=f"{where}.status.allocation"),
        reserved_for=tuple(
            str(mapping(r, where=f"{where}.status.reservedFor").get("uid") or "") for r in reserved
        ),
        deleting=meta.get("deletionTimestamp") is not None,
        controller=controller,
        extended_for=controller_pod if extended else "",
    )


def template_from_object(obj: Obj) -> ClaimSpec:
    where = describe(obj, kind="ResourceClaimTemplate")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    return claim_spec(spec.get("spec"), where=f"{where}.spec.spec")


def claim_spec(raw: object, *, where: str) -> ClaimSpec:
    devices = mapping(mapping(raw, where=where).get("devices"), where=f"{where}.devices")
    requests = []
    names: set[str] = set()
    for i, item in enumerate(sequence(devices.get("requests"), where=f"{where}.devices.requests")):
        here = f"{where}.devices.requests[{i}]"
        entry = mapping(item, where=here)
        name = _required(entry.get("name"), where=f"{here}.name")
        if name in names:
            raise InvalidObject(f"{here}.name: duplicate request {name!r}")
        names.add(name)
        exactly, alternatives = entry.get("exactly"), entry.get("firstAvailable")
        if (exactly is None) == (alternatives is None):
            raise InvalidObject(f"{here}: exactly one of exactly, firstAvailable must be set")
        if exactly is not None:
            found: tuple[DeviceRequest, ...] = (
                _device_request(exactly, name, where=f"{here}.exactly"),
            )
        else:
            subs = sequence(alternatives, where=f"{here}.firstAvailable")
            if not subs:
                raise InvalidObject(f"{here}.firstAvailable: must not be empty")
            found_subs = []
            for j, sub in enumerate(subs):
                at = f"{here}.firstAvailable[{j}]"
                raw_sub = mapping(sub, where=at)
                sub_name = _required(raw_sub.get("name"), where=f"{at}.name")
                found_subs.append(_device_request(raw_sub, f"{name}/{sub_name}", where=at))
            found = tuple(found_subs)
        requests.append(ClaimRequest(name, found, first_available=alternatives is not None))
    constraints = []
    for i, item in enumerate(
        sequence(devices.get("constraints"), where=f"{where}.devices.constraints")
    ):
        here = f"{where}.devices.constraints[{i}]"
        entry = mapping(item, where=here)
        match, distinct = entry.get("matchAttribute"), entry.get("distinctAttribute")
        if (match is None) == (distinct is None):
            raise InvalidObject(
                f"{here}: exactly one of matchAttribute, distinctAttribute must be set"
            )
        attribute = _required(match if match is not None else distinct, where=here)
        if "/" not in attribute:
            raise InvalidObject(f"{here}: attribute {attribute!r} must be fully qualified")
        applies = tuple(str(r) for r in sequence(entry.get("requests"), where=f"{here}.requests"))
        constraints.append(Constraint(applies, attribute, distinct=distinct is not None))
    return ClaimSpec(tuple(requests), tuple(constraints))


def _device_request(raw: object, name: str, *, where: str) -> DeviceRequest:
    entry = mapping(raw, where=where)
    mode = text(entry.get("allocationMode"), where=f"{where}.allocationMode", default=EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL):
        raise InvalidObject(f"{where}.allocationMode: {mode!r} is not one of ExactCount, All")
    count = 1
    if mode == EXACT_COUNT:
        count = whole_number(entry.get("count", 1), where=f"{where}.count", minimum=1)
    elif entry.get("count") is not None:
        raise InvalidObject(f"{where}.count: only for allocationMode ExactCount")
    tolerations = []
    for i, item in enumerate(sequence(entry.get("tolerations"), where=f"{where}.tolerations")):
        at = f"{where}.tolerations[{i}]"
        raw_tol = mapping(item, where=at)
        operator = text(raw_tol.get("operator"), where=f"{at}.operator", default="Equal")
        if operator not in ("Equal", "Exists"):
            raise InvalidObject(f"{at}.operator: {operator!r} is not one of Equal, Exists")
        tolerations.append(
            Toleration(
                key=text(raw_tol.get("key"), where=f"{at}.key", default=""),
                operator=operator,
                value=text(raw_tol.get("value"), where=f"{at}.value", default=""),
                effect=text(raw_tol.get("effect"), where=f"{at}.effect", default=""),
            )
        )
    admin = entry.get("adminAccess")
    wanted = mapping(
        mapping(entry.get("capacity"), where=f"{where}.capacity").get("requests"),
        where=f"{where}.capacity.requests",
    )
    return DeviceRequest(
        name=name,
        class_name=_required(entry.get("deviceClassName"), where=f"{where}.deviceClassName"),
        selectors=_selectors(entry.get("selectors"), where=f"{where}.selectors"),
        mode="ExactCount" if mode == EXACT_COUNT else "All",
        count=count,
        admin_access=False if admin is None else flag(admin, where=f"{where}.adminAccess"),
        tolerations=tuple(tolerations),
        capacity=tuple(
            sorted(
                (str(k), parse_quantity(v, where=f"{where}.capacity.requests[{k}]"))
                for k, v in wanted.items()
            )
        ),
    )


def _selectors(raw: object, *, where: str) -> tuple[str, ...]:
    found = []
    for i, item in enumerate(sequence(raw, where=where)):
        cel = mapping(mapping(item, where=f"{where}[{i}]").get("cel"), where=f"{where}[{i}].cel")
        found.append(_required(cel.get("expression"), where=f"{where}[{i}].cel.expression"))
    return tuple(found)


def _allocation(raw: object, *, where: str) -> Allocation:
    entry = mapping(raw, where=where)
    devices = mapping(entry.get("devices"), where=f"{where}.devices")
    results = []
    for i, item in enumerate(sequence(devices.get("results"), where=f"{where}.devices.results")):
        at = f"{where}.devices.results[{i}]"
        result = mapping(item, where=at)
        results.append(
            AllocatedDevice(
                request=_required(result.get("request"), where=f"{at}.request"),
                driver=_required(result.get("driver"), where=f"{at}.driver"),
                pool=_required(result.get("pool"), where=f"{at}.pool"),
                device=_required(result.get("device"), where=f"{at}.device"),
                admin_access=bool(result.get("adminAccess")),
                share_id=text(result.get("shareID"), where=f"{at}.shareID", default=""),
                consumed=tuple(
                    sorted(
                        (str(k), parse_quantity(v, where=f"{at}.consumedCapacity[{k}]"))
                        for k, v in mapping(
                            result.get("consumedCapacity"), where=f"{at}.consumedCapacity"
                        ).items()
                    )
                ),
            )
        )
    selector = entry.get("nodeSelector")
    terms = None
    if selector is not None:
        raw_terms = sequence(
            mapping(selector, where=f"{where}.nodeSelector").get("nodeSelectorTerms"),
            where=f"{where}.nodeSelector.nodeSelectorTerms",
        )
        terms = tuple(
            node_selector_term(t, where=f"{where}.nodeSelector.nodeSelectorTerms[{i}]")
            for i, t in enumerate(raw_terms)
        )
    return Allocation(tuple(results), terms)


def pod_resource_claims(spec: Obj, status: Obj, *, where: str) -> tuple[PodResourceClaim, ...]:
    """A pod's spec.resourceClaims, each with the claim it resolves to."""
    generated = {}
    for i, item in enumerate(
        sequence(status.get("resourceClaimStatuses"), where=f"{where}.status.resourceClaimStatuses")
    ):
        entry = mapping(item, where=f"{where}.status.resourceClaimStatuses[{i}]")
        generated[str(entry.get("name") or "")] = entry.get("resourceClaimName")
    claims = []
    for i, item in enumerate(
        sequence(spec.get("resourceClaims"), where=f"{where}.spec.resourceClaims")
    ):
        here = f"{where}.spec.resourceClaims[{i}]"
        entry = mapping(item, where=here)
        name = _required(entry.get("name"), where=f"{here}.name")
        by_name, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if (by_name is None) == (template is None):
            raise InvalidObject(
                f"{here}: exactly one of resourceClaimName, resourceClaimTemplateName must be set"
            )
        if by_name is not None:
            claims.append(
                PodResourceClaim(name, _required(by_name, where=f"{here}.resourceClaimName"))
            )
            continue
        made = generated.get(name, "")
        claims.append(
            PodResourceClaim(
                name,
                None if name in generated and not made else str(made or ""),
                template=_required(template, where=f"{here}.resourceClaimTemplateName"),
            )
        )
    return tuple(claims)


def claim_keys(task: Task, *, extended: bool = True) -> list[str]:
    """The keys ("ns/name") of the ResourceClaims a pod uses (those created), with the
    one made for its extended resources unless `extended` is False."""
    keys = [f"{task.namespace}/{ref.claim}" for ref in task.resource_claims if ref.claim]
    if extended and task.extended_claim:
        keys.append(f"{task.namespace}/{task.extended_claim}")
    return keys


def _required(value: object, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidObject(f"{where}: must be a non-empty string, got {value!r}")
    return value
