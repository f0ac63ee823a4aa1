"""A session's frozen view of the cluster: numpy arrays over nodes, jobs with their tasks.

Resources are columns (cpu, memory, pods, ephemeral-storage, then extended resources by
name); a task's request is one row vector over the same columns, shared by every task of
the same shape. cache/keeper.py takes snapshots of the cache; cache/jobs.py groups pods
into jobs.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from batchsched.api.budgets import DisruptionBudget
from batchsched.api.dra import Devices
from batchsched.api.gpu import NO_GPU, GpuDemand
from batchsched.api.objects import GroupPhase, Node, PodGroup, PriorityClass, Queue, Task
from batchsched.api.resources import PODS, ResourceList
from batchsched.api.topology import PodSetTopology
from batchsched.api.volumes import Storage
from batchsched.model.arrays import IntArray
from batchsched.model.decisions import Unplaced
from batchsched.model.reasons import Reason
from batchsched.model.topology import Topology

NO_EXTRA = (0, 0)


@dataclass(slots=True)
class TaskInfo:
    pod: Task
    vec: IntArray
    priority: int
    # Set when the pod cannot be scheduled whatever the cluster looks like.
    error: Reason | None = None
    # The GPU cards it asks for, parsed once rather than at every placement attempt.
    gpu: GpuDemand = NO_GPU
    # The node row its gang's recorded placement holds for it (see api/placement.py).
    reserved: int | None = None
    # The node row of its status.nominatedNodeName: where a preemption made room for it.
    nominated: int | None = None
    # Whether it may evict others (preemptionPolicy, its own or its PriorityClass's).
    preempts: bool = True

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def best_effort(self) -> bool:
        """Requests nothing but its pod slot."""
        return self.pod.request.keys() <= {PODS}


@dataclass(slots=True)
class JobInfo:
    """A gang (or a lone pod) with every task that belongs to it.

    `group` is the PodGroup object, None for lone pods and label-only groups.
    """

    key: str
    namespace: str
    name: str
    min_member: int
    queue: str
    priority: int
    creation: float
    group: PodGroup | None = None
    label_only: bool = False
    min_resources: ResourceList = field(default_factory=dict)
    pending: list[TaskInfo] = field(default_factory=list)
    # Sum of the requests of members bound to nodes (the queue's usage by this job).
    allocated: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    bound: int = 0
    # The nodes its bound members are on (one name per member), which the queue's
    # reach counts.
    hosts: list[str] = field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    total: int = 0
    # Set when the job's objects keep it from being scheduled (cache/jobs.py).
    error: Reason | None = None
    phase: GroupPhase = "Pending"
    # Some pending member is named in a recorded placement: the gang was cut off
    # mid-bind and is finished first, even where its recorded nodes are gone.
    resumes: bool = False
    # Some pending member has a nominated node (status.nominatedNodeName).
    nominated: bool = False
    # Some pod of it names a scheduler this one serves. A peer's PodGroup whose pods all
    # name another (its own scheduler still running) is that scheduler's to report on;
    # one without pods, that of the scheduler its API answers to (cache/jobs.py).
    served: bool = False
    # Per task role, the members its PodGroup's minTaskMember needs (empty when it has
    # none, or when minMember is below their sum, where Volcano counts the total alone),
    # and of those roles the members bound, and those alive (pending, bound, succeeded).
    role_minimum: dict[str, int] = field(default_factory=dict)
    role_bound: dict[str, int] = field(default_factory=dict)
    role_alive: dict[str, int] = field(default_factory=dict)
    # Kueue's pod set of its first member (pending or holding a node) stating one, and
    # how many such members state that pod set: with every one of them, the gang asks
    # that pod set's topology as a whole (whole_podset).
    podset: PodSetTopology | None = None
    podset_members: int = 0
    # When a session first found that its soft topology asks could have placed it across
    # domains (the cache keeps it from the session's Decisions.span_clocks): its
    # topology.softWait counts from then. None: no session has found so yet.
    span_since: float | None = None

    @property
    def owner(self) -> str | float:
        """What tells this job from one deleted and made again under its name: its
        PodGroup's uid, or for a group with none its creation (SpanClock.owner)."""
        return self.group.uid if self.group is not None and self.group.uid else self.creation

    @property
    def whole_podset(self) -> PodSetTopology | None:
        """The pod set every member pending or holding a node is in, if one is."""
        if self.podset is None or self.podset_members < self.bound + len(self.pending):
            return None
        return self.podset

    @property
    def is_gang(self) -> bool:
        return self.group is not None or self.label_only

    @property
    def awaits_pods(self) -> bool:
        """A PodGroup this scheduler acts on, none of whose pods exists yet. It is
        admitted on its minResources alone, as Volcano's enqueue admits it: a controller
        may create the pods only then (Volcano's job controller does)."""
        return self.group is not None and self.served and not self.total


