"""Pods as Tasks, with the defaulting the API server would have applied before we see them."""

import marshal
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from batchsched.api.dra import (
    container_extended,
    extended_claim_of,
    is_extended_resource,
    pod_resource_claims,
)
from batchsched.api.errors import InvalidObject
from batchsched.api.gpu import GPU_INDEX_ANNOTATION, check_gpu_request, parse_gpu_index
from batchsched.api.meta import (
    Obj,
    annotations_of,
    creation_of,
    labels_of,
    mapping,
    name_of,
    namespace_of,
    sequence,
    timestamp,
    whole_number,
)
from batchsched.api.nativegroups import scheduling_group
from batchsched.api.objects import (
    POD_PHASES,
    Constraints,
    GroupRef,
    PodPhase,
    PodResourceClaim,
    PreferredTerm,
    QueueName,
    Task,
    Toleration,
)
from batchsched.api.placement import PLACEMENT_ANNOTATION, parse_placement
from batchsched.api.podaffinity import PREFERRED, PodAffinity, pod_affinity, term_weight
from batchsched.api.queues import preemption_policy
from batchsched.api.reads import keys_under, reads
from batchsched.api.resources import CPU, MEMORY, PODS, ResourceList, parse_resource_list
from batchsched.api.selectors import node_selector_term
from batchsched.api.topology import KUEUE_ANNOTATIONS, kueue_topology
from batchsched.api.topologyspread import Spread, label_keys, spread_constraints
from batchsched.api.unsupported import (
    NODE_BOUND_VOLUMES,
    spec_blocker,
    volume_blocker,
)
from batchsched.api.volumes import PodClaim, pod_claims

OUR_GROUP_KEY = "scheduling.batchsched.io/group-name"
# kube-batch's v1alpha1 annotation, which Volcano still reads.
KUBE_BATCH_GROUP_KEY = "scheduling.k8s.io/group-name"
# The annotation kube-batch's last releases (PodGroups of scheduling.sigs.dev) read.
KUBE_BATCH_V1ALPHA2_GROUP_KEY = "scheduling.x-k8s.io/group-name"
VOLCANO_GROUP_KEY = "scheduling.volcano.sh/group-name"
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# scheduler-plugins' label while its PodGroups were of scheduling.sigs.k8s.io.
OLD_COSCHEDULING_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
TENCENT_GROUP_LABEL = "group.batch.scheduler.tencent.com"
LIGHTWEIGHT_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
# Every key whose value names a PodGroup object, as (where on the pod, key), each where
# its own scheduler reads it (README, "How a pod finds its group"). A key elsewhere
# means nothing to that scheduler, so it means nothing here either.
GROUP_KEYS: tuple[tuple[str, str], ...] = (
    ("annotation", OUR_GROUP_KEY),
    ("label", OUR_GROUP_KEY),
    ("annotation", KUBE_BATCH_GROUP_KEY),
    ("annotation", KUBE_BATCH_V1ALPHA2_GROUP_KEY),
    ("annotation", VOLCANO_GROUP_KEY),
    ("label", COSCHEDULING_GROUP_LABEL),
    ("label", OLD_COSCHEDULING_GROUP_LABEL),
    ("label", TENCENT_GROUP_LABEL),
)
# The annotations among them, which the operator's trim must keep.
GROUP_ANNOTATIONS = tuple(key for where, key in GROUP_KEYS if where == "annotation")
# The queue of a lone pod or a label-only group: ours first, then Volcano's. Our key is
# also what a Namespace names its default queue by.
OUR_QUEUE_KEY = "scheduling.batchsched.io/queue-name"
VOLCANO_QUEUE_KEY = "scheduling.volcano.sh/queue-name"
# Whether preempt and reclaim may evict the pod, as an annotation or label: ours, then
# Volcano's. Any value but "true" keeps the pod from them: a misspelt opt-out still
# protects what it was written to protect.
PREEMPTABLE_KEYS = ("scheduling.batchsched.io/preemptable", "volcano.sh/preemptable")
# A pod's task role, annotation then label, as Volcano's job controller writes both and
# its scheduler reads them: what a PodGroup's minTaskMember counts by.
TASK_ROLE_KEY = "volcano.sh/task-spec"


Key = TypeVar("Key", bound=Hashable)
Parsed = TypeVar("Parsed")

