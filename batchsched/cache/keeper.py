"""Taking snapshots of the cache: once (take_snapshot), or kept up to date (SnapshotKeeper).

A snapshot's cost is in its pods: what those holding nodes add up to per node, and the
jobs they make. The operator takes one per session, and most sessions follow a few
changes (a pod created, a bind confirmed), so SnapshotKeeper keeps the last one's state
and redoes only what changed since: each changed pod's part of the node sums is taken
back and counted again, and only the jobs those pods or changed PodGroups belong to are
built again. A one-pod session on a large cluster then costs its change, not the cluster.

Some changes reach everything: a resource name that comes or goes (the arrays' columns),
a queue or a priority class (every job may read one). Those take the snapshot whole
again, as take_snapshot does, which is also how the first one is taken. Nodes added or
removed move the kept nodes' sums to their new rows (nodes are in name order); a node
changed in place only has the node arrays taken again; a namespace changed has its own
jobs built again. Refused binds are the one part that changes with time alone: the jobs
of pods whose refusal might have ended since the last snapshot are built again too.

The keeper also holds the jobs set aside: those a session could place nowhere, which
later sessions skip until something that could place them happens (_wake says what),
the time the session gave them comes, or the caller retries them all (the operator
does every 5 minutes).
"""

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from batchsched.api.dra import Devices
from batchsched.api.gpu import GPU_MILLI, GpuDemand, gpu_demand
from batchsched.api.objects import Node, PodGroup, Task
from batchsched.api.resources import BASE_RESOURCES, GPU, ResourceList
from batchsched.api.volumes import Storage
from batchsched.cache.cluster import Changes, ClusterCache
from batchsched.cache.jobs import JobBuilder, usable_queues
from batchsched.model.arrays import IntArray, request_row
from batchsched.model.decisions import Unplaced
from batchsched.model.snapshot import (
    NO_EXTRA,
    JobInfo,
    Snapshot,
    default_priority,
    job_key,
    placed_priority,
)
from batchsched.model.topology import Topology


def _placed_by_others(task: Task) -> bool:
    """Whether other pods, or volumes, rather than room alone decide where it fits."""
    affinity = task.affinity
    required = affinity is not None and bool(affinity.affinity or affinity.anti_affinity)
    return required or bool(task.spread) or bool(task.claims)


def take_snapshot(
    cache: ClusterCache,
    *,
    now: float,
    scheduler_names: Collection[str],
    seen: float | None = None,
) -> Snapshot:
    """The cache as it is now, taken whole; `seen` is the cache's sequence when the last
    session's snapshot was taken (None: no session came before)."""
    names = frozenset(scheduler_names)
    return _State(cache, scheduler_names=names, now=now, seen=seen).snapshot(now)


class SnapshotKeeper:
    """Takes snapshots of one cache, each from the last and what changed since (the
    module says how). Every change must reach the cache through its methods (apply,
    assume, forget, refuse, confirm), which log it for the keeper."""

    def __init__(self, cache: ClusterCache, *, scheduler_names: Collection[str]) -> None:
        self.cache = cache
        self.scheduler_names = frozenset(scheduler_names)
        cache.changes = Changes(everything=True)
        self._state: _State | None = None
        # The cache's sequence when the last snapshot was taken (None: none was).
        self.seen: float | None = None
        # Snapshots taken afresh, whole, since the keeper started: the first, and one
        # per change that reaches everything.
        self.whole = 0

    def take(self, *, now: float, retry_all: bool = False) -> Snapshot:
        """The cache as it is now; `retry_all` tries every job set aside again."""
        changes = self.cache.changes
        assert changes is not None
        self.cache.changes = Changes()
        state = self._state
        # Following more than half the pods costs more than taking them all afresh (a
        # replica that stood by while the cluster changed, say).
        many = len(changes.pods) > len(self.cache.tasks) // 2
        seen, self.seen = self.seen, self.cache.sequence
        if (
            state is None
            or changes.everything
            or many
            or not state.follow(changes, now=now, seen=seen)
        ):
            names = self.scheduler_names
            state = self._state = _State(self.cache, scheduler_names=names, now=now, seen=seen)
            self.whole += 1
        if retry_all:
            state.set_aside.clear()
        return state.snapshot(now)

    def set_aside(self, unplaced: Mapping[str, Unplaced]) -> None:
        """After a session over the last snapshot: the jobs it could place nowhere are
        skipped by the next ones, until something that could place them happens (the
        module says what) or the caller retries all. Jobs whose pods state pod
        affinity, topology spread or volume claims are not: what places those is more
        than freed room."""
        state = self._state
        if state is None:
            return
        for key, why in unplaced.items():
            job = state.jobs.get(key)
            if job is not None and not any(_placed_by_others(t.pod) for t in job.pending):
                state.set_aside[key] = why


