"""Queues and PriorityClasses."""

from collections.abc import Mapping

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    describe,
    flag,
    mapping,
    name_of,
    sequence,
    text,
    whole_number,
)
from batchsched.api.objects import Dequeue, PriorityClass, Queue
from batchsched.api.reads import keys_under, reads
from batchsched.api.resources import ResourceList, format_amount, parse_resource_list

DEFAULT_QUEUE = "default"
# The top of the queue tree. Volcano creates a Queue of this name in every cluster; when
# one exists, the queues without a parent are its children (cache/jobs.py), so its
# capability bounds them all. Without one the top is implied.
ROOT_QUEUE = "root"
# Every key of our Queue's spec. Anything else (a typo) is refused by name rather than
# ignored.
SPEC_KEYS = ("weight", "capability", "reclaimable", "state", "guarantee", "deserved", "parent")
# Every key of Volcano's Queue spec (v1.15.1's CRD). Its state is status.state, set by its
# queue controller or `vcctl queue operate`; the CRD has no spec.state.
VOLCANO_SPEC_KEYS = (
    "weight",
    "capability",
    "reclaimable",
    "guarantee",
    "deserved",
    "parent",
    "dequeueStrategy",
    "priority",
    "affinity",
    "extendClusters",
    "type",
)
# Volcano's keys that change nothing a single-cluster scheduler decides: accepted, and
# logged once with this reason.
INERT_VOLCANO_KEYS = {
    "extendClusters": "it feeds Volcano's multi-cluster dispatch; batchsched schedules one cluster",
    "type": "Volcano's scheduler reads it in no decision either",
}
# Volcano's drf plugin reads these annotations only in its hierarchical mode
# (enableHierarchy), which plugins/drf.py refuses: accepted, and logged once.
HIERARCHY_ANNOTATIONS = ("volcano.sh/hierarchy", "volcano.sh/hierarchy-weights")
HIERARCHY_WHY = (
    "Volcano's drf reads it only with enableHierarchy, which batchsched does not "
    "implement; spec.parent makes a tree of queues here"
)
# Volcano's nodegroup plugin: a queue's jobs go to (or avoid) nodes labelled with these
# node groups. Preferences are accepted without effect; requirements cannot be honoured.
NODE_GROUP_KEYS = ("nodeGroupAffinity", "nodeGroupAntiAffinity")
REQUIRED_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_TERMS = "preferredDuringSchedulingIgnoredDuringExecution"
# Volcano's status.state values; jobs are scheduled only in an Open queue, as Volcano
# schedules them. A queue with no state yet (no Volcano controller has seen it) is Open,
# as that controller would make it.
VOLCANO_STATES = ("Open", "Closed", "Closing", "Unknown")

# What queue_from_object and priority_class_from_object read (api/reads.py); a Queue's
# apiVersion too, as a Queue of one name may exist in our API and Volcano's. Of its status
# only Volcano's state: the counts we write there would make every write look like a
# change to the queue.
QUEUE_READS = reads(
    "Queue",
    "apiVersion",
    "spec",
    "status.state",
    *keys_under("metadata.annotations", HIERARCHY_ANNOTATIONS),
)
PRIORITY_CLASS_READS = reads("PriorityClass", "value", "globalDefault", "preemptionPolicy")


