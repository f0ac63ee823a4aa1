"""Kubernetes' own gang API: `scheduling.k8s.io/v1alpha2` PodGroups and Workloads, and
the pods' `spec.schedulingGroup` that names them (Kubernetes 1.36).

A PodGroup's `schedulingPolicy` is either `gang` (at least `minCount` pods start in one
decision, or none does) or `basic` (every pod on its own, the group used for grouping
and status only); both map onto our gang (`PodGroup.min_member`, 0 for basic). What
the group cannot have honoured here is refused, naming key and value, and its pods wait
with that message. A Workload is read for display only: kube-scheduler never reads it,
as the PodGroup carries a copy of its template's policy.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    describe,
    mapping,
    name_of,
    namespace_of,
    text,
    whole_number,
)
from batchsched.api.objects import GroupRef, PodGroup
from batchsched.api.reads import reads

NATIVE_API = "scheduling.k8s.io/v1alpha2"

# kube-scheduler's GangScheduling PreEnqueue messages (v1.36), word for word: what a
# pod waits with until its PodGroup exists and, for a gang, minCount of its pods do.
# Ours add, in brackets, the object and field behind them.
AWAITING_GROUP = 'waiting for pod\'s pod group "{name}" to appear in scheduling queue'
AWAITING_MEMBERS = "waiting for minCount pods from a gang to appear in scheduling queue"

# spec.disruptionMode: how the group may be preempted. `Pod` (the API server's default)
# lets members go one by one, which is what preemption here may do; `PodGroup` asks for
# all-or-nothing eviction of the group as a victim, which it does not keep.
DISRUPTION_MODES = ("Pod", "PodGroup")
HONOURED_DISRUPTION = "Pod"

# Spec keys refused while set, and why: constraints no placement here keeps yet.
REFUSED_SPEC = {
    "schedulingConstraints": "batchsched keeps no topology domain for this PodGroup yet",
    "resourceClaims": "batchsched allocates no ResourceClaims for a PodGroup yet",
}
# Spec keys read: the policy, the Workload template it was copied from (display),
# the disruption mode and the priority (see fill_native).
READ_SPEC = (
    "schedulingPolicy",
    "podGroupTemplateRef",
    "disruptionMode",
    "priorityClassName",
    "priority",
)

WORKLOAD_READS = reads("Workload", "spec.controllerRef")


@dataclass(frozen=True, slots=True)
class Workload:
    """A Workload as explain and the simulator's report show it: what made it, its
    controllerRef ("Job train"). Its templates' policies are the PodGroups' own copies."""

    namespace: str
    name: str
    controller: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def fill_native(group: PodGroup, obj: Obj, *, where: str) -> None:
    """Read a v1alpha2 PodGroup's spec into `group`; raises InvalidObject naming the key
    and value it cannot honour."""
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    for key, why in REFUSED_SPEC.items():
        if spec.get(key):
            raise InvalidObject(f"{where}.spec.{key}: {spec[key]!r} is not supported: {why}")
    unknown = sorted(set(spec) - set(REFUSED_SPEC) - set(READ_SPEC))
    if unknown:
        # The API server drops fields it does not know; one here is from a newer API
        # than ours, and may be a constraint.
        raise InvalidObject(f"{where}.spec.{unknown[0]}: {spec[unknown[0]]!r} is not known")
    group.basic, group.min_member = policy(spec.get("schedulingPolicy"), where=f"{where}.spec")
    mode = text(spec.get("disruptionMode"), where=f"{where}.spec.disruptionMode", default="Pod")
    if mode not in DISRUPTION_MODES:
        raise InvalidObject(
            f"{where}.spec.disruptionMode: {mode!r} is not one of {', '.join(DISRUPTION_MODES)}"
        )
    if mode != HONOURED_DISRUPTION:
        raise InvalidObject(
            f"{where}.spec.disruptionMode: {mode!r} is not supported: preemption here "
            "may evict members of a group one by one"
        )
    group.priority_class_name = text(
        spec.get("priorityClassName"), where=f"{where}.spec.priorityClassName", default=""
    )
    if spec.get("priority") is not None:
        group.priority = whole_number(
            spec["priority"], where=f"{where}.spec.priority", minimum=-(2**31)
        )
    group.template = _template(spec.get("podGroupTemplateRef"), where=f"{where}.spec")


def policy(raw: object, *, where: str) -> tuple[bool, int]:
    """(basic, minCount) of a schedulingPolicy, which holds exactly one policy. Basic
    is a gang of no minimum: each pod starts as it fits."""
    found = mapping(raw, where=f"{where}.schedulingPolicy")
    unknown = sorted(set(found) - {"basic", "gang"})
    if unknown:
        raise InvalidObject(
            f"{where}.schedulingPolicy.{unknown[0]}: {found[unknown[0]]!r} is not a policy "
            "batchsched knows (basic, gang)"
        )
    stated = [key for key in ("basic", "gang") if found.get(key) is not None]
    if len(stated) != 1:
        raise InvalidObject(
            f"{where}.schedulingPolicy: exactly one of basic, gang must be set, got "
            f"{', '.join(stated) or 'none'}"
        )
    if stated == ["basic"]:
        mapping(found["basic"], where=f"{where}.schedulingPolicy.basic")
        return True, 0
    gang = mapping(found["gang"], where=f"{where}.schedulingPolicy.gang")
    if "minCount" not in gang:
        raise InvalidObject(f"{where}.schedulingPolicy.gang.minCount is required")
    return False, whole_number(
        gang["minCount"], where=f"{where}.schedulingPolicy.gang.minCount", minimum=1
    )


def _template(raw: object, *, where: str) -> str:
    """ "workload/template" of spec.podGroupTemplateRef.workload, "" without one."""
    ref = mapping(mapping(raw, where=f"{where}.podGroupTemplateRef").get("workload"), where=where)
    if not ref:
        return ""
    at = f"{where}.podGroupTemplateRef.workload"
    workload = text(ref.get("workloadName"), where=f"{at}.workloadName", default="")
    template = text(ref.get("podGroupTemplateName"), where=f"{at}.podGroupTemplateName", default="")
    return f"{workload}/{template}"


def scheduling_group(spec: Mapping[str, object], *, namespace: str, where: str) -> GroupRef | None:
    """The PodGroup a pod's spec.schedulingGroup names, None without one."""
    raw = spec.get("schedulingGroup")
    if raw is None:
        return None
    group = mapping(raw, where=f"{where}.spec.schedulingGroup")
    unknown = sorted(set(group) - {"podGroupName"})
    if unknown:
        raise InvalidObject(
            f"{where}.spec.schedulingGroup.{unknown[0]}: {group[unknown[0]]!r} is not "
            "known: a pod joins a group by podGroupName only"
        )
    name = group.get("podGroupName")
    if not isinstance(name, str) or not name:
        raise InvalidObject(
            f"{where}.spec.schedulingGroup.podGroupName: {name!r} must name a PodGroup"
        )
    return GroupRef(namespace=namespace, name=name, native=True)


