"""Victims: every running pod preemption could evict, as arrays the actions filter at once.

Plugins say which victims a preemptor may take (priority: lower priority, within its
queue; proportion: from queues above their share); the rules no configuration may
lift are kept here: pods of the control plane, critical pods and pods marked not
preemptable (api/pods.py PREEMPTABLE_KEYS) are never taken, nor, unless configured,
pods of other schedulers. A pod whose Binding is not yet seen on it (assumed: sent, or
waiting for its claims) holds nothing to evict and is no victim; it still counts as a
member of its gang, as do the members a session places or nominates, so a gang with
such members can never be evicted whole: it loses only members above its minMember.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from batchsched.api.budgets import DisruptionBudget
from batchsched.api.gpu import gpu_demand
from batchsched.api.objects import Task
from batchsched.api.resources import PODS
from batchsched.model.arrays import BoolArray, FloatArray, IntArray, request_row
from batchsched.model.snapshot import JobInfo, Snapshot, TaskInfo, default_priority, placed_priority

# Never preempted, whatever their priority: what keeps the cluster itself running.
SYSTEM_NAMESPACE = "kube-system"
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


@dataclass(slots=True)
class Victims:
    """Running pods, one entry each: `tasks[i]` runs on node row `rows[i]`.

    `jobs[i]` is its job when it belongs to one the session knows (ours, or a PodGroup);
    `members[job key]` lists the entries of each such job, for evicting a gang whole.
    """

    tasks: list[Task]
    jobs: list[JobInfo | None]
    rows: IntArray
    vecs: IntArray
    priority: IntArray
    # Per entry, the pod's own priority: among victims of one priority (their PodGroup's
    # class), the pods of lower priority go first, as Volcano orders a job's tasks.
    own_priority: IntArray
    creation: FloatArray
    # Per entry, the number of its queue in `queue_names` ("" for no queue), for masks.
    queue_ids: IntArray
    queue_names: dict[str, int]
    # May be evicted at all (see the module docstring).
    evictable: BoolArray
    # Indices into `budgets` of the PodDisruptionBudgets each entry is protected by.
    protected_by: list[tuple[int, ...]]
    budgets: list[DisruptionBudget]
    # Per entry, whether any budget protects it.
    guarded: BoolArray
    members: dict[str, list[int]] = field(default_factory=dict)
    # Per entry, the index of its gang (-1: none) and per gang its minMember, so what
    # evicting each entry costs is known at once for every entry (`costs`).
    gang_ids: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gang_min: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Gang key -> its index in `gang_min` and `pinned`.
    gang_index: dict[str, int] = field(default_factory=dict)
    # Per gang, its members that hold a node but are no entry (not bound yet, or placed
    # or nominated by this session): they can be neither evicted nor left short.
    pinned: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Per entry, whether it asks for nothing but its pod slot: all a BestEffort
    # preemptor may take.
    best_effort: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    # Entries evicted by the session so far (tentatively or for good).
    taken: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    # Per budget, how many more pods it allows to be disrupted, less those evicted so far.
    budget_left: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Entries the session already turned into TaskInfos (for deallocating them).
    infos: dict[int, TaskInfo] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tasks)

    def info(self, index: int) -> TaskInfo:
        found = self.infos.get(index)
        if found is None:
            task = self.tasks[index]
            found = self.infos[index] = TaskInfo(
                pod=task,
                vec=self.vecs[index],
                priority=int(self.priority[index]),
                gpu=gpu_demand(task.request),
            )
        return found

    def mark(self, index: int, *, taken: bool) -> None:
        """Record the entry evicted (or restored), and what that leaves of its budgets."""
        self.taken[index] = taken
        for budget in self.protected_by[index]:
            self.budget_left[budget] += -1 if taken else 1

    def exceeding(self) -> BoolArray:
        """Per entry, whether evicting it now would exceed one of its budgets."""
        found: BoolArray = np.zeros(len(self.tasks), dtype=np.bool_)
        if self.budgets:
            for index in np.flatnonzero(self.guarded).tolist():
                found[index] = bool(self.exceeded(index))
        return found

    def exceeded(self, index: int) -> str:
        """The key of a budget that evicting the entry now would exceed, or ""."""
        for budget in self.protected_by[index]:
            if self.budget_left[budget] <= 0:
                return self.budgets[budget].key
        return ""

    def pin(self, job: str, count: int) -> None:
        """`count` more members of `job` hold a node that no victim frees."""
        gang = self.gang_index.get(job)
        if gang is not None:
            self.pinned[gang] += count

    def costs(self) -> IntArray:
        """Per entry, how many pods evicting it takes: 1, or its whole gang's remaining
        members when the gang is at its minMember (see `stuck` for gangs that cannot go
        whole)."""
        in_gang = self.gang_ids >= 0
        if not in_gang.any():
            return np.ones(len(self.tasks), dtype=np.int64)
        untaken = np.bincount(self.gang_ids[in_gang & ~self.taken], minlength=len(self.gang_min))
        gang = np.where(in_gang, self.gang_ids, 0)
        alone = ~in_gang | (untaken[gang] + self.pinned[gang] - 1 >= self.gang_min[gang])
        return np.where(alone, 1, untaken[gang]).astype(np.int64)

    def stuck(self) -> BoolArray:
        """Per entry, whether it may not go at all: its gang would run short of minMember
        and has pinned members, so it cannot be evicted whole."""
        in_gang = self.gang_ids >= 0
        if not in_gang.any() or not self.pinned.any():
            return np.zeros(len(self.tasks), dtype=np.bool_)
        untaken = np.bincount(self.gang_ids[in_gang & ~self.taken], minlength=len(self.gang_min))
        gang = np.where(in_gang, self.gang_ids, 0)
        pinned = self.pinned[gang]
        short = untaken[gang] + pinned - 1 < self.gang_min[gang]
        return np.asarray(in_gang & short & (pinned > 0), dtype=np.bool_)

    def whole(self, index: int, chosen: set[int]) -> list[int] | None:
        """What evicting `index` takes, beside `chosen` and the entries taken: itself, or
        its whole gang when fewer than minMember would be left; None when that gang has
        pinned members."""
        job = self.jobs[index]
        gang = self.gang_index.get(job.key) if job is not None else None
        if job is None or gang is None:
            return [index]
        left = [m for m in self.members[job.key] if not self.taken[m] and m not in chosen]
        pinned = int(self.pinned[gang])
        if len(left) + pinned - 1 >= job.min_member:
            return [index]
        return None if pinned else left

    def leaves_short(self, chosen: set[int], among: Iterable[int]) -> bool:
        """Whether evicting `chosen` beside the entries taken leaves a gang of `among`
        running short of minMember: what sparing a pod of a gang whose other members
        went whole counting on it would do."""
        for key in {job.key for i in among if (job := self.jobs[i]) is not None}:
            gang = self.gang_index.get(key)
            if gang is None:
                continue
            left = sum(1 for m in self.members[key] if not self.taken[m] and m not in chosen)
            left += int(self.pinned[gang])
            if 0 < left < self.gang_min[gang]:
                return True
        return False

    def job_of(self, index: int) -> JobInfo:
        """Its job, or for a pod of no job the session knows (another scheduler's), a
        stand-in in no queue, for the plugins told that it leaves its node."""
        job = self.jobs[index]
        if job is None:
            task = self.tasks[index]
            job = JobInfo(
                key="",
                namespace=task.namespace,
                name=task.name,
                min_member=1,
                queue="",
                priority=int(self.priority[index]),
                creation=task.creation,
            )
        return job


def build_victims(
    snapshot: Snapshot, *, other_schedulers: bool, pinned: Mapping[str, int]
) -> Victims:
    """Every bound pod holding a node that is not already terminating; `pinned` counts,
    per job, the members the session placed or nominated so far."""
    classes = snapshot.priority_classes
    default = default_priority(classes)
    column = snapshot.column
    budgets = list(snapshot.budgets)
    by_namespace: dict[str, list[int]] = {}
    for index, budget in enumerate(budgets):
        by_namespace.setdefault(budget.namespace, []).append(index)
    tasks: list[Task] = []
    jobs: list[JobInfo | None] = []
    rows: list[int] = []
    priority: list[int] = []
    own_priority: list[int] = []
    queue_names: dict[str, int] = {}
    queue_ids: list[int] = []
    evictable: list[bool] = []
    protected_by: list[tuple[int, ...]] = []
    members: dict[str, list[int]] = {}
    vectors: dict[tuple[object, ...], IntArray] = {}
    unbound: Counter[str] = Counter(pinned)
    for row, task in snapshot.placed:
        if task.deleting:
            continue
        job = snapshot.job_of(task)
        if task.key in snapshot.unbound:
            if job is not None:
                unbound[job.key] += 1
                members.setdefault(job.key, [])
            continue
        index = len(tasks)
        tasks.append(task)
        jobs.append(job)
        rows.append(row)
        priority.append(placed_priority(task, job, classes, default))
        own_priority.append(placed_priority(task, None, classes, default))
        name = job.queue if job is not None else ""
        queue_ids.append(queue_names.setdefault(name, len(queue_names)))
        ours = task.scheduler_name in snapshot.scheduler_names
        evictable.append(
            (ours or other_schedulers)
            and task.preemptable
            and task.namespace != SYSTEM_NAMESPACE
            and task.priority_class_name not in CRITICAL_CLASSES
        )
        protected_by.append(
            tuple(
                b
                for b in by_namespace.get(task.namespace, ())
                if budgets[b].selector.matches(task.labels)
            )
        )
        if job is not None:
            members.setdefault(job.key, []).append(index)
        if task.shape_key not in vectors:
            vectors[task.shape_key] = request_row(task.request, column)
    vecs = (
        np.array([vectors[t.shape_key] for t in tasks], dtype=np.int64)
        if tasks
        else np.zeros((0, len(column)), dtype=np.int64)
    )
    gangs = {key: g for g, key in enumerate(k for k in members if snapshot.jobs[k].is_gang)}
    gang_ids = [-1 if job is None else gangs.get(job.key, -1) for job in jobs]
    return Victims(
        tasks=tasks,
        jobs=jobs,
        rows=np.array(rows, dtype=np.int64),
        vecs=vecs,
        priority=np.array(priority, dtype=np.int64),
        own_priority=np.array(own_priority, dtype=np.int64),
        creation=np.array([t.creation for t in tasks], dtype=np.float64),
        queue_ids=np.array(queue_ids, dtype=np.int64),
        queue_names=queue_names,
        evictable=np.array(evictable, dtype=np.bool_),
        protected_by=protected_by,
        budgets=budgets,
        guarded=np.array([bool(b) for b in protected_by], dtype=np.bool_),
        members=members,
        gang_ids=np.array(gang_ids, dtype=np.int64),
        gang_min=np.array([snapshot.jobs[k].min_member for k in gangs], dtype=np.int64),
        gang_index=gangs,
        pinned=np.array([unbound[k] for k in gangs], dtype=np.int64),
        best_effort=np.array([t.request.keys() <= {PODS} for t in tasks], dtype=np.bool_),
        budget_left=np.array([b.disruptions_allowed for b in budgets], dtype=np.int64),
        taken=np.zeros(len(tasks), dtype=np.bool_),
    )


def queue_mask(victims: Victims, queue: str) -> BoolArray:
    """The entries whose job is in `queue`."""
    found = victims.queue_names.get(queue)
    if found is None:
        return np.zeros(len(victims), dtype=np.bool_)
    return np.asarray(victims.queue_ids == found, dtype=np.bool_)
