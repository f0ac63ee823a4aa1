"""The scheduler's own records of cluster objects.

They hold only what scheduling needs, already parsed and defaulted, so the core never
looks at raw Kubernetes dictionaries.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, get_args

from batchsched.api.gpu import node_cards
from batchsched.api.placement import Placement
from batchsched.api.podaffinity import PodAffinity
from batchsched.api.resources import ResourceList
from batchsched.api.selectors import Requirement
from batchsched.api.topology import PodSetTopology, SubGroupPolicy, TopologyAsk
from batchsched.api.topologyspread import SpreadConstraint
from batchsched.api.volumes import PodClaim

# A pod's phase, as Kubernetes names it.
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
POD_PHASES: tuple[PodPhase, ...] = get_args(PodPhase)
# Pod phases after which a pod no longer holds resources on its node.
TERMINAL_PHASES: frozenset[PodPhase] = frozenset({"Succeeded", "Failed"})


# Taint effects that keep pods not tolerating them off a node, and the one that only
# counts against it in scores.
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
PREFER_NO_SCHEDULE = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One of a pod's spec.resourceClaims: `claim` is the ResourceClaim's name (for a
    template's, as pod.status.resourceClaimStatuses records it; "" until the resource-claim
    controller has made it, None when it decided none is needed)."""

    name: str
    claim: str | None
    template: str = ""


@dataclass(frozen=True, slots=True)
class ContainerExtended:
    """A container's integer requests of extended resources, which a DeviceClass may
    back: kube-scheduler names the request of the pod's claim for one of them
    `container-<index>-request-<position of its name among the container's request
    names, sorted>`, counting init containers first."""

    index: int
    name: str
    # An init container that is not a sidecar: it is done before the others start.
    short_lived: bool
    names: tuple[str, ...]
    counts: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # An empty key with operator Equal is rejected by the API server; treat it as no match.
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A preferred node affinity term: nodes matching `term` score `weight` more."""

    weight: int
    term: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a pod may run, independent of what is already running there.

    `affinity` holds the required node affinity terms (any one term must match);
    an empty tuple means no affinity constraint.
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # Sessions look masks up by constraints for every pending pod: hashing the nested
    # terms each time cost more than the lookups.
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_hash", hash((self.node_selector, self.affinity, self.tolerations))
        )

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type["Constraints"], tuple[object, ...]]:
        # Rebuilt, so that the hash is the receiving process's own.
        return Constraints, (self.node_selector, self.affinity, self.tolerations)


@dataclass(frozen=True, slots=True)
class QueueName:
    """A queue as an annotation or label names it, and where: a job sent to a queue that
    does not exist says which object to fix."""

    name: str
    # "Pod ns/name's annotation <key>", "Namespace ns's label <key>".
    source: str


@dataclass(frozen=True, slots=True)
class GroupRef:
    """The group a pod names, and how it named it.

    `min_available` is set only for label-only groups, which have no object to read it from.
    """

    namespace: str
    name: str
    min_available: int | None = None
    # Named by spec.schedulingGroup: only a PodGroup of Kubernetes' own API will do.
    native: bool = False
    # "namespace/name", made once: sessions look jobs up by it for every pod they count.
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")


@dataclass(slots=True)
class Node:
    name: str
    allocatable: ResourceList
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    # Read by every session for every node, so derived once per node object (a node
    # that changes is parsed again): whether a pod tolerating nothing may run here
    # (ready, schedulable, no NoSchedule or NoExecute taint), its PreferNoSchedule
    # taints, and its GPU cards.
    plain: bool = field(init=False, compare=False, repr=False)
    soft_taints: tuple[Taint, ...] = field(init=False, compare=False, repr=False)
    gpu_cards: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        blocked = any(t.effect in BLOCKING_EFFECTS for t in self.taints)
        self.plain = self.ready and not self.unschedulable and not blocked
        self.soft_taints = tuple(t for t in self.taints if t.effect == PREFER_NO_SCHEDULE)
        self.gpu_cards = node_cards(self.allocatable)


@dataclass(slots=True)
class Task:
    """A pod, as the scheduler sees it."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str
    request: ResourceList
    creation: float
    node_name: str | None = None
    phase: PodPhase = "Pending"
    priority: int | None = None
    priority_class_name: str = ""
    # spec.preemptionPolicy; "" when unset (then its PriorityClass's applies).
    preemption_policy: str = ""
    group: GroupRef | None = None
    # The queue its annotations name, for a lone pod or a group that exists only in labels.
    queue: QueueName | None = None
    constraints: Constraints = Constraints()
    host_ports: frozenset[tuple[str, int]] = frozenset()
    deleting: bool = False
    # status.nominatedNodeName: where a preemption made room for it, held while the
    # pods it preempted terminate.
    nominated_node: str | None = None
    # spec.activeDeadlineSeconds, the longest it may run, and status.startTime: when a
    # running pod is sure to have ended, for room held for a starving gang.
    deadline_seconds: int | None = None
    started: float | None = None
    # False when its annotations or labels keep preemption away from it.
    preemptable: bool = True
    # Its task role (Volcano's `volcano.sh/task-spec`), which a PodGroup's
    # minTaskMember counts by; "" when it names none.
    role: str = ""
    # The GPU cards a bound pod holds (annotation scheduling.batchsched.io/gpu-index).
    gpu_index: tuple[int, ...] = ()
    # On a gang's first bound member: where the session that bound it put the others.
    placement: Placement | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Preferred node affinity, for the nodeaffinity score.
    node_preferences: tuple[PreferredTerm, ...] = ()
    # CPU (milli) and memory scores count on top of the request: kube-scheduler's 100m
    # and 200 MiB for each container that requests none.
    score_extra: tuple[int, int] = (0, 0)
    # Its pod affinity and anti-affinity terms; None for the many pods without.
    affinity: PodAffinity | None = None
    # Its topology spread constraints, selectors merged with its matchLabelKeys.
    spread: tuple[SpreadConstraint, ...] = ()
    # The PersistentVolumeClaims it mounts, in the pod's namespace.
    claims: tuple[PodClaim, ...] = ()
    # Its spec.resourceClaims, each with the ResourceClaim it resolves to.
    resource_claims: tuple[PodResourceClaim, ...] = ()
    # Its containers' extended resource requests, which DeviceClasses may back (api/dra.py).
    extended: tuple[ContainerExtended, ...] = ()
    # status.extendedResourceClaimStatus.resourceClaimName: the claim made for them.
    extended_claim: str = ""
    # Why no node will do whatever the cluster holds: a scheduling gate, or a constraint
    # the core does not honour yet (api/unsupported.py).
    blocked: str | None = None
    # Kueue's topology annotations of its pod set (api/topology.py); None for most pods.
    podset_topology: PodSetTopology | None = None
    # Everything predicates and scores may look at; tasks with equal keys are interchangeable.
    shape_key: tuple[object, ...] = ()
    # shape_key without what the session evaluates afresh at each choice (pod affinity,
    # topology spread); None when that is nothing.
    fit_key: tuple[object, ...] | None = None
    # "namespace/name", made once, for the same reason as GroupRef.key.
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


