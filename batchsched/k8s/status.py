"""Publishing what sessions decide: pod conditions, PodGroup and Queue status, and events.

A write goes out only when what an object should show differs from what it shows: as
the watch last saw it, or as last written here. Writes wait in a queue where a newer
status for an object replaces a queued older one, and a few workers send them, so a
cluster full of pending pods costs writes when their reasons change, not every session,
and status never competes with binding: writes wait while binds are queued or in
flight, or a session may send more (at most `defer_seconds`, so a steady stream of
binds cannot starve them). Writes to one object go one at a time: two in flight at
once may land in either order, and an older reason landing last would stay, as the
newer one is what the writer remembers writing. Like the binder, the writer is fenced:
nothing is sent once the lease cannot be proven ours (`valid_for`), and what is queued
then is dropped.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from batchsched.api.groups import OUR_API
from batchsched.api.nativegroups import NATIVE_API
from batchsched.api.objects import PodGroup, Queue, Task
from batchsched.api.resources import CPU, ResourceList
from batchsched.api.spanclock import OWNER_ANNOTATION, SINCE_ANNOTATION
from batchsched.api.unsupported import GATED_REASON
from batchsched.k8s.client import (
    JSON,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    Requests,
    error_code,
    with_retries,
)
from batchsched.k8s.events import EventRecorder, ObjectRef, Write, rfc3339
from batchsched.k8s.fence import Fenced, fenced, unbounded
from batchsched.k8s.workers import run_workers
from batchsched.metrics import API_WRITES
from batchsched.model.decisions import (
    SCHEDULED,
    UNSCHEDULABLE,
    Binding,
    Condition,
    JobStatus,
    SpanClock,
    TopologyDomain,
)
from batchsched.model.reasons import Code, Reason

log = logging.getLogger(__name__)

API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "Queue": OUR_API,
    "PodGroup": OUR_API,
    "PriorityClass": "scheduling.k8s.io/v1",
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "CSIDriver": "storage.k8s.io/v1",
    "CSIStorageCapacity": "storage.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "Workload": NATIVE_API,
}
# A write that failed is sent again after this, doubling each time up to the most.
RETRY_LATER_SECONDS = 10.0
RETRY_LATER_MAX_SECONDS = 300.0
# kube-scheduler's PodScheduled reason for a pod placed whose binding then failed.
SCHEDULER_ERROR_REASON = "SchedulerError"
# How often event series are looked at for counts to write (events.py).
SERIES_FLUSH_SECONDS = 10.0
# kube-scheduler's conditions (v1.36): a victim pod's, and Kubernetes' own PodGroup's
# (scheduling.k8s.io/v1alpha2), with the reasons and the message it writes; placed,
# the reason is SCHEDULED, as our own groups' condition says.
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"
POD_GROUP_SCHEDULED = "PodGroupScheduled"
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
# Where Volcano records the HyperNode a job was placed in (its scheduler's
# JobAllocatedHyperNode, v1.15.1): the PodGroup's status has no field for it.
VOLCANO_DOMAIN_ANNOTATION = "volcano.sh/job-allocated-hypernode"
# How a Kubernetes PodGroup's PodGroupScheduled message names the domain it was placed
# in: "scheduled in the topology domain <key>=<value>".
TOPOLOGY_DOMAIN_MESSAGE = "scheduled in the topology domain"
# The writer's target of a group's softWait clock, apart from its status: neither
# replaces the other while queued.
SOFT_WAIT_TARGET = "soft-wait"
# The cause the API server gives for refusing to create anything, events included, in a
# namespace being deleted; events to it are not sent for a while after.
NAMESPACE_TERMINATING = "NamespaceTerminating"
TERMINATING_SILENCE_SECONDS = 60.0


def disruption_message(scheduler_name: str, preemptor: str = "pod") -> str:
    """kube-scheduler's DisruptionTarget message, naming the preemptor's scheduler."""
    return f"{scheduler_name}: preempting to accommodate a higher priority {preemptor}"


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    """How an event names the object it is about."""
    meta = obj["metadata"]
    kind = str(obj["kind"])
    ref = {
        "apiVersion": str(obj.get("apiVersion") or API_VERSIONS[kind]),
        "kind": kind,
        "name": str(meta["name"]),
    }
    for key in ("namespace", "uid"):
        if meta.get(key):
            ref[key] = str(meta[key])
    return ref


def pod_ref(key: str, uid: str | None = None) -> ObjectRef:
    namespace, name = key.split("/", 1)
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
    if uid:
        ref["uid"] = uid
    return ref


@dataclass(frozen=True)
class QueueUsage:
    """What a queue's Status shows: bound resources and its groups by phase."""

    allocated: ResourceList = field(default_factory=dict)
    pending: int = 0
    inqueue: int = 0
    running: int = 0


