"""PodGroups of our API group and of the schedulers users migrate from.

All of them carry `spec.minMember`; the rest differs in name only, so one reader serves.
Our CRD requires minMember; the peers' CRDs do not, and their schedulers read a group
without one as a quorum of 0 (Go's zero value): each member starts as it fits.
"""

import re

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import (
    Obj,
    creation_of,
    describe,
    mapping,
    name_of,
    namespace_of,
    text,
    whole_number,
)
from batchsched.api.nativegroups import NATIVE_API, fill_native
from batchsched.api.objects import GROUP_PHASES, PodGroup
from batchsched.api.queues import DEFAULT_QUEUE
from batchsched.api.reads import keys_under, reads
from batchsched.api.resources import parse_resource_list, volcano_counts
from batchsched.api.spanclock import ANNOTATIONS as CLOCK_ANNOTATIONS
from batchsched.api.spanclock import read_stored_clock
from batchsched.api.topology import network_topology, sub_group_policies

GROUP = "scheduling.batchsched.io"
VERSION = "v1alpha1"
# The apiVersion of our own PodGroups and Queues.
OUR_API = f"{GROUP}/{VERSION}"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"

# apiVersion -> how that API spells the schedule timeout (None: it has none).
POD_GROUP_APIS: dict[str, str | None] = {
    OUR_API: "scheduleTimeoutSeconds",
    # kube-batch's PodGroups: v1alpha1, then v1alpha2 in a group of its own (also
    # Volcano's before scheduling.volcano.sh). Neither has a schedule timeout.
    "scheduling.incubator.k8s.io/v1alpha1": None,
    "scheduling.sigs.dev/v1alpha2": None,
    "scheduling.sigs.k8s.io/v1alpha1": "scheduleTimeoutSeconds",
    "scheduling.volcano.sh/v1beta1": None,
    "scheduling.x-k8s.io/v1alpha1": "scheduleTimeoutSeconds",
    "batch.scheduler.tencent.com/v1": "maxScheduleTime",
    # Kubernetes' own (api/nativegroups.py): spec.schedulingPolicy, not minMember.
    NATIVE_API: None,
}

# Volcano's API, whose CRD allows minMember 0 (its job controller writes it for a job
# with no minimum: every member starts on its own) and has spec.minTaskMember.
VOLCANO_API = "scheduling.volcano.sh/v1beta1"

# Volcano's job waiting time for its sla plugin, on the PodGroup (the first key is
# Volcano's current spelling, read first).
WAITING_TIME_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")

# What pod_group_from_object reads (api/reads.py): the apiVersion too, as a PodGroup of
# one name may exist in several APIs.
POD_GROUP_READS = reads(
    "PodGroup",
    "apiVersion",
    "metadata.creationTimestamp",
    *keys_under("metadata.annotations", WAITING_TIME_ANNOTATIONS),
    *keys_under("metadata.annotations", CLOCK_ANNOTATIONS),
    "spec",
    "status.phase",
)


def pod_group_from_object(obj: Obj, *, default_creation: float = 0.0) -> PodGroup:
    """Parse any supported PodGroup. A malformed one comes back with `error` set.

    Keeping the malformed group (rather than dropping it) lets its pods wait with a
    message that says what to fix, instead of being scheduled alone.
    """
    namespace, name = namespace_of(obj), name_of(obj)
    where = describe(obj, kind="PodGroup")
    api_version = str(obj.get("apiVersion") or "")
    group = PodGroup(
        namespace=namespace,
        name=name,
        min_member=1,
        creation=creation_of(obj, default=default_creation),
        api_version=api_version,
        uid=str((obj.get("metadata") or {}).get("uid") or ""),
    )
    try:
        _fill(group, obj, where=where)
    except InvalidObject as error:
        group.error = str(error)
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        read_stored_clock(group, annotations)
    return group


