"""What a session decides: the only output of the scheduling core."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from batchsched.api.dra import AllocatedDevice, ClaimSpec, ExtendedMapping, NodeTerms
from batchsched.api.objects import GroupPhase
from batchsched.api.resources import ResourceList
from batchsched.model.reasons import Reason

# The action that evicts: preempt (for a higher priority) or reclaim (for a queue's share).
EvictionAction = Literal["preempt", "reclaim"]


class _PickledAsFields:
    """Pickled as the class and its fields in order. The operator's sessions send their
    decisions back from a child process (k8s/forked.py): each job's bindings as it is
    committed, one status per group at the end. The slot state that slotted dataclasses
    pickle by default takes about twice as long to read back on the event loop."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        fields: tuple[str, ...] = self.__slots__
        return type(self), tuple(getattr(self, name) for name in fields)


@dataclass(frozen=True, slots=True)
class SpanClock(_PickledAsFields):
    """A job's softWait clock: when it started, and the job it started for (its
    PodGroup's uid, or its creation for a group with none), so that a gang deleted and
    made again under the same name starts its own."""

    since: float
    owner: str | float


@dataclass(frozen=True, slots=True)
class ClaimBinding(_PickledAsFields):
    """How a claim of a bound pod gets its volume on the chosen node: the administrator's
    volume `volume` is bound to it, or, when `volume` is empty, one is provisioned for
    `node` (the claim's selected-node annotation). Written before any pod of the job is
    bound, as kube-scheduler's VolumeBinding does in PreBind."""

    namespace: str
    claim: str
    uid: str
    node: str
    volume: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.claim}"


@dataclass(frozen=True, slots=True)
class DeviceAllocation(_PickledAsFields):
    """A ResourceClaim allocated where its pod is bound: its status.allocation results,
    written before the pod is bound, as kube-scheduler's DynamicResources does in PreBind."""

    namespace: str
    claim: str
    devices: tuple[AllocatedDevice, ...]
    # status.allocation.nodeSelector: where the devices can be used; None: everywhere.
    terms: NodeTerms | None = None
    # Set for the claim made for the pod's extended resources backed by devices (its
    # `claim` is then the prefix of the name to generate): which request serves each
    # container, for pod.status.extendedResourceClaimStatus.
    extended: tuple[ExtendedMapping, ...] = ()
    # The requests of that claim, for the writer to create it with.
    spec: ClaimSpec | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.claim}"


@dataclass(frozen=True, slots=True)
class Deallocation(_PickledAsFields):
    """A ResourceClaim allocated already for nodes where its pending pod cannot go,
    reserved for nobody or for that pod alone, to be deallocated (allocation and
    reservedFor cleared) so that the pod's next attempt may allocate it elsewhere: what
    kube-scheduler's DynamicResources PostFilter does for a pod no node takes."""

    namespace: str
    claim: str
    uid: str
    # The pod it was decided for ("ns/name") and its uid.
    pod: str
    pod_uid: str
    # The devices the session saw allocated: the claim is left alone if they changed.
    devices: tuple[AllocatedDevice, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.claim}"


@dataclass(slots=True)
class Binding(_PickledAsFields):
    namespace: str
    name: str
    uid: str
    node: str
    job: str
    # GPU cards taken on the node; the shell records them in the gpu-index annotation.
    gpu_index: tuple[int, ...] = ()
    # The pod's claims still to be bound; the shell settles them before binding the pod.
    claims: tuple[ClaimBinding, ...] = ()
    # The ResourceClaims the session allocated for it (claims allocated already aside).
    devices: tuple[DeviceAllocation, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Eviction(_PickledAsFields):
    """A running pod to evict so that a higher-priority job (preempt) or a queue below
    its share (reclaim) gets room. `budget` names the PodDisruptionBudget the eviction
    exceeds, when no victim that spares every budget would do: the Eviction API refuses
    such an eviction, so the shell deletes the pod (with its grace period) instead, as
    kube-scheduler does, and says so."""

    namespace: str
    name: str
    uid: str
    node: str
    action: EvictionAction
    # The job the room is made for, and a sentence naming it and why, for events.
    preemptor: str
    message: str
    budget: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Nomination(_PickledAsFields):
    """A pending pod's status.nominatedNodeName: the node whose room its preemption freed,
    held for it while the victims terminate; an empty `node` clears a stale one."""

    namespace: str
    name: str
    uid: str
    node: str
    job: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


# A PodGroup condition's types. A Scheduled one's reason is Scheduled too, as is the
# reason kube-scheduler gives Kubernetes' PodGroupScheduled condition once placed.
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True, slots=True)
class Condition(_PickledAsFields):
    """A PodGroup condition: type Scheduled or Unschedulable, with a reason a user can act
    on; Scheduled is False while a placed gang waits for its volumes (k8s/binder.py)."""

    type: str
    reason: str
    message: str
    status: str = "True"


@dataclass(frozen=True, slots=True)
class TopologyDomain(_PickledAsFields):
    """The topology domain holding a gang that asked for one: its tier's name (a
    configured tier, a HyperNode tierName, or the label key asked for) and its own (the
    label's value, or the HyperNode's name)."""

    tier: str
    name: str


@dataclass(slots=True)
class JobStatus(_PickledAsFields):
    key: str
    namespace: str
    name: str
    phase: GroupPhase
    min_member: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    condition: Condition | None = None
    # Where its members are, bound, placed or nominated, when it asked for a domain and
    # they share one of its tiers.
    domain: TopologyDomain | None = None


@dataclass(slots=True)
class Unplaced(_PickledAsFields):
    """Why a job allocate could place nowhere waits, as the session said it: kept with
    the job while it is set aside (SnapshotKeeper.set_aside), so that the sessions that
    skip it say the same of its group."""

    job_reason: Reason | None
    # When what it waits for changes with time alone (its gang's schedule timeout, the
    # starvation threshold), on the snapshot's clock: it is tried again then.
    until: float | None = None


@dataclass(slots=True)
class Decisions:
    bindings: list[Binding] = field(default_factory=list)
    # "ns/name" of every pod of ours still pending after the session -> why; but those
    # of jobs set aside, whose reasons were given when they were set aside.
    pending: dict[str, Reason] = field(default_factory=dict)
    # How many pods of jobs set aside wait.
    waiting_set_aside: int = 0
    # PodGroup key -> status; lone pods are not listed, nor groups running unchanged
    # since the last snapshot (see Snapshot.changed_jobs), whose status is written.
    jobs: dict[str, JobStatus] = field(default_factory=dict)
    # Queue -> how many of those running groups it holds, for its counts.
    running_unchanged: Counter[str] = field(default_factory=Counter)
    # Queue -> its fair share in this session, in the core's units (set by proportion).
    deserved: dict[str, ResourceList] = field(default_factory=dict)
    # Pods to evict, and pending pods' nominated nodes to write (preempt and reclaim).
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    # Claims of pods no node took, to deallocate (at most one per pod).
    deallocations: list[Deallocation] = field(default_factory=list)
    # Job key -> when a session first found that the job's soft topology asks could have
    # placed it across domains (its topology.softWait counts from then), for every job
    # not holding its minimum yet: the cache keeps them for the next session
    # (JobInfo.span_since).
    span_clocks: dict[str, SpanClock] = field(default_factory=dict)
    # Jobs allocate tried and could place nowhere, that made no room by evicting and
    # hold none (starving): nothing in this session would place them.
    unplaced: dict[str, Unplaced] = field(default_factory=dict)