# What kube-scheduler's scores count for a container that requests no CPU or memory
# (100m, 200 MiB), so that pods without requests do not all look free.
NON_ZERO_REQUESTS: ResourceList = {CPU: 100, MEMORY: 200 * 2**20}

# The parts of a pod spec that say what it needs of a node.
SHAPE_FIELDS = (
    "containers",
    "initContainers",
    "overhead",
    "nodeSelector",
    "affinity",
    "tolerations",
    "resources",
    "hostNetwork",
    "schedulingGates",
)


# Everything task_from_pod reads (api/reads.py): the operator keeps this of each pod.
# Annotations by key; labels whole, as any label may be what another pod's affinity
# selects. Every field that constrains placement is here, those the core refuses
# included: a pod asking for something unsupported must still say so on a live cluster.
POD_ANNOTATIONS = (
    *GROUP_ANNOTATIONS,
    OUR_QUEUE_KEY,
    VOLCANO_QUEUE_KEY,
    GPU_INDEX_ANNOTATION,
    PLACEMENT_ANNOTATION,
    *PREEMPTABLE_KEYS,
    TASK_ROLE_KEY,
    *KUEUE_ANNOTATIONS,
)
POD_SPEC_FIELDS = (
    *(field for field in SHAPE_FIELDS if field not in ("containers", "initContainers")),
    "schedulerName",
    "schedulingGroup",
    "nodeName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "topologySpreadConstraints",
    "activeDeadlineSeconds",
)
CONTAINER_FIELDS = (
    "resources",
    "restartPolicy",
    "ports[].hostPort",
    "ports[].containerPort",
    "ports[].protocol",
)
POD_VOLUME_FIELDS = ("name", "persistentVolumeClaim", "ephemeral", *NODE_BOUND_VOLUMES)
POD_READS = reads(
    "Pod",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "metadata.labels",
    *keys_under("metadata.annotations", POD_ANNOTATIONS),
    *(f"spec.{field}" for field in POD_SPEC_FIELDS),
    *(
        f"spec.{part}[].{field}"
        for part in ("containers", "initContainers")
        for field in CONTAINER_FIELDS
    ),
    *(f"spec.volumes[].{field}" for field in POD_VOLUME_FIELDS),
    # Named in the claim for extended resources backed by devices (api/dra.py).
    "spec.containers[].name",
    "spec.initContainers[].name",
    "spec.resourceClaims[].name",
    "spec.resourceClaims[].resourceClaimName",
    "spec.resourceClaims[].resourceClaimTemplateName",
    "status.resourceClaimStatuses",
    "status.extendedResourceClaimStatus.resourceClaimName",
    "status.phase",
    "status.nominatedNodeName",
    "status.startTime",
)


@dataclass(frozen=True, slots=True)
class PodShape:
    """What a pod asks of a node. Pods stamped from one template share one, request
    dict included: tasks only ever read their request."""

    request: ResourceList
    constraints: Constraints
    host_ports: frozenset[tuple[str, int]]
    node_preferences: tuple[PreferredTerm, ...]
    # Why no node will do (see api/unsupported.py), volumes aside.
    blocked: str | None
    # Task.score_extra.
    score_extra: tuple[int, int]
    # Task.shape_key: equal for interchangeable pods.
    key: tuple[object, ...]


class ShapeMemo:
    """Parsed shapes by spec text. A cluster's pods come from few templates, and
    parsing requests, tolerations and affinity is most of what parsing a pod costs; a
    thousand-pod gang is parsed once. Bounded: past `limit` distinct shapes it starts over.
    """

    def __init__(self, *, limit: int = 4096) -> None:
        self.limit = limit
        self._shapes: dict[bytes | str, PodShape] = {}
        # Pod affinity depends on the pod's namespace and labels as well as its spec.
        self._affinities: dict[tuple[object, ...], PodAffinity | None] = {}
        # Spread constraints on the pod's values of their matchLabelKeys only.
        self._spreads: dict[tuple[object, ...], Spread] = {}

    def shape(self, spec: Mapping[str, object], *, where: str) -> PodShape:
        text = _text([spec.get(field) for field in SHAPE_FIELDS])
        return self._remember(self._shapes, text, lambda: pod_shape(spec, where=where))

    def affinity(
        self, affinity: Mapping[str, object], *, namespace: str, labels: dict[str, str], where: str
    ) -> PodAffinity | None:
        text = _text([affinity.get("podAffinity"), affinity.get("podAntiAffinity")])
        return self._remember(
            self._affinities,
            (text, namespace, *labels.items()),
            lambda: pod_affinity(affinity, namespace=namespace, labels=labels, where=where),
        )

    def spread(self, raw: object, *, labels: dict[str, str], where: str) -> Spread:
        key = (_text([raw]), *((k, labels.get(k)) for k in label_keys(raw)))
        return self._remember(
            self._spreads, key, lambda: spread_constraints(raw, labels=labels, where=where)
        )

    def _remember(self, store: dict[Key, Parsed], key: Key, parse: Callable[[], Parsed]) -> Parsed:
        """What `parse` gives for `key`, parsed once. Not remembered when it raises: each
        bad pod gets an error naming itself."""
        if key in store:
            return store[key]
        found = parse()
        if len(store) >= self.limit:
            store.clear()
        store[key] = found
        return found


