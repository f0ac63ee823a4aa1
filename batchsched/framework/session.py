"""A Session: one scheduling pass over a snapshot, with the plugins' callbacks.

Actions drive it; plugins register callbacks on it in `open`. Everything a session
changes (node usage, queue usage) lives here, so a Statement can undo it exactly.
"""

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVarTuple

import numpy as np

from batchsched.api.objects import Constraints, Task
from batchsched.api.resources import MAX_UNITS
from batchsched.api.unsupported import GATED_MESSAGE
from batchsched.framework.deviceclaims import DeviceClaims, backed_resources
from batchsched.framework.devices import DeviceMemo
from batchsched.framework.gpucards import GpuCards
from batchsched.framework.plugin import (
    UNBOUNDED,
    Explained,
    Hook,
    NodeFilter,
    NodeScorer,
    Opening,
)
from batchsched.framework.reservations import Reservations
from batchsched.framework.topology import LabelTier, TopologyPlanner
from batchsched.framework.victims import Victims, build_victims
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.decisions import (
    Binding,
    ClaimBinding,
    Deallocation,
    Decisions,
    DeviceAllocation,
    Unplaced,
)
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, Snapshot, TaskInfo

JobCheck = Callable[[JobInfo], str | None]
Args = TypeVarTuple("Args")
BlockerCheck = Callable[[TaskInfo], str | None]
# kube-scheduler's message when the cluster has no node at all.
NO_NODES = "no nodes available to schedule pods"
# The reason of a pending pod no action looked at.
NOT_ATTEMPTED = Reason(Code.NOT_ATTEMPTED, SESSION, "not attempted in this session")
TaskCheck = Callable[[JobInfo, TaskInfo], str | None]
Handler = Callable[[JobInfo, TaskInfo, int], None]
# Told that a member of a job counts as placed (+1) or no longer (-1), wherever it is.
CountHandler = Callable[[JobInfo, TaskInfo, int], None]
# Which running pods (over Victims) a job may evict: one list per action, preempt and
# reclaim; a victim must pass every check of its action's list.
VictimCheck = Callable[[JobInfo, Victims], BoolArray]
# Told each job's bindings the moment they are final, before the session ends.
CommitHandler = Callable[[Sequence[Binding]], None]


class Plugin(Protocol):
    """What plugins provide to a session: `open` registers their callbacks on it
    (framework/plugin.py has the filter and scorer shapes those callbacks take)."""

    name: str

    def open(self, session: "Session") -> None:
        """Register callbacks on a new session and reset any per-session state."""


class FreshFilter(Protocol):
    # The plugin it comes from (or the session's own check), as explain names it.
    name: str

    def concerns(self, task: TaskInfo) -> bool:
        """Whether any term of the session bears on where the task may go."""

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """Where the task may go, over all nodes; None when it may go anywhere."""

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        """The same for some nodes."""

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        """For the given nodes, how many fail for each reason, and those that pass."""


class NormalizedScorer(Protocol):
    # The plugin it comes from (or the session's own check), as explain names it.
    name: str

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        """0..MAX_NODE_SCORE for every node where `feasible` (over the whole cluster),
        normalized over those nodes; None when it would be the same everywhere."""


# The preferences a pod may state and the plugin that scores each: a pod stating one
# that no configured plugin scores waits, rather than have it ignored.
PREFERENCES: tuple[tuple[str, str, Callable[[Task], bool]], ...] = (
    (
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        "nodeaffinity",
        lambda task: bool(task.node_preferences),
    ),
    (
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        "interpodaffinity",
        lambda task: bool(task.affinity and task.affinity.preferred_affinity),
    ),
    (
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        "interpodaffinity",
        lambda task: bool(task.affinity and task.affinity.preferred_anti_affinity),
    ),
    (
        "spec.topologySpreadConstraints with whenUnsatisfiable ScheduleAnyway",
        "podtopologyspread",
        lambda task: any(not c.hard for c in task.spread),
    ),
)