def quantity(resource: str, amount: int) -> str:
    """An amount in the core's units as a Kubernetes quantity (CPU is in millicores)."""
    if resource == CPU and amount % 1000:
        return f"{amount}m"
    return str(amount // 1000 if resource == CPU else amount)


class Unwritable(Exception):
    """A status write answered 404 while its object exists: the path is not served (a
    status subresource the kind's CRD lacks), so it can never land."""


@dataclass(frozen=True, kw_only=True)
class StatusForm:
    """How one project writes its PodGroups' status: its phase names for ours (None: it
    has no phase), the counts it keeps, its conditions (ours: one of our shape;
    kube-scheduler's: PodGroupScheduled, see _pod_group_scheduled), and whether it
    records when scheduling began. `kubectl get` of its kind reads these fields."""

    phase: Callable[[JobStatus], str] | None
    counts: tuple[str, ...]
    conditions: Literal["ours", "kube-scheduler"] | None = None
    start_time: bool = False
    # Whether its CRD serves a status subresource; without one (Volcano's PodGroup)
    # status is patched on the object itself.
    status_subresource: bool = True
    # Whether its conditions record the object's generation they were written for.
    generations: bool = False
    # A form of a scheduler we stand in for: written unless --peer-status=skip.
    peer: bool = True
    # Where the topology domain holding a gang that asked for one is written: ours in
    # status.topologyDomain, Volcano's in its annotation; Kubernetes' own in the
    # PodGroupScheduled message (see _pod_group_scheduled).
    domain: Literal["status", "annotation"] | None = None

    @property
    def patch_type(self) -> str:
        """A built-in kind's conditions merge by type under a strategic merge patch,
        keeping those written by others; a custom resource takes a merge patch only,
        which replaces the list, so ours hold one condition."""
        return STRATEGIC_MERGE_PATCH if self.conditions == "kube-scheduler" else MERGE_PATCH


def _our_phase(job: JobStatus) -> str:
    return job.phase


def _volcano_phase(job: JobStatus) -> str:
    """Volcano has no Failed: its scheduler calls a group short of minMember with some
    members gone Unknown."""
    return "Unknown" if job.phase == "Failed" else job.phase


def _kube_batch_phase(job: JobStatus) -> str:
    """kube-batch has neither Completed nor Failed: its scheduler counts succeeded
    members as ready, so a finished gang stays Running, and a failed one is Unknown."""
    return {"Completed": "Running", "Failed": "Unknown"}.get(job.phase, job.phase)


def _coscheduling_phase(job: JobStatus) -> str:
    """scheduler-plugins' current API: Scheduling while minMember are placed but fewer
    are running, Running once they run, Finished and Failed for the ends; waiting is
    Pending (it has no Inqueue)."""
    if job.phase == "Running":
        return "Running" if job.running >= job.min_member else "Scheduling"
    return {"Inqueue": "Pending", "Completed": "Finished"}.get(job.phase, job.phase)


def _tencent_phase(job: JobStatus) -> str:
    """Tencent's batch-scheduler, and scheduler-plugins' first API that came from it:
    PreScheduling for a group let in but not placed, Scheduling while some but fewer
    than minMember are placed, Scheduled once minMember are, Running once they run."""
    if job.phase == "Running":
        return "Running" if job.running >= job.min_member else "Scheduled"
    if job.phase in ("Pending", "Inqueue") and job.scheduled:
        return "Scheduling"
    return {"Inqueue": "PreScheduling", "Completed": "Finished"}.get(job.phase, job.phase)


_COUNTS = ("running", "succeeded", "failed")
_OURS = StatusForm(
    phase=_our_phase,
    counts=("scheduled", *_COUNTS),
    conditions="ours",
    peer=False,
    domain="status",
)
_KUBE_BATCH = StatusForm(phase=_kube_batch_phase, counts=_COUNTS, conditions="ours")
_TENCENT = StatusForm(phase=_tencent_phase, counts=("scheduled", *_COUNTS), start_time=True)
# By API group: each project kept its status's shape across its versions.
STATUS_FORMS = {
    "scheduling.batchsched.io": _OURS,
    "scheduling.volcano.sh": StatusForm(
        phase=_volcano_phase,
        counts=_COUNTS,
        conditions="ours",
        status_subresource=False,
        domain="annotation",
    ),
    "scheduling.incubator.k8s.io": _KUBE_BATCH,
    "scheduling.sigs.dev": _KUBE_BATCH,
    "scheduling.x-k8s.io": StatusForm(phase=_coscheduling_phase, counts=_COUNTS, start_time=True),
    # scheduler-plugins' CRD of this API (v0.22) has no status subresource.
    "scheduling.sigs.k8s.io": replace(_TENCENT, status_subresource=False),
    "batch.scheduler.tencent.com": _TENCENT,
    # Kubernetes' own (1.36): conditions only, as kube-scheduler writes them.
    "scheduling.k8s.io": StatusForm(
        phase=None, counts=(), conditions="kube-scheduler", generations=True, peer=False
    ),
}


def target_kind(kind: str, api_version: str) -> str:
    """The writer's name for a kind of one API: a PodGroup or Queue of one name may exist
    in ours and a peer's, and each is written apart, so a peer's kinds carry their API."""
    if kind in ("PodGroup", "Queue") and api_version != OUR_API:
        return f"{kind} {api_version}"
    return kind


class StatusWriter:
    def __init__(
        self,
        api: Requests,
        *,
        scheduler_name: str,
        instance: str,
        binds_idle: asyncio.Event,
        valid_for: Callable[[], float] = unbounded,
        write_peers: bool = True,
        queue_apis: Mapping[str, str] | None = None,
        concurrency: int = 4,
        retry_seconds: float = 30.0,
        defer_seconds: float = 30.0,
    ) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.instance = instance
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self.binds_idle = binds_idle
        self.valid_for = valid_for
        self.defer_seconds = defer_seconds
        # Whether the PodGroups and Queues of the schedulers we stand in for get status.
        self.write_peers = write_peers
        # Queue name -> the apiVersion of the Queue that stands for it (ours by default).
        self.queue_apis: Mapping[str, str] = {} if queue_apis is None else queue_apis
        # (kind, key) -> what the object shows per the watch, and what we last wrote to it
        # (a softWait clock's target: the clock written, and the one the object showed).
        self._observed: dict[tuple[str, str], Any] = {}
        self._generations: dict[tuple[str, str], int] = {}
        self._written: dict[tuple[str, str], Any] = {}
        # PodGroup -> the domain its annotation was last written with (Volcano's form),
        # once the write landed; and the one the latest write asked for, which counts
        # instead while that write is queued, being sent or to be sent again.
        self._annotated: dict[tuple[str, str], str | None] = {}
        self._annotating: dict[tuple[str, str], str | None] = {}
        # Keys of the groups a softWait clock was last written to (not taken off since).
        self._clocked: set[str] = set()
        # Pod -> when it became unschedulable, while the write saying so is not sent: a
        # newer reason that replaces that write in the queue must carry the time along.
        self._unsent_since: dict[tuple[str, str], str] = {}
        # Queued writes by target, oldest first; an event's target is unique to it.
        self._queue: dict[tuple[str, str], tuple[str, Write]] = {}
        # Targets a worker is writing: their queued writes wait until it is done.
        self._sending: set[tuple[str, str]] = set()
        # Writes that failed, to be sent again: how many times in a row, and the last.
        self._failed: dict[tuple[str, str], tuple[int, str, Write]] = {}
        self._wake = asyncio.Event()
        self.recorder = EventRecorder(
            api, self._enqueue_event, controller=scheduler_name, instance=instance
        )
        # Namespace being deleted -> until when (monotonic) no event is sent to it.
        self._terminating: dict[str, float] = {}

    # What objects show now, from the watch.

    def observe(self, kind: str, key: str, shown: object, generation: int | None = None) -> None:
        """What the object shows now, and its metadata.generation where its form records it."""
        if shown is None:
            self._observed.pop((kind, key), None)
        else:
            self._observed[(kind, key)] = shown
        if generation is None:
            self._generations.pop((kind, key), None)
        else:
            self._generations[(kind, key)] = generation

    def observe_clock(self, kind: str, key: str, shown: tuple[str, str] | None) -> None:
        """The softWait clock a group's object shows now: once it shows the one written
        last, that write is no longer on its way, and what the object shows decides
        (a later edit back to what it showed before the write is replaced too)."""
        target = (f"{kind} {SOFT_WAIT_TARGET}", key)
        if target in self._written and self._written[target][0] == shown:
            del self._written[target]

    def forget(self, kind: str, key: str) -> None:
        """The object is gone: drop what we know and what we meant to write to it."""
        stores = (
            self._observed,
            self._generations,
            self._written,
            self._unsent_since,
            self._annotated,
            self._annotating,
        )
        for store in (*stores, self._queue, self._failed):
            store.pop((kind, key), None)
            store.pop((f"{kind} {SOFT_WAIT_TARGET}", key), None)
        for store in (self._queue, self._failed):
            store.pop((f"{kind} {DISRUPTION_TARGET}", key), None)
        if kind.startswith("PodGroup"):
            self._clocked.discard(key)

    def _shown(self, kind: str, key: str) -> Any:
        target = (kind, key)
        return self._written[target] if target in self._written else self._observed.get(target)

    # What sessions decide.

    def pods(self, pending: Mapping[str, Reason], tasks: Mapping[str, Task]) -> None:
        """PodScheduled=False with the session's reason, and a FailedScheduling event
        (SchedulingGated and no event for a pod with scheduling gates)."""
        for key, message in pending.items():
            target = ("Pod", key)
            shown = self._shown(*target)
            if shown == message:
                continue
            self._written[target] = message
            # A gated pod is not tried at all: kube-scheduler says so, and raises no event.
            gated = message.code is Code.GATED
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": GATED_REASON if gated else "Unschedulable",
                "message": message,
            }
            # Otherwise the merge keeps the time the pod first became unschedulable.
            since = rfc3339(time.time()) if shown is None else self._unsent_since.get(target)
            if since is not None:
                condition["lastTransitionTime"] = since
                self._unsent_since[target] = since
            write = partial(self._pod_condition, key, condition, tasks)
            self._enqueue(target, "pod_condition", write)
            if not gated:
                task = tasks.get(key)
                ref = pod_ref(key, task.uid if task else None)
                self.event(ref, "Warning", "FailedScheduling", message)

    async def _pod_condition(self, key: str, condition: JSON, tasks: Mapping[str, Task]) -> None:
        """Sent late (after binds): a pod placed in the meantime must not be told it waits."""
        task = tasks.get(key)
        if task is not None and task.node_name is not None:
            self._written.pop(("Pod", key), None)
            self._unsent_since.pop(("Pod", key), None)
            return
        namespace, name = key.split("/", 1)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        body = {"status": {"conditions": [condition]}}
        await self.api.patch(path, body, content_type=STRATEGIC_MERGE_PATCH)
        self._unsent_since.pop(("Pod", key), None)

    def bind_failed(self, key: str, uid: str, message: str, tasks: Mapping[str, Task]) -> None:
        """A decided bind failed (the pod is pending again): as kube-scheduler says of a
        failure after the pod was placed, PodScheduled=False with reason SchedulerError,
        and a FailedScheduling event."""
        self._written[("Pod", key)] = message
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": SCHEDULER_ERROR_REASON,
            "message": message,
            "lastTransitionTime": rfc3339(time.time()),
        }
        write = partial(self._pod_condition, key, condition, tasks)
        self._enqueue(("Pod", key), "pod_condition", write)
        self.event(pod_ref(key, uid), "Warning", "FailedScheduling", message)

    def bound(self, binding: Binding) -> None:
        """The pod is bound: the API server set PodScheduled=True; say where it went."""
        self.forget("Pod", binding.key)
        self.event(
            pod_ref(binding.key, binding.uid),
            "Normal",
            "Scheduled",
            f"Successfully assigned {binding.key} to {binding.node}",
            action="Binding",
        )

    def groups(self, statuses: Mapping[str, JobStatus], groups: Mapping[str, PodGroup]) -> None:
        """Each PodGroup's status in the form its own project writes (STATUS_FORMS): ours
        and Kubernetes' own, and a peer's unless `write_peers` is off. A kind without a
        known form is left alone."""
        now = time.time()
        for key, status in statuses.items():
            group = groups.get(key)
            form = None if group is None else STATUS_FORMS.get(group.api_version.partition("/")[0])
            if group is None or form is None or (form.peer and not self.write_peers):
                continue
            target = (target_kind("PodGroup", group.api_version), key)
            shown = self._shown(*target) or {}
            desired: JSON = {}
            if form.phase is not None:
                desired["phase"] = form.phase(status)
            desired.update((count, getattr(status, count)) for count in form.counts)
            condition = status.condition
            if form.conditions == "kube-scheduler":
                condition = _pod_group_scheduled(condition, group, shown, status.domain)
            domain = status.domain
            if form.domain == "status" and (domain or shown.get("topologyDomain")):
                desired["topologyDomain"] = domain and {"tier": domain.tier, "name": domain.name}
            hypernode = domain.name if domain is not None else None
            annotated = form.domain == "annotation"
            moved = annotated and self._annotation(target) != hypernode
            if form.conditions is not None and condition is not None:
                generation = self._generations.get(target) if form.generations else None
                desired["conditions"] = [_condition(condition, shown, generation)]
            if form.start_time:
                desired["scheduleStartTime"] = shown.get("scheduleStartTime") or rfc3339(now)
            by_type = form.patch_type == STRATEGIC_MERGE_PATCH
            if not moved and (not desired or _same(desired, shown, by_type=by_type)):
                continue
            self._written[target] = _merged(shown, desired, by_type=by_type)
            path = f"/apis/{group.api_version}/namespaces/{group.namespace}/podgroups/{group.name}"
            if form.status_subresource:
                path += "/status"
            body: JSON = {"status": desired}
            write = partial(self._patch_status, path, body, form.patch_type)
            if annotated and (
                hypernode is not None or target in self._annotated or target in self._annotating
            ):
                # Volcano's PodGroup has no status subresource: one patch of the object.
                # Every write carries the annotation, as it may replace a queued one that
                # carried it and was not sent.
                body["metadata"] = {"annotations": {VOLCANO_DOMAIN_ANNOTATION: hypernode}}
                self._annotating[target] = hypernode
                write = partial(self._annotate, target, hypernode, write)
            self._enqueue(target, "podgroup_status", write)
            # News: a changed condition, or for a form without conditions a changed phase.
            if form.conditions is not None:
                news = not _same_condition(desired, shown, by_type=by_type)
            else:
                news = desired.get("phase") != shown.get("phase")
            if status.condition is not None and news:
                self.event(_group_ref(group), *_group_event(status.condition))

    def clocks(
        self,
        clocks: Mapping[str, SpanClock],
        groups: Mapping[str, PodGroup],
        stored: Iterable[str],
        served: Callable[[str], bool],
    ) -> None:
        """Keep each softWait clock a session kept on its gang's group object
        (api/spanclock.py), so that a restart or a new leader goes on counting it, and
        take it off a group of a job `served` here once the session drops it (the gang
        holds its minimum): a clock left there would be taken back when the gang next
        waits. `stored`: the groups whose objects show one. A peer's group gets it
        unless `write_peers` is off; a gang with no group object keeps it in memory."""
        for key in {*clocks, *stored, *self._clocked}:
            group = groups.get(key)
            form = None if group is None else STATUS_FORMS.get(group.api_version.partition("/")[0])
            if group is None or form is None or (form.peer and not self.write_peers):
                continue
            clock = clocks.get(key)
            if clock is None and not served(key):
                continue  # another scheduler's, whose clock it is to keep
            desired = None
            if clock is not None and group.uid and clock.owner == group.uid:
                desired = (rfc3339(clock.since, micro=True), group.uid)
            target = (f"{target_kind('PodGroup', group.api_version)} {SOFT_WAIT_TARGET}", key)
            # What the object shows decides: an edit, or another leader's write, is
            # replaced. Only while it shows what it did when this replica wrote is that
            # write taken as shown (on its way, or landed and not yet watched).
            shown = group.stored_clock
            if target in self._written and self._written[target][1] == shown:
                shown = self._written[target][0]
            if shown == desired:
                continue
            self._written[target] = (desired, group.stored_clock)
            if desired is None:
                self._clocked.discard(key)
            else:
                self._clocked.add(key)
            self._enqueue(target, "podgroup_clock", partial(self._clock, group, desired, groups))

    def forget_clocks(self) -> None:
        """The softWait clocks this replica wrote in an earlier term: another leader may
        have written over them since, so what the objects show decides again."""
        for target in [t for t in self._written if t[0].endswith(f" {SOFT_WAIT_TARGET}")]:
            del self._written[target]

    async def _clock(
        self, group: PodGroup, desired: tuple[str, str] | None, groups: Mapping[str, PodGroup]
    ) -> object:
        """Sent late (after binds): not to an object the watch shows made again under
        the name meanwhile. The uid in the patch makes the API server refuse it (422,
        uid immutable) where the watch has not shown that yet."""
        now = groups.get(group.key)
        if now is None or now.uid != group.uid or now.api_version != group.api_version:
            return None
        since, owner = desired or (None, None)
        meta: JSON = {"annotations": {SINCE_ANNOTATION: since, OWNER_ANNOTATION: owner}}
        if group.uid:
            meta["uid"] = group.uid
        path = f"/apis/{group.api_version}/namespaces/{group.namespace}/podgroups/{group.name}"
        return await self.api.patch(path, {"metadata": meta}, content_type=MERGE_PATCH)

    def _annotation(self, target: tuple[str, str]) -> str | None:
        """The domain a group's annotation shows once the write on its way, if one is,
        has landed. A write dropped (the lease lost) or failed for good is not on its
        way: the annotation is then as last written."""
        on_its_way = target in self._queue or target in self._sending or target in self._failed
        if on_its_way and target in self._annotating:
            return self._annotating[target]
        return self._annotated.get(target)

    async def _annotate(
        self, target: tuple[str, str], hypernode: str | None, write: Write
    ) -> object:
        """A write carrying the annotation: it shows `hypernode` once the write landed."""
        answer = await write()
        self._annotated[target] = hypernode
        return answer

    def group_disrupted(self, group: PodGroup, preemptor: str) -> None:
        """Kubernetes' own PodGroup, whose members preemption is evicting below what it
        needs: DisruptionTarget True, reason PreemptionByScheduler, as its API defines it
        (kube-scheduler 1.36 defines it and writes it nowhere yet). It stays: the group
        was preempted, whatever is scheduled after."""
        form = STATUS_FORMS.get(group.api_version.partition("/")[0])
        if form is None or form.conditions != "kube-scheduler":
            return
        target = (target_kind("PodGroup", group.api_version), group.key)
        shown = self._shown(*target) or {}
        condition = Condition(
            DISRUPTION_TARGET,
            PREEMPTION_REASON,
            disruption_message(self.scheduler_name, preemptor),
        )
        generation = self._generations.get(target)
        desired: JSON = {"conditions": [_condition(condition, shown, generation)]}
        if _same(desired, shown, by_type=True):
            return
        self._written[target] = _merged(shown, desired, by_type=True)
        path = f"/apis/{group.api_version}/namespaces/{group.namespace}/podgroups/{group.name}"
        write = partial(self._patch_status, f"{path}/status", {"status": desired}, form.patch_type)
        # A target of its own: a PodGroupScheduled write queued for the group must not
        # replace it, nor it that one.
        self._enqueue((f"{target[0]} {DISRUPTION_TARGET}", group.key), "podgroup_status", write)

    def queues(self, usage: Mapping[str, QueueUsage], queues: Mapping[str, Queue]) -> None:
        """Our Queues' status, and Volcano's (unless `write_peers` is off) in Volcano's
        form: the counts of groups by phase and the resources allocated (a parent's
        with its children's, as Volcano's scheduler writes them). Volcano's state is
        never written: it is status.state itself, which its queue controller and
        `vcctl queue operate` set and we read."""
        for name in queues:
            api_version = self.queue_apis.get(name, OUR_API)
            ours = api_version == OUR_API
            if not ours and not self.write_peers:
                continue
            used = usage.get(name, QueueUsage())
            target = (target_kind("Queue", api_version), name)
            shown = self._shown(*target) or {}
            allocated: dict[str, str | None] = {
                resource: quantity(resource, amount)
                for resource, amount in sorted(used.allocated.items())
                if amount
            }
            # A merge patch keeps map keys it does not mention: null removes them.
            for resource in shown.get("allocated") or {}:
                allocated.setdefault(resource, None)
            desired: JSON = {
                "allocated": allocated,
                "pending": used.pending,
                "inqueue": used.inqueue,
                "running": used.running,
            }
            if _same(desired, shown):
                continue
            written = {**shown, **desired}
            written["allocated"] = {k: v for k, v in allocated.items() if v is not None}
            self._written[target] = written
            path = f"/apis/{api_version}/queues/{name}/status"
            write = partial(self._patch_status, path, {"status": desired})
            self._enqueue(target, "queue_status", write)

    def invalid(self, problems: Mapping[tuple[str, str], tuple[ObjectRef, str]]) -> None:
        """A Warning event on each unusable object, once per distinct problem."""
        for (kind, key), (ref, message) in problems.items():
            target = (f"Invalid{kind}", key)
            if self._written.get(target) != message:
                self._written[target] = message
                self.event(ref, "Warning", "Invalid", message, action="Watching")

    def event(
        self,
        regarding: ObjectRef,
        type: str,
        reason: str,
        note: str,
        *,
        action: str = "Scheduling",
    ) -> None:
        """Recorded as client-go records it (events.py): repeats join one Event's series."""
        if not self._silenced(regarding.get("namespace", "default")):
            self.recorder.record(regarding, type, reason, note, action)

    def namespace_terminating(self, namespace: str) -> None:
        """The API server said `namespace` is being deleted: it would refuse events."""
        self._terminating[namespace] = time.monotonic() + TERMINATING_SILENCE_SECONDS

    def _silenced(self, namespace: str) -> bool:
        until = self._terminating.get(namespace)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self._terminating[namespace]
        return False

    def _enqueue_event(self, target: tuple[str, str], send: Write) -> None:
        # The body is built when the event is sent: events wait for binding to finish,
        # and the bind burst, when most of them are raised, should not pay for them.
        self._enqueue(target, "event", partial(self._unless_silenced, target[1], send))

    async def _unless_silenced(self, key: str, send: Write) -> object:
        return None if self._silenced(key.partition("/")[0]) else await send()

    # Sending.

    def _enqueue(self, target: tuple[str, str], what: str, write: Write) -> None:
        self._queue.pop(target, None)
        self._queue[target] = (what, write)
        self._wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(run_workers(self.concurrency, self._work))
            while True:
                await asyncio.sleep(SERIES_FLUSH_SECONDS)
                self.recorder.flush()

    def _next(self) -> tuple[str, str] | None:
        """The oldest queued target no worker is writing."""
        return next((target for target in self._queue if target not in self._sending), None)

    async def _work(self) -> None:
        while True:
            while self._next() is None:
                self._wake.clear()
                await self._wake.wait()
            # asyncio.timeout, not wait_for: in 3.11 wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.defer_seconds):
                    await self.binds_idle.wait()
            target = self._next()
            if target is None:
                continue
            if self.valid_for() <= 0:
                self._drop_queued()
                continue
            what, write = self._queue.pop(target)
            self._sending.add(target)
            try:
                await self._send(target, what, write)
            finally:
                self._sending.discard(target)
                if target in self._queue:
                    self._wake.set()

    async def _send(self, target: tuple[str, str], what: str, write: Write) -> None:
        try:
            await with_retries(partial(self._fenced, write), seconds=self.retry_seconds)
        except Fenced:
            # Perhaps not written: leading again, the next session compares with the watch.
            self._written.pop(target, None)
            self._drop_queued()
            API_WRITES.labels(what, "fenced").inc()
        except ApiError as error:
            if NAMESPACE_TERMINATING in error.causes:
                # Every namespaced target's key is "namespace/name".
                self.namespace_terminating(target[1].partition("/")[0])
            elif error.status != 404:
                log.error("writing %s of %s/%s failed: %s", what, *target, error)
                self._retry_later(target, what, write)
            API_WRITES.labels(what, "gone" if error.status == 404 else error_code(error)).inc()
        except Unwritable as error:
            log.error("writing %s of %s/%s cannot land: %s", what, *target, error)
            API_WRITES.labels(what, "unwritable").inc()
        except TRANSPORT_ERRORS as error:
            log.error("writing %s of %s/%s failed: %r", what, *target, error)
            self._retry_later(target, what, write)
            API_WRITES.labels(what, error_code(error)).inc()
        else:
            self._failed.pop(target, None)
            API_WRITES.labels(what, "ok").inc()

    def _retry_later(self, target: tuple[str, str], what: str, write: Write) -> None:
        """A write that failed is sent again later, backing off: otherwise the object
        would show what it showed before until what it should show changes again, which
        for a pod set aside may be long after."""
        count = self._failed[target][0] + 1 if target in self._failed else 1
        self._failed[target] = (count, what, write)
        delay = min(RETRY_LATER_SECONDS * 2 ** (count - 1), RETRY_LATER_MAX_SECONDS)
        asyncio.get_running_loop().call_later(delay, self._send_again, target)

    def _send_again(self, target: tuple[str, str]) -> None:
        # The last write that failed, unless a newer one is queued, being sent or went
        # through, or the object was forgotten.
        failed = self._failed.get(target)
        if failed is not None and target not in self._queue and target not in self._sending:
            self._enqueue(target, *failed[1:])

    async def _patch_status(self, path: str, body: JSON, content_type: str = MERGE_PATCH) -> object:
        """The API server answers 404 alike for a deleted object and for a status
        subresource its CRD does not serve; the object itself tells them apart. It is
        looked for by a list of its name, which the role grants (it has no `get`)."""
        try:
            return await self.api.patch(path, body, content_type=content_type)
        except ApiError as error:
            if error.status != 404 or not path.endswith("/status"):
                raise
            collection, _, name = path.removesuffix("/status").rpartition("/")
            found = await self.api.get(f"{collection}?fieldSelector=metadata.name%3D{name}")
            if not found.get("items"):
                raise  # deleted
            raise Unwritable(f"PATCH {path}: HTTP 404, but the object exists") from error

    async def _fenced(self, write: Write) -> object:
        """One attempt, sent only while the lease is ours and given up before it may not be."""
        async with fenced(self.valid_for):
            return await write()

    def _drop_queued(self) -> None:
        if self._queue:
            log.warning("lost the leader lease: %d status writes dropped", len(self._queue))
            for target, (what, _) in self._queue.items():
                API_WRITES.labels(what, "fenced").inc()
                # Not written: leading again, the next session compares with the watch.
                self._written.pop(target, None)
            self._queue.clear()
        # Nor are those that failed, which are not sent again.
        for target in self._failed:
            self._written.pop(target, None)
        self._failed.clear()


