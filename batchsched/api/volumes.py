"""Claims, volumes, storage classes and CSI nodes: what decides where a pod's storage can be.

Read as kube-scheduler's VolumeBinding, VolumeZone, VolumeRestrictions and
NodeVolumeLimits plugins read them (v1.36), and defaulted as the API server defaults them.
"""

from dataclasses import dataclass, field

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    annotations_of,
    describe,
    flag,
    labels_of,
    mapping,
    name_of,
    namespace_of,
    sequence,
    text,
    timestamp,
    whole_number,
)
from batchsched.api.quantity import ceil_int, parse_quantity
from batchsched.api.reads import keys_under, reads
from batchsched.api.selectors import Requirement, Selector, node_selector_term, parse_selector

# Written by the scheduler on a claim to be provisioned for the node it chose.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
# Set by the PersistentVolume controller once it has finished binding a claim.
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"
# Written by the scheduler with what it asks of a claim (a node selected for it, or an
# administrator's volume given it): when it asked, so that how long the binding has
# waited, and its bind timeout, survive a change of leader.
BINDING_SINCE_ANNOTATION = "scheduling.batchsched.io/volume-binding-since"
# kube-scheduler's VolumeBindingArgs.bindTimeoutSeconds default: how long a placed pod's
# claims may take to be bound before the placement is given up and decided again.
BIND_TIMEOUT_SECONDS = 600.0
# Still read before spec.storageClassName, as the API's helpers do.
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
# A class with this provisioner has only the volumes an administrator made.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
# What the parsers below read of each storage kind (api/reads.py). A volume's labels
# whole: zone and region labels confine it.
STORAGE_FIELDS = ("storageClassName", "accessModes", "volumeMode", "volumeAttributesClassName")
CLAIM_READS = reads(
    "PersistentVolumeClaim",
    "metadata.deletionTimestamp",
    *keys_under(
        "metadata.annotations",
        (
            SELECTED_NODE_ANNOTATION,
            BIND_COMPLETED_ANNOTATION,
            BETA_CLASS_ANNOTATION,
            BINDING_SINCE_ANNOTATION,
        ),
    ),
    # The controller among them: an ephemeral claim belongs to the pod it was made for.
    "metadata.ownerReferences[].controller",
    "metadata.ownerReferences[].uid",
    *(f"spec.{field}" for field in (*STORAGE_FIELDS, "volumeName", "selector")),
    "spec.resources.requests.storage",
    "status.phase",
)
VOLUME_READS = reads(
    "PersistentVolume",
    "metadata.deletionTimestamp",
    "metadata.labels",
    *keys_under("metadata.annotations", (BETA_CLASS_ANNOTATION, BINDING_SINCE_ANNOTATION)),
    *(f"spec.{field}" for field in (*STORAGE_FIELDS, "nodeAffinity")),
    "spec.capacity.storage",
    "spec.claimRef.namespace",
    "spec.claimRef.name",
    "spec.claimRef.uid",
    "spec.csi.driver",
    "spec.csi.volumeHandle",
    "status.phase",
)
STORAGE_CLASS_READS = reads("StorageClass", "provisioner", "volumeBindingMode", "allowedTopologies")
CSI_NODE_READS = reads("CSINode", "spec.drivers[].name", "spec.drivers[].allocatable")
CSI_DRIVER_READS = reads("CSIDriver", "spec.storageCapacity")
STORAGE_CAPACITY_READS = reads(
    "CSIStorageCapacity", "storageClassName", "nodeTopology", "maximumVolumeSize", "capacity"
)
# Zone and region labels a volume may carry, and the node label each is compared with.
ZONE_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region": "topology.kubernetes.io/region",
}

# Node selector terms, any one of which must match (None: no constraint).
NodeTerms = tuple[tuple[Requirement, ...], ...]


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A claim a pod mounts: named in the pod, or made for it from an ephemeral template
    (then named `<pod>-<volume>` and owned by the pod)."""

    name: str
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str
    storage_class: str
    volume_name: str = ""
    bind_completed: bool = False
    lost: bool = False
    deleting: bool = False
    selected_node: str | None = None
    # When the scheduler asked for its volume (BINDING_SINCE_ANNOTATION), epoch seconds.
    binding_since: float | None = None
    access_modes: frozenset[str] = frozenset()
    request: int = 0
    block: bool = False
    attributes_class: str = ""
    selector: Selector | None = None
    # The uid of the object that controls it (for an ephemeral claim, its pod).
    controller: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Fully bound: a volume named and the controller done with it."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    def names(self, claim: Claim) -> bool:
        same = (self.namespace, self.name) == (claim.namespace, claim.name)
        return same and (not self.uid or self.uid == claim.uid)


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume."""

    name: str
    storage_class: str
    capacity: int
    claim: ClaimRef | None = None
    # When the scheduler gave it to `claim` (BINDING_SINCE_ANNOTATION), epoch seconds.
    binding_since: float | None = None
    available: bool = False
    deleting: bool = False
    access_modes: frozenset[str] = frozenset()
    block: bool = False
    attributes_class: str = ""
    node_affinity: NodeTerms | None = None
    labels: tuple[tuple[str, str], ...] = ()
    # The CSI driver and volume handle, for per-node attach limits.
    csi: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    wait_for_consumer: bool
    # Terms any one of which a node must match for a volume to be provisioned for it;
    # empty: any node.
    allowed_topologies: NodeTerms = ()