@dataclass(slots=True)
class Snapshot:
    now: float
    resources: tuple[str, ...]
    nodes: list[Node]
    allocatable: IntArray
    used: IntArray
    port_users: dict[tuple[str, int], set[int]]
    jobs: dict[str, JobInfo]
    queues: dict[str, Queue]
    # The schedulerNames this scheduler serves: pods naming one of them are ours.
    scheduler_names: frozenset[str]
    # The nodes' domains, per label and per HyperNode tier (model/topology.py).
    topology: Topology
    # Queues that exist but could not be parsed, by name -> why (not in `queues`).
    rejected_queues: dict[str, str] = field(default_factory=dict)
    # GPU cards held by bound pods: milli taken per node row and card (None: none) by
    # those naming valid cards, and the node rows and asks of the others, which each
    # session gives cards best fit (api/gpu.py says how a bound pod names its cards).
    gpu_used: IntArray | None = None
    gpu_unnamed: list[tuple[int, GpuDemand]] = field(default_factory=list)
    # Every pod holding a node, with its node row: what pod affinity terms select from.
    placed: list[tuple[int, Task]] = field(default_factory=list)
    # Those of them that state pod affinity or anti-affinity terms, so that a session
    # finds out whether it needs the affinity plugins without walking every pod.
    placed_affine: list[tuple[int, Task]] = field(default_factory=list)
    # Keys of those of them not bound yet: their Binding was decided (assumed) but is not
    # seen on the pod, still on its way or waiting for the pod's claims to be bound.
    unbound: frozenset[str] = frozenset()
    # The jobs built afresh since the previous snapshot the keeper took; None when all
    # were (a snapshot taken whole). A group neither among them nor with anything to
    # place has the status it had then.
    changed_jobs: frozenset[str] | None = None
    # Jobs a recent session could place nowhere, and nothing since could have changed
    # that (cache/keeper.py says what wakes them): skipped, with what it said of them.
    set_aside: dict[str, Unplaced] = field(default_factory=dict)
    # Kubernetes PodGroups decided as they stood before a pod naming another scheduler
    # came (cache/jobs.py, _refuse_mixed): the next session, due at once, refuses them.
    held_back: frozenset[str] = frozenset()
    # Namespace -> labels, for the namespace selectors of pod affinity terms.
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per node row, the CPU and memory its pods' scores count beyond their requests
    # (Task.score_extra); None when that is nothing anywhere.
    score_extra: IntArray | None = None
    # Claims, volumes, storage classes and CSI nodes, for pods that mount claims.
    storage: Storage = field(default_factory=Storage)
    # ResourceSlices, DeviceClasses and ResourceClaims, for pods with resource claims.
    devices: Devices = field(default_factory=Devices)
    # What preemption reads of the pods it may evict: their priorities and budgets.
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    budgets: list[DisruptionBudget] = field(default_factory=list)

    @property
    def column(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.resources)}

    def job_of(self, task: Task) -> JobInfo | None:
        """The job a pod belongs to, if the session knows it (ours, or a PodGroup)."""
        return self.jobs.get(job_key(task))


def default_priority(classes: Mapping[str, PriorityClass]) -> int:
    """The priority of a pod that names no class: the global default class's, or 0."""
    return max((pc.value for pc in classes.values() if pc.global_default), default=0)


def placed_priority(
    task: Task, job: JobInfo | None, classes: Mapping[str, PriorityClass], default: int
) -> int:
    """The priority a pod holding a node has as a victim: the one the session ordered its
    job by, which is its PodGroup's class when it names one, else the pod's own
    (spec.priority, set on admission, or its class)."""
    if job is not None and job.group is not None and job.group.priority_class_name:
        return job.priority
    if task.priority is not None:
        return task.priority
    found = classes.get(task.priority_class_name)
    return found.value if found is not None else default


def job_key(task: Task) -> str:
    """Its group's key, or for a pod of no group its own, marked apart from groups'."""
    return task.group.key if task.group is not None else f"pod:{task.key}"
