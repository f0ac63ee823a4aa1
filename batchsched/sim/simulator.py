"""Running sessions on an in-memory cluster as simulated time passes.

Bound pods are marked Running at once, standing in for the kubelet, and PodGroup phases
are written back, just as the operator's status writer would do. The claims a binding
settles are bound at once, standing in for the PersistentVolume controller and the
provisioner: to the volume chosen for them, or to a new one made for the chosen node
(reachable from the nodes sharing its values of the class's allowedTopologies keys).

Time starts at the earliest creationTimestamp of the input's Pods and PodGroups; Pods,
PodGroups and Nodes created later arrive then (a node a pod of the input is on is there
from the start, as that pod is). A pod the simulator binds with a DURATION_ANNOTATION
(its own, or else its PodGroup's) succeeds that long after, freeing its node; one whose
activeDeadlineSeconds pass first fails then (DeadlineExceeded), as the kubelet ends it.
Its status.startTime is when it was bound. Sessions run every schedulePeriod; when one
changes nothing (binds, evicts or nominates nothing), time jumps to the next arrival or
finish, and the run ends when none is left.

Preempt and reclaim are carried out as the cluster would carry them out:

- An evicted pod is deleted at once, as the kubelet deletes it after a zero grace
  period: simulated pods have no containers to stop, and a grace period would only
  delay the preemptor by a guess. Its node is free for the next session, and its
  finish, if it had a duration, never comes. No controller recreates it: the report
  keeps it, with when and why it was evicted.
- Each PodDisruptionBudget selecting the pod allows one disruption fewer (never fewer
  than none), standing in for the disruption controller, so that later sessions count
  what earlier evictions spent. Nothing gives disruptions back: evicted pods are not
  replaced, and a replacement would have to become healthy first.
- A nomination writes status.nominatedNodeName on the pending pod (an empty node
  removes it), and the pod is applied to the cache again, as a watch would deliver the
  update; the next session then places the pod on that node first.
"""

import dataclasses
import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.api.groups import parse_duration
from batchsched.api.meta import annotations_of, creation_of, describe, name_of, namespace_of
from batchsched.api.selectors import Requirement
from batchsched.api.volumes import ClaimRef, NodeTerms, Volume
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig
from batchsched.framework.devices import DeviceMemo
from batchsched.model.decisions import ClaimBinding, Decisions, Eviction, Nomination
from batchsched.model.snapshot import Snapshot
from batchsched.scheduler import run_session
from batchsched.sim.claims import deallocate, release, write_allocations

# A guard against a plugin that keeps binding forever; real inputs settle far sooner.
MAX_SESSIONS = 10_000
DURATION_ANNOTATION = "simulation.batchsched.io/duration"
# The kinds of work: their earliest creation starts simulated time, and they may carry
# a duration. A cluster's nodes are mostly older than its work, and time starting at
# the first of them would only run idle until the first pod.
WORK_KINDS = ("Pod", "PodGroup")
# The kinds that arrive at their creationTimestamp; everything else is there from the
# start. A node created later is room that comes then, as it comes to the operator.
ARRIVING_KINDS = (*WORK_KINDS, "Node")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Evicted:
    """A pod the simulator deleted for preempt or reclaim."""

    eviction: Eviction
    # Simulated seconds since the start.
    at: float
    # Its PodGroup's key, and its schedulerName: the report lists our pods only.
    group: str | None
    scheduler_name: str


@dataclass
class Simulation:
    cache: ClusterCache
    snapshot: Snapshot
    decisions: Decisions
    sessions: int
    elapsed_seconds: float
    errors: list[str] = field(default_factory=list)
    # "ns/name" -> simulated seconds since the start at which the simulator bound the pod,
    # and at which it succeeded.
    bound_at: dict[str, float] = field(default_factory=dict)
    finished_at: dict[str, float] = field(default_factory=dict)
    # Pods that ended because their activeDeadlineSeconds passed, not by succeeding.
    deadline_exceeded: set[str] = field(default_factory=set)
    # Simulated seconds from the start to the last session.
    end_seconds: float = 0.0
    # In the order they were carried out.
    evictions: list[Evicted] = field(default_factory=list)


