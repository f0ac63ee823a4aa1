"""Dynamic Resource Allocation (resource.k8s.io/v1): ResourceSlices, DeviceClasses,
ResourceClaims and their templates, read as kube-scheduler's DynamicResources plugin
reads them (v1.36), and what a pod's spec.resourceClaims name.

What allocation cannot honour yet is refused out loud rather than ignored: a claim
asking for consumable capacity (a request's `capacity`) makes its pods wait with a
message naming the field (`claim_blocker`).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from batchsched.api.celfuncs import Version
from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    describe,
    flag,
    mapping,
    name_of,
    namespace_of,
    sequence,
    text,
    whole_number,
)
from batchsched.api.objects import BLOCKING_EFFECTS, PodResourceClaim, Taint, Task, Toleration
from batchsched.api.quantity import parse_quantity
from batchsched.api.reads import reads
from batchsched.api.selectors import Requirement, node_selector_term
from batchsched.api.unsupported import not_supported

# Set by the resource-claim controller on a claim it makes from a template: which of the
# pod's spec.resourceClaims it stands for.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# A namespace must carry this label for its claims to ask for admin access.
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
# resourceapi.AllocationResultsMaxSize: at most this many devices in one claim's result.
MAX_RESULTS = 32
# resourceapi.ResourceClaimReservedForMaxSize: at most this many consumers of a claim.
MAX_CONSUMERS = 256
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
        )
    ),
)
CLASS_READS = reads("DeviceClass", "spec.selectors", "spec.config")
CLAIM_SPEC_FIELDS = ("devices.requests", "devices.constraints")
RESOURCE_CLAIM_READS = reads(
    "ResourceClaim",
    "metadata.deletionTimestamp",
    "metadata.ownerReferences[].controller",
    "metadata.ownerReferences[].uid",
    *(f"spec.{part}" for part in CLAIM_SPEC_FIELDS),
    "status.allocation.devices.results",
    "status.allocation.nodeSelector",
    "status.reservedFor[].uid",
)
TEMPLATE_READS = reads("ResourceClaimTemplate", *(f"spec.spec.{p}" for p in CLAIM_SPEC_FIELDS))

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
    """Its selectors, and its config, which allocation copies into a claim's status for
    the drivers (never read here); its extendedResourceName (pods asking an extended
    resource through a class) is not honoured yet (README)."""

    name: str
    selectors: tuple[str, ...]
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
    # Why the claim cannot be allocated here, naming the field (unsupported.py style).
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class Devices:
    """Everything the allocation of a session reads: kept apart from the pods so that a
    session opens it only when some pending pod has claims."""

    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    templates: dict[str, ClaimSpec] = field(default_factory=dict)
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
    capacity = {
        str(key): parse_quantity(
            mapping(value, where=f"{where}.capacity[{key}]").get("value"),
            where=f"{where}.capacity[{key}].value",
        )
        for key, value in mapping(entry.get("capacity"), where=f"{where}.capacity").items()
    }
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
    )


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


def class_from_object(obj: Obj) -> DeviceClass:
    name = name_of(obj, kind="DeviceClass")
    where = describe(obj, kind="DeviceClass")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    config = tuple(
        mapping(entry, where=f"{where}.spec.config[{i}]")
        for i, entry in enumerate(sequence(spec.get("config"), where=f"{where}.spec.config"))
    )
    return DeviceClass(
        name=name,
        selectors=_selectors(spec.get("selectors"), where=f"{where}.spec.selectors"),
        config=config,
    )


def resource_claim_from_object(obj: Obj) -> ResourceClaim:
    namespace, name = namespace_of(obj, kind="ResourceClaim"), name_of(obj, kind="ResourceClaim")
    where = describe(obj, kind="ResourceClaim")
    meta = mapping(obj.get("metadata"), where=f"{where}.metadata")
    status = mapping(obj.get("status"), where=f"{where}.status")
    raw_allocation = status.get("allocation")
    reserved = sequence(status.get("reservedFor"), where=f"{where}.status.reservedFor")
    controller = ""
    for i, owner in enumerate(sequence(meta.get("ownerReferences"), where=f"{where}.metadata")):
        entry = mapping(owner, where=f"{where}.metadata.ownerReferences[{i}]")
        if entry.get("controller"):
            controller = str(entry.get("uid") or "")
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
    )


def template_from_object(obj: Obj) -> ClaimSpec:
    where = describe(obj, kind="ResourceClaimTemplate")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    return claim_spec(spec.get("spec"), where=f"{where}.spec.spec")


def claim_spec(raw: object, *, where: str) -> ClaimSpec:
    devices = mapping(mapping(raw, where=where).get("devices"), where=f"{where}.devices")
    requests = []
    blocked = None
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
            blocked = blocked or _capacity_blocker(exactly, where=f"{here}.exactly")
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
                blocked = blocked or _capacity_blocker(raw_sub, where=at)
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
    return ClaimSpec(tuple(requests), tuple(constraints), blocked)


def _capacity_blocker(raw: object, *, where: str) -> str | None:
    if mapping(raw, where=where).get("capacity"):
        return not_supported(f"{where}.capacity (consumable capacity)")
    return None


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
    return DeviceRequest(
        name=name,
        class_name=_required(entry.get("deviceClassName"), where=f"{where}.deviceClassName"),
        selectors=_selectors(entry.get("selectors"), where=f"{where}.selectors"),
        mode="ExactCount" if mode == EXACT_COUNT else "All",
        count=count,
        admin_access=False if admin is None else flag(admin, where=f"{where}.adminAccess"),
        tolerations=tuple(tolerations),
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


def claim_keys(task: Task) -> list[str]:
    """The keys ("ns/name") of the ResourceClaims a pod uses (those created)."""
    return [f"{task.namespace}/{ref.claim}" for ref in task.resource_claims if ref.claim]


def _required(value: object, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidObject(f"{where}: must be a non-empty string, got {value!r}")
    return value
