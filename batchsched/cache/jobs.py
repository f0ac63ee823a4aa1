"""Jobs from pods and PodGroups: which pods go together, their priorities and queues.

Everything a job needs beyond its own members and group is read from the cache's
cluster-wide kinds (queues, priority classes, namespaces), which is why a change to
one of those rebuilds every job (keeper.py).
"""

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from batchsched.api.gpu import gpu_demand
from batchsched.api.groups import OUR_API, VOLCANO_API
from batchsched.api.nativegroups import NATIVE_API, awaiting_group
from batchsched.api.objects import GroupRef, PodGroup, Queue, QueueName, Task
from batchsched.api.placement import Placement
from batchsched.api.pods import LIGHTWEIGHT_MIN_LABEL
from batchsched.api.queues import DEFAULT_QUEUE, ROOT_QUEUE, check_hierarchy
from batchsched.cache.cluster import ClusterCache
from batchsched.model.arrays import IntArray
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo, job_key

# By a peer's PodGroup API, the scheduler that acts on its groups before any pod of
# theirs exists: Volcano's takes every PodGroup of its API, and its job controller
# creates a Job's pods only once that scheduler has admitted the group (Inqueue).
PODLESS_SCHEDULERS = {VOLCANO_API: "volcano"}


def _reserve(job: JobInfo, placements: list[Placement], node_rows: Mapping[str, int]) -> None:
    """Hold for each pending member the node its newest recorded placement gave it; a
    member whose node is gone holds nothing and is placed afresh, still ahead of others."""
    for info in job.pending:
        for placement in reversed(placements):
            node = placement.node_for(info.pod.name, info.pod.uid)
            if node is not None:
                info.reserved = node_rows.get(node)
                job.resumes = True
                break


def _role_minimum(group: PodGroup) -> dict[str, int]:
    """The task roles' minimums a gang is held to: none when minMember is below their
    sum, as Volcano then checks the total alone."""
    roles = group.min_task_member
    return dict(roles) if roles and group.min_member >= sum(roles.values()) else {}


def _native(job: JobInfo) -> bool:
    return job.group is not None and job.group.api_version == NATIVE_API


def _wrong_api(group: PodGroup, task: Task) -> Reason:
    """Why a pod may not join the PodGroup of its group's name: spec.schedulingGroup
    names a PodGroup of Kubernetes' own API, the peers' keys one of theirs, and each
    scheduler sees only its own kind."""
    by_field = group.api_version != NATIVE_API
    named = "spec.schedulingGroup.podGroupName" if by_field else "a PodGroup key"
    wanted = NATIVE_API if by_field else "a peer's PodGroup API"
    return Reason(
        Code.INVALID,
        SESSION,
        f"Pod {task.key} names PodGroup {group.key} by {named}, which needs a PodGroup of "
        f"{wanted}, but that PodGroup is of {group.api_version}",
    )


def _queues_disagree(key: str, named: Mapping[str, QueueName] | None) -> Reason | None:
    """Members of one group that name different queues leave it waiting: picking
    either would put the other's work under a share it was not meant for."""
    if not named or len(named) < 2:
        return None
    first, second = (named[name] for name in sorted(named)[:2])
    return Reason(
        Code.INVALID,
        SESSION,
        f"gang {key}: its pods name different queues, {first.name!r} "
        f"(named by {first.source}) and {second.name!r} (named by {second.source})",
    )


def _schedulers_disagree(key: str, names: Mapping[str, str] | None) -> Reason | None:
    """All pods of a Kubernetes PodGroup must name one scheduler, as kube-scheduler
    requires: a group split between two could be started by neither, so it is refused
    whole, naming two of the schedulers and a pod of each. Finished pods are left out:
    they ask for nothing (and kube-scheduler does not see them), so one of another
    scheduler that ends lifts the refusal, as one deleted does."""
    if not names or len(names) < 2:
        return None
    (first, pod), (second, other) = sorted(names.items())[:2]
    return Reason(
        Code.INVALID,
        SESSION,
        f"PodGroup {key}: its pods name different schedulers in spec.schedulerName, "
        f"{first!r} (pod {pod}) and {second!r} (pod {other}); all pods of a PodGroup "
        "must name one",
    )


