"""Queues and PriorityClasses."""

from collections.abc import Mapping

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import Obj, describe, flag, mapping, name_of, text, whole_number
from batchsched.api.objects import PriorityClass, Queue
from batchsched.api.reads import reads
from batchsched.api.resources import ResourceList, format_amount, parse_resource_list

DEFAULT_QUEUE = "default"
# Volcano's implied top of the queue tree: naming it as a parent means having none.
ROOT_QUEUE = "root"
# Every key of a Queue's spec we read. Anything else (Volcano's affinity, extendClusters,
# priority, type, dequeueStrategy, or a typo) is refused by name rather than ignored.
SPEC_KEYS = ("weight", "capability", "reclaimable", "state", "guarantee", "deserved", "parent")

# What queue_from_object and priority_class_from_object read (api/reads.py); a Queue's
# apiVersion too, as a Queue of one name may exist in our API and Volcano's.
QUEUE_READS = reads("Queue", "apiVersion", "spec")
PRIORITY_CLASS_READS = reads("PriorityClass", "value", "globalDefault", "preemptionPolicy")


def queue_from_object(obj: Obj) -> Queue:
    where = describe(obj, kind="Queue")
    name = name_of(obj)
    if name == ROOT_QUEUE:
        raise InvalidObject(
            f"{where}: {ROOT_QUEUE!r} is the top of the queue tree, which the scheduler "
            "implies (it holds the whole cluster); name the queue otherwise"
        )
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    _refuse_unknown(spec, SPEC_KEYS, where=f"{where}.spec")
    state = str(spec.get("state") or "Open")
    if state not in ("Open", "Closed"):
        raise InvalidObject(f"{where}.spec.state: {state!r} is not one of Open, Closed")
    guarantee_spec = mapping(spec.get("guarantee"), where=f"{where}.spec.guarantee")
    _refuse_unknown(guarantee_spec, ("resource",), where=f"{where}.spec.guarantee")
    capability = parse_resource_list(spec.get("capability"), where=f"{where}.spec.capability")
    guarantee = parse_resource_list(
        guarantee_spec.get("resource"), where=f"{where}.spec.guarantee.resource"
    )
    deserved = parse_resource_list(spec.get("deserved"), where=f"{where}.spec.deserved")
    # Volcano's order: guarantee <= deserved <= capability, each where both are set.
    _at_most(guarantee, "guarantee.resource", capability, "capability", where=where)
    _at_most(guarantee, "guarantee.resource", deserved, "deserved", where=where)
    _at_most(deserved, "deserved", capability, "capability", where=where)
    parent = text(spec.get("parent"), where=f"{where}.spec.parent", default=ROOT_QUEUE)
    return Queue(
        name=name,
        weight=whole_number(spec.get("weight", 1), where=f"{where}.spec.weight", minimum=1),
        capability=capability,
        reclaimable=flag(spec.get("reclaimable", True), where=f"{where}.spec.reclaimable"),
        open=state == "Open",
        guarantee=guarantee,
        deserved=deserved,
        parent=None if parent == ROOT_QUEUE else parent,
    )


def _refuse_unknown(spec: Obj, known: tuple[str, ...], *, where: str) -> None:
    for key in spec:
        if key not in known:
            raise InvalidObject(
                f"{where}.{key} is not supported; the keys read are {', '.join(known)}"
            )


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