@dataclass(slots=True)
class Timings:
    """Where a session's time went, for the operator's metrics: seconds per action, and
    per plugin for opening the session (its per-session set-up, as Volcano measures)."""

    actions: dict[str, float] = field(default_factory=dict)
    plugins: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class _ShapeCache:
    """Best-node search state for one task shape: score per node, -1 where it cannot go."""

    scores: IntArray
    seen: int  # how much of Session.touched is already reflected in `scores`


class Session:
    def __init__(
        self,
        snapshot: Snapshot,
        *,
        tiers: Sequence[Sequence[Plugin]],
        starvation_seconds: float | None = None,
        timings: Timings | None = None,
        on_commit: CommitHandler | None = None,
        evict_other_schedulers: bool = False,
        devices: DeviceMemo | None = None,
        topology_tiers: Sequence[LabelTier] = (),
        topology_soft_wait: float = 0.0,
    ) -> None:
        self.snapshot = snapshot
        # Which plugin the callbacks registered now belong to (framework/plugin.Hook).
        opening = self._opening = Opening()
        self.evict_other_schedulers = evict_other_schedulers
        self.on_commit = on_commit
        self.timings = Timings() if timings is None else timings
        self.starvation_seconds = starvation_seconds
        # Set by the enqueue action; without it every valid job may be allocated.
        self.enqueue_ran = False
        self.requested = snapshot.used.copy()
        # allocatable - requested, kept with it: what fit checks read.
        self.free = snapshot.allocatable - self.requested
        # Extended resources a DeviceClass backs are given through devices on a node
        # that has none of them (DeviceClaims checks those): no fit check finds such a
        # node short of them.
        self.backed = backed_resources(snapshot)
        for resource in self.backed:
            column = snapshot.column[resource]
            self.free[snapshot.allocatable[:, column] == 0, column] = MAX_UNITS
        self.port_users = {port: set(rows) for port, rows in snapshot.port_users.items()}
        self.decisions = Decisions()
        self.node_count = len(snapshot.nodes)
        self.all_nodes: IntArray = np.arange(self.node_count, dtype=np.int64)
        # Node rows changed by allocate/undo, in order; shape caches replay it lazily.
        self.touched: list[int] = []
        # Job key -> why it is not (yet) placed; filled by actions, read at close.
        self.job_reasons: dict[str, Reason] = {}
        self.task_reasons: dict[str, Reason] = {}
        # Jobs set aside are not tried: they wait for the reasons they were given.
        self.set_aside = snapshot.set_aside
        # The jobs with pods to place in this session: what actions try, and what
        # plugins look at to know whether they are needed.
        self.placing = [
            job for job in snapshot.jobs.values() if job.pending and job.key not in self.set_aside
        ]
        for key, unplaced in self.set_aside.items():
            if unplaced.job_reason is not None:
                self.job_reasons[key] = unplaced.job_reason
        # Jobs allocate tried and could place nowhere.
        self.unplaced: set[str] = set()
        # Task key -> the claim to deallocate for it (post_filter), as first decided.
        self.deallocations: dict[str, Deallocation] = {}
        # When a job's outcome changes with time alone, if it will (plugins' hooks).
        self.deadlines: Hook[Callable[[JobInfo], float | None]] = Hook(opening)
        self.enqueued: set[str] = set()
        # Jobs enqueue held back only because the cluster lacks idle room for them.
        self.short_of_room: set[str] = set()
        # Job key -> members bound by this session's committed statements.
        self.placed: Counter[str] = Counter()
        self.job_keys: Hook[Callable[[JobInfo], object]] = Hook(opening)
        self.task_keys: Hook[Callable[[TaskInfo], object]] = Hook(opening)
        self.queue_keys: Hook[Callable[[str], object]] = Hook(opening)
        self.gpu = GpuCards(snapshot, self.requested)
        # The domains gangs asking for one are tried in; while one is tried, `within`
        # holds its nodes and no node outside it is chosen.
        self.topology = TopologyPlanner(
            snapshot, self.requested, self.free, topology_tiers, self.touched, topology_soft_wait
        )
        self.within: BoolArray | None = None
        # Filters in the order they explain a node (see explain); the card filter, which
        # no configuration may leave out, comes after the plugins' (set up below).
        self.filters: Hook[NodeFilter] = Hook(opening)
        self.scorers: Hook[tuple[NodeScorer, int]] = Hook(opening)
        # Filters whose outcome on a node changes with pods placed on other nodes (pod
        # affinity, over a zone): asked afresh over all nodes at each choice, on top of
        # the evaluation cached per Task.fit_key.
        self.fresh_filters: Hook[FreshFilter] = Hook(opening)
        # Scores normalized over the nodes that fit, as kube-scheduler's NormalizeScore
        # does: they change with every node that fills up, so they are taken afresh at
        # each choice instead of being cached per node.
        self.normalized_scorers: Hook[tuple[NormalizedScorer, int]] = Hook(opening)
        # The plugins of PREFERENCES that are configured.
        self.scored: set[str] = set()
        self.valid_checks: Hook[JobCheck] = Hook(opening)
        # Why no node will do for a task in this session, whatever is placed in it (a
        # claim that does not exist): a gang with such members is not tried.
        self.blockers: Hook[BlockerCheck] = Hook(opening)
        # Where pods with these constraints may run at all (set by predicates); the
        # starvation check packs gangs within it.
        self.allowed: Callable[[Constraints], BoolArray] = self._everywhere
        # Task key -> its claims to bind with it, decided where it was placed.
        self.claim_bindings: dict[str, tuple[ClaimBinding, ...]] = {}
        self.enqueue_checks: Hook[JobCheck] = Hook(opening)
        # How long a job may wait before room is held for it, where a plugin says so for
        # that job (Volcano's sla); the starvation threshold applies to the others.
        self.waiting_limits: Hook[Callable[[JobInfo], float | None]] = Hook(opening)
        # Room beyond what is idle that enqueue may admit into, per resource column
        # (the overcommit plugin's); none: only what is idle.
        self.enqueue_headroom: Hook[IntArray] = Hook(opening)
        # Checks of a task before it is placed; these, and the capacity, share and ready
        # checks below, read only what its job and queue hold, kept by `on_count`.
        self.allocate_checks: Hook[TaskCheck] = Hook(opening)
        # Set by a plugin whose checks learn from the pods tried and the order they are
        # tried in (gpufragmentation counting pods it has not seen): a try is then
        # always made, never answered without it.
        self.tries_observed = False
        # Allocate checks a task fails for what its queue holds (its capability), which
        # evicting pods of that queue can change: preempt makes room there too.
        self.capacity_checks: Hook[TaskCheck] = Hook(opening)
        # Whether a task still counts toward its job's minimum (the gang plugin's); the
        # members beyond it are elastic, and `share_checks` hold each of them to its
        # queue's share (proportion's, Volcano's allocatable), asking `needed`.
        self.minimum_checks: Hook[Callable[[JobInfo, TaskInfo], bool]] = Hook(opening)
        self.share_checks: Hook[TaskCheck] = Hook(opening)
        # What a job with `placed` members tentatively placed is short of, beyond its
        # minMember (a task role's minimum), in words; None when nothing.
        self.shortfalls: Hook[Callable[[JobInfo, int], str | None]] = Hook(opening)
        # Members placed per job in this session, tentatively or for good, less those
        # of its members evicted: what the minimum checks count beyond the bound ones.
        self.allocations: Counter[str] = Counter()
        # Jobs with a member the share checks held back: they wait for their queue's
        # share, not for room, so they are not set aside as unplaceable.
        self.share_refused: set[str] = set()
        self.overused_checks: Hook[Callable[[str], bool]] = Hook(opening)
        self.ready_checks: Hook[Callable[[JobInfo, int], bool]] = Hook(opening)
        self.on_allocate: Hook[Handler] = Hook(opening)
        self.on_deallocate: Hook[Handler] = Hook(opening)
        # What the checks of a task read, kept as members are placed and undone, or
        # counted on no node (`count`): a job's and its queue's holdings, not a node's.
        self.on_count: Hook[CountHandler] = Hook(opening)
        self.closers: Hook[Callable[[], None]] = Hook(opening)
        self.preemptable: Hook[VictimCheck] = Hook(opening)
        self.reclaimable: Hook[VictimCheck] = Hook(opening)
        # Jobs keeping the room a preemption freed while its victims terminate: neither
        # placed elsewhere nor preempting again in this session.
        self.awaiting_victims: set[str] = set()
        # Job key -> members placed or nominated by this session, which no victim frees:
        # the job's running members are evicted only as far as they leave it minMember.
        self.pinned: Counter[str] = Counter()
        self._victims: Victims | None = None
        # Room held for starving gangs, once one is (framework/reservations.py).
        self.reservations: Reservations | None = None
        self._shapes: dict[tuple[object, ...], _ShapeCache] = {}
        for tier in tiers:
            for plugin in tier:
                started = time.perf_counter()
                opening.plugin = plugin.name
                plugin.open(self)
                self.timings.plugins[plugin.name] = time.perf_counter() - started
        opening.plugin = SESSION
        self.filters.append(self.gpu)
        if self.topology.tiers:
            # A starving gang's domain counts the pods this session placed as running,
            # and those it evicted as gone.
            self.on_allocate.append(self.topology.on_placed)
            self.on_deallocate.append(self.topology.on_unplaced)
        # Resource claims, which no configuration may leave out either.
        self.device_claims: DeviceClaims | None = None
        if DeviceClaims.needed(self.placing, self.backed):
            self._open_device_claims(devices or DeviceMemo())

    def _open_device_claims(self, memo: DeviceMemo) -> None:
        snapshot = self.snapshot
        inventory = memo.inventory(snapshot.devices, snapshot.nodes)
        claims = self.device_claims = DeviceClaims(
            devices=snapshot.devices,
            inventory=inventory,
            placed=snapshot.placed,
            namespace_labels=snapshot.namespace_labels,
            unavailable=self.unavailable,
            backed=self.backed,
            allocatable=snapshot.allocatable,
            columns=snapshot.column,
        )
        self.blockers.append(claims.blocker)
        self.fresh_filters.append(claims)
        self.on_allocate.append(claims.allocated_to)
        self.on_deallocate.append(claims.released_by)

    def device_allocations(self, task: TaskInfo) -> tuple[DeviceAllocation, ...]:
        """The ResourceClaims allocated where the task was placed."""
        claims = self.device_claims
        return () if claims is None else claims.allocated.get(task.key, ())

    def _everywhere(self, _: Constraints) -> BoolArray:
        return np.ones(self.node_count, dtype=np.bool_)

    # Ordering: keys from plugins in tier order, then creation and name so that equal
    # input always gives equal output.

    def job_order(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        keys = self.job_keys.callbacks
        return sorted(jobs, key=lambda j: (*(k(j) for k in keys), j.creation, j.key))

    def task_order(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        keys = self.task_keys.callbacks
        return sorted(tasks, key=lambda t: (*(k(t) for k in keys), t.pod.name))

    def queue_order_key(self, queue: str) -> tuple[object, ...]:
        return (*(k(queue) for k in self.queue_keys.callbacks), queue)

    # Checks: the first plugin that objects wins, and its words become the reason, with
    # the code of the kind of check and the plugin's name.

    def invalid(self, job: JobInfo) -> Reason | None:
        return _blocked(self, job) or _first(self.valid_checks, Code.INVALID, job)

    def not_enqueueable(self, job: JobInfo) -> Reason | None:
        return _first(self.enqueue_checks, Code.NOT_ADMITTED, job)

    def waiting_limit(self, job: JobInfo) -> float | None:
        """How long `job` may wait before room is held for it; None: for ever."""
        stated = [limit for check in self.waiting_limits if (limit := check(job)) is not None]
        return min(stated) if stated else self.starvation_seconds

    def overdue(self, job: JobInfo) -> bool:
        """Whether `job` has waited longer than a plugin says it may (not the cluster's
        starvation threshold): admitted then without waiting for idle room, as Volcano's
        sla plugin permits it, so that room can be held for it."""
        return any(
            (limit := check(job)) is not None and self.snapshot.now - job.creation > limit
            for check in self.waiting_limits
        )

    def blocker(self, task: TaskInfo) -> Reason | None:
        """Why no node will do for the task, whatever the cluster holds."""
        pod = task.pod
        if pod.blocked:
            # Where the pod's words become a code: api/unsupported.py says gated so.
            gated = pod.blocked == GATED_MESSAGE
            return Reason(Code.GATED if gated else Code.BLOCKED, SESSION, pod.blocked)
        # Asked of every member at every attempt: most sessions have no blocker check.
        if self.blockers.callbacks and (found := _first(self.blockers, Code.BLOCKED, task)):
            return found
        if pod.affinity is None and not pod.node_preferences and not pod.spread:
            return None
        for field_name, plugin, states in PREFERENCES:
            if plugin not in self.scored and states(pod):
                return Reason(
                    Code.BLOCKED,
                    SESSION,
                    f"{field_name} is not scored: "
                    f"the configuration does not list the {plugin} plugin",
                )
        return None

    def not_allocatable(self, job: JobInfo, task: TaskInfo) -> Reason | None:
        return self.refused(job, task) or self.over_capacity(job, task)

    def refused(self, job: JobInfo, task: TaskInfo) -> Reason | None:
        """Why the task may not be placed now, but for its queue's capability."""
        blocker = self.blocker(task)
        if blocker:
            return blocker
        return _first(self.allocate_checks, Code.REFUSED, job, task) or _first(
            self.share_checks, Code.REFUSED, job, task
        )

    def shortfall(self, job: JobInfo, placed: int) -> str | None:
        """What a gang is short of beyond minMember, in words a gang's reason includes."""
        return next((short for check in self.shortfalls if (short := check(job, placed))), None)

    def needed(self, job: JobInfo, task: TaskInfo) -> bool:
        """Whether placing the task brings its job closer to its minimum."""
        return any(check(job, task) for check in self.minimum_checks.callbacks)

    def over_capacity(self, job: JobInfo, task: TaskInfo) -> Reason | None:
        return _first(self.capacity_checks, Code.REFUSED, job, task)

    def overused(self, queue: str) -> str | None:
        """The plugin that finds the queue over its fair share, if one does."""
        return next(
            (plugin for plugin, check in self.overused_checks.named() if check(queue)), None
        )

    def ready(self, job: JobInfo, placed: int) -> bool:
        return all(check(job, placed) for check in self.ready_checks.callbacks)

    # Placement.

    def best_node(self, task: TaskInfo) -> int | None:
        """The highest-scoring feasible node (lowest index on ties), or None."""
        if self.node_count == 0:
            return None
        scores = self.scores(task)
        for fresh in self.fresh_filters.callbacks:
            allowed = fresh.mask(task)
            if allowed is not None:
                scores = np.where(allowed, scores, -1)
        if self.within is not None:
            scores = np.where(self.within, scores, -1)
        if self.normalized_scorers.callbacks:
            scores = self._normalized(task, scores)
        best = int(scores.argmax())
        if scores[best] < 0:
            return None
        if self.within is not None:
            # Already inside the domain its gang asked for: the nodes are ranked alike.
            return best
        return self.topology.fullest(task, scores == scores[best], best)

    def scores(self, task: TaskInfo) -> IntArray:
        """The task's score per node by the filters and scorers asked once per shape
        (-1 where it cannot go), kept current from the nodes changed since; the filters
        asked afresh only rule out more. Not to be changed by the caller."""
        key = task.pod.fit_key or task.pod.shape_key
        cache = self._shapes.get(key)
        if cache is None:
            cache = _ShapeCache(scores=self._evaluate(task, self.all_nodes), seen=0)
            cache.seen = len(self.touched)
            self._shapes[key] = cache
        elif cache.seen < len(self.touched):
            changed = self.touched[cache.seen :]
            stale = np.array(changed if len(changed) == 1 else sorted(set(changed)))
            cache.scores[stale] = self._evaluate(task, stale)
            cache.seen = len(self.touched)
        return cache.scores

    def room_for(self, tasks: Sequence[TaskInfo]) -> IntArray | None:
        """Per node, how many of `tasks` it takes at least, whichever go first and
        whichever nodes the others go to (NodeFilter.room_for, the least of every
        filter's); None when a filter cannot say, or a filter asked afresh (pod
        affinity, spread, claims) bears on one of them."""
        if any(f.concerns(t) for f in self.fresh_filters.callbacks for t in tasks):
            return None
        room: IntArray = np.full(self.node_count, UNBOUNDED, dtype=np.int64)
        for node_filter in self.filters.callbacks:
            held = node_filter.room_for(tasks)
            if held is None:
                return None
            np.minimum(room, held, out=room)
        return room

    def _normalized(self, task: TaskInfo, scores: IntArray) -> IntArray:
        """`scores` (-1 where the task does not fit) plus each normalized scorer's."""
        feasible = scores >= 0
        if not feasible.any():
            return scores
        for scorer, weight in self.normalized_scorers.callbacks:
            normal = scorer.normalized_scores(task, feasible)
            if normal is not None:
                scores = np.where(feasible, scores + normal * weight, -1)
        return scores

    def fits(self, task: TaskInfo, node: int) -> bool:
        """Whether every filter lets the task onto this one node."""
        if self.within is not None and not self.within[node]:
            return False
        rows: IntArray = np.array([node], dtype=np.int64)
        return all(
            bool(node_filter.filter(task, rows)[0])
            for node_filter in (*self.filters, *self.fresh_filters)
        )

    def _evaluate(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        feasible: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for node_filter in self.filters.callbacks:
            feasible &= node_filter.filter(task, nodes)
        total = np.zeros(len(nodes), dtype=np.int64)
        for scorer, weight in self.scorers.callbacks:
            total += scorer.score(task, nodes) * weight
        return np.where(feasible, total, -1)

    def explain(self, task: TaskInfo) -> Reason:
        """Why no node fits, in kube-scheduler's words: `0/4 nodes are available: 1 node(s)
        were unschedulable, 3 Insufficient cpu.` (counted reasons sorted as text), from the
        plugin whose filter refused the first of them.

        As in kube-scheduler, a node gives the reasons of the first filter it fails only.
        While a topology domain is tried, its nodes are the ones counted.
        """
        if not self.node_count:
            return Reason(Code.UNSCHEDULABLE, SESSION, NO_NODES)
        reasons: Counter[str] = Counter()
        first = SESSION
        left = self.all_nodes if self.within is None else np.flatnonzero(self.within)
        total = len(left)
        named: list[tuple[str, NodeFilter | FreshFilter]] = [
            *self.filters.named(),
            *self.fresh_filters.named(),
        ]
        for plugin, node_filter in named:
            counted, left = node_filter.explain(task, left)
            if counted and not reasons:
                first = plugin
            reasons.update(counted)
            if not len(left):
                break
        why = ", ".join(sorted(f"{n} {why}" for why, n in reasons.items()))
        return Reason(Code.UNSCHEDULABLE, first, self.unavailable(why, total))

    def post_filter(self, task: TaskInfo) -> None:
        """For a task no node takes, kube-scheduler's DynamicResources PostFilter
        (v1.36.3): one of its claims allocated already, whose allocation cannot be used
        on some node that passed every other filter and which is reserved for nobody or
        for this pod alone, is to be deallocated, so that the next attempt may allocate
        it elsewhere (a node gone, or full). Upstream picks at random; the pod's order
        here keeps sessions reproducible. Once per pod per session, and only when no node
        takes it: one tried within a topology domain may fit outside it."""
        claims = self.device_claims
        if claims is None or task.key in self.deallocations or not claims.concerns(task):
            return
        idle = claims.idle_allocated(task)
        if not idle:
            return
        nodes = self.all_nodes
        reaching: BoolArray = np.ones(self.node_count, dtype=np.bool_)
        for node_filter in self.filters.callbacks:
            reaching &= node_filter.filter(task, nodes)
        for fresh in self.fresh_filters.callbacks:
            allowed = None if fresh is claims else fresh.mask(task)
            if allowed is not None:
                reaching &= allowed
        allowed = claims.mask(task)
        if allowed is not None and (reaching & allowed).any():
            return
        for claim, where in idle:
            if (reaching & ~where).any():
                assert claim.allocation is not None
                self.deallocations[task.key] = Deallocation(
                    claim.namespace,
                    claim.name,
                    claim.uid,
                    task.key,
                    task.pod.uid,
                    claim.allocation.devices,
                )
                return

    def unavailable(self, why: str, total: int | None = None) -> str:
        """kube-scheduler's message for a pod no node takes (of `total`, by default
        all), and why."""
        return f"0/{self.node_count if total is None else total} nodes are available: {why}."

    def allocate(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.gpu.take(task, node)
        self.requested[node] += task.vec
        self.free[node] -= task.vec
        for port in task.pod.host_ports:
            self.port_users.setdefault(port, set()).add(node)
        self.touched.append(node)
        for handler in self.on_allocate.callbacks:
            handler(job, task, node)
        self.count(job, task, 1)

    def deallocate(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.gpu.release(task, node)
        self.requested[node] -= task.vec
        self.free[node] += task.vec
        for port in task.pod.host_ports:
            self.port_users[port].discard(node)
        self.touched.append(node)
        for handler in self.on_deallocate.callbacks:
            handler(job, task, node)
        self.count(job, task, -1)

    def count(self, job: JobInfo, task: TaskInfo, step: int) -> None:
        """The task counts as placed for its job (`step` 1) or no longer (-1), for what
        the checks of a task read (`on_count`); `allocate` counts it with its node."""
        self.allocations[job.key] += step
        for handler in self.on_count.callbacks:
            handler(job, task, step)

    def reserve(self, job: str, rows: list[int], vecs: list[IntArray]) -> None:
        """Hold room on node `rows` for a starving gang (`vecs`, one per member)."""
        if self.reservations is None:
            self.reservations = Reservations(self.snapshot, self.free)
            self.filters.append(self.reservations)
            # Every cached evaluation predates the new filter.
            self._shapes.clear()
        self.reservations.hold(job, rows, vecs)
        self.touched.extend(rows)

    def unreserve(self, job: str) -> tuple[list[int], list[IntArray]] | None:
        """Give back the room held for `job`, which its own members may then take; what
        was held (None: nothing), for `reserve` to hold again."""
        held = None if self.reservations is None else self.reservations.release(job)
        if held is not None:
            self.touched.extend(held[0])
        return held

    @property
    def victims(self) -> Victims:
        """The running pods preempt and reclaim may evict, built when first asked."""
        if self._victims is None:
            self._victims = build_victims(
                self.snapshot, other_schedulers=self.evict_other_schedulers, pinned=self.pinned
            )
        return self._victims

    def pin(self, job: str, count: int) -> None:
        """`count` members of `job` now hold nodes for the rest of the session."""
        self.pinned[job] += count
        if self._victims is not None:
            self._victims.pin(job, count)

    def evict(self, index: int) -> None:
        """Take victim `index` off its node for the rest of the session (or until
        restored): its resources, cards and ports are free, and plugins forget it."""
        victims = self.victims
        info = victims.info(index)
        cards = info.pod.gpu_index
        if cards and len(set(cards)) == info.gpu.cards:
            # Cards it was bound with are known; others were counted best fit, and stay
            # counted rather than free a card that might be another pod's.
            self.gpu.placed.setdefault(info.key, cards)
        victims.mark(index, taken=True)
        self.deallocate(victims.job_of(index), info, int(victims.rows[index]))

    def restore(self, index: int) -> None:
        victims = self.victims
        victims.mark(index, taken=False)
        self.allocate(victims.job_of(index), victims.info(index), int(victims.rows[index]))

    def close(self) -> Decisions:
        """Run the plugins' closers and say, for every pod still waiting, why (but for
        those of jobs set aside: what they wait for was said)."""
        bound = {b.key for b in self.decisions.bindings}
        for job in self.snapshot.jobs.values():
            if job.key in self.set_aside:
                self.decisions.waiting_set_aside += len(job.pending)
                continue
            for task in job.pending:
                if task.key not in bound:
                    self.decisions.pending[task.key] = (
                        self.task_reasons.get(task.key)
                        or self.job_reasons.get(job.key)
                        or NOT_ATTEMPTED
                    )
        self._report_unplaced()
        self.decisions.span_clocks = self.topology.clocks()
        claims = self.device_claims
        self.decisions.deallocations = [
            d for d in self.deallocations.values() if claims is not None and claims.still_idle(d)
        ]
        for closer in self.closers:
            closer()
        return self.decisions

    def _report_unplaced(self) -> None:
        """The jobs allocate could place nowhere and no eviction made room for."""
        making_room = {e.preemptor for e in self.decisions.evictions}
        making_room.update(n.job for n in self.decisions.nominations if n.node)
        jobs, now = self.snapshot.jobs, self.snapshot.now
        for key in sorted(self.unplaced - making_room - self.awaiting_victims):
            job = jobs[key]
            times = [deadline(job) for deadline in self.deadlines]
            limit = self.waiting_limit(job)
            if limit is not None:
                times.append(job.creation + limit)
            # A soft topology ask spans domains once its wait runs out: a new outcome.
            # Its wait not started, it is woken as room frees, as other jobs are.
            if self.topology.waits_by_choice(job):
                times.append(self.topology.wait_ends(job))
            ahead = [t for t in times if t is not None and t > now]
            self.decisions.unplaced[key] = Unplaced(
                job_reason=self.job_reasons.get(key), until=min(ahead, default=None)
            )


def _first(checks: Hook[Callable[[*Args], str | None]], code: Code, *args: *Args) -> Reason | None:
    """The first check's objection, if any objects, with its plugin's name."""
    for index, check in enumerate(checks.callbacks):
        message = check(*args)
        if message:
            return Reason(code, checks.plugins[index], message)
    return None


def _blocked(session: Session, job: JobInfo) -> Reason | None:
    """Why the job cannot reach minMember while some members may not be placed at all
    (gated, or asking for what the core does not honour): such a gang is not tried, so
    it neither takes room for nothing nor has its queue hold room for it. Not a plugin:
    no configuration may place a pod as if it had not asked."""
    blocked = [(t, b) for t in job.pending if (b := session.blocker(t))]
    if not blocked:
        return None
    for task, blocker in blocked:
        session.task_reasons[task.key] = blocker
    placeable = job.bound + len(job.pending) - len(blocked)
    if placeable >= job.min_member:
        return None
    first, blocker = blocked[0]
    if not job.is_gang:
        return blocker
    # Blocked, not gated: the gang's other members are tried, and say they wait for it.
    return Reason(
        Code.BLOCKED,
        blocker.plugin,
        f"gang {job.key}: {placeable} of {job.min_member} members may be placed; "
        f"{first.key}: {blocker}",
    )