def queue_from_object(obj: Obj, *, volcano: bool = False) -> Queue:
    """A Queue of our API, or of Volcano's (`volcano`): the same record, read from each
    one's keys (Volcano's state is status.state, ours spec.state)."""
    where = describe(obj, kind="Queue")
    name = name_of(obj)
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    if volcano and "state" in spec:
        raise InvalidObject(
            f"{where}.spec.state: {spec['state']!r}: Volcano's Queue has no spec.state; "
            "its state is status.state (vcctl queue operate sets it)"
        )
    _refuse_unknown(spec, VOLCANO_SPEC_KEYS if volcano else SPEC_KEYS, where=f"{where}.spec")
    is_open = _volcano_open(obj, where=where) if volcano else _spec_open(spec, where=where)
    guarantee_spec = mapping(spec.get("guarantee"), where=f"{where}.spec.guarantee")
    _refuse_unknown(guarantee_spec, ("resource",), where=f"{where}.spec.guarantee")
    capability = parse_resource_list(spec.get("capability"), where=f"{where}.spec.capability")
    guarantee = parse_resource_list(
        guarantee_spec.get("resource"), where=f"{where}.spec.guarantee.resource"
    )
    deserved = parse_resource_list(spec.get("deserved"), where=f"{where}.spec.deserved")
    inert_devices = tuple(
        f"{where}.spec.{field}[{name}] has no effect here: {DEVICE_SHARE_WHY}"
        for field, amounts in (("guarantee.resource", guarantee), ("deserved", deserved))
        for name in amounts
        if is_device_class_quota(name)
    )
    # Volcano's order: guarantee <= deserved <= capability, each where both are set.
    _at_most(guarantee, "guarantee.resource", capability, "capability", where=where)
    _at_most(guarantee, "guarantee.resource", deserved, "deserved", where=where)
    _at_most(deserved, "deserved", capability, "capability", where=where)
    parent = text(spec.get("parent"), where=f"{where}.spec.parent", default=ROOT_QUEUE)
    if name == ROOT_QUEUE and parent != ROOT_QUEUE:
        raise InvalidObject(
            f"{where}.spec.parent: {parent!r}: {ROOT_QUEUE!r} is the top of the queue tree"
        )
    dequeue = text(spec.get("dequeueStrategy"), where=f"{where}.spec.dequeueStrategy", default="")
    if dequeue and dequeue not in tuple(Dequeue):
        raise InvalidObject(
            f"{where}.spec.dequeueStrategy: {dequeue!r} is not one of "
            f"{', '.join(d.value for d in Dequeue)}"
        )
    return Queue(
        name=name,
        weight=whole_number(spec.get("weight", 1), where=f"{where}.spec.weight", minimum=1),
        capability=capability,
        reclaimable=flag(spec.get("reclaimable", True), where=f"{where}.spec.reclaimable"),
        open=is_open,
        guarantee=guarantee,
        deserved=deserved,
        parent=None if parent == ROOT_QUEUE else parent,
        dequeue=Dequeue(dequeue or Dequeue.TRAVERSE),
        priority=whole_number(spec.get("priority", 0), where=f"{where}.spec.priority", minimum=0),
        inert=(_inert(obj, spec, where=where) if volcano else ()) + inert_devices,
    )


def _spec_open(spec: Obj, *, where: str) -> bool:
    state = str(spec.get("state") or "Open")
    if state not in ("Open", "Closed"):
        raise InvalidObject(f"{where}.spec.state: {state!r} is not one of Open, Closed")
    return state == "Open"


def _volcano_open(obj: Obj, *, where: str) -> bool:
    status = mapping(obj.get("status"), where=f"{where}.status")
    state = text(status.get("state"), where=f"{where}.status.state", default="Open")
    if state not in VOLCANO_STATES:
        raise InvalidObject(
            f"{where}.status.state: {state!r} is not one of {', '.join(VOLCANO_STATES)}"
        )
    return state == "Open"


def _inert(obj: Obj, spec: Obj, *, where: str) -> tuple[str, ...]:
    """Volcano's keys set here that have no effect, each with why; a node-group
    requirement, which cannot be honoured, is refused."""
    notes = [(f"spec.{key}", why) for key, why in INERT_VOLCANO_KEYS.items() if spec.get(key)]
    annotations = mapping(mapping(obj.get("metadata"), where=where).get("annotations"), where=where)
    notes += [
        (f"metadata.annotations[{key}]", HIERARCHY_WHY)
        for key in HIERARCHY_ANNOTATIONS
        if annotations.get(key)
    ]
    at = f"{where}.spec.affinity"
    affinity = mapping(spec.get("affinity"), where=at)
    _refuse_unknown(affinity, NODE_GROUP_KEYS, where=at)
    for key in NODE_GROUP_KEYS:
        terms = mapping(affinity.get(key), where=f"{at}.{key}")
        _refuse_unknown(terms, (REQUIRED_TERMS, PREFERRED_TERMS), where=f"{at}.{key}")
        required = sequence(terms.get(REQUIRED_TERMS), where=f"{at}.{key}")
        if required:
            raise InvalidObject(
                f"{at}.{key}.{REQUIRED_TERMS}: {required!r} cannot be honoured: "
                "batchsched has no node groups (Volcano's nodegroup plugin); give the "
                "pods a nodeAffinity on the volcano.sh/nodegroup-name label instead"
            )
        if sequence(terms.get(PREFERRED_TERMS), where=f"{at}.{key}"):
            notes.append(
                (
                    f"spec.affinity.{key}.{PREFERRED_TERMS}",
                    "a preference for Volcano's node groups, which batchsched does not score",
                )
            )
    return tuple(f"{where}.{key} has no effect here: {why}" for key, why in notes)