def _fill(group: PodGroup, obj: Obj, *, where: str) -> None:
    if group.api_version not in POD_GROUP_APIS:
        raise InvalidObject(
            f"{where}: apiVersion {group.api_version!r} is not one of "
            f"{', '.join(sorted(POD_GROUP_APIS))}"
        )
    if group.api_version == NATIVE_API:
        fill_native(group, obj, where=where)
        return
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    status = mapping(obj.get("status"), where=f"{where}.status")
    volcano = group.api_version == VOLCANO_API
    if "minMember" in spec:
        # Peers' CRDs other than Volcano's state `minimum: 1` for a minMember that is set.
        group.min_member = whole_number(
            spec["minMember"], where=f"{where}.spec.minMember", minimum=0 if volcano else 1
        )
    elif group.api_version == OUR_API:
        raise InvalidObject(f"{where}: spec.minMember is required")
    else:
        group.min_member = 0
    if volcano:
        group.min_task_member = _min_task_member(
            spec.get("minTaskMember"), where=f"{where}.spec.minTaskMember"
        )
    if volcano or group.api_version == OUR_API:
        # Ours in Volcano's shape (api/topology.py); values batchsched cannot keep refused.
        group.network_topology = network_topology(
            spec.get("networkTopology"), where=f"{where}.spec.networkTopology"
        )
        group.sub_groups = sub_group_policies(
            spec.get("subGroupPolicy"), where=f"{where}.spec.subGroupPolicy"
        )
    group.min_resources = parse_resource_list(
        spec.get("minResources"), where=f"{where}.spec.minResources"
    )
    if group.api_version == VOLCANO_API:
        # Read as Volcano reads them: its job controller writes quota usage there.
        group.min_resources = {k: v for k, v in group.min_resources.items() if volcano_counts(k)}
    queue = text(spec.get("queue"), where=f"{where}.spec.queue", default="")
    # Unset, the namespace's queue applies, else the default one (see model/snapshot.py).
    group.queue, group.queue_explicit = queue or DEFAULT_QUEUE, bool(queue)
    group.priority_class_name = text(
        spec.get("priorityClassName"), where=f"{where}.spec.priorityClassName", default=""
    )
    timeout_key = POD_GROUP_APIS[group.api_version]
    if timeout_key and spec.get(timeout_key) is not None:
        raw = spec[timeout_key]
        field = f"{where}.spec.{timeout_key}"
        group.schedule_timeout_seconds = (
            parse_duration(raw, where=field)
            if timeout_key == "maxScheduleTime"
            else whole_number(raw, where=field, minimum=1)
        )
    phase = status.get("phase")
    group.phase = next((p for p in GROUP_PHASES if p == phase), "Pending")
    annotations = mapping(
        (obj.get("metadata") or {}).get("annotations"), where=f"{where}.metadata.annotations"
    )
    for key in WAITING_TIME_ANNOTATIONS:
        if key in annotations:
            group.waiting_seconds = parse_duration(
                annotations[key], where=f"{where}.metadata.annotations[{key}]"
            )
            break


def _min_task_member(raw: object, *, where: str) -> dict[str, int]:
    """Task role -> members of it needed; a role needing 0 is as good as unlisted."""
    minimums = mapping(raw, where=where)
    counts = {
        str(role): whole_number(value, where=f"{where}.{role}", minimum=0)
        for role, value in minimums.items()
    }
    return {role: count for role, count in counts.items() if count}


# "ms" before "m": the first alternative that matches wins, and "500ms" is not "500m" + "s".
# Every unit of Go's time.ParseDuration, which Volcano reads its durations with.
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|h|m|s)")
_UNIT_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
}


def parse_duration(raw: object, *, where: str) -> float:
    """A Go duration ("1m30s", "500ms") or a bare number of seconds."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw)
    else:
        text = str(raw).strip()
        parts = _DURATION_PART.findall(text)
        if not text or "".join(n + u for n, u in parts) != text:
            raise InvalidObject(f"{where}: {raw!r} is not a duration like 30s, 5m or 1h30m")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidObject(f"{where}: {raw!r} must be positive")
    return seconds