def _text(parts: list[object]) -> bytes | str:
    """Parts of a spec as one hashable text. marshal (format 2: no back-references) is
    twice as fast as repr, and handles all of JSON; YAML can also hold dates, which
    only repr can write."""
    try:
        return marshal.dumps(parts, 2)
    except ValueError:
        return repr(parts)


def task_from_pod(
    pod: Obj, *, default_creation: float = 0.0, shapes: ShapeMemo | None = None
) -> Task:
    """Parse a Pod; raises InvalidObject naming the pod and field when it cannot be used."""
    namespace, name = namespace_of(pod, kind="Pod"), name_of(pod, kind="Pod")
    where = f"Pod {namespace}/{name}"
    spec = mapping(pod.get("spec"), where=f"{where}.spec")
    status = mapping(pod.get("status"), where=f"{where}.status")
    meta = mapping(pod.get("metadata"), where=f"{where}.metadata")
    labels, notes = labels_of(pod, kind="Pod"), annotations_of(pod, kind="Pod")
    priority = spec.get("priority")
    shape = pod_shape(spec, where=where) if shapes is None else shapes.shape(spec, where=where)
    gpu_index = notes.get(GPU_INDEX_ANNOTATION)
    placement = notes.get(PLACEMENT_ANNOTATION)
    # Volumes stay out of the shape memo: each pod's token volume has a name of its own.
    blocked, shape_key = shape.blocked, shape.key
    claims: tuple[PodClaim, ...] = ()
    if blocked is None and spec.get("volumes"):
        blocked = volume_blocker(spec, where=where)
        shape_key = shape_key if blocked is None else (*shape_key, blocked)
        claims = pod_claims(spec, pod=name, where=where)
    # Outside the memo too: terms and spread constraints read the pod's labels.
    affinity = fit_key = None
    raw_affinity = spec.get("affinity")
    if raw_affinity and ("podAffinity" in raw_affinity or "podAntiAffinity" in raw_affinity):
        raw = mapping(raw_affinity, where=f"{where}.spec.affinity")
        affinity = (
            pod_affinity(raw, namespace=namespace, labels=labels, where=where)
            if shapes is None
            else shapes.affinity(raw, namespace=namespace, labels=labels, where=where)
        )
        if affinity is not None:
            fit_key, shape_key = shape_key, (*shape_key, affinity)
    raw_spread = spec.get("topologySpreadConstraints")
    spread: Spread = ()
    if raw_spread:
        spread = (
            spread_constraints(raw_spread, labels=labels, where=where)
            if shapes is None
            else shapes.spread(raw_spread, labels=labels, where=where)
        )
    if spread:
        fit_key, shape_key = fit_key or shape_key, (*shape_key, spread)
    # Claims are checked afresh at each choice too: a volume or a device one pod takes
    # is gone for all.
    if claims:
        fit_key, shape_key = fit_key or shape_key, (*shape_key, claims)
    extended = container_extended(spec, where=where) if _asks_extended(shape.request) else ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    if spec.get("resourceClaims"):
        resource_claims = pod_resource_claims(spec, status, where=where)
        fit_key, shape_key = fit_key or shape_key, (*shape_key, resource_claims)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None:
        deadline = whole_number(deadline, where=f"{where}.spec.activeDeadlineSeconds", minimum=1)
        # Where it may go beside room held for others depends on how long it may run.
        shape_key = (*shape_key, ("activeDeadlineSeconds", deadline))
        fit_key = None if fit_key is None else (*fit_key, ("activeDeadlineSeconds", deadline))
    started = status.get("startTime")
    return Task(
        namespace=namespace,
        name=name,
        uid=pod_uid(meta, namespace, name),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        request=shape.request,
        creation=creation_of(pod, default=default_creation, kind="Pod"),
        node_name=spec.get("nodeName") or None,
        phase=_phase(status.get("phase")),
        priority=priority if isinstance(priority, int) else None,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        preemption_policy=""
        if spec.get("preemptionPolicy") is None
        else preemption_policy(spec["preemptionPolicy"], where=f"{where}.spec"),
        group=_group(spec, labels, notes, namespace=namespace, where=where),
        queue=named_queue(meta, "annotations", OUR_QUEUE_KEY, owner=where)
        or named_queue(meta, "annotations", VOLCANO_QUEUE_KEY, owner=where),
        constraints=shape.constraints,
        host_ports=shape.host_ports,
        deleting=meta.get("deletionTimestamp") is not None,
        nominated_node=status.get("nominatedNodeName") or None,
        deadline_seconds=deadline,
        preemptable=_preemptable(notes, labels),
        role=notes.get(TASK_ROLE_KEY) or labels.get(TASK_ROLE_KEY) or "",
        started=None if started is None else timestamp(started, where=f"{where}.status.startTime"),
        gpu_index=parse_gpu_index(gpu_index, where=where) if gpu_index else (),
        placement=parse_placement(placement) if placement else None,
        labels=labels,
        node_preferences=shape.node_preferences,
        score_extra=shape.score_extra,
        affinity=affinity,
        spread=spread,
        claims=claims,
        resource_claims=resource_claims,
        extended=extended,
        extended_claim=extended_claim_of(status, where=where),
        blocked=blocked,
        podset_topology=kueue_topology(notes, labels, where=where),
        shape_key=shape_key,
        fit_key=fit_key,
    )