@dataclass(frozen=True, slots=True)
class CsiNode:
    """How many volumes of each CSI driver the node may have attached."""

    name: str
    limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class CsiDriver:
    """Whether volumes of the driver are provisioned only where its CSIStorageCapacity
    objects say there is room."""

    name: str
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """A CSIStorageCapacity: room for volumes of a class on the nodes its topology selects."""

    namespace: str
    name: str
    storage_class: str
    # None: no node (kube-scheduler treats a missing topology as unavailable).
    node_topology: Selector | None
    # The largest volume it can hold (maximumVolumeSize, else capacity); None: unknown.
    limit: int | None


@dataclass(slots=True)
class Storage:
    """Everything storage a session reads, as of its snapshot."""

    claims: dict[str, Claim] = field(default_factory=dict)
    volumes: dict[str, Volume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CsiNode] = field(default_factory=dict)
    drivers: dict[str, CsiDriver] = field(default_factory=dict)
    capacities: dict[str, StorageCapacity] = field(default_factory=dict)
    # "Kind key" -> why the object could not be read.
    rejected: dict[str, str] = field(default_factory=dict)

    def rejection(self, kind: str, key: str) -> str | None:
        """Why an object that is not here could not be read, naming it; None if absent."""
        why = self.rejected.get(f"{kind} {key}")
        return None if why is None else f"{kind.lower()} {key} is invalid: {why}"


def pod_claims(spec: Obj, *, pod: str, where: str) -> tuple[PodClaim, ...]:
    claims = []
    for index, raw in enumerate(sequence(spec.get("volumes"), where=f"{where}.spec.volumes")):
        at = f"{where}.spec.volumes[{index}]"
        volume = mapping(raw, where=at)
        if volume.get("persistentVolumeClaim") is not None:
            source = mapping(volume["persistentVolumeClaim"], where=f"{at}.persistentVolumeClaim")
            name = source.get("claimName")
            if not isinstance(name, str) or not name:
                raise InvalidObject(f"{at}.persistentVolumeClaim.claimName: must be a name")
            claims.append(PodClaim(name))
        elif volume.get("ephemeral") is not None:
            claims.append(PodClaim(f"{pod}-{volume.get('name')}", ephemeral=True))
    return tuple(claims)


def claim_from_object(obj: Obj) -> Claim:
    where = describe(obj, kind="PersistentVolumeClaim")
    meta = mapping(obj.get("metadata"), where=f"{where}.metadata")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    status = mapping(obj.get("status"), where=f"{where}.status")
    notes = annotations_of(obj, kind="PersistentVolumeClaim")
    requests = mapping(mapping(spec.get("resources"), where=where).get("requests"), where=where)
    storage = requests.get("storage")
    raw_selector = spec.get("selector")
    controller = ""
    for index, raw in enumerate(sequence(meta.get("ownerReferences"), where=where)):
        owner = mapping(raw, where=f"{where}.metadata.ownerReferences[{index}]")
        if owner.get("controller") is True:
            controller = str(owner.get("uid") or "")
    return Claim(
        namespace=namespace_of(obj, kind="PersistentVolumeClaim"),
        name=name_of(obj, kind="PersistentVolumeClaim"),
        uid=str(meta.get("uid") or ""),
        storage_class=_class_of(notes, spec.get("storageClassName")),
        volume_name=str(spec.get("volumeName") or ""),
        bind_completed=BIND_COMPLETED_ANNOTATION in notes,
        lost=status.get("phase") == "Lost",
        deleting=meta.get("deletionTimestamp") is not None,
        selected_node=notes.get(SELECTED_NODE_ANNOTATION),
        binding_since=_since(notes, where=where),
        access_modes=_access_modes(spec, where=where),
        request=_bytes(storage, where=f"{where}.spec.resources.requests.storage"),
        block=spec.get("volumeMode") == "Block",
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        selector=None
        if raw_selector is None
        else parse_selector(raw_selector, where=f"{where}.spec.selector"),
        controller=controller,
    )