def simulate(objects: Iterable[dict[str, Any]], config: SchedulerConfig) -> Simulation:
    start, present, later = _arrivals(list(objects))
    events = _Events(ClusterCache(), later)
    for obj in present:
        events.apply(obj)
    # No pod present may look created in the future, nor may the clock run before the
    # start (pods without a creationTimestamp are numbered by their order in the input).
    now = max((t.creation for t in events.cache.tasks.values()), default=0.0)
    if start is not None:
        now = max(now, start)
    events.origin = now
    # The softWait clocks the input's groups keep, as the operator takes them at its start.
    events.cache.restore_clocks(now)
    elapsed = 0.0
    sessions = 0
    # The cache's sequence at the last session's snapshot: what arrived since is new.
    seen: float | None = None
    # Devices are evaluated once and kept while slices do not change, as in the operator.
    devices = DeviceMemo()
    while True:
        events.advance(now)
        started = time.perf_counter()
        snapshot = take_snapshot(
            events.cache, now=now, scheduler_names=config.scheduler_names, seen=seen
        )
        seen = events.cache.sequence
        decisions = run_session(snapshot, config, devices=devices)
        elapsed += time.perf_counter() - started
        sessions += 1
        # Before the bindings: a cleared nomination re-applies the pod as the input gave
        # it, pending, and a pod bound in the same session must stay bound.
        for eviction in decisions.evictions:
            events.evict(eviction, now=now)
        nominated = [events.nominate(nomination) for nomination in decisions.nominations]
        for binding in decisions.bindings:
            for claim in binding.claims:
                _settle(events.cache, claim)
            write_allocations(events.cache, events.cache.tasks[binding.key], binding.devices)
            events.bind(binding.key, binding.node, binding.gpu_index, now=now)
        released = [d for d in decisions.deallocations if deallocate(events.cache, d)]
        events.cache.span_clocks = decisions.span_clocks
        for status in decisions.jobs.values():
            group = events.cache.pod_groups.get(status.key)
            if group is not None:
                group.phase = status.phase
        # Claims for extended resources left by an earlier attempt at pods that wait
        # (given as input): deleted, as the scheduler's PostFilter does.
        leftovers = events.cache.extended_leftovers(config.scheduler_names)
        for left in leftovers:
            meta = {"name": left.name, "namespace": left.namespace}
            events.cache.apply({"kind": "ResourceClaim", "metadata": meta}, deleted=True)
        if sessions >= MAX_SESSIONS:
            break
        # A group held back is refused by the next session, as the operator's is.
        if (
            decisions.bindings
            or decisions.evictions
            or any(nominated)
            or leftovers
            or released
            or snapshot.held_back
        ):
            now += config.schedule_period
            continue
        # A job set aside until a deadline (a soft topology wait, a gang's timeout, the
        # starvation threshold) is tried again then, as the operator's keeper wakes it.
        woken = [u.until for u in decisions.unplaced.values() if u.until is not None]
        upcoming = min([t for t in (events.upcoming(), *woken) if t is not None], default=None)
        if upcoming is None:
            break
        now = upcoming
    cache = events.cache
    # A malformed PodGroup is kept so that its pods can wait with its error; say it here too.
    errors = events.errors + [group.error for group in cache.pod_groups.values() if group.error]
    final = take_snapshot(cache, now=now, scheduler_names=config.scheduler_names)
    return Simulation(
        cache=cache,
        snapshot=final,
        decisions=decisions,
        sessions=sessions,
        elapsed_seconds=elapsed,
        errors=errors,
        bound_at=events.bound_at,
        finished_at=events.finished_at,
        deadline_exceeded=events.deadline_exceeded,
        end_seconds=now - events.origin,
        evictions=events.evicted,
    )


def _arrivals(objects: list[Obj]) -> tuple[float | None, list[Obj], list[tuple[float, int, Obj]]]:
    """The start of simulated time (None when nothing states its creation), the objects
    present then in input order, and a heap of the later ones by arrival.

    Time starts at the earliest creation of a Pod or PodGroup, or later if the input
    already has a pod on a node created later: the cluster held that pod, so it was at
    least that late.
    """
    # A node a pod of the input is on held that pod from the start, whatever its stamp.
    held = {str(obj["spec"]["nodeName"]) for obj in objects if _on_node(obj)}
    stamped = [(_creation(obj, held), index, obj) for index, obj in enumerate(objects)]
    times = [t for t, _, obj in stamped if t is not None and obj.get("kind") in WORK_KINDS]
    if not times:
        return None, objects, []
    running = [created for created, _, obj in stamped if created is not None and _on_node(obj)]
    start = max([min(times), *running])
    present = [obj for created, _, obj in stamped if created is None or created <= start]
    later = [
        (created, i, obj) for created, i, obj in stamped if created is not None and created > start
    ]
    heapq.heapify(later)
    return start, present, later


