"""What the scheduler watches, and how each watched object reaches the ClusterCache.

Objects arrive trimmed (trim.py); one whose trimmed form has not changed since the last
time stops here, so kubelet heartbeats and status churn cost no parsing and do not wake
the session loop. The watch only reads: it writes nothing to the objects it sees.

Of the changes that get through, those a session would act on at once wake the loop
(`Changes.note(urgent=True)`): a pod of ours that may now be scheduled (new, or its
scheduling gates gone; in a gang, once as many members wait as its group asks for),
room freed on a node (a bound pod of any scheduler finished or deleted), a node added or
changed that may take pods, a new PodGroup. The rest (another
scheduler's pending pod, a pod starting to run, a status the scheduler wrote itself)
wait for the next periodic tick, so they cannot chain sessions back to back.

It also times each pod of ours, and each gang, from when it could be scheduled to when
it is seen bound (the SLI histograms of metrics.py): the watch is where both moments
show, to the millisecond, where creationTimestamp has whole seconds only.
"""

import asyncio
import logging
import marshal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.api.dra import TAINT_RULE_API
from batchsched.api.errors import InvalidObject
from batchsched.api.gpu import GPU_INDEX_ANNOTATION
from batchsched.api.groups import POD_GROUP_APIS
from batchsched.api.hypernodes import HYPERNODE_API
from batchsched.api.meta import describe
from batchsched.api.nativegroups import NATIVE_API
from batchsched.api.objects import Node, Task
from batchsched.api.placement import PLACEMENT_ANNOTATION, parse_placement
from batchsched.api.spanclock import stored_clock_of
from batchsched.cache.cluster import QUEUE_APIS, ClusterCache
from batchsched.k8s.events import ObjectRef
from batchsched.k8s.status import StatusWriter, object_ref, target_kind
from batchsched.k8s.trim import (
    JSON,
    trim_budget,
    trim_claim,
    trim_claim_template,
    trim_csi_driver,
    trim_csi_node,
    trim_device_class,
    trim_hypernode,
    trim_namespace,
    trim_node,
    trim_pod,
    trim_pod_group,
    trim_priority_class,
    trim_queue,
    trim_resource_claim,
    trim_resource_slice,
    trim_storage_capacity,
    trim_storage_class,
    trim_taint_rule,
    trim_volume,
    trim_workload,
)
from batchsched.metrics import GANG_SCHEDULING_SLI, INVALID_OBJECTS, POD_SCHEDULING_SLI

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Watched:
    """One watched collection: `kind` is how the cache knows its objects."""

    api_version: str
    plural: str
    kind: str
    trim: Callable[[Mapping[str, Any]], JSON]
    # Logged once when the API server does not serve the kind (informer.py): for an API
    # a cluster may not enable, what its absence means here.
    absent_note: str = ""

    @property
    def id(self) -> str:
        return f"{self.plural}.{self.api_version}"

    @property
    def path(self) -> str:
        root = "/api" if "/" not in self.api_version else "/apis"
        return f"{root}/{self.api_version}/{self.plural}"