def volume_from_object(obj: Obj) -> Volume:
    where = describe(obj, kind="PersistentVolume")
    meta = mapping(obj.get("metadata"), where=f"{where}.metadata")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    status = mapping(obj.get("status"), where=f"{where}.status")
    notes = annotations_of(obj, kind="PersistentVolume")
    capacity = mapping(spec.get("capacity"), where=f"{where}.spec.capacity").get("storage")
    raw_ref = spec.get("claimRef")
    claim = None
    if raw_ref is not None:
        ref = mapping(raw_ref, where=f"{where}.spec.claimRef")
        claim = ClaimRef(
            str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")
        )
    affinity = mapping(spec.get("nodeAffinity"), where=f"{where}.spec.nodeAffinity")
    required = affinity.get("required")
    node_affinity = None
    if required is not None:
        at = f"{where}.spec.nodeAffinity.required.nodeSelectorTerms"
        terms = sequence(mapping(required, where=at).get("nodeSelectorTerms"), where=at)
        node_affinity = tuple(
            node_selector_term(term, where=f"{at}[{i}]") for i, term in enumerate(terms)
        )
    csi = None
    if spec.get("csi") is not None:
        source = mapping(spec["csi"], where=f"{where}.spec.csi")
        csi = (str(source.get("driver") or ""), str(source.get("volumeHandle") or ""))
    return Volume(
        name=name_of(obj, kind="PersistentVolume"),
        storage_class=_class_of(notes, spec.get("storageClassName")),
        capacity=_bytes(capacity, where=f"{where}.spec.capacity.storage"),
        claim=claim,
        binding_since=_since(notes, where=where),
        available=status.get("phase") == "Available",
        deleting=meta.get("deletionTimestamp") is not None,
        access_modes=_access_modes(spec, where=where),
        block=spec.get("volumeMode") == "Block",
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        node_affinity=node_affinity,
        labels=tuple(sorted(labels_of(obj, kind="PersistentVolume").items())),
        csi=csi,
    )


def storage_class_from_object(obj: Obj) -> StorageClass:
    where = describe(obj, kind="StorageClass")
    mode = obj.get("volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise InvalidObject(
            f"{where}.volumeBindingMode: {mode!r} is not one of Immediate, WaitForFirstConsumer"
        )
    topologies = []
    at = f"{where}.allowedTopologies"
    for i, raw in enumerate(sequence(obj.get("allowedTopologies"), where=at)):
        term = mapping(raw, where=f"{at}[{i}]")
        expressions = sequence(term.get("matchLabelExpressions"), where=f"{at}[{i}]")
        requirements = []
        for j, item in enumerate(expressions):
            entry = mapping(item, where=f"{at}[{i}].matchLabelExpressions[{j}]")
            values = sequence(entry.get("values"), where=f"{at}[{i}].matchLabelExpressions[{j}]")
            requirements.append(
                Requirement(str(entry.get("key") or ""), "In", tuple(str(v) for v in values))
            )
        topologies.append(tuple(requirements))
    return StorageClass(
        name=name_of(obj, kind="StorageClass"),
        provisioner=str(obj.get("provisioner") or ""),
        wait_for_consumer=mode == "WaitForFirstConsumer",
        allowed_topologies=tuple(topologies),
    )


def csi_node_from_object(obj: Obj) -> CsiNode:
    where = describe(obj, kind="CSINode")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    limits = []
    for i, raw in enumerate(sequence(spec.get("drivers"), where=f"{where}.spec.drivers")):
        at = f"{where}.spec.drivers[{i}]"
        driver = mapping(raw, where=at)
        count = mapping(driver.get("allocatable"), where=f"{at}.allocatable").get("count")
        if count is not None:
            number = whole_number(count, where=f"{at}.allocatable.count", minimum=0)
            limits.append((str(driver.get("name") or ""), number))
    return CsiNode(name=name_of(obj, kind="CSINode"), limits=tuple(limits))


def csi_driver_from_object(obj: Obj) -> CsiDriver:
    where = describe(obj, kind="CSIDriver")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    raw = spec.get("storageCapacity")
    return CsiDriver(
        name=name_of(obj, kind="CSIDriver"),
        storage_capacity=False if raw is None else flag(raw, where=f"{where}.spec.storageCapacity"),
    )


def storage_capacity_from_object(obj: Obj) -> StorageCapacity:
    where = describe(obj, kind="CSIStorageCapacity")
    raw_topology = obj.get("nodeTopology")
    largest = obj.get("maximumVolumeSize")
    at = f"{where}.maximumVolumeSize"
    if largest is None:
        largest, at = obj.get("capacity"), f"{where}.capacity"
    return StorageCapacity(
        namespace=namespace_of(obj, kind="CSIStorageCapacity"),
        name=name_of(obj, kind="CSIStorageCapacity"),
        storage_class=text(obj.get("storageClassName"), where=where, default=""),
        node_topology=None
        if raw_topology is None
        else parse_selector(raw_topology, where=f"{where}.nodeTopology"),
        limit=None if largest is None else _bytes(largest, where=at),
    )


def _class_of(notes: dict[str, str], name: object) -> str:
    if BETA_CLASS_ANNOTATION in notes:
        return notes[BETA_CLASS_ANNOTATION]
    return str(name or "")


def _since(notes: dict[str, str], *, where: str) -> float | None:
    stamp = notes.get(BINDING_SINCE_ANNOTATION)
    at = f"{where}.metadata.annotations[{BINDING_SINCE_ANNOTATION}]"
    return None if stamp is None else timestamp(stamp, where=at)


def _access_modes(spec: Obj, *, where: str) -> frozenset[str]:
    modes = sequence(spec.get("accessModes"), where=f"{where}.spec.accessModes")
    return frozenset(str(mode) for mode in modes)


def _bytes(value: object, *, where: str) -> int:
    return 0 if value is None else ceil_int(parse_quantity(value, where=where))
