"""Queues and PriorityClasses."""

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import Obj, describe, flag, mapping, name_of, whole_number
from batchsched.api.objects import PriorityClass, Queue
from batchsched.api.resources import parse_resource_list

DEFAULT_QUEUE = "default"


def queue_from_object(obj: Obj) -> Queue:
    where = describe({**obj, "kind": "Queue"})
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    state = str(spec.get("state") or "Open")
    if state not in ("Open", "Closed"):
        raise InvalidObject(f"{where}.spec.state: {state!r} is not one of Open, Closed")
    return Queue(
        name=name_of(obj),
        weight=whole_number(spec.get("weight", 1), where=f"{where}.spec.weight", minimum=1),
        capability=parse_resource_list(spec.get("capability"), where=f"{where}.spec.capability"),
        reclaimable=flag(spec.get("reclaimable", True), where=f"{where}.spec.reclaimable"),
        open=state == "Open",
    )


def priority_class_from_object(obj: Obj) -> PriorityClass:
    where = describe({**obj, "kind": "PriorityClass"})
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