PODS = Watched("v1", "pods", "Pod", trim_pod)
CLAIMS = Watched("v1", "persistentvolumeclaims", "PersistentVolumeClaim", trim_claim)
VOLUMES = Watched("v1", "persistentvolumes", "PersistentVolume", trim_volume)
# Dynamic Resource Allocation (resource.k8s.io/v1, served by default since 1.34).
DRA_API = "resource.k8s.io/v1"
RESOURCE_CLAIMS = Watched(DRA_API, "resourceclaims", "ResourceClaim", trim_resource_claim)
RESOURCE_SLICES = Watched(DRA_API, "resourceslices", "ResourceSlice", trim_resource_slice)
DEVICE_CLASSES = Watched(DRA_API, "deviceclasses", "DeviceClass", trim_device_class)
# Kubernetes serves its own gang API only with an alpha feature gate and API version on.
ABSENT_NOTES = {
    NATIVE_API: (
        "this API server does not serve Kubernetes' own gangs (1.36: kube-apiserver "
        "--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true)"
        ", so no pod can name a PodGroup in spec.schedulingGroup; looked for again every "
        "30s"
    ),
    TAINT_RULE_API: (
        "this API server does not serve DeviceTaintRules (1.36: kube-apiserver "
        "--feature-gates=DRADeviceTaintRules=true --runtime-config=resource.k8s.io/v1beta2=true)"
        ", so devices carry only the taints their ResourceSlices give; looked for again "
        "every 30s"
    ),
}
WATCHED = (
    PODS,
    Watched("v1", "nodes", "Node", trim_node),
    Watched("v1", "namespaces", "Namespace", trim_namespace),
    Watched("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", trim_priority_class),
    CLAIMS,
    VOLUMES,
    Watched("storage.k8s.io/v1", "storageclasses", "StorageClass", trim_storage_class),
    Watched("storage.k8s.io/v1", "csinodes", "CSINode", trim_csi_node),
    Watched("storage.k8s.io/v1", "csidrivers", "CSIDriver", trim_csi_driver),
    Watched(
        "storage.k8s.io/v1", "csistoragecapacities", "CSIStorageCapacity", trim_storage_capacity
    ),
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    DEVICE_CLASSES,
    Watched(DRA_API, "resourceclaimtemplates", "ResourceClaimTemplate", trim_claim_template),
    # Taints added to devices by selector, once that API is served.
    Watched(
        TAINT_RULE_API,
        "devicetaintrules",
        "DeviceTaintRule",
        trim_taint_rule,
        ABSENT_NOTES[TAINT_RULE_API],
    ),
    # Ours and Volcano's (ours wins a name in both, see ClusterCache._apply_queue).
    *(Watched(api, "queues", "Queue", trim_queue) for api in QUEUE_APIS),
    # Which running pods preemption should spare.
    Watched("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", trim_budget),
    # Ours, Kubernetes' own and the kinds of the schedulers we stand in for, once their
    # APIs are served (a kind that is not counts as listed, empty, and is looked for again).
    *(
        Watched(api, "podgroups", "PodGroup", trim_pod_group, ABSENT_NOTES.get(api, ""))
        for api in POD_GROUP_APIS
    ),
    # Kubernetes' own Workloads, shown beside the PodGroups made from them.
    Watched(NATIVE_API, "workloads", "Workload", trim_workload),
    # Volcano's network topology (cluster-scoped), once its CRD exists.
    Watched(HYPERNODE_API, "hypernodes", "HyperNode", trim_hypernode),
)


# Kinds whose resourceVersion is kept: the binder waits for, or applies, its own writes.
VERSIONED = (CLAIMS, VOLUMES, RESOURCE_CLAIMS)

# What a Binding writes on a pod: its node, and the annotations the binder sends with it.
BIND_ANNOTATIONS = (GPU_INDEX_ANNOTATION, PLACEMENT_ANNOTATION)

# A hash of a trimmed object apart from what a Binding writes, and what it wrote: the
# pod's node and its bind annotations.
Fingerprint = tuple[int, tuple[object, ...] | None]


def fingerprint_of(obj: JSON) -> Fingerprint:
    """Keeping the bind apart tells a bind confirmation from any other change in one
    pass over the object (a bind is the most frequent pod event a scheduler sees).

    The pass is marshal's format 2 (no back-references): a decoded JSON object always
    marshals, equal bytes mean equal objects, and it costs half what repr does. Equal
    objects with keys in another order count as changed, which costs a parse, no more.
    """
    spec = obj.get("spec")
    if not isinstance(spec, dict) or "nodeName" not in spec:
        return hash(marshal.dumps(obj, 2)), None
    node = spec.pop("nodeName")
    # Trimming keeps a map only where the object has one: annotations that held only
    # what the bind wrote hash as none at all, as the pod had before.
    meta = obj["metadata"]
    notes = meta.pop("annotations", None) or {}
    written = tuple(notes.pop(key, None) for key in BIND_ANNOTATIONS)
    if notes:
        meta["annotations"] = notes
    digest = hash(marshal.dumps(obj, 2))
    spec["nodeName"] = node
    notes.update(
        (key, value) for key, value in zip(BIND_ANNOTATIONS, written, strict=True) if value
    )
    if notes:
        meta["annotations"] = notes
    return digest, (node, *written)