def _refuse_unknown(spec: Obj, known: tuple[str, ...], *, where: str) -> None:
    for key in spec:
        if key not in known:
            raise InvalidObject(
                f"{where}.{key} is not supported; the keys read are {', '.join(known)}"
            )


# Volcano's capacity plugin counts DRA devices per DeviceClass under these names
# (`deviceclass/<class>`, and `<dimension>.deviceclass/<class>` for consumable capacity).
DEVICE_CLASS_QUOTA = "deviceclass/"
# Volcano v1.15.1's scheduler reads these keys in deserved and guarantee but acts only on
# capability's (capacity.go: checkDRAAllocatable); so does batchsched.
DEVICE_SHARE_WHY = (
    "DRA devices per DeviceClass are held to a queue's capability only, as Volcano's "
    "capacity plugin holds them"
)


def is_device_class_quota(name: str) -> bool:
    return name.startswith(DEVICE_CLASS_QUOTA) or f".{DEVICE_CLASS_QUOTA}" in name


def _at_most(
    low: ResourceList, low_key: str, high: ResourceList, high_key: str, *, where: str
) -> None:
    for resource, amount in low.items():
        limit = high.get(resource)
        if limit is not None and amount > limit:
            raise InvalidObject(
                f"{where}.spec.{low_key}.{resource}: {format_amount(resource, amount)} exceeds "
                f"spec.{high_key}.{resource} {format_amount(resource, limit)}"
            )


def check_hierarchy(queues: Mapping[str, Queue], *, rejected: Mapping[str, str]) -> dict[str, str]:
    """Why each queue whose parents do not lead to the top cannot be used: every queue on
    a cycle, a queue whose parent is missing or refused, and, in turn, their children.
    It needs every queue, so the snapshot asks, not the per-object parse."""
    why: dict[str, str] = {}
    for start in sorted(queues):
        path: list[str] = []
        name: str | None = start
        while name is not None and name in queues and name not in why and name not in path:
            path.append(name)
            name = queues[name].parent
        if name is None:
            continue
        if name in path:
            cycle = path[path.index(name) :]
            first = cycle.index(min(cycle))
            ring = [*cycle[first:], *cycle[:first], cycle[first]]
            for member in cycle:
                why[member] = (
                    f"Queue {member}.spec.parent: the parents form a cycle, {' -> '.join(ring)}"
                )
            path = path[: path.index(name)]
        # Each queue left on the path has the next (the last: `name`) as its bad parent.
        parents = [*path[1:], name]
        for child, parent in reversed(list(zip(path, parents[: len(path)], strict=True))):
            reason = why.get(parent) or rejected.get(parent)
            state = "does not exist" if reason is None else f"is invalid: {reason}"
            why[child] = f"Queue {child}.spec.parent: queue {parent!r} {state}"
    return why


def priority_class_from_object(obj: Obj) -> PriorityClass:
    where = describe(obj, kind="PriorityClass")
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(f"{where}.value: {value!r} is not a whole number")
    return PriorityClass(
        name=name_of(obj),
        value=value,
        global_default=bool(obj.get("globalDefault")),
        preemption_policy=preemption_policy(obj.get("preemptionPolicy"), where=where),
    )


PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")


def preemption_policy(value: object, *, where: str) -> str:
    """PreemptLowerPriority (the API's default) or Never: whether pods may preempt."""
    if value is None or value == "":
        return "PreemptLowerPriority"
    if value not in PREEMPTION_POLICIES:
        raise InvalidObject(
            f"{where}.preemptionPolicy: {value!r} is not one of {', '.join(PREEMPTION_POLICIES)}"
        )
    return str(value)
