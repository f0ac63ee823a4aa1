"""ClusterCache: the latest parsed state of every object the scheduler watches.

Both shells feed it: the simulator from YAML, the operator from watch events. It keeps
parsed records only, and remembers objects it could not parse so their pods can say why
they wait instead of disappearing.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from batchsched.api.budgets import DisruptionBudget, budget_from_object
from batchsched.api.dra import (
    Allocation,
    ClaimSpec,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
    claim_keys,
    class_from_object,
    resource_claim_from_object,
    slice_from_object,
    taint_rule_from_object,
    template_from_object,
)
from batchsched.api.errors import InvalidObject
from batchsched.api.groups import OUR_API, POD_GROUP_APIS, pod_group_from_object
from batchsched.api.hypernodes import HyperNode, hypernode_from_object
from batchsched.api.meta import Obj, describe, name_of, namespace_of
from batchsched.api.namespaces import namespace_from_object
from batchsched.api.nativegroups import Workload, workload_from_object
from batchsched.api.nodes import node_from_object
from batchsched.api.objects import Namespace, Node, PodGroup, PriorityClass, Queue, Task
from batchsched.api.placement import Placement
from batchsched.api.pods import ShapeMemo, task_from_pod
from batchsched.api.queues import priority_class_from_object, queue_from_object
from batchsched.api.spanclock import SINCE_ANNOTATION
from batchsched.api.volumes import (
    Claim,
    CsiDriver,
    CsiNode,
    StorageCapacity,
    StorageClass,
    Volume,
    claim_from_object,
    csi_driver_from_object,
    csi_node_from_object,
    storage_capacity_from_object,
    storage_class_from_object,
    volume_from_object,
)
from batchsched.model.decisions import DeviceAllocation, SpanClock

log = logging.getLogger(__name__)

STORAGE_KINDS = (
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
)
# Dynamic Resource Allocation (resource.k8s.io/v1).
DEVICE_KINDS = (
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceTaintRule",
)
KINDS = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "PriorityClass",
    "Namespace",
    "PodDisruptionBudget",
    "Workload",
    "HyperNode",
    *STORAGE_KINDS,
    *DEVICE_KINDS,
)
NAMESPACED_KINDS = (
    "Pod",
    "PodGroup",
    "Workload",
    "PodDisruptionBudget",
    "PersistentVolumeClaim",
    "CSIStorageCapacity",
    "ResourceClaim",
    "ResourceClaimTemplate",
)
# Which of a name's PodGroups pods see: the one whose API comes first (ours).
_API_RANK = {api: rank for rank, api in enumerate(POD_GROUP_APIS)}
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
# The APIs whose Queues the scheduler reads; of a name's Queues, the first one's is used.
QUEUE_APIS = (OUR_API, VOLCANO_QUEUE_API)


# A refused bind is tried again after 1 s, then after twice as long each time, up to a
# minute: a namespace being deleted refuses every bind until its pods are gone.
REFUSAL_BACKOFF_SECONDS = 1.0
MAX_REFUSAL_BACKOFF_SECONDS = 60.0


@dataclass(slots=True)
class AssumedClaim:
    """A ResourceClaim that binds decided allocate or reserve, until they are written."""

    # As the watch last showed it (None: deleted).
    seen: ResourceClaim | None
    # The uid of the claim the binds were decided for: one made again by name is
    # another claim, which they add nothing to.
    uid: str = ""
    # Uids of the pods whose binds are to reserve it.
    pods: set[str] = field(default_factory=set)
    # What one of them (of uid `allocator`) allocates it with, if the watch showed it
    # unallocated.
    allocation: Allocation | None = None
    allocator: str = ""


@dataclass(slots=True)
class Refusal:
    """The API server refused to bind a pod (403): why, and until when it waits."""

    message: str
    until: float
    count: int


@dataclass(slots=True)
class Changes:
    """What changed since a SnapshotKeeper (keeper.py) last took a snapshot."""

    # Keys of pods added, changed (bound, assumed, refused...) or deleted.
    pods: set[str] = field(default_factory=set)
    # Keys of PodGroups added, changed or deleted.
    groups: set[str] = field(default_factory=set)
    # A node changed: the node arrays are taken again, and pods' rows too if the set of
    # nodes did.
    nodes: bool = False
    # Names of namespaces changed: their jobs may be sent to another queue.
    namespaces: set[str] = field(default_factory=set)
    # A queue or priority class changed: every job may read one.
    everything: bool = False
    # A ResourceSlice, DeviceClass or ResourceClaim changed: devices may have been freed.
    devices: bool = False


# Kinds whose change may reach every job: their queues and priorities.
CONTEXT_KINDS = ("Queue", "PriorityClass")


class ClusterCache:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.tasks: dict[str, Task] = {}
        self.pod_groups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        # For pod affinity's namespace selectors.
        self.namespaces: dict[str, Namespace] = {}
        # What pods' volumes need: claims by "ns/name", the rest by name.
        self.claims: dict[str, Claim] = {}
        self.volumes: dict[str, Volume] = {}
        self.storage_classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CsiNode] = {}
        self.csi_drivers: dict[str, CsiDriver] = {}
        self.storage_capacities: dict[str, StorageCapacity] = {}
        # What pods' resource claims need: claims and templates by "ns/name", the rest
        # by name; objects that could not be parsed as "Kind key" -> why.
        self.resource_slices: dict[str, ResourceSlice] = {}
        self.device_classes: dict[str, DeviceClass] = {}
        self.resource_claims: dict[str, ResourceClaim] = {}
        self.claim_templates: dict[str, ClaimSpec] = {}
        self.device_taint_rules: dict[str, DeviceTaintRule] = {}
        self.rejected_devices: dict[str, str] = {}
        # "ns/name" -> what assumed binds make of a ResourceClaim until the binder has
        # written it (or given up): resource_claims shows the claim as they make it.
        self.assumed_claims: dict[str, AssumedClaim] = {}
        # Pod uid -> "ns/name" of the claim made for its extended resources backed by
        # devices, found as kube-scheduler finds it (annotated so, the pod its
        # controller), whatever the pod's status names; or, until the binder creates
        # it, the name it will be generated from.
        self.extended_claims: dict[str, str] = {}
        # Pod uid -> the key of that claim while the binder has yet to create it.
        self._to_create: dict[str, str] = {}
        # Pod uid -> the keys of the assumed claims its bind holds: what settle_claims
        # visits, so that a gang settles in time proportional to its own claims.
        self._assumed_by_pod: dict[str, set[str]] = {}
        # By "ns/name": which pods preemption should spare (api/budgets.py).
        self.budgets: dict[str, DisruptionBudget] = {}
        # Kubernetes' Workloads by "ns/name", for display only (api/nativegroups.py).
        self.workloads: dict[str, Workload] = {}
        # Volcano's HyperNodes by name, and those that could not be parsed -> why: the
        # topology says so of the gangs asking for their tiers (model/topology.py).
        self.hypernodes: dict[str, HyperNode] = {}
        self.rejected_hypernodes: dict[str, str] = {}
        # "ns/name" of a pod that could not be parsed -> (its schedulerName, why); the
        # reason is shown as the pod's pending reason.
        self.rejected_pods: dict[str, tuple[str, str]] = {}
        # Name of a Queue that could not be parsed -> why: its groups' pods say the queue
        # is invalid and why, rather than that it does not exist.
        self.rejected_queues: dict[str, str] = {}
        # Storage objects that could not be parsed, as "Kind key" -> why: a pod mounting
        # such a claim says so rather than that the claim does not exist.
        self.rejected_storage: dict[str, str] = {}
        # "ns/name" -> (node, GPU cards) of binds decided but not yet seen in the pod's
        # nodeName. They outlive updates of the pod, which would otherwise make a decided
        # pod look pending again.
        self.assumed: dict[str, tuple[str, tuple[int, ...]]] = {}
        # "ns/name" -> uid of a pod whose eviction the evictor was handed: it shows as
        # being deleted until the watch shows it so (or gone), or the eviction is not
        # carried out, so that no session counts it as a victim still to take, nor its
        # preemptor as a pod still to make room for.
        self.evicting: dict[str, str] = {}
        # "ns/name" -> (uid, node or "" to clear, the nominated node the watch shows) of
        # a nomination the evictor was handed: the pod shows it until the watch does, or
        # the write fails, as kube-scheduler's nominator holds a preemptor's node.
        self.nominating: dict[str, tuple[str, str, str | None]] = {}
        # "ns/name" -> the last refusal of a bind of the pod, kept until the pod is gone.
        self.refusals: dict[str, Refusal] = {}
        # "ns/name" -> the sequence (below) at which the pod first reached the cache:
        # the order pods arrived in, finer than their creationTimestamps' seconds.
        self.arrivals: dict[str, float] = {}
        # Job key -> when its soft topology asks' softWait started counting
        # (Decisions.span_clocks, kept from the last session). The operator keeps them on
        # the groups' objects too, whence restore_clocks takes them back.
        self.span_clocks: dict[str, SpanClock] = {}
        # PodGroup key -> why the softWait clock its object keeps was ignored, once logged;
        # and the keys of the groups whose objects show one, valid or not.
        self._clock_problems: dict[str, str] = {}
        self.stored_clock_keys: set[str] = set()
        self._sequence = 0.0
        self._shapes = ShapeMemo()
        # "ns/name" -> apiVersion -> PodGroup, for groups of one name in several APIs.
        self._group_versions: dict[str, dict[str, PodGroup]] = {}
        # Queue name -> apiVersion -> the Queue, or why it cannot be used.
        self._queue_versions: dict[str, dict[str, Queue | str]] = {}
        # Queue name -> the apiVersion of the Queue (valid or not) that stands for it:
        # where its status goes.
        self.queue_apis: dict[str, str] = {}
        # What changed since snapshots were last taken; None while no SnapshotKeeper
        # follows the cache (the simulator's), so nothing is logged for nobody.
        self.changes: Changes | None = None

    @property
    def sequence(self) -> float:
        """Counts the objects applied: what arrived after a snapshot was taken has a
        greater `arrivals` entry than this was then."""
        return self._sequence

    def apply(self, obj: Obj, *, deleted: bool = False) -> None:
        """Record an added, changed or deleted object of one of KINDS.

        Raises InvalidObject for an object that cannot be used; the cache stays consistent
        (the object's previous version is dropped, never half-updated).
        """
        kind = obj.get("kind")
        if kind not in KINDS:
            raise InvalidObject(f"{describe(obj)}: kind {kind!r} is not one of {', '.join(KINDS)}")
        key = self._key(obj, namespaced=kind in NAMESPACED_KINDS)
        self._sequence += 1.0
        previous = self.seen_claim(key) if kind == "ResourceClaim" else None
        try:
            if self.changes is not None:
                before = self._context(str(kind), key)
                try:
                    self._apply(str(kind), key, obj, deleted=deleted)
                finally:
                    self._note(str(kind), key, before)
            else:
                self._apply(str(kind), key, obj, deleted=deleted)
        finally:
            if kind == "ResourceClaim":
                self._own_extended(previous, self.seen_claim(key))

    def _apply(self, kind: str, key: str, obj: Obj, *, deleted: bool) -> None:
        if kind == "PodGroup":
            self._apply_group(key, obj, deleted=deleted)
            return
        if kind == "Queue":
            self._apply_queue(key, obj, deleted=deleted)
            return
        handlers: dict[str, tuple[dict[str, Any], Callable[[], Any]]] = {
            "Node": (self.nodes, lambda: node_from_object(obj)),
            "Pod": (
                self.tasks,
                lambda: task_from_pod(obj, default_creation=self._sequence, shapes=self._shapes),
            ),
            "PriorityClass": (self.priority_classes, lambda: priority_class_from_object(obj)),
            "Namespace": (self.namespaces, lambda: namespace_from_object(obj)),
            "PodDisruptionBudget": (self.budgets, lambda: budget_from_object(obj)),
            "Workload": (self.workloads, lambda: workload_from_object(obj)),
            "HyperNode": (self.hypernodes, lambda: hypernode_from_object(obj)),
            "PersistentVolumeClaim": (self.claims, lambda: claim_from_object(obj)),
            "PersistentVolume": (self.volumes, lambda: volume_from_object(obj)),
            "StorageClass": (self.storage_classes, lambda: storage_class_from_object(obj)),
            "CSINode": (self.csi_nodes, lambda: csi_node_from_object(obj)),
            "CSIDriver": (self.csi_drivers, lambda: csi_driver_from_object(obj)),
            "CSIStorageCapacity": (
                self.storage_capacities,
                lambda: storage_capacity_from_object(obj),
            ),
            "ResourceSlice": (self.resource_slices, lambda: slice_from_object(obj)),
            "DeviceClass": (self.device_classes, lambda: class_from_object(obj)),
            "ResourceClaim": (self.resource_claims, lambda: resource_claim_from_object(obj)),
            "ResourceClaimTemplate": (self.claim_templates, lambda: template_from_object(obj)),
            "DeviceTaintRule": (self.device_taint_rules, lambda: taint_rule_from_object(obj)),
        }
        store, parse = handlers[kind]
        if kind == "ResourceClaim" and key in self.assumed_claims:
            self._apply_assumed_claim(key, obj, deleted=deleted)
            return
        if kind == "Pod":
            self.rejected_pods.pop(key, None)
            if deleted:
                self.arrivals.pop(key, None)
            else:
                self.arrivals.setdefault(key, self._sequence)
        elif kind in STORAGE_KINDS:
            self.rejected_storage.pop(f"{kind} {key}", None)
        elif kind in DEVICE_KINDS:
            self.rejected_devices.pop(f"{kind} {key}", None)
        elif kind == "HyperNode":
            self.rejected_hypernodes.pop(key, None)
        if deleted:
            store.pop(key, None)
            self.assumed.pop(key, None)
            self.evicting.pop(key, None)
            self.nominating.pop(key, None)
            self.refusals.pop(key, None)
            return
        try:
            before = store.get(key)
            store[key] = parsed = parse()
            if kind == "Pod":
                self._keep_assumption(key, parsed)
                self._keep_writes(key, parsed)
                made = self.extended_claims.get(parsed.uid)
                if made is not None:
                    parsed.extended_claim = made.partition("/")[2]
            elif kind == "ResourceSlice":
                _note_binding_conditions(before, parsed)
        except InvalidObject as error:
            store.pop(key, None)
            if kind == "Pod":
                spec = obj.get("spec")
                scheduler = spec.get("schedulerName") if isinstance(spec, dict) else None
                self.rejected_pods[key] = (str(scheduler or "default-scheduler"), str(error))
            elif kind in STORAGE_KINDS:
                self.rejected_storage[f"{kind} {key}"] = str(error)
            elif kind in DEVICE_KINDS:
                self.rejected_devices[f"{kind} {key}"] = str(error)
            elif kind == "HyperNode":
                self.rejected_hypernodes[key] = str(error)
            raise

    def _context(self, kind: str, key: str) -> object:
        """What snapshots read of a node or a context kind's object, to tell a real
        change from a rewrite (our own status on a Queue, a node's heartbeat)."""
        if kind == "Node":
            return self.nodes.get(key)
        if kind == "HyperNode":
            return (self.hypernodes.get(key), self.rejected_hypernodes.get(key))
        if kind == "Queue":
            return (self.queues.get(key), self.rejected_queues.get(key))
        if kind == "PriorityClass":
            return self.priority_classes.get(key)
        if kind == "Namespace":
            return self.namespaces.get(key)
        if kind == "PodGroup":
            # Each apply parses a new object: the one held is the group as it was.
            return self.pod_groups.get(key)
        if kind == "ResourceClaim":
            # Its devices change hands only as it comes, goes or is (de)allocated: its
            # reservations do not free any.
            claim = self.resource_claims.get(key)
            return None if claim is None else (claim.uid, claim.allocation)
        return None

    def _note(self, kind: str, key: str, before: object) -> None:
        changes = self.changes
        assert changes is not None
        if kind == "Pod":
            changes.pods.add(key)
        elif kind == "PodGroup":
            if not _clock_alone_changed(before, self.pod_groups.get(key)):
                changes.groups.add(key)
        elif kind in DEVICE_KINDS:
            changes.devices |= kind != "ResourceClaim" or self._context(kind, key) != before
        elif self._context(kind, key) == before:
            return
        elif kind == "Namespace":
            changes.namespaces.add(key)
        elif kind in ("Node", "HyperNode"):
            # A HyperNode regroups nodes: the topology is taken again with the nodes.
            changes.nodes = True
        elif kind in CONTEXT_KINDS:
            changes.everything = True

    def _changed_pod(self, key: str) -> None:
        if self.changes is not None:
            self.changes.pods.add(key)

    def _apply_group(self, key: str, obj: Obj, *, deleted: bool) -> None:
        """PodGroups of one name in several APIs are kept apart, so deleting one leaves
        the others. Pods see the one whose API comes first in POD_GROUP_APIS: ours."""
        versions = self._group_versions.setdefault(key, {})
        api_version = str(obj.get("apiVersion") or "")
        if deleted:
            versions.pop(api_version, None)
        else:
            versions[api_version] = pod_group_from_object(obj, default_creation=self._sequence)
        if not versions:
            del self._group_versions[key]
            self.pod_groups.pop(key, None)
            self._clock_problems.pop(key, None)
            self.stored_clock_keys.discard(key)
            return
        first = min(versions, key=lambda v: _API_RANK.get(v, len(_API_RANK)))
        group = self.pod_groups[key] = versions[first]
        if group.stored_clock is None:
            self.stored_clock_keys.discard(key)
        else:
            self.stored_clock_keys.add(key)
        problem = group.stored_clock_problem
        if problem is not None and self._clock_problems.get(key) != problem:
            log.warning("%s", problem)
        if problem is None:
            self._clock_problems.pop(key, None)
        else:
            self._clock_problems[key] = problem

    def restore_clocks(self, now: float) -> None:
        """Take the softWait clocks the groups' objects keep (api/spanclock.py) as the
        last session's: before the first session, and when a replica starts leading,
        its memory holding none or those of its own last term. A clock started after
        `now` (an edit, or a leader whose clock ran ahead) would stretch the wait past
        softWait: it counts from `now`, with one logged line."""
        self.span_clocks = {}
        for key in self.stored_clock_keys:
            group = self.pod_groups[key]
            since, shown = group.span_since, group.stored_clock
            if since is None or shown is None:
                continue
            if since > now:
                log.warning(
                    "PodGroup %s annotation %s=%r is later than now: its softWait counts from now",
                    key,
                    SINCE_ANNOTATION,
                    shown[0],
                )
            self.span_clocks[key] = SpanClock(min(since, now), group.uid)

    def _apply_queue(self, key: str, obj: Obj, *, deleted: bool) -> None:
        """Queues of one name in our API and Volcano's are kept apart, as PodGroups are,
        and ours is the queue, even while it is invalid: a typo in ours must not hand
        its jobs to the other's limits. Objects without an apiVersion (simulator input
        written loosely) count as ours."""
        versions = self._queue_versions.setdefault(key, {})
        api_version = str(obj.get("apiVersion") or OUR_API)
        error = None
        if deleted:
            versions.pop(api_version, None)
        else:
            try:
                queue = queue_from_object(obj, volcano=api_version == VOLCANO_QUEUE_API)
                before = versions.get(api_version)
                # Once per key set, not on every status change of the object.
                known = before.inert if isinstance(before, Queue) else ()
                for note in queue.inert:
                    if note not in known:
                        log.warning("%s", note)
                versions[api_version] = queue
            except InvalidObject as invalid:
                versions[api_version] = str(invalid)
                error = invalid
        self.queues.pop(key, None)
        self.rejected_queues.pop(key, None)
        self.queue_apis.pop(key, None)
        if not versions:
            del self._queue_versions[key]
        else:
            first = min(versions, key=_queue_rank)
            shown = versions[first]
            self.queue_apis[key] = first
            if isinstance(shown, Queue):
                self.queues[key] = shown
            else:
                self.rejected_queues[key] = shown
        if error is not None:
            raise error

    def assume(
        self,
        task_key: str,
        node_name: str,
        *,
        gpu_index: tuple[int, ...] = (),
        devices: tuple[DeviceAllocation, ...] = (),
    ) -> None:
        """Count a decided bind at once, so the next session sees the node (and cards) as
        used, and the pod's ResourceClaims as allocated (`devices`) and reserved for it."""
        task = self.tasks[task_key]
        task.node_name = node_name
        task.gpu_index = gpu_index
        self.assumed[task_key] = (node_name, gpu_index)
        self._changed_pod(task_key)
        if task.resource_claims:
            self._assume_claims(task, devices)
        for allocation in devices:
            if allocation.extended:
                self._assume_extended(task, allocation)

    def _assume_extended(self, task: Task, allocation: DeviceAllocation) -> None:
        """The claim for the pod's extended resources, to be created by the binder,
        shows under the name it is generated from (which no claim can have): its
        devices are taken meanwhile."""
        key = allocation.key
        self.resource_claims[key] = ResourceClaim(
            namespace=task.namespace,
            name=allocation.claim,
            uid=key,
            spec=allocation.spec or ClaimSpec(()),
            allocation=Allocation(allocation.devices, allocation.terms),
            reserved_for=(task.uid,),
            controller=task.uid,
            extended_for=task.name,
        )
        self._to_create[task.uid] = key
        self._own_extended(None, self.resource_claims[key])

    def extended_created(self, uid: str, name: str, claim_uid: str) -> None:
        """The binder created the claim for the extended resources of the pod of `uid`
        as `name`: it stands for the one assumed, with its allocation until written."""
        key = self._to_create.pop(uid, None)
        assumed = None if key is None else self.resource_claims.pop(key, None)
        if assumed is None:
            return
        made = f"{assumed.namespace}/{name}"
        seen = self.resource_claims.get(made)
        self.assumed_claims[made] = held = AssumedClaim(
            seen if seen is not None and seen.uid == claim_uid else None,
            claim_uid,
            {uid},
            assumed.allocation,
            uid,
        )
        self._assumed_by_pod.setdefault(uid, set()).add(made)
        self._own_extended(assumed, replace(assumed, name=name, uid=claim_uid))
        if held.seen is not None:
            self._show_claim(made, held)

    def _assume_claims(self, task: Task, devices: tuple[DeviceAllocation, ...]) -> None:
        made = {allocation.key: allocation for allocation in devices}
        for key in claim_keys(task):
            assumed = self.assumed_claims.get(key)
            if assumed is None:
                seen = self.resource_claims.get(key)
                uid = "" if seen is None else seen.uid
                assumed = self.assumed_claims[key] = AssumedClaim(seen, uid)
            assumed.pods.add(task.uid)
            self._assumed_by_pod.setdefault(task.uid, set()).add(key)
            found = made.get(key)
            if found is not None:
                assumed.allocation = Allocation(found.devices, found.terms)
                assumed.allocator = task.uid
            self._show_claim(key, assumed)

    def settle_claims(self, uid: str) -> None:
        """The binder is done writing the claims of the pod of `uid` (written, undone or
        given up): they show as the watch shows them once no other assumed bind holds
        them. (By uid: the pod may be gone from the cache by then.) A claim for its
        extended resources never created is gone, its devices free again."""
        never = self._to_create.pop(uid, None)
        if never is not None:
            self._own_extended(self.resource_claims.pop(never, None), None)
            if self.changes is not None:
                self.changes.devices = True
        for key in sorted(self._assumed_by_pod.pop(uid, ())):
            assumed = self.assumed_claims[key]
            before = self._context("ResourceClaim", key)
            assumed.pods.discard(uid)
            if assumed.allocator == uid:
                # Written (the watch shows it) or never to be.
                assumed.allocation = None
            if not assumed.pods:
                del self.assumed_claims[key]
            self._show_claim(key, assumed)
            if self.changes is not None and self._context("ResourceClaim", key) != before:
                # An allocation never written: its devices are free again.
                self.changes.devices = True

    def seen_claim(self, key: str) -> ResourceClaim | None:
        """The ResourceClaim as the watch last showed it, assumed binds aside."""
        assumed = self.assumed_claims.get(key)
        return self.resource_claims.get(key) if assumed is None else assumed.seen

    def _apply_assumed_claim(self, key: str, obj: Obj, *, deleted: bool) -> None:
        assumed = self.assumed_claims[key]
        self.rejected_devices.pop(f"ResourceClaim {key}", None)
        assumed.seen = None
        try:
            if not deleted:
                assumed.seen = resource_claim_from_object(obj)
        except InvalidObject as error:
            self.rejected_devices[f"ResourceClaim {key}"] = str(error)
            raise
        finally:
            self._show_claim(key, assumed)

    def extended_leftovers(self, scheduler_names: Iterable[str]) -> list[ResourceClaim]:
        """Claims made for the extended resources of pods of `scheduler_names` that wait
        and are not being bound: left by an earlier attempt, what kube-scheduler's
        PostFilter deletes before the pod is tried again."""
        served = set(scheduler_names)
        found = []
        for key in self.extended_claims.values():
            claim = self.resource_claims.get(key)
            if claim is None or key in self.assumed_claims:
                continue
            task = self.tasks.get(f"{claim.namespace}/{claim.extended_for}")
            if (
                task is not None
                and task.uid == claim.controller
                and task.node_name is None
                and task.scheduler_name in served
            ):
                found.append(claim)
        return found

    def _own_extended(self, previous: ResourceClaim | None, claim: ResourceClaim | None) -> None:
        """Keep `extended_claims` and the pod's `extended_claim` as a claim for extended
        resources comes, changes or goes (a pod's status may name one gone: sessions
        then take it as none)."""
        if (
            previous is not None
            and previous.extended_for
            and self.extended_claims.get(previous.controller) == previous.key
        ):
            del self.extended_claims[previous.controller]
        if claim is None or not claim.extended_for:
            return
        self.extended_claims[claim.controller] = claim.key
        key = f"{claim.namespace}/{claim.extended_for}"
        task = self.tasks.get(key)
        if task is not None and task.uid == claim.controller:
            task.extended_claim = claim.name
            self._changed_pod(key)

    def _show_claim(self, key: str, assumed: AssumedClaim) -> None:
        """What sessions see of a claim: as the watch shows it, with what the assumed
        binds add while they hold it (an allocation the watch does not show yet, their
        pods reserved). A claim deleted or replaced shows as the watch shows it."""
        seen = assumed.seen
        if seen is None:
            self.resource_claims.pop(key, None)
        elif key not in self.assumed_claims or seen.uid != assumed.uid:
            self.resource_claims[key] = seen
        else:
            reserved = seen.reserved_for
            reserved += tuple(sorted(uid for uid in assumed.pods if uid not in reserved))
            allocation = seen.allocation or assumed.allocation
            self.resource_claims[key] = replace(seen, allocation=allocation, reserved_for=reserved)

    def forget(self, task_key: str) -> None:
        """Undo an assumed bind that the API server refused."""
        assumed = self.assumed.pop(task_key, None)
        task = self.tasks.get(task_key)
        if assumed is not None and task is not None and task.node_name == assumed[0]:
            task.node_name = None
            task.gpu_index = ()
            self._changed_pod(task_key)

    def refuse(self, task_key: str, message: str, *, now: float) -> None:
        """The bind was refused for a reason a retry at once would meet again: the pod
        waits with `message`, for a backoff that doubles with each refusal."""
        count = self.refusals[task_key].count + 1 if task_key in self.refusals else 1
        wait = min(REFUSAL_BACKOFF_SECONDS * 2 ** (count - 1), MAX_REFUSAL_BACKOFF_SECONDS)
        self.refusals[task_key] = Refusal(message, now + wait, count)
        self._changed_pod(task_key)

    def touch(self, task_key: str) -> None:
        """Nothing the core reads changed, but the next snapshot builds the pod's job
        again, so that its group's status is reported again."""
        self._changed_pod(task_key)

    def confirm(self, task_key: str, *, placement: Placement | None = None) -> None:
        """The pod now shows the assumed node: the bind is done, and nothing else changed
        but the gang's placement record, which rides on its first member's Binding."""
        self.assumed.pop(task_key, None)
        if placement is not None:
            self.tasks[task_key].placement = placement
            self._changed_pod(task_key)

    def _keep_assumption(self, key: str, task: Task) -> None:
        """An update that still shows no node keeps the assumed bind; a node ends it."""
        assumed = self.assumed.get(key)
        if assumed is not None and task.node_name is None:
            task.node_name, task.gpu_index = assumed
        else:
            self.assumed.pop(key, None)

    def assume_evicted(self, task_key: str, uid: str) -> None:
        """An eviction handed to the evictor: the pod shows as being deleted at once,
        as kube-scheduler counts a preemption in flight, so that a session before the
        watch shows it neither preempts for the same pods again nor takes other victims."""
        task = self.tasks.get(task_key)
        if task is None or task.uid != uid or task.deleting:
            return
        task.deleting = True
        self.evicting[task_key] = uid
        self._changed_pod(task_key)

    def spare(self, task_key: str) -> None:
        """Undo an assumed eviction that was not carried out."""
        uid = self.evicting.pop(task_key, None)
        task = self.tasks.get(task_key)
        if uid is not None and task is not None and task.uid == uid:
            task.deleting = False
            self._changed_pod(task_key)

    def assume_nominated(self, task_key: str, uid: str, node: str) -> None:
        """A nomination handed to the evictor (`node` "" clears it): the pod shows it at
        once, so the next session holds the room for it while its victims go."""
        task = self.tasks.get(task_key)
        if task is None or task.uid != uid:
            return
        held = self.nominating.get(task_key)
        seen = task.nominated_node if held is None else held[2]
        self.nominating[task_key] = (uid, node, seen)
        task.nominated_node = node or None
        self._changed_pod(task_key)

    def unnominate(self, task_key: str) -> None:
        """Undo an assumed nomination that was not written: the pod shows what the
        watch does."""
        held = self.nominating.pop(task_key, None)
        task = self.tasks.get(task_key)
        if held is not None and task is not None and task.uid == held[0]:
            task.nominated_node = held[2]
            self._changed_pod(task_key)

    def _keep_writes(self, key: str, task: Task) -> None:
        """An update that does not show an assumed eviction or nomination yet keeps it;
        one that shows it, a pod bound or another pod of the name ends it."""
        uid = self.evicting.get(key)
        if uid is not None:
            if uid != task.uid or task.deleting:
                del self.evicting[key]
            else:
                task.deleting = True
        held = self.nominating.get(key)
        if held is not None:
            uid, node, _ = held
            if uid != task.uid or task.node_name is not None or (task.nominated_node or "") == node:
                del self.nominating[key]
            else:
                self.nominating[key] = (uid, node, task.nominated_node)
                task.nominated_node = node or None

    @staticmethod
    def _key(obj: Obj, *, namespaced: bool) -> str:
        name = name_of(obj)
        return f"{namespace_of(obj)}/{name}" if namespaced else name


def _clock_alone_changed(before: object, after: PodGroup | None) -> bool:
    """Whether the group changed in the softWait clock its object keeps and nothing
    else: that is read by restore_clocks alone, so the leader's own write of it changes
    nothing a session reads."""
    if not isinstance(before, PodGroup) or after is None:
        return False
    if before.stored_clock == after.stored_clock:
        return False
    same_clock = replace(
        before,
        stored_clock=after.stored_clock,
        span_since=after.span_since,
        stored_clock_problem=after.stored_clock_problem,
    )
    return same_clock == after


def _queue_rank(api_version: str) -> int:
    return QUEUE_APIS.index(api_version) if api_version in QUEUE_APIS else len(QUEUE_APIS)


def _note_binding_conditions(before: ResourceSlice | None, found: ResourceSlice) -> None:
    """One line when a slice's devices with bindingConditions change: batchsched binds
    without waiting for a driver's conditions, so it never allocates such a device."""
    waiting = tuple(d.name for d in found.devices if d.binding_conditions)
    if not waiting:
        return
    if before is not None and waiting == tuple(
        d.name for d in before.devices if d.binding_conditions
    ):
        return
    log.warning(
        "ResourceSlice %s: devices %s set bindingConditions; batchsched does not wait for a "
        "driver's binding conditions before binding, so it never allocates them",
        found.name,
        ", ".join(waiting),
    )