def _group_event(condition: Condition) -> tuple[str, str, str]:
    """A group's condition as an event: its type, reason and note."""
    if condition.type == UNSCHEDULABLE:
        return "Warning", "FailedScheduling", condition.message
    if condition.status == "True":
        return "Normal", SCHEDULED, condition.message
    return "Normal", condition.reason, condition.message


def _pod_group_scheduled(
    condition: Condition | None, group: PodGroup, shown: JSON, domain: TopologyDomain | None
) -> Condition | None:
    """A session's condition of a group as kube-scheduler writes it on Kubernetes' own
    PodGroup: PodGroupScheduled True (Scheduled, no message) once placed; False with
    reason Unschedulable, its message first in kube-scheduler's words, or SchedulerError
    for a group that cannot be read. Once True it never goes back to False, nor is it
    written while a placed gang's claims are bound (None: nothing to write). A group
    placed in the domain of its topology key says which in the True condition's message
    (its status has no field for it, and kube-scheduler leaves the message empty)."""
    if condition is None:
        return None
    if condition.type == SCHEDULED and condition.status == "True":
        placed = "" if domain is None else f"{TOPOLOGY_DOMAIN_MESSAGE} {domain.tier}={domain.name}"
        return Condition(POD_GROUP_SCHEDULED, SCHEDULED, placed)
    if (
        condition.type != UNSCHEDULABLE
        or _shown_condition(shown, POD_GROUP_SCHEDULED).get("status") == "True"
    ):
        return None
    if group.error is not None:
        return Condition(POD_GROUP_SCHEDULED, SCHEDULER_ERROR_REASON, condition.message, "False")
    message = f"{POD_GROUP_UNSCHEDULABLE}: {condition.message}"
    return Condition(POD_GROUP_SCHEDULED, UNSCHEDULABLE, message, "False")