# A group's phase, as ours and Volcano's PodGroups name it; the other projects' names are
# written from it (k8s/status.py).
GroupPhase = Literal["Pending", "Inqueue", "Running", "Completed", "Failed", "Unknown"]
GROUP_PHASES: tuple[GroupPhase, ...] = get_args(GroupPhase)


@dataclass(slots=True)
class PodGroup:
    """A gang: at least `min_member` of its pods start together, or none does.

    `error` is set when the object is malformed; its pods then wait with that message.
    """

    namespace: str
    name: str
    min_member: int
    creation: float
    queue: str = "default"
    # Whether spec.queue set `queue`: when not, the namespace's queue applies.
    queue_explicit: bool = False
    min_resources: ResourceList = field(default_factory=dict)
    # Volcano's spec.minTaskMember: task role -> members of that role needed (roles
    # needing none left out).
    min_task_member: dict[str, int] = field(default_factory=dict)
    priority_class_name: str = ""
    schedule_timeout_seconds: float | None = None
    # Volcano's sla waiting time (its annotation): how long the job may wait.
    waiting_seconds: float | None = None
    api_version: str = ""
    phase: GroupPhase = "Pending"
    error: str | None = None
    # Events about the group name it by uid: `kubectl describe` looks them up by it.
    uid: str = ""
    # Kubernetes' own PodGroups (api/nativegroups.py): a basic policy (every pod on its
    # own, min_member 0), spec.priority, and the "workload/template" it was made from.
    basic: bool = False
    priority: int | None = None
    template: str = ""
    # spec.networkTopology: all members in one domain (api/topology.py); and
    # spec.subGroupPolicy: parts of the gang, each in a domain of its own.
    network_topology: TopologyAsk | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    # The softWait clock kept on the object (api/spanclock.py): its annotations as the
    # object shows them, (since, owner), None when it has neither; when it started, if
    # they are valid and kept for this object; else why they are ignored.
    stored_clock: tuple[str, str] | None = None
    span_since: float | None = None
    stored_clock_problem: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Dequeue(StrEnum):
    """Volcano's spec.dequeueStrategy: whether a job that cannot start holds back the
    jobs behind it in its queue (fifo) or not (traverse, Volcano's default and ours)."""

    TRAVERSE = "traverse"
    FIFO = "fifo"


@dataclass(slots=True)
class Queue:
    """A Queue as the proportion plugin shares the cluster by (see its docstring)."""

    name: str
    weight: int = 1
    capability: ResourceList = field(default_factory=dict)
    reclaimable: bool = True
    open: bool = True
    # spec.guarantee.resource: the floor of its deserved share and of what reclaim leaves it.
    guarantee: ResourceList = field(default_factory=dict)
    # spec.deserved (Volcano's capacity plugin): a fixed share for the resources it lists.
    deserved: ResourceList = field(default_factory=dict)
    # spec.parent; None for a queue at the top (no parent, or Volcano's `root`).
    parent: str | None = None
    dequeue: Dequeue = Dequeue.TRAVERSE
    # Volcano's spec.priority: queues of a higher one are served, and reclaim for, first.
    priority: int = 0
    # "Queue q.spec.<key> has no effect here: why", for each key accepted without effect;
    # the cache logs them once per change (Volcano's extendClusters, type, ...).
    inert: tuple[str, ...] = ()


@dataclass(slots=True)
class Namespace:
    """What pod affinity's namespaceSelector reads (its labels), and the queue of the
    jobs in it that name none themselves."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    queue: QueueName | None = None


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    # Copied into the spec of its pods on admission, as the Priority admission plugin does.
    preemption_policy: str = "PreemptLowerPriority"