def _some(names: list[str], *, shown: int = 3) -> str:
    """Up to `shown` names, then how many more: a message stays readable for a big gang."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def usable_queues(cache: ClusterCache) -> tuple[dict[str, Queue], dict[str, str]]:
    """The queues jobs may use, and why each other Queue may not: as parsed, or for its
    place in the tree of parents, which only all the queues together can tell."""
    queues = dict(cache.queues)
    # The default queue is implied only while no Queue of that name exists.
    if DEFAULT_QUEUE not in cache.rejected_queues:
        queues.setdefault(DEFAULT_QUEUE, Queue(name=DEFAULT_QUEUE))
    # A root Queue (Volcano's) is the top: the queues without a parent are its children.
    if ROOT_QUEUE in queues:
        for name, queue in queues.items():
            if name != ROOT_QUEUE and queue.parent is None:
                queues[name] = replace(queue, parent=ROOT_QUEUE)
    rejected = dict(cache.rejected_queues)
    rejected.update(check_hierarchy(queues, rejected=rejected))
    return {name: q for name, q in queues.items() if name not in rejected}, rejected


class JobBuilder:
    """Groups tasks into jobs, resolving priorities, queues and group references on the way.

    A job is built from its PodGroup (if any) and its own members alone, so any set of
    jobs can be built afresh: every job of the cluster for a whole snapshot, or just
    those whose pods or group changed (keeper.py). The members of each job must all be
    added, those of no other job are needed."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        scheduler_names: frozenset[str],
        width: int,
        now: float,
        queues: Mapping[str, Queue],
        rejected_queues: Mapping[str, str],
        groups: Iterable[PodGroup],
        seen: float | None = None,
    ) -> None:
        self.cache = cache
        # The cache's sequence when the last session's snapshot was taken: pods whose
        # arrival is greater came since. None when no session came before: all count
        # as seen.
        self.seen = seen
        self.queues = queues
        # Why each Queue that is not in `queues` was refused, its place in the tree included.
        self.rejected_queues = rejected_queues
        self.width = width
        self.now = now
        self.scheduler_names = scheduler_names
        self.jobs: dict[str, JobInfo] = {}
        # Job key -> the placements recorded on its members.
        self.placements: dict[str, list[Placement]] = defaultdict(list)
        # Job key -> queue name -> where its members name it, the least source of each
        # (jobs without a PodGroup, or with Kubernetes' own, which has no queue field).
        self.pod_queues: dict[str, dict[str, QueueName]] = defaultdict(dict)
        # For Kubernetes' own PodGroups, whose unfinished pods must all name one
        # scheduler: job key -> schedulerName -> the least key of the pods naming it
        # (least, not first: what a message names must not depend on the order pods
        # reach the cache), and the first arrival among them (when the group mixed).
        self.schedulers: dict[str, dict[str, str]] = defaultdict(dict)
        self.arrived: dict[str, dict[str, float]] = defaultdict(dict)
        # Jobs decided as they stood before a pod naming another scheduler came, which
        # the next session must build again (and then refuses whole): _refuse_mixed.
        self.held_back: set[str] = set()
        # Job key -> the pod of least key naming the job's PodGroup in a way its API
        # does not read (spec.schedulingGroup for a peer's, a peer's key for Kubernetes').
        self.misnamed: dict[str, Task] = {}
        # Group key -> other schedulers' pods naming a group with no PodGroup, seen
        # before any pod of ours made it a job: they count once it is, whatever the order.
        self.strays: dict[str, list[tuple[Task, IntArray]]] = defaultdict(list)
        default = [pc.value for pc in cache.priority_classes.values() if pc.global_default]
        self.default_priority = max(default, default=0)
        for group in groups:
            self.jobs[group.key] = self._job_for_group(group)

    def add(self, task: Task, vec: IntArray) -> None:
        ours = task.scheduler_name in self.scheduler_names
        job = self._job_of(task, ours=ours)
        if job is None:
            if task.group is not None:
                self.strays[task.group.key].append((task, vec))
            return
        job.total += 1
        job.served |= ours
        native = _native(job)
        if native and not task.terminal:
            self._name_scheduler(job.key, task)
        if task.queue is not None and (job.group is None or native):
            named = self.pod_queues[job.key]
            known = named.get(task.queue.name)
            if known is None or task.queue.source < known.source:
                named[task.queue.name] = task.queue
        if task.placement is not None:
            self.placements[job.key].append(task.placement)
        counted = job.role_minimum and task.role in job.role_minimum
        if task.phase == "Succeeded":
            job.succeeded += 1
        elif task.phase == "Failed":
            job.failed += 1
            counted = False
        elif task.node_name is not None:
            _count_podset(job, task)
            job.bound += 1
            job.hosts.append(task.node_name)
            job.allocated = job.allocated + vec
            job.running += task.phase == "Running"
            if counted:
                job.role_bound[task.role] = job.role_bound.get(task.role, 0) + 1
        elif ours and not task.deleting:
            _count_podset(job, task)
            priority, error = self._priority(task.priority, task.priority_class_name)
            refusal = self.cache.refusals.get(task.key)
            if refusal is not None and self.now < refusal.until:
                error = error or Reason(Code.BIND_REFUSED, SESSION, refusal.message)
            job.pending.append(
                TaskInfo(
                    pod=task,
                    vec=vec,
                    priority=priority,
                    error=error,
                    gpu=gpu_demand(task.request),
                    preempts=self._policy(task) != "Never",
                )
            )
        else:
            counted = False
        if counted:
            job.role_alive[task.role] = job.role_alive.get(task.role, 0) + 1

    def finish(self, node_rows: Mapping[str, int]) -> dict[str, JobInfo]:
        for key, strays in self.strays.items():
            if key in self.jobs:
                for task, vec in strays:
                    self.add(task, vec)
        for job in self.jobs.values():
            misnamed = self.misnamed.get(job.key)
            if misnamed is not None and job.group is not None:
                job.error = job.error or _wrong_api(job.group, misnamed)
            mixed = _schedulers_disagree(job.key, self.schedulers.get(job.key))
            if mixed is not None:
                self._refuse_mixed(job, mixed)
            job.error = job.error or _queues_disagree(job.key, self.pod_queues.get(job.key))
            if job.group is not None and not job.total:
                job.served = self._serves_podless(job.group)
            group = job.group
            if group is None or (not group.priority_class_name and group.priority is None):
                # A job whose PodGroup names no class is as urgent as its pods.
                job.priority = max((t.priority for t in job.pending), default=job.priority)
            named = self._named_queue(job)
            if named is not None:
                job.queue = named.name
                job.error = job.error or self._missing_queue(named)
        for key, placements in self.placements.items():
            _reserve(self.jobs[key], sorted(placements, key=lambda p: p.at), node_rows)
        for job in self.jobs.values():
            for info in job.pending:
                if info.pod.nominated_node is not None:
                    info.nominated = node_rows.get(info.pod.nominated_node)
                    job.nominated = True
        return self.jobs

    def _name_scheduler(self, key: str, task: Task) -> None:
        names, arrived = self.schedulers[key], self.arrived[key]
        name = task.scheduler_name
        least = names.get(name)
        if least is None or task.key < least:
            names[name] = task.key
        at = self.cache.arrivals.get(task.key, 0.0)
        if at < arrived.get(name, math.inf):
            arrived[name] = at

    def _refuse_mixed(self, job: JobInfo, reason: Reason) -> None:
        """Refuse a group whose pods name different schedulers: whole, once a session
        has seen it mixed. In the first session to see it so, it is decided as it stood
        before the pod that mixed it came, as a session between the two would have
        decided it: the members that came since are refused, the others tried, and
        the next session refuses it whole. So whether a member that came before that
        pod is placed does not depend on how arrivals fall into sessions."""
        if job.error is not None:
            return
        mixed_at = sorted(self.arrived[job.key].values())[1]
        if self.seen is None or mixed_at <= self.seen:
            job.error = reason
            return
        arrivals = self.cache.arrivals
        for info in job.pending:
            if arrivals.get(info.key, 0.0) >= mixed_at:
                info.error = info.error or reason
        self.held_back.add(job.key)

    def _serves_podless(self, group: PodGroup) -> bool:
        """Whether this scheduler acts on `group` while it has no pods: ours always, a
        peer's when the scheduler that would is served here (PODLESS_SCHEDULERS)."""
        if group.api_version == OUR_API:
            return True
        return PODLESS_SCHEDULERS.get(group.api_version) in self.scheduler_names

    def _named_queue(self, job: JobInfo) -> QueueName | None:
        """Where the job's queue is named, unless by its PodGroup's spec.queue, which
        always wins; then its pods' annotation (jobs without a PodGroup, or with one of
        Kubernetes' own, which has no queue), then its namespace's. None leaves the job
        where it is: its PodGroup's queue or the default."""
        if job.group is not None and job.group.queue_explicit:
            return None
        named = self.pod_queues.get(job.key)
        if (job.group is None or _native(job)) and named:
            return named[min(named)]
        namespace = self.cache.namespaces.get(job.namespace)
        return None if namespace is None else namespace.queue

    def _missing_queue(self, named: QueueName) -> Reason | None:
        """The proportion plugin's words for a queue that is not there, plus where it was
        named: unlike a PodGroup's spec.queue, an annotation or a namespace's setting is
        not in plain sight of whoever reads why the pod waits."""
        if named.name in self.queues:
            return None
        why = self.rejected_queues.get(named.name)
        code, state = (
            (Code.NO_QUEUE, "does not exist")
            if why is None
            else (Code.INVALID, f"is invalid: {why}")
        )
        return Reason(code, SESSION, f"queue {named.name!r} {state} (named by {named.source})")

    def _job_of(self, task: Task, *, ours: bool) -> JobInfo | None:
        ref = task.group
        if ref is None:
            if not ours:
                return None
            key = job_key(task)
            job = JobInfo(
                key=key,
                namespace=task.namespace,
                name=task.name,
                min_member=1,
                queue=DEFAULT_QUEUE,
                priority=self.default_priority,
                creation=task.creation,
                allocated=np.zeros(self.width, dtype=np.int64),
            )
            self.jobs[key] = job
            return job
        existing = self.jobs.get(ref.key)
        if existing is not None and existing.group is not None:
            native = existing.group.api_version == NATIVE_API
            named = self.misnamed.get(ref.key)
            if ref.native != native and (named is None or task.key < named.key):
                self.misnamed[ref.key] = task
        if existing is not None and existing.group is None:
            # A group without an object is as old as its oldest pod, in whatever order
            # the pods reached the cache.
            existing.creation = min(existing.creation, task.creation)
            if existing.label_only:
                existing.error = existing.error or self._label_member_conflict(existing, ref)
        if existing is not None or not ours:
            return existing
        job = JobInfo(
            key=ref.key,
            namespace=ref.namespace,
            name=ref.name,
            min_member=ref.min_available or 1,
            queue=DEFAULT_QUEUE,
            priority=self.default_priority,
            creation=task.creation,
            label_only=ref.min_available is not None,
            allocated=np.zeros(self.width, dtype=np.int64),
        )
        if ref.native or ref.min_available is None:
            job.error = _no_pod_group(ref)
        self.jobs[ref.key] = job
        return job

    def _label_member_conflict(self, job: JobInfo, ref: GroupRef) -> Reason | None:
        """Why a label-only group must wait for this member, if it must. A member that
        names it by a PodGroup key makes it need that object, whichever member reached
        the cache first; members that name different min-available values leave it
        waiting, since starting it at either breaks the promise the others carry."""
        if ref.native or ref.min_available is None:
            return _no_pod_group(ref)
        if ref.min_available != job.min_member:
            return Reason(Code.INVALID, SESSION, self._minimums_disagree(job, ref.min_available))
        return None

    def _minimums_disagree(self, job: JobInfo, other: int) -> str:
        """Names the pods behind each value (a few of them), found only on this rare path."""
        holders: dict[int, list[str]] = {job.min_member: [], other: []}
        for task in self.cache.tasks.values():
            ref = task.group
            if ref is not None and ref.key == job.key and ref.min_available in holders:
                holders[ref.min_available].append(task.key)
        values = [f"{value} (on {_some(sorted(pods))})" for value, pods in holders.items()]
        return (
            f"gang {job.key}: its pods' label {LIGHTWEIGHT_MIN_LABEL} disagree: "
            f"{' and '.join(values)}"
        )

    def _job_for_group(self, group: PodGroup) -> JobInfo:
        priority, error = self._priority(group.priority, group.priority_class_name)
        if group.api_version != OUR_API:
            # Volcano's and kube-batch's caches give a group whose class does not exist
            # the default priority; our own PodGroup waits to have it named right.
            error = None
        return JobInfo(
            key=group.key,
            namespace=group.namespace,
            name=group.name,
            min_member=group.min_member,
            queue=group.queue,
            priority=priority,
            creation=group.creation,
            group=group,
            min_resources=group.min_resources,
            error=Reason(Code.INVALID, SESSION, group.error) if group.error else error,
            phase=group.phase,
            allocated=np.zeros(self.width, dtype=np.int64),
            role_minimum=_role_minimum(group),
        )

    def _policy(self, task: Task) -> str:
        """spec.preemptionPolicy, which admission copies from the pod's PriorityClass;
        read from the class when a pod was written without it (the simulator's)."""
        if task.preemption_policy:
            return task.preemption_policy
        found = self.cache.priority_classes.get(task.priority_class_name)
        return found.preemption_policy if found is not None else ""

    def _priority(self, explicit: int | None, class_name: str) -> tuple[int, Reason | None]:
        if explicit is not None:
            return explicit, None
        if not class_name:
            return self.default_priority, None
        found = self.cache.priority_classes.get(class_name)
        if found is None:
            missing = f"PriorityClass {class_name!r} does not exist"
            return self.default_priority, Reason(Code.NO_PRIORITY_CLASS, SESSION, missing)
        return found.value, None


def _no_pod_group(ref: GroupRef) -> Reason:
    """Why a group's pods wait for its PodGroup, in the words of the API they name it by."""
    message = awaiting_group(ref.key) if ref.native else f"PodGroup {ref.key} does not exist"
    return Reason(Code.NO_POD_GROUP, SESSION, message)


def _count_podset(job: JobInfo, task: Task) -> None:
    """A member pending or holding a node: counted toward its job's pod set if it
    states the same one as the first that stated one (JobInfo.whole_podset)."""
    stated = task.podset_topology
    if stated is not None and (job.podset is None or job.podset.part == stated.part):
        job.podset = job.podset or stated
        job.podset_members += 1