def _group_ref(group: PodGroup) -> ObjectRef:
    ref = {"apiVersion": group.api_version, "kind": "PodGroup"}
    ref |= {"namespace": group.namespace, "name": group.name}
    if group.uid:
        ref["uid"] = group.uid
    return ref


def _shown_condition(shown: JSON, type: str) -> JSON:
    """The condition of that type the object shows, {} for none."""
    return next((c for c in shown.get("conditions") or [] if c.get("type") == type), {})


def _condition(condition: Condition, shown: JSON, generation: int | None = None) -> JSON:
    """The condition as written; it keeps its transition time while its status holds."""
    previous = _shown_condition(shown, condition.type)
    same = previous.get("status") == condition.status
    since = previous.get("lastTransitionTime") if same else None
    written: JSON = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": since or rfc3339(time.time()),
    }
    # kube-scheduler's Go struct leaves out a generation of 0 (omitempty): a PodGroup
    # has none until it is deleted.
    if generation:
        written["observedGeneration"] = generation
    return written


def _comparable(value: object) -> object:
    """Conditions compare without their transition times."""
    if isinstance(value, list):
        return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in value]
    return value


def _shown_like(desired: JSON, shown: JSON, by_type: bool) -> JSON:
    """What `shown` holds of the keys `desired` writes; `by_type`: of its conditions,
    those of the types `desired` writes, the others being left as they are by a
    strategic merge patch (a merge patch replaces the whole list)."""
    like = {key: shown.get(key) for key in desired}
    if by_type and "conditions" in desired:
        kept = [_shown_condition(shown, c["type"]) for c in desired["conditions"]]
        like["conditions"] = [c for c in kept if c] or None
    return like


def _same(desired: JSON, shown: JSON, *, by_type: bool = False) -> bool:
    like = _shown_like(desired, shown, by_type)
    return all(_comparable(v) == _comparable(like[k]) for k, v in desired.items())


def _same_condition(desired: JSON, shown: JSON, *, by_type: bool = False) -> bool:
    like = _shown_like(desired, shown, by_type)
    return _comparable(desired.get("conditions")) == _comparable(like.get("conditions"))


def _merged(shown: JSON, desired: JSON, *, by_type: bool = False) -> JSON:
    """`shown` once `desired` is written; `by_type`: conditions replaced by type."""
    merged = {**shown, **desired}
    if by_type and "conditions" in desired:
        types = {c["type"] for c in desired["conditions"]}
        others = [c for c in shown.get("conditions") or [] if c.get("type") not in types]
        merged["conditions"] = others + desired["conditions"]
    return merged