def _asks_extended(request: Mapping[str, int]) -> bool:
    return any(is_extended_resource(name) for name in request)


def _preemptable(notes: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    for key in PREEMPTABLE_KEYS:
        value = notes.get(key, labels.get(key))
        if value is not None:
            return value.strip().lower() == "true"
    return True


def pod_uid(meta: Mapping[str, object], namespace: str, name: str) -> str:
    """metadata.uid; hand-written simulator pods often have none, and go by their name."""
    return str(meta.get("uid") or f"{namespace}/{name}")


def pod_shape(spec: Mapping[str, object], *, where: str) -> PodShape:
    constraints = _constraints(spec, where=where)
    request = effective_request(spec, where=where)
    check_gpu_request(request, where=where)
    ports = _host_ports(spec, where=where)
    preferences = _node_preferences(spec, where=where)
    blocked = spec_blocker(spec, where=where)
    scored = effective_request(spec, where=where, missing=NON_ZERO_REQUESTS)
    score_extra = (
        scored.get(CPU, 0) - request.get(CPU, 0),
        scored.get(MEMORY, 0) - request.get(MEMORY, 0),
    )
    key = (tuple(sorted(request.items())), constraints, ports)
    extra = (
        *((preferences,) if preferences else ()),
        *((blocked,) if blocked else ()),
        *((score_extra,) if any(score_extra) else ()),
    )
    return PodShape(request, constraints, ports, preferences, blocked, score_extra, (*key, *extra))


def _group(
    spec: Mapping[str, object],
    labels: Mapping[str, str],
    notes: Mapping[str, str],
    *,
    namespace: str,
    where: str,
) -> GroupRef | None:
    """The group named by spec.schedulingGroup or by a peer's key, not both: each
    scheduler reads only its own way, so a pod naming both would be one gang's member
    to kube-scheduler and another's to the peer."""
    native = scheduling_group(spec, namespace=namespace, where=where)
    peer = group_from_metadata(labels, notes, namespace=namespace, where=where)
    if native is not None and peer is not None:
        raise InvalidObject(
            f"{where}: names its group both by spec.schedulingGroup.podGroupName "
            f"({native.name!r}) and by a PodGroup key ({peer.name!r}); remove one"
        )
    return native or peer


def group_of(pod: Obj, *, namespace: str, where: str) -> GroupRef | None:
    """The group a pod names by any association key (README, "How a pod finds its group")."""
    return group_from_metadata(
        labels_of(pod, kind="Pod"),
        annotations_of(pod, kind="Pod"),
        namespace=namespace,
        where=where,
    )


def group_from_metadata(
    labels: Mapping[str, str], notes: Mapping[str, str], *, namespace: str, where: str
) -> GroupRef | None:
    """The group named by any of the peers' keys (GROUP_KEYS) or by the lightweight label
    pair. Keys that name different groups are refused, naming both: joining either group
    would run the pod in a gang its author may not have meant, and a gang one member
    short never starts."""
    named = [
        (value, f"{where_on} {key}")
        for where_on, key in GROUP_KEYS
        if (value := (notes if where_on == "annotation" else labels).get(key))
    ]
    lightweight = labels.get(LIGHTWEIGHT_NAME_LABEL)
    if lightweight:
        named.append((lightweight, f"label {LIGHTWEIGHT_NAME_LABEL}"))
    for value, source in named[1:]:
        if value != named[0][0]:
            first_value, first_source = named[0]
            raise InvalidObject(
                f"{where}: names two groups, {first_value!r} by {first_source} and {value!r} "
                f"by {source}; remove one key or make them agree"
            )
    if not named:
        return None
    name = named[0][0]
    if not lightweight:
        return GroupRef(namespace=namespace, name=name)
    min_available = _min_available(labels, where=where)
    # Beside a key that names a PodGroup object, the object says how many the gang needs.
    label_only = len(named) == 1
    return GroupRef(
        namespace=namespace, name=name, min_available=min_available if label_only else None
    )


def _min_available(labels: Mapping[str, str], *, where: str) -> int:
    raw_min = labels.get(LIGHTWEIGHT_MIN_LABEL)
    if raw_min is None:
        raise InvalidObject(
            f"{where}: label {LIGHTWEIGHT_NAME_LABEL} needs {LIGHTWEIGHT_MIN_LABEL} beside it"
        )
    if not raw_min.strip().isdigit() or int(raw_min) < 1:
        raise InvalidObject(
            f"{where}: label {LIGHTWEIGHT_MIN_LABEL}={raw_min!r} must be a whole number >= 1"
        )
    return int(raw_min)


def named_queue(
    meta: Mapping[str, object], field: str, key: str, *, owner: str
) -> QueueName | None:
    """The queue named by `key` among the object's `field` (annotations or labels), None
    when the key is absent. A value that names no queue is refused rather than read as
    the default queue: a slip must not move work into another queue's share."""
    values = mapping(meta.get(field), where=f"{owner}.metadata.{field}")
    if key not in values:
        return None
    value, kind = values[key], field.removesuffix("s")
    if not isinstance(value, str) or not value.strip():
        raise InvalidObject(f"{owner}: {kind} {key}={value!r} must name a queue")
    return QueueName(name=value, source=f"{owner}'s {kind} {key}")


def effective_request(
    spec: Mapping[str, object], *, where: str, missing: ResourceList | None = None
) -> ResourceList:
    """max(sum of containers and sidecars, largest init container) + overhead, plus one pod.

    Requests default to limits for any resource that has only a limit, as the API server
    does on admission. Init containers with restartPolicy Always are sidecars: they keep
    running, so they add to the pod's steady request and to every later init container.
    Pod-level requests (spec.resources) replace that sum for the resources they may name.
    `missing` stands in for what a container does not request at all (for scoring).
    """
    total: ResourceList = {}
    for index, container in enumerate(sequence(spec.get("containers"), where=f"{where}.spec")):
        at = f"{where}.spec.containers[{index}]"
        _add(total, _container_request(container, where=at, missing=missing))
    init_peak: ResourceList = {}
    sidecars: ResourceList = {}
    for index, container in enumerate(sequence(spec.get("initContainers"), where=where)):
        at = f"{where}.spec.initContainers[{index}]"
        request = _container_request(container, where=at, missing=missing)
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _add(sidecars, request)
            _add(total, request)
            request = dict(sidecars)
        else:
            _add(request, sidecars)
        for name, value in request.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    pod_level = _container_request(spec, where=f"{where}.spec")
    total.update((k, v) for k, v in pod_level.items() if _pod_level(k))
    _add(total, parse_resource_list(spec.get("overhead"), where=f"{where}.spec.overhead"))
    total[PODS] = total.get(PODS, 0) + 1
    return {name: value for name, value in total.items() if value > 0}


def _pod_level(resource: str) -> bool:
    """Whether spec.resources may set this resource for the whole pod."""
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def _container_request(
    container: object, *, where: str, missing: ResourceList | None = None
) -> ResourceList:
    resources = mapping(mapping(container, where=where).get("resources"), where=where)
    limits = parse_resource_list(resources.get("limits"), where=f"{where}.resources.limits")
    requests = parse_resource_list(resources.get("requests"), where=f"{where}.resources.requests")
    return {**(missing or {}), **limits, **requests}


def _add(total: ResourceList, extra: ResourceList) -> None:
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value


def _constraints(spec: Mapping[str, object], *, where: str) -> Constraints:
    selector = mapping(spec.get("nodeSelector"), where=f"{where}.spec.nodeSelector")
    affinity = mapping(spec.get("affinity"), where=f"{where}.spec.affinity")
    node_affinity = mapping(affinity.get("nodeAffinity"), where=f"{where}.spec.affinity")
    required = mapping(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        where=f"{where}.spec.affinity.nodeAffinity",
    )
    terms = sequence(required.get("nodeSelectorTerms"), where=f"{where}.nodeSelectorTerms")
    tolerations = sequence(spec.get("tolerations"), where=f"{where}.spec.tolerations")
    return Constraints(
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity=tuple(
            node_selector_term(term, where=f"{where}.nodeSelectorTerms[{i}]")
            for i, term in enumerate(terms)
        ),
        tolerations=tuple(
            _toleration(t, where=f"{where}.spec.tolerations[{i}]")
            for i, t in enumerate(tolerations)
        ),
    )


def _node_preferences(spec: Mapping[str, object], *, where: str) -> tuple[PreferredTerm, ...]:
    """Preferred node affinity terms; an empty preference matches no node, so it is left
    out, as kube-scheduler leaves it out."""
    affinity = mapping(spec.get("affinity"), where=f"{where}.spec.affinity")
    at = f"{where}.spec.affinity.nodeAffinity.{PREFERRED}"
    node_affinity = mapping(affinity.get("nodeAffinity"), where=f"{where}.spec.affinity")
    preferences = []
    for i, raw in enumerate(sequence(node_affinity.get(PREFERRED), where=at)):
        entry = mapping(raw, where=f"{at}[{i}]")
        weight = term_weight(entry, where=f"{at}[{i}]")
        term = node_selector_term(entry.get("preference"), where=f"{at}[{i}].preference")
        if term:
            preferences.append(PreferredTerm(weight, term))
    return tuple(preferences)


def _toleration(raw: object, *, where: str) -> Toleration:
    entry = mapping(raw, where=where)
    operator = str(entry.get("operator") or "Equal")
    if operator not in ("Equal", "Exists"):
        raise InvalidObject(f"{where}.operator: {operator!r} is not one of Equal, Exists")
    return Toleration(
        key=str(entry.get("key") or ""),
        operator=operator,
        value=str(entry.get("value") or ""),
        effect=str(entry.get("effect") or ""),
    )


def _host_ports(spec: Mapping[str, object], *, where: str) -> frozenset[tuple[str, int]]:
    """With hostNetwork every container port is a host port: the API server defaults
    hostPort to containerPort."""
    ports: set[tuple[str, int]] = set()
    host_network = spec.get("hostNetwork") is True
    for section in ("initContainers", "containers"):
        for container in sequence(spec.get(section), where=f"{where}.spec.{section}"):
            for port in sequence(mapping(container, where=where).get("ports"), where=where):
                entry = mapping(port, where=where)
                host_port = entry.get("hostPort")
                if host_network and host_port is None:
                    host_port = entry.get("containerPort")
                if isinstance(host_port, int) and host_port > 0:
                    ports.add((str(entry.get("protocol") or "TCP"), host_port))
    return frozenset(ports)


def _phase(raw: object) -> PodPhase:
    """Pending when unset; a phase Kubernetes does not define is Unknown, its word for a
    pod whose state could not be had."""
    if not raw:
        return "Pending"
    return next((p for p in POD_PHASES if p == raw), "Unknown")