def _creation(obj: Obj, held: set[str]) -> float | None:
    """An arriving object's stated creation; one without (or with a malformed one, which
    applying it reports), and a node in `held`, is there from the start."""
    meta = obj.get("metadata")
    if obj.get("kind") not in ARRIVING_KINDS or not isinstance(meta, dict):
        return None
    if obj.get("kind") == "Node" and meta.get("name") in held:
        return None
    if meta.get("creationTimestamp") is None:
        return None
    try:
        return creation_of(obj, default=0.0)
    except InvalidObject:
        return None


def _on_node(obj: Obj) -> bool:
    spec = obj.get("spec")
    return obj.get("kind") == "Pod" and isinstance(spec, dict) and bool(spec.get("nodeName"))


class _Events:
    """The cluster as simulated time passes: objects arriving, and pods bound, run and
    finished by the simulator."""

    def __init__(self, cache: ClusterCache, arrivals: list[tuple[float, int, Obj]]) -> None:
        self.cache = cache
        self.arrivals = arrivals
        self.errors: list[str] = []
        # Simulated time at which sessions start; reports count seconds from it.
        self.origin = 0.0
        # (time, "ns/name") of every bound pod that will finish.
        self.finishes: list[tuple[float, str]] = []
        # "ns/name" -> when the pod's run ends, while it runs: an evicted pod's entry in
        # `finishes` is left in the heap, and ignored for want of one here.
        self.finish_due: dict[str, float] = {}
        # "ns/name" -> the Pod as last applied, for updates of its status.
        self.pods: dict[str, Obj] = {}
        self.evicted: list[Evicted] = []
        self.bound_at: dict[str, float] = {}
        self.finished_at: dict[str, float] = {}
        self.deadline_exceeded: set[str] = set()
        # (kind, "ns/name") of a Pod or PodGroup -> seconds its pods run.
        self.durations: dict[tuple[str, str], float] = {}

    def apply(self, obj: Obj) -> None:
        try:
            self.cache.apply(obj)
        except InvalidObject as error:
            self.errors.append(str(error))
            return
        kind = str(obj.get("kind"))
        if kind not in WORK_KINDS:
            return
        key = f"{namespace_of(obj)}/{name_of(obj)}"
        if kind == "Pod":
            self.pods[key] = obj
        try:
            raw = annotations_of(obj).get(DURATION_ANNOTATION)
            if raw is not None:
                where = f"{describe(obj)}: annotation {DURATION_ANNOTATION}"
                self.durations[kind, key] = parse_duration(raw, where=where)
        except InvalidObject as error:
            self._reject(kind, key, str(error))

    def _reject(self, kind: str, key: str, message: str) -> None:
        """A bad duration makes the object invalid, as any bad field would: a pod is left
        out and reported; a PodGroup is kept so that its pods wait with the message."""
        if kind == "PodGroup":
            group = self.cache.pod_groups[key]
            group.error = group.error or message
            return
        task = self.cache.tasks.pop(key)
        self.cache.arrivals.pop(key, None)
        self.cache.rejected_pods[key] = (task.scheduler_name, message)
        self.errors.append(message)

    def advance(self, now: float) -> None:
        """Finish the pods and apply the objects due by `now`."""
        while self.finishes and self.finishes[0][0] <= now:
            when, key = heapq.heappop(self.finishes)
            if self.finish_due.get(key) != when:
                continue
            del self.finish_due[key]
            task = self.cache.tasks.get(key)
            # A pod given again in the input, and rejected then, has no run to end.
            if task is not None:
                task.phase = "Failed" if key in self.deadline_exceeded else "Succeeded"
                self.finished_at[key] = when - self.origin
                release(self.cache, task)
        while self.arrivals and self.arrivals[0][0] <= now:
            self.apply(heapq.heappop(self.arrivals)[2])

    def bind(self, key: str, node: str, gpu_index: tuple[int, ...], *, now: float) -> None:
        # Bound at once, as the API server would answer: the pod is bound, not assumed.
        self.cache.assume(key, node, gpu_index=gpu_index)
        self.cache.confirm(key)
        task = self.cache.tasks[key]
        task.phase = "Running"
        task.started = now
        self.bound_at[key] = now - self.origin
        duration = self.durations.get(("Pod", key))
        if duration is None and task.group is not None:
            duration = self.durations.get(("PodGroup", task.group.key))
        deadline = task.deadline_seconds
        if deadline is not None and (duration is None or deadline < duration):
            duration = deadline
            self.deadline_exceeded.add(key)
        if duration is not None:
            heapq.heappush(self.finishes, (now + duration, key))
            self.finish_due[key] = now + duration

    def evict(self, eviction: Eviction, *, now: float) -> None:
        """Delete the pod at once, spending a disruption of each budget selecting it."""
        task = self.cache.tasks.get(eviction.key)
        if task is None:
            return
        for key, budget in self.cache.budgets.items():
            if budget.namespace == task.namespace and budget.selector.matches(task.labels):
                allowed = max(budget.disruptions_allowed - 1, 0)
                self.cache.budgets[key] = dataclasses.replace(budget, disruptions_allowed=allowed)
        gone = {"kind": "Pod", "metadata": {"namespace": task.namespace, "name": task.name}}
        self.cache.apply(gone, deleted=True)
        release(self.cache, task)
        self.pods.pop(eviction.key, None)
        self.finish_due.pop(eviction.key, None)
        self.evicted.append(
            Evicted(
                eviction=eviction,
                at=now - self.origin,
                group=task.group.key if task.group else None,
                scheduler_name=task.scheduler_name,
            )
        )

    def nominate(self, nomination: Nomination) -> bool:
        """Write (or remove) the pending pod's status.nominatedNodeName and apply the pod
        again; False when that changes nothing.

        The pod keeps the creation it had: one the input gave no creationTimestamp is
        numbered by its arrival, and a status update must not make it look newer.
        """
        task = self.cache.tasks.get(nomination.key)
        raw = self.pods.get(nomination.key)
        node = nomination.node or None
        if task is None or raw is None or task.nominated_node == node:
            return False
        status = {k: v for k, v in (raw.get("status") or {}).items() if k != "nominatedNodeName"}
        if node is not None:
            status["nominatedNodeName"] = node
        updated = {**raw, "status": status}
        self.cache.apply(updated)
        self.cache.tasks[nomination.key].creation = task.creation
        self.pods[nomination.key] = updated
        return True

    def upcoming(self) -> float | None:
        """When the next pod finishes or object arrives."""
        times = [heap[0][0] for heap in (self.finishes, self.arrivals) if heap]
        return min(times, default=None)


def _settle(cache: ClusterCache, binding: ClaimBinding) -> None:
    claim = cache.claims[binding.key]
    if claim.bound:
        return
    name = binding.volume or f"pvc-{claim.uid or claim.key.replace('/', '-')}"
    if not binding.volume:
        found = cache.storage_classes[claim.storage_class]
        labels = cache.nodes[binding.node].labels
        keys = {r.key for term in found.allowed_topologies for r in term}
        cache.volumes[name] = Volume(
            name=name,
            storage_class=claim.storage_class,
            capacity=claim.request,
            access_modes=claim.access_modes,
            block=claim.block,
            node_affinity=_reach(keys, labels),
            csi=(found.provisioner, name),
        )
    cache.volumes[name] = dataclasses.replace(
        cache.volumes[name], claim=ClaimRef(claim.namespace, claim.name, claim.uid)
    )
    cache.claims[binding.key] = dataclasses.replace(
        claim, volume_name=name, bind_completed=True, selected_node=binding.node
    )


def _reach(keys: set[str], labels: dict[str, str]) -> NodeTerms | None:
    """Where a volume provisioned on a node with these labels can be used."""
    term = tuple(Requirement(key, "In", (labels[key],)) for key in sorted(keys) if key in labels)
    return (term,) if term else None