def awaiting_group(key: str) -> str:
    """Why the pods naming PodGroup `key` ("ns/name") by spec.schedulingGroup wait."""
    name = key.partition("/")[2]
    return (
        f"{AWAITING_GROUP.format(name=name)} (PodGroup {key}, named by the pods' "
        "spec.schedulingGroup.podGroupName, does not exist)"
    )


def awaiting_members(key: str, *, alive: int, needed: int) -> str:
    """Why a gang with fewer pods than its minCount waits: no decision could start it."""
    return (
        f"{AWAITING_MEMBERS} (PodGroup {key}: {alive} pods exist, "
        f"spec.schedulingPolicy.gang.minCount is {needed})"
    )


def native_origin(group: PodGroup, workloads: Mapping[str, Workload]) -> str:
    """What explain and the simulator's report say of a Kubernetes PodGroup: its policy,
    then the Workload template it was made from and that Workload's controller, as far
    as they are known ("gang minCount 4, Workload train-x/train-pgt-0 of Job train")."""
    policy = "basic" if group.basic else f"gang minCount {group.min_member}"
    if not group.template:
        return policy
    workload = workloads.get(f"{group.namespace}/{group.template.partition('/')[0]}")
    controller = f" of {workload.controller}" if workload and workload.controller else ""
    return f"{policy}, Workload {group.template}{controller}"


def workload_from_object(obj: Obj) -> Workload:
    where = describe(obj, kind="Workload")
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    controller = mapping(spec.get("controllerRef"), where=f"{where}.spec.controllerRef")
    return Workload(
        namespace=namespace_of(obj),
        name=name_of(obj),
        controller=" ".join(str(controller[k]) for k in ("kind", "name") if controller.get(k)),
    )