@dataclass(slots=True)
class _Counted:
    """A pod as the state counted it: a pod's node changes in place (an assumed bind),
    so what it added must be remembered to be taken back."""

    pod: Task
    vec: IntArray
    row: int | None
    job: str


class _State:
    """Everything a snapshot is made of, as of the last one taken."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        scheduler_names: frozenset[str],
        now: float,
        seen: float | None,
    ) -> None:
        self.cache = cache
        self.scheduler_names = scheduler_names
        self.now = now
        self.seen = seen
        # Some name no pod or group asks for any more: the columns may shrink.
        self.dropped = False
        self._take_nodes()
        # The columns are the nodes' resource names and those pods and groups ask for:
        # how many pods ask for each name no node has, and each group's names.
        self.pod_names: Counter[str] = Counter()
        for task in cache.tasks.values():
            self._name(task, 1)
        self.group_names: Counter[str] = Counter()
        self.group_requests: dict[str, ResourceList] = {}
        for key, group in cache.pod_groups.items():
            self._name_group(key, group)
        self.resources = self._columns()
        self.column = {name: i for i, name in enumerate(self.resources)}
        self.allocatable = self._allocatable()
        width = len(self.resources)
        self.used = np.zeros((len(self.nodes), width), dtype=np.int64)
        self.extra = np.zeros((len(self.nodes), 2), dtype=np.int64)
        self.extra_pods = 0
        self.ports: dict[tuple[str, int], Counter[int]] = {}
        self.placed: dict[str, tuple[int, Task]] = {}
        # The placed pods that state pod affinity or anti-affinity terms.
        self.affine: dict[str, tuple[int, Task]] = {}
        self.gpu_holders: dict[str, tuple[int, tuple[int, ...], GpuDemand]] = {}
        # The milli per node row and card taken by holders naming cards the node has,
        # and the other holders, whom a session gives cards best fit. None while nodes
        # are being taken again: then every holder is counted afresh (_count_cards).
        self.cards_used: IntArray | None = None
        self.unnamed: dict[str, tuple[int, GpuDemand]] = {}
        self.vectors: dict[tuple[object, ...], IntArray] = {}
        self.counted: dict[str, _Counted] = {}
        # Job key -> the keys of its pods, in the order they were counted.
        self.members: dict[str, dict[str, None]] = {}
        self.queues, self.rejected_queues = usable_queues(cache)
        builder = self._builder(cache.pod_groups.values())
        for key, task in cache.tasks.items():
            self._count(key, task)
            builder.add(task, self.counted[key].vec)
        self.jobs: dict[str, JobInfo] = builder.finish(self.index)
        self.held_back = frozenset(builder.held_back)
        self._count_cards()
        # The jobs built again by the last follow(); None: all of them.
        self.changed: frozenset[str] | None = None
        # Jobs set aside, and what the session said of them.
        self.set_aside: dict[str, Unplaced] = {}

    def follow(self, changes: Changes, *, now: float, seen: float | None) -> bool:
        """Catch up with `changes`; False if they need the state taken whole again."""
        tasks, groups = self.cache.tasks, self.cache.pod_groups
        column = self.column
        asked = [tasks[key].request for key in changes.pods if key in tasks]
        asked += [groups[key].min_resources for key in changes.groups if key in groups]
        if any(not request.keys() <= column.keys() for request in asked):
            return False
        dirty = set(changes.groups)
        if changes.nodes:
            self.cards_used = None
            before, names = self.nodes, self.node_names
            self._take_nodes()
            if self.node_names != names:
                return False
            if len(self.nodes) != len(before) or any(
                a.name != b.name for a, b in zip(self.nodes, before, strict=True)
            ):
                dirty |= self._move_rows(before)
        for key in changes.groups:
            self._name_group(key, groups.get(key))
        dirty |= {key for key, job in self.jobs.items() if job.namespace in changes.namespaces}
        # Room freed, and pods newly on nodes (_wake says why these).
        freed = changes.nodes or changes.devices
        arrived: list[_Counted] = []
        for key in changes.pods:
            counted = self.counted.pop(key, None)
            if counted is not None:
                self._take_back(key, counted)
                self._name(counted.pod, -1)
                dirty.add(counted.job)
            if key in tasks:
                self._name(tasks[key], 1)
                dirty.add(self._count(key, tasks[key]))
            now_counted = self.counted.get(key)
            row = None if now_counted is None else now_counted.row
            if counted is not None:
                freed |= now_counted is None or counted.pod.nominated_node is not None
                if counted.row is not None:
                    freed |= row != counted.row
                    # Pods of one shape share their vector: most updates compare nothing.
                    freed |= (
                        now_counted is not None
                        and now_counted.vec is not counted.vec
                        and bool((now_counted.vec < counted.vec).any())
                    )
            if (
                now_counted is not None
                and row is not None
                and (counted is None or counted.row != row)
            ):
                arrived.append(now_counted)
        if self.dropped and self._columns() != self.resources:
            return False
        if changes.nodes:
            self.allocatable = self._allocatable()
            self._count_cards()
        for key, refusal in self.cache.refusals.items():
            if refusal.until > self.now and key in self.counted:
                dirty.add(self.counted[key].job)
        self.now = now
        self.seen = seen
        # Groups held back are built again, and refused whole now that a session saw them.
        dirty |= self.held_back
        self.held_back = self._rebuild(dirty)
        self.changed = frozenset(dirty)
        self._wake(dirty, freed=freed, arrived=arrived)
        return True

    def _wake(self, dirty: set[str], *, freed: bool, arrived: list[_Counted]) -> None:
        """Take back from the jobs set aside those that might be placed now: those
        that changed, and all of them when room may have been freed: nodes changed, a
        pod left its node or asks less there, a pod was deleted or a nominated one
        changed (a pending pod may hold room: its nomination, a starving gang's
        reservation, its gang's recorded placement). A pod newly on a node makes room
        for none, but it may be evicted: by a job of higher priority (preempt) or of
        another queue (reclaim)."""
        if freed:
            self.set_aside.clear()
            return
        for key in dirty:
            self.set_aside.pop(key, None)
        if not arrived or not self.set_aside:
            return
        classes = self.cache.priority_classes
        default = default_priority(classes)
        lowest = min(
            placed_priority(counted.pod, self.jobs.get(counted.job), classes, default)
            for counted in arrived
        )
        queues = {self.jobs[counted.job].queue for counted in arrived if counted.job in self.jobs}
        for key in list(self.set_aside):
            job = self.jobs.get(key)
            if job is None or job.priority > lowest or queues - {job.queue}:
                del self.set_aside[key]

    def snapshot(self, now: float) -> Snapshot:
        cache = self.cache
        for key, why in list(self.set_aside.items()):
            if why.until is not None and why.until <= now:
                del self.set_aside[key]
        jobs = dict(self.jobs)
        # The softWait clocks the last session kept, on the jobs still there (not on one
        # made again under the same name since: that session's snapshot predates it).
        for key, clock in cache.span_clocks.items():
            job = jobs.get(key)
            if job is not None and job.owner == clock.owner:
                jobs[key] = replace(job, span_since=clock.since)
        return Snapshot(
            now=now,
            resources=self.resources,
            nodes=list(self.nodes),
            allocatable=self.allocatable,
            used=self.used.copy(),
            port_users={port: set(rows) for port, rows in self.ports.items()},
            jobs=jobs,
            changed_jobs=self.changed,
            set_aside=dict(self.set_aside),
            held_back=self.held_back,
            queues=self.queues,
            scheduler_names=self.scheduler_names,
            topology=self.topology,
            rejected_queues=self.rejected_queues,
            gpu_used=None if self.cards_used is None else self.cards_used.copy(),
            gpu_unnamed=list(self.unnamed.values()),
            placed=list(self.placed.values()),
            placed_affine=list(self.affine.values()),
            unbound=frozenset(cache.assumed),
            score_extra=self.extra.copy() if self.extra_pods else None,
            namespace_labels={name: ns.labels for name, ns in cache.namespaces.items()},
            storage=Storage(
                claims=dict(cache.claims),
                volumes=dict(cache.volumes),
                classes=dict(cache.storage_classes),
                csi_nodes=dict(cache.csi_nodes),
                drivers=dict(cache.csi_drivers),
                capacities=dict(cache.storage_capacities),
                rejected=dict(cache.rejected_storage),
            ),
            priority_classes=dict(cache.priority_classes),
            budgets=list(cache.budgets.values()),
            devices=Devices(
                slices=dict(cache.resource_slices),
                classes=dict(cache.device_classes),
                claims=dict(cache.resource_claims),
                templates=dict(cache.claim_templates),
                taint_rules=dict(cache.device_taint_rules),
                rejected=dict(cache.rejected_devices),
            ),
        )

    def _move_rows(self, before: list[Node]) -> set[str]:
        """Nodes were added or removed, so rows moved (nodes are in name order): move
        each kept node's sums to its new row, and count pods on removed nodes as holding
        none, as a snapshot taken whole would. The jobs whose pending pods name a node
        (a recorded placement, a nomination) are to be built again, and the jobs of pods
        bound to a node that only now appeared."""
        moved = np.array([self.index.get(node.name, -1) for node in before], dtype=np.int64)
        kept = moved >= 0
        used = np.zeros((len(self.nodes), self.used.shape[1]), dtype=np.int64)
        used[moved[kept]] = self.used[kept]
        extra = np.zeros((len(self.nodes), 2), dtype=np.int64)
        extra[moved[kept]] = self.extra[kept]
        self.used, self.extra = used, extra
        to: list[int] = moved.tolist()
        arrived: list[tuple[str, _Counted]] = []
        for key, counted in self.counted.items():
            if counted.row is None:
                task = counted.pod
                if task.node_name in self.index and not task.terminal:
                    arrived.append((key, counted))
                continue
            row = to[counted.row]
            if row < 0:
                counted.row = None
                self.placed.pop(key)
                self.affine.pop(key, None)
                self.gpu_holders.pop(key, None)
                self.extra_pods -= counted.pod.score_extra != NO_EXTRA
                continue
            counted.row = row
            self.placed[key] = (row, counted.pod)
            if key in self.affine:
                self.affine[key] = (row, counted.pod)
            if key in self.gpu_holders:
                self.gpu_holders[key] = (row, *self.gpu_holders[key][1:])
        for port, users in list(self.ports.items()):
            moved_users = Counter({to[row]: n for row, n in users.items() if to[row] >= 0})
            if moved_users:
                self.ports[port] = moved_users
            else:
                del self.ports[port]
        # Pods bound to a node before it was seen hold it now.
        for key, counted in arrived:
            self._take_back(key, counted)
            self._count(key, counted.pod)
        named = {key for key, job in self.jobs.items() if job.resumes or job.nominated}
        return named | {counted.job for _, counted in arrived}

    def _take_nodes(self) -> None:
        self.nodes: list[Node] = sorted(self.cache.nodes.values(), key=lambda n: n.name)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.node_names = {name for node in self.nodes for name in node.allocatable}
        self.node_names.update(BASE_RESOURCES)
        self.topology = Topology(
            self.nodes, dict(self.cache.hypernodes), rejected=dict(self.cache.rejected_hypernodes)
        )

    def _name_group(self, key: str, group: PodGroup | None) -> None:
        old = self.group_requests.pop(key, {})
        self.group_names.subtract(old.keys())
        if group is not None:
            self.group_requests[key] = group.min_resources
            self.group_names.update(group.min_resources.keys())
        self.dropped |= any(self.group_names[name] <= 0 for name in old)

    def _name(self, task: Task, sign: int) -> None:
        """Count the names the pod asks for that no node has (most pods ask for none)
        in (1) or out (-1)."""
        request = task.request
        if request.keys() <= self.node_names:
            return
        for name in request.keys() - self.node_names:
            self.pod_names[name] += sign
            self.dropped |= self.pod_names[name] <= 0

    def _columns(self) -> tuple[str, ...]:
        self.dropped = False
        names = {name for name, count in self.group_names.items() if count > 0}
        names.update(name for name, count in self.pod_names.items() if count > 0)
        names |= self.node_names
        return BASE_RESOURCES + tuple(sorted(names - set(BASE_RESOURCES)))

    def _allocatable(self) -> IntArray:
        allocatable = np.zeros((len(self.nodes), len(self.resources)), dtype=np.int64)
        for row, node in enumerate(self.nodes):
            for name, value in node.allocatable.items():
                allocatable[row, self.column[name]] = value
        return allocatable

    def _count(self, key: str, task: Task) -> str:
        """Add the pod's part to the node sums and its job's members; its job's key."""
        vec = self.vectors.get(task.shape_key)
        if vec is None:
            vec = self.vectors[task.shape_key] = request_row(task.request, self.column)
        row = None
        if task.node_name is not None and not task.terminal:
            row = self.index.get(task.node_name)
        job = job_key(task)
        self.counted[key] = _Counted(task, vec, row, job)
        self.members.setdefault(job, {})[key] = None
        if row is None:
            return job
        self.used[row] += vec
        self.placed[key] = (row, task)
        if task.affinity is not None:
            self.affine[key] = (row, task)
        for port in task.host_ports:
            self.ports.setdefault(port, Counter())[row] += 1
        if GPU in task.request or GPU_MILLI in task.request:
            demand = gpu_demand(task.request)
            if demand.cards:
                self.gpu_holders[key] = (row, task.gpu_index, demand)
                if self.cards_used is not None:
                    self._hold_cards(key, 1)
        if task.score_extra != NO_EXTRA:
            self.extra[row] += task.score_extra
            self.extra_pods += 1
        return job

    def _take_back(self, key: str, counted: _Counted) -> None:
        members = self.members[counted.job]
        del members[key]
        if not members:
            del self.members[counted.job]
        row, task = counted.row, counted.pod
        if row is None:
            return
        self.used[row] -= counted.vec
        del self.placed[key]
        self.affine.pop(key, None)
        for port in task.host_ports:
            users = self.ports[port]
            users[row] -= 1
            if not users[row]:
                del users[row]
                if not users:
                    del self.ports[port]
        if key in self.gpu_holders:
            if self.cards_used is not None:
                self._hold_cards(key, -1)
            del self.gpu_holders[key]
        if task.score_extra != NO_EXTRA:
            self.extra[row] -= task.score_extra
            self.extra_pods -= 1

    def _count_cards(self) -> None:
        """Every holder counted afresh, in one pass over the arrays (a large cluster
        has tens of thousands)."""
        width = max((node.gpu_cards for node in self.nodes), default=0)
        self.cards_used = np.zeros((len(self.nodes), width), dtype=np.int64)
        self.unnamed = {}
        rows: list[int] = []
        cards: list[int] = []
        milli: list[int] = []
        for key, (row, named, demand) in self.gpu_holders.items():
            if self._owns(row, named, demand):
                rows += [row] * len(named)
                cards += named
                milli += [demand.milli] * len(named)
            else:
                self.unnamed[key] = (row, demand)
        np.add.at(self.cards_used, (rows, cards), milli)

    def _hold_cards(self, key: str, sign: int) -> None:
        """Count a holder's cards in (1) or out (-1)."""
        assert self.cards_used is not None
        row, named, demand = self.gpu_holders[key]
        if sign < 0 and self.unnamed.pop(key, None) is not None:
            return
        if self._owns(row, named, demand):
            self.cards_used[row, list(named)] += sign * demand.milli
        else:
            self.unnamed[key] = (row, demand)

    def _owns(self, row: int, named: tuple[int, ...], demand: GpuDemand) -> bool:
        """Whether a holder's cards are the ones it names: distinct cards of its node,
        as many as it asks for. Otherwise each session gives it some, after the others."""
        return len(set(named)) == demand.cards and max(named) < self.nodes[row].gpu_cards

    def _rebuild(self, keys: set[str]) -> frozenset[str]:
        """Build the jobs of `keys` again from their groups and members; those of them
        held back (cache/jobs.py)."""
        groups = self.cache.pod_groups
        builder = self._builder(groups[key] for key in keys if key in groups)
        for key in keys:
            self.jobs.pop(key, None)
            for member in self.members.get(key, ()):
                counted = self.counted[member]
                builder.add(counted.pod, counted.vec)
        self.jobs.update(builder.finish(self.index))
        return frozenset(builder.held_back)

    def _builder(self, groups: Iterable[PodGroup]) -> JobBuilder:
        return JobBuilder(
            self.cache,
            scheduler_names=self.scheduler_names,
            width=len(self.resources),
            now=self.now,
            queues=self.queues,
            rejected_queues=self.rejected_queues,
            groups=groups,
            seen=self.seen,
        )