# The taints the node lifecycle controller puts on a node its kubelet does not report on.
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
# Phases in which a pod holds nothing on its node.
FINISHED = ("Succeeded", "Failed")


class Changes:
    """Counts changes a session could act on, so the loop can skip ticks without any,
    and wakes the loop for the urgent ones, with when the first and the latest of them
    since the last `take` came (monotonic clock), for it to let a burst gather."""

    def __init__(self) -> None:
        self._count = 0
        self._taken = -1
        self.urgent = asyncio.Event()
        self.first_urgent: float | None = None
        self.last_urgent = 0.0

    def note(self, *, urgent: bool = False) -> None:
        self._count += 1
        if urgent:
            self.last_urgent = time.monotonic()
            if self.first_urgent is None:
                self.first_urgent = self.last_urgent
            self.urgent.set()

    def take(self) -> bool:
        """Whether anything changed since the last call."""
        changed = self._count != self._taken
        self._taken = self._count
        self.first_urgent = None
        self.urgent.clear()
        return changed


@dataclass
class _Gang:
    """The members of one group waiting to be bound, and since when the last of them
    could be scheduled."""

    waiting: set[str]
    since: float
    bound: int = 0


class Watch:
    def __init__(
        self,
        cache: ClusterCache,
        status: StatusWriter,
        *,
        scheduler_names: tuple[str, ...] = ("batch-scheduler",),
    ) -> None:
        self.cache = cache
        self.status = status
        self.scheduler_names = frozenset(scheduler_names)
        self.changes = Changes()
        self.synced = asyncio.Event()
        self._unlisted = {w.id for w in WATCHED}
        # Per watched collection: key -> fingerprint of the trimmed object last applied.
        self._fingerprints: dict[str, dict[str, Fingerprint]] = {w.id: {} for w in WATCHED}
        # The resourceVersion last seen of each claim, volume and ResourceClaim, by key:
        # the binder waits for its own writes to show before it judges what they led
        # to, or (ResourceClaims) applies them at once.
        self.versions: dict[str, int] = {}
        # (kind, key) -> the object and why it cannot be used, for the leader to report.
        # Pods are not listed: their errors become their pending reasons.
        self.invalid: dict[tuple[str, str], tuple[ObjectRef, str]] = {}
        self._logged: dict[tuple[str, str], str] = {}
        # Pods of ours waiting to be bound: key -> since when they could be scheduled
        # (wall clock) and their group's key; and those groups, for the latency SLIs.
        self._waiting: dict[str, tuple[float, str | None]] = {}
        self._gangs: dict[str, _Gang] = {}

    def listed(self, watched: Watched) -> None:
        """A complete list of `watched` has been applied; with every kind listed, the
        cache holds the whole cluster and sessions may start."""
        self._unlisted.discard(watched.id)
        if not self._unlisted:
            self.synced.set()

    def keys(self, watched: Watched) -> set[str]:
        return set(self._fingerprints[watched.id])

    def apply(self, watched: Watched, raw: Mapping[str, Any]) -> str:
        """Record an added or changed object; returns its key."""
        obj = watched.trim(raw)
        # A list's items of a built-in kind carry no apiVersion (the trimmer sets the
        # kind): a PodGroup is read as the API it was listed from.
        obj.setdefault("apiVersion", watched.api_version)
        key = key_of(obj)
        if watched in VERSIONED:
            version, known = resource_version(raw), version_key(watched, key)
            # A ResourceClaim's own write was applied from its reply (`written`): the
            # watch's events from before it would show its devices free again.
            if watched is RESOURCE_CLAIMS and version < self.versions.get(known, 0):
                return key
            self.versions[known] = version
        self._observe(watched, key, raw)
        fingerprint = fingerprint_of(obj)
        seen = self._fingerprints[watched.id]
        previous = seen.get(key)
        if previous == fingerprint:
            return key
        seen[key] = fingerprint
        if watched is PODS and self._confirms_bind(key, fingerprint, previous):
            self._time(key, obj)
            return key
        before = self.cache.tasks.get(key) if watched is PODS else None
        held = watched is RESOURCE_CLAIMS and self._allocated(key)
        try:
            self.cache.apply(obj)
        except InvalidObject as error:
            self._report(watched.kind, key, obj, str(error))
        else:
            self.invalid.pop((watched.kind, key), None)
            self._logged.pop((watched.kind, key), None)
        if watched is PODS:
            self._time(key, obj)
        new = previous is None
        if watched is RESOURCE_CLAIMS:
            # A claim made for a waiting pod, or one whose allocation the controller
            # cleared (its devices are free).
            urgent = new or (held and not self._allocated(key))
        else:
            urgent = self._urgent(watched, key, obj, before, new=new)
        self.changes.note(urgent=urgent)
        return key

    def written(self, watched: Watched, raw: Mapping[str, Any]) -> None:
        """Apply the API server's reply to a write of ours at once, so that the cache
        does not show the object as it was until the watch catches up; unless the watch
        has shown the object deleted meanwhile."""
        if key_of(raw) in self._fingerprints[watched.id]:
            self.apply(watched, raw)

    def _allocated(self, key: str) -> bool:
        claim = self.cache.resource_claims.get(key)
        return claim is not None and claim.allocation is not None

    def _time(self, key: str, obj: JSON) -> None:
        """Start a pod's latency when it can be scheduled; observe it once it is bound."""
        spec, now = obj.get("spec") or {}, time.time()
        if spec.get("nodeName"):
            waited = self._waiting.pop(key, None)
            if waited is not None:
                POD_SCHEDULING_SLI.observe(max(now - waited[0], 0.0))
                self._leave_gang(key, waited[1], bound=True, now=now)
            return
        if key in self._waiting or spec.get("schedulingGates"):
            return
        if spec.get("schedulerName", "default-scheduler") not in self.scheduler_names:
            return
        task = self.cache.tasks.get(key)
        # Listed at start-up: it has waited since it was created, as far as anyone knows.
        since = now if task is None or self.synced.is_set() else min(task.creation, now)
        group = task.group if task is not None else None
        gang_key = None if group is None else group.key
        self._waiting[key] = (since, gang_key)
        if gang_key is not None:
            gang = self._gangs.setdefault(gang_key, _Gang(set(), since))
            gang.waiting.add(key)
            gang.since = max(gang.since, since)

    def _leave_gang(self, key: str, gang_key: str | None, *, bound: bool, now: float) -> None:
        if gang_key is None or (gang := self._gangs.get(gang_key)) is None:
            return
        gang.waiting.discard(key)
        gang.bound += bound
        if not gang.waiting:
            del self._gangs[gang_key]
            if gang.bound:
                GANG_SCHEDULING_SLI.observe(max(now - gang.since, 0.0))

    def _confirms_bind(
        self, key: str, fingerprint: Fingerprint, previous: Fingerprint | None
    ) -> bool:
        """Whether the pod changed only by showing the node we assumed for it: then the
        cache already holds it as it is, and no session needs to look again."""
        assumed = self.cache.assumed.get(key)
        written = fingerprint[1]
        if assumed is None or previous is None or written is None or written[0] != assumed[0]:
            return False
        if fingerprint[0] != previous[0]:
            return False
        _, _, record = written
        self.cache.confirm(
            key, placement=parse_placement(record) if isinstance(record, str) else None
        )
        return True

    def _urgent(
        self, watched: Watched, key: str, obj: JSON, before: Task | None, *, new: bool
    ) -> bool:
        """Whether a session should run at once for this change (the module says which);
        `before` is the pod as the cache held it until then."""
        if watched.kind == "Node":
            return _takes_pods(self.cache.nodes.get(key))
        if watched.kind in ("PodGroup", "ResourceSlice", "DeviceClass"):
            return new
        if watched is not PODS:
            return False
        spec = obj.get("spec") or {}
        if _frees_room(before) and (obj.get("status") or {}).get("phase") in FINISHED:
            return True
        if spec.get("schedulerName", "default-scheduler") not in self.scheduler_names:
            return False
        if spec.get("nodeName") or spec.get("schedulingGates"):
            return False
        # The resource-claim controller named the claims it made for the pod.
        after = self.cache.tasks.get(key)
        named = (
            before is not None
            and after is not None
            and before.resource_claims != after.resource_claims
        )
        return (before is None or before.blocked is not None or named) and self._gang_complete(key)

    def _gang_complete(self, key: str) -> bool:
        """Whether the pod's gang has the members waiting that its group asks for: a
        session could place none of it before. A gang whose other members are bound
        already (a member replaced) is placed at the next tick."""
        gang_key = self._waiting[key][1] if key in self._waiting else None
        if gang_key is None:
            return True
        task = self.cache.tasks[key]
        group = self.cache.pod_groups.get(gang_key)
        least = group.min_member if group is not None else task.group and task.group.min_available
        return len(self._gangs[gang_key].waiting) >= (least or 1)

    def delete(self, watched: Watched, key: str) -> None:
        urgent = watched is PODS and _frees_room(self.cache.tasks.get(key))
        waited = self._waiting.pop(key, None) if watched is PODS else None
        if waited is not None:
            self._leave_gang(key, waited[1], bound=False, now=time.time())
        self._fingerprints[watched.id].pop(key, None)
        self.versions.pop(version_key(watched, key), None)
        self.invalid.pop((watched.kind, key), None)
        self._logged.pop((watched.kind, key), None)
        self.status.forget(target_kind(watched.kind, watched.api_version), key)
        self.changes.note(urgent=urgent)
        namespace, _, name = key.rpartition("/")
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        stub = {"apiVersion": watched.api_version, "kind": watched.kind, "metadata": meta}
        self.cache.apply(stub, deleted=True)

    def _observe(self, watched: Watched, key: str, raw: Mapping[str, Any]) -> None:
        """Tell the status writer what the object shows now, so it rewrites only changes."""
        status = raw.get("status") or {}
        kind = watched.kind
        if kind == "Pod":
            message = next(
                (
                    c.get("message")
                    for c in status.get("conditions") or []
                    if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                ),
                None,
            )
            self.status.observe(kind, key, message)
        elif kind in ("Queue", "PodGroup"):
            meta = raw.get("metadata") or {}
            generation = meta.get("generation")
            target = target_kind(kind, watched.api_version)
            self.status.observe(
                target,
                key,
                dict(status) or None,
                generation if isinstance(generation, int) else None,
            )
            annotations = meta.get("annotations")
            if kind == "PodGroup":
                clock = stored_clock_of(annotations) if isinstance(annotations, dict) else None
                self.status.observe_clock(target, key, clock)

    def _report(self, kind: str, key: str, obj: JSON, message: str) -> None:
        """Log and count an unusable object once per distinct problem."""
        if kind != "Pod":
            self.invalid[(kind, key)] = (object_ref(obj), message)
        if self._logged.get((kind, key)) != message:
            self._logged[(kind, key)] = message
            INVALID_OBJECTS.labels(kind).inc()
            log.warning("%s cannot be used: %s", describe(obj), message)


def _takes_pods(node: Node | None) -> bool:
    """Whether a node, as parsed, may take pods now: not cordoned, nor (as every node
    comes in, until its kubelet reports) not ready. A node that may not is looked at on
    the next tick; the change that readies it wakes the loop."""
    return (
        node is not None
        and node.ready
        and not node.unschedulable
        and not any(t.key in NOT_READY_TAINTS for t in node.taints)
    )


def _frees_room(task: Task | None) -> bool:
    """Whether the pod holds room on a node that its end would free."""
    return task is not None and task.node_name is not None and task.phase not in FINISHED


def key_of(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects, as the cache keys them."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def version_key(watched: Watched, key: str) -> str:
    """Claims are keyed `namespace/name` and volumes `name`; the kind keeps them apart."""
    return f"{watched.kind}:{key}"


def resource_version(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number, 0 if it has none. Kubernetes calls it
    opaque, but kube-scheduler's volume binder compares them as numbers too (they are
    etcd revisions), to tell whether its cache shows its own write yet."""
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return int(version) if isinstance(version, str) and version.isdigit() else 0
