"""proportion: share the cluster between queues by weight, within each queue's capability.

Each session computes every queue's deserved share by water-filling: the capacity of the
nodes its jobs can reach is handed out in proportion to weight, no queue gets more than
it asks for (allocated + pending) or than its capability, and what one queue cannot use
goes to the others. Queues share apart where they reach apart nodes (pools): a queue
alone on its nodes deserves them all, whatever the weights of queues elsewhere. The
queue furthest below its share is served first; a queue at or above its share waits
while another queue of its pool has work.

Volcano's other Queue fields mean what its users expect:
- `guarantee.resource` is a floor: a queue deserves at least its guarantee, or what it
  asks for if that is less (the rest goes to others), and reclaim never takes it below
  its guarantee. Guarantees adding up to more than there is are scaled down alike.
- `deserved` (Volcano's capacity plugin) is honoured rather than refused, as it states a
  clear intent: for each resource it lists, the queue deserves that amount (raised to its
  guarantee, capped by what it asks for) instead of a weighted share; others share the rest.
- `parent` makes a tree. Queues with none (or Volcano's `root`) share the cluster; a
  parent's share is water-filled among its children alike, and deserves at least their
  guarantees. A `root` Queue, where one exists, is the parent of them all: its
  capability caps each pool's share and, at placement, their total. A pod counts
  against its queue's capability and every ancestor's. Jobs go to leaves: one sent to a
  queue with children waits, as in Volcano.
- `priority` (Volcano's) orders queues before their shares do.
- Reclaim lets a job of a queue below its deserved share (in a resource the job asks for)
  evict pods of other reclaimable queues above theirs, as Volcano's proportion does, but
  never a pod whose eviction would take its queue, or an ancestor the job's queue does
  not share, below its guarantee.
- DRA devices per DeviceClass (Volcano's `deviceclass/<class>` keys) are held to
  `capability`, the queue's and its ancestors' (plugins/devicequota.py).
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from batchsched.api.objects import Constraints
from batchsched.api.queues import ROOT_QUEUE
from batchsched.api.resources import PODS, format_amount
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.devicequota import DeviceQuota

if TYPE_CHECKING:
    from batchsched.framework.victims import Victims

ANCESTOR_LEVELS = "ancestorReclaimLevel"


class Proportion:
    name = "proportion"
    # Whether queues share the cluster by weight, each held to its share while others
    # wait (proportion); without, a queue deserves what its `deserved` states (capacity).
    by_weight = True

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        allowed = set() if self.by_weight else {ANCESTOR_LEVELS}
        check_keys(self.name, arguments, allowed)
        # How many levels of a victim's ancestors the job's queue does not share must be
        # above what they deserve too (Volcano capacity's ancestorReclaimLevel).
        self.ancestor_levels = integer(
            self.name, ANCESTOR_LEVELS, arguments.get(ANCESTOR_LEVELS, 0), low=0
        )

    def open(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        width = len(snapshot.resources)
        self.queues = snapshot.queues
        self.children: dict[str, list[str]] = {name: [] for name in self.queues}
        for name, queue in sorted(self.queues.items()):
            if queue.parent is not None:
                self.children[queue.parent].append(name)
        # A queue, its parent, and so on up: what a pod in the queue counts against.
        self.lineage = {name: self._ancestry(name) for name in self.queues}
        # The queues pools are made of: a root Queue's children when one heads the tree
        # (its capability bounds them all, its share is theirs together), else the
        # queues without a parent.
        self.root = ROOT_QUEUE if self.children.get(ROOT_QUEUE) else None
        self.tops = (
            self.children[ROOT_QUEUE]
            if self.root is not None
            else [name for name, queue in self.queues.items() if queue.parent is None]
        )
        below_root = 2 if self.root is not None else 1
        self.top_of = {
            name: lineage[-min(below_root, len(lineage))] for name, lineage in self.lineage.items()
        }
        # Pod slots are a per-node limit, not something queues share out.
        self.shared = np.array([name != PODS for name in snapshot.resources], dtype=np.bool_)
        # Per queue, its own pods' and its descendants'.
        self.allocated: dict[str, IntArray] = {
            name: np.zeros(width, dtype=np.int64) for name in self.queues
        }
        # Resources held by jobs admitted (Inqueue) but not yet placed, per queue.
        self.reserved: dict[str, IntArray] = {
            name: np.zeros(width, dtype=np.int64) for name in self.queues
        }
        # What each queue's own jobs ask for; a queue with children runs none of its own.
        self.demand = {name: np.zeros(width, dtype=np.int64) for name in self.queues}
        self.capability = {name: self._row(q.capability, np.inf) for name, q in self.queues.items()}
        self.guarantee = {name: self._row(q.guarantee, 0.0) for name, q in self.queues.items()}
        self.fixed = {name: self._row(q.deserved, np.nan) for name, q in self.queues.items()}
        # What each queue may hold beside the guarantees of the queues it does not share
        # (only where some queue states a guarantee).
        self.room = self._room() if any(q.guarantee for q in self.queues.values()) else {}
        self.device_quota = DeviceQuota(snapshot, self.lineage)
        for job in snapshot.jobs.values():
            if job.queue in self.queues:
                for name in self.lineage[job.queue]:
                    self.allocated[name] += job.allocated
                self.demand[job.queue] += job.allocated
                if not self.children[job.queue]:
                    for task in job.pending:
                        self.demand[job.queue] += task.vec
        self._deserved: dict[str, FloatArray] | None = None
        self._contention: dict[str, bool] = {}
        self._pools: list[tuple[list[str], IntArray]] | None = None
        # Queues with pending work, whose pools a queue at its share waits in.
        self.waiting = {
            q
            for q in self.demand
            if not self.children[q] and (self.demand[q] > self.allocated[q])[self.shared].any()
        }
        # Queues in a fixed order, for arrays over queues (reclaim's checks).
        self._names = list(self.queues)
        self._position = {name: i for i, name in enumerate(self._names)}
        # Each queue's parent as an index into `_names`, -1 at the top.
        self._up = np.array(
            [-1 if q.parent is None else self._position[q.parent] for q in self.queues.values()],
            dtype=np.int64,
        )
        session.valid_checks.append(self._invalid)
        session.enqueue_checks.append(self._enqueue_blocked)
        session.capacity_checks.append(self._over_capability)
        session.queue_keys.append(self._priority)
        session.queue_keys.append(self._share)
        if self.by_weight:
            session.share_checks.append(self._over_share)
            session.overused_checks.append(self._overused)
        session.reclaimable.append(self._reclaimable)
        session.on_count.append(self._counted)
        session.closers.append(self._report)

    def _ancestry(self, name: str) -> tuple[str, ...]:
        parent = self.queues[name].parent
        return (name,) if parent is None else (name, *self._ancestry(parent))

    def _row(self, resources: Mapping[str, int], unset: float) -> FloatArray:
        """A queue's setting as a row over the snapshot's resources, `unset` elsewhere."""
        column = self.session.snapshot.column
        row = np.full(len(column), unset)
        for resource, value in resources.items():
            if resource in column:
                row[column[resource]] = value
        return row

    def _room(self) -> dict[str, FloatArray]:
        """Per queue, the cluster's capacity less what the guarantees of other queues
        hold back: at each level of its lineage, its siblings' guarantees (a parent's
        being at least its children's together). As Volcano's realCapability, never
        below its own guarantee, when guarantees add up to more than there is."""
        total = self.session.snapshot.allocatable.sum(axis=0).astype(np.float64)
        held: dict[str, FloatArray] = {}

        def guaranteed(name: str) -> FloatArray:
            if name not in held:
                children = sum((guaranteed(c) for c in self.children[name]), np.zeros_like(total))
                held[name] = np.maximum(self.guarantee[name], children)
            return held[name]

        # Per parent (None: the top), its children's guarantees together; a queue's
        # siblings hold that less its own.
        together: dict[str | None, FloatArray] = {}
        for name, queue in self.queues.items():
            together[queue.parent] = together.get(queue.parent, 0) + guaranteed(name)
        room: dict[str, FloatArray] = {}
        for name in self.queues:
            others = sum(
                (together[self.queues[level].parent] - held[level] for level in self.lineage[name]),
                np.zeros_like(total),
            )
            own = held[name]
            room[name] = np.maximum(total - others - own, 0) + own
        return room

    @property
    def deserved(self) -> dict[str, FloatArray]:
        """Worked out when first asked in a session, once every plugin is open: which
        nodes a pod may use is the predicates plugin's to say, wherever the configuration
        lists it. Whole units, as resources are counted, so that a queue holding exactly
        its share is not taken for one holding more."""
        if self._deserved is None and not self.by_weight:
            self._deserved = self._stated()
        if self._deserved is None:
            shares: dict[str, FloatArray] = {}
            bounds: dict[str, tuple[FloatArray, FloatArray]] = {}
            for name in self.tops if self.root is None else [self.root]:
                self._bounds(name, bounds)
            for members, total in self.pools:
                available = total.astype(np.float64)
                if self.root is not None:
                    available = np.minimum(available, bounds[self.root][1])
                self._share_out(available, members, bounds, shares)
            if self.root is not None:
                shares[self.root] = sum(
                    (shares[child] for child in self.tops), np.zeros(len(self.shared))
                )
            self._deserved = {
                name: np.floor(share * (1 + 1e-12) + 1e-9) for name, share in shares.items()
            }
        return self._deserved

    def _stated(self) -> dict[str, FloatArray]:
        """Volcano's capacity plugin's deserved: what each queue states (0 where it
        states nothing), raised to its guarantee, within its capability and the room
        the other queues' guarantees leave it."""
        out: dict[str, FloatArray] = {}
        for name in self.queues:
            stated = np.nan_to_num(self.fixed[name], nan=0.0)
            limit = self.capability[name]
            if self.room:
                limit = np.minimum(limit, self.room[name])
            out[name] = np.floor(np.maximum(np.minimum(stated, limit), self.guarantee[name]))
        return out

    def _bounds(
        self, name: str, bounds: dict[str, tuple[FloatArray, FloatArray]]
    ) -> tuple[FloatArray, FloatArray]:
        """The least and most `name` may deserve: its guarantee (at least its children's
        together) and what it and its children ask for within its capability, both fixed
        where it states `deserved`."""
        guaranteed = np.zeros_like(self.guarantee[name])
        asks = self.demand[name].astype(np.float64)
        for child in self.children[name]:
            child_floor, child_limit = self._bounds(child, bounds)
            guaranteed += child_floor
            asks += child_limit
        limit = np.minimum(asks, self.capability[name])
        if self.room:
            limit = np.minimum(limit, self.room[name])
        floor = np.minimum(np.maximum(guaranteed, self.guarantee[name]), limit)
        fixed = self.fixed[name]
        stated = ~np.isnan(fixed)
        floor[stated] = limit[stated] = np.minimum(np.maximum(fixed, floor), limit)[stated]
        bounds[name] = (floor, limit)
        return floor, limit

    def _share_out(
        self,
        total: FloatArray,
        members: list[str],
        bounds: dict[str, tuple[FloatArray, FloatArray]],
        shares: dict[str, FloatArray],
    ) -> None:
        """Water-fill `total` among `members`, then each member's share among its children."""
        if not members:
            return
        weight = np.array([self.queues[q].weight for q in members], dtype=np.float64)
        floor = np.array([bounds[q][0] for q in members])
        limit = np.array([bounds[q][1] for q in members])
        split = np.stack(
            [_level(t, weight, floor[:, r], limit[:, r]) for r, t in enumerate(total)], axis=1
        )
        for row, name in enumerate(members):
            shares[name] = split[row]
            self._share_out(split[row], self.children[name], bounds, shares)

    def _report(self) -> None:
        resources = self.session.snapshot.resources
        self.session.decisions.deserved = {
            name: {resources[column]: int(share[column]) for column in np.flatnonzero(share >= 1)}
            for name, share in self.deserved.items()
        }

    @property
    def pools(self) -> list[tuple[list[str], IntArray]]:
        """The top-level queues in groups that compete for the same nodes, each with the
        capacity of those nodes: the ones some pending pod of theirs may use (its
        selectors, affinity and tolerations, as predicates reads them) or some pod of
        theirs runs on. Shares are of what a group can reach, not of the cluster: two
        queues weighted 1:3 on an 8-CPU pool deserve 2 and 6 CPUs of it, whatever other
        queues use elsewhere, and a queue alone on its nodes deserves all of them."""
        if self._pools is None:
            reach = self._reach()
            groups: list[tuple[list[str], BoolArray]] = []
            for name, mask in reach.items():
                joined = [g for g in groups if (g[1] & mask).any()]
                members, nodes = [name], mask.copy()
                for other in joined:
                    members += other[0]
                    nodes |= other[1]
                    groups.remove(other)
                groups.append((members, nodes))
            allocatable = self.session.snapshot.allocatable
            self._pools = [
                (sorted(members, key=list(reach).index), allocatable[nodes].sum(axis=0))
                for members, nodes in groups
            ]
        return self._pools

    def _reach(self) -> dict[str, BoolArray]:
        """Per top-level queue, the nodes its queues' pending pods may use or their pods
        run on."""
        snapshot = self.session.snapshot
        top = self.top_of
        reach = {name: np.zeros(len(snapshot.nodes), dtype=np.bool_) for name in self.tops}
        allowed: dict[Constraints, BoolArray] = {}
        # The nodes of the pods running in each top-level queue, marked at once.
        hosts: dict[str, list[str]] = {name: [] for name in reach}
        for job in snapshot.jobs.values():
            name = top.get(job.queue)
            if name not in hosts:
                continue
            hosts[name] += job.hosts
            mask = reach[name]
            for task in job.pending:
                constraints = task.pod.constraints
                if constraints not in allowed:
                    allowed[constraints] = self.session.allowed(constraints)
                mask |= allowed[constraints]
        row = {node.name: i for i, node in enumerate(snapshot.nodes)}
        for name, names in hosts.items():
            reach[name][[row[n] for n in names if n in row]] = True
        return reach

    def _invalid(self, job: JobInfo) -> str | None:
        if job.queue in self.queues:
            children = self.children[job.queue]
            if children:
                return (
                    f"queue {job.queue!r} has child queues; submit to one of them: "
                    f"{', '.join(children)}"
                )
            return None
        why = self.session.snapshot.rejected_queues.get(job.queue)
        if why is not None:
            return f"queue {job.queue!r} is invalid: {why}"
        return f"queue {job.queue!r} does not exist"

    def _enqueue_blocked(self, job: JobInfo) -> str | None:
        for name in self.lineage[job.queue]:
            if not self.queues[name].open:
                return f"queue {name} is closed"
        minimum = self._vector(job.min_resources)
        for name in self.lineage[job.queue]:
            after = self.allocated[name] + self.reserved[name] + minimum
            over = np.flatnonzero(after > self.capability[name])
            if len(over):
                return self._over_message(name, int(over[0]), "minResources")
        if self.room:
            after = self.allocated[job.queue] + self.reserved[job.queue] + minimum
            over = np.flatnonzero((after > self.room[job.queue]) & (minimum > 0))
            if len(over):
                return self._guaranteed_message(job.queue, int(over[0]), "minResources")
        members = job.pending[: max(job.min_member - job.bound, 0)]
        found = self.device_quota.over(job.queue, [t.pod for t in members], f"job {job.key}")
        if found is not None:
            return found
        for name in self.lineage[job.queue]:
            self.reserved[name] += minimum
        return None

    def _over_capability(self, job: JobInfo, task: TaskInfo) -> str | None:
        for name in self.lineage[job.queue]:
            if self.queues[name].capability:
                after = self.allocated[name] + task.vec
                over = np.flatnonzero((after > self.capability[name]) & (task.vec > 0))
                if len(over):
                    return self._over_message(name, int(over[0]), f"pod {task.key}")
        if self.room:
            after = self.allocated[job.queue] + task.vec
            over = np.flatnonzero((after > self.room[job.queue]) & (task.vec > 0))
            if len(over):
                return self._guaranteed_message(job.queue, int(over[0]), f"pod {task.key}")
        return self.device_quota.over(job.queue, [task.pod], f"pod {task.key}")

    def _over_share(self, job: JobInfo, task: TaskInfo) -> str | None:
        """Volcano's allocatable check, for a member beyond its gang's minimum: it goes
        only within its queue's deserved share, in each resource it asks for, while
        another queue of its pool waits."""
        queue = job.queue
        deserved = self.deserved.get(queue)
        if deserved is None or not self._contended(queue) or self.session.needed(job, task):
            return None
        after = self.allocated[queue] + task.vec
        over = np.flatnonzero((after > deserved) & (task.vec > 0) & self.shared)
        if not len(over):
            return None
        self.session.share_refused.add(job.key)
        column = int(over[0])
        name = self.session.snapshot.resources[column]
        used, share = int(self.allocated[queue][column]), int(deserved[column])
        return (
            f"queue {queue}: pod {task.key} would take it past its deserved share of {name} "
            f"({format_amount(name, used)} of {format_amount(name, share)} in use) while "
            "other queues wait; members beyond their gang's minimum stay within the share"
        )

    def _guaranteed_message(self, queue: str, column: int, what: str) -> str:
        name = self.session.snapshot.resources[column]
        room = int(self.room[queue][column])
        used = int(self.allocated[queue][column])
        return (
            f"queue {queue}: {what} would take {name} that other queues' guarantees hold "
            f"({format_amount(name, used)} in use of the {format_amount(name, room)} "
            "left beside them)"
        )

    def _over_message(self, queue: str, column: int, what: str) -> str:
        name = self.session.snapshot.resources[column]
        cap = int(self.capability[queue][column])
        used = int(self.allocated[queue][column])
        return (
            f"queue {queue}: {what} would exceed its capability for {name} "
            f"({format_amount(name, used)} of {format_amount(name, cap)} in use)"
        )

    def _priority(self, queue: str) -> int:
        """Volcano's proportion serves (and reclaims for) queues of a higher
        spec.priority first, whatever their shares."""
        found = self.queues.get(queue)
        return 0 if found is None else -found.priority

    def _share(self, queue: str) -> float:
        deserved = self.deserved.get(queue)
        if deserved is None:
            return 0.0
        counted = (deserved > 0) & self.shared
        if not counted.any():
            # Volcano's capacity serves a queue that deserves nothing (best effort) after
            # those below their share.
            return 0.0 if self.by_weight else 1.0
        return float((self.allocated[queue][counted] / deserved[counted]).max())

    def _overused(self, queue: str) -> bool:
        """At or above its share while another queue of its pool waits: holding it back
        helps only a queue that could use what it would take."""
        deserved = self.deserved.get(queue)
        if deserved is None or not deserved[self.shared].any():
            return False
        if not self._contended(queue):
            return False
        return bool((deserved <= self.allocated[queue])[self.shared].all())

    def _contended(self, queue: str) -> bool:
        """Whether another queue of its pool waits (as of the session's start, so asked
        once per queue: the share check asks it for every pod)."""
        contended = self._contention.get(queue)
        if contended is None:
            pool = self._pool_of(queue)
            contended = any(q != queue and self._pool_of(q) is pool for q in self.waiting)
            self._contention[queue] = contended
        return contended

    def _pool_of(self, queue: str) -> list[str]:
        top = self.top_of[queue]
        return next(members for members, _ in self.pools if top in members)

    def _reclaimable(self, job: JobInfo, victims: "Victims") -> BoolArray:
        """The victims `job` may reclaim, from what queues hold now (evictions so far
        included): pods of other reclaimable queues above their deserved share, each
        leaving its queue, and every ancestor not also the job's, at or above its
        guarantee; for capacity's ancestorReclaimLevel, those ancestors up so many
        levels (Volcano's root aside) above what they deserve too. None unless the job's
        own queue may reclaim (`_may_reclaim`), nor while it or an ancestor is closed:
        as Volcano's reclaim passes over queues that are not open."""
        allowed: BoolArray = np.zeros(len(victims), dtype=np.bool_)
        own = self.deserved.get(job.queue)
        if own is None or not len(victims):
            return allowed
        if not all(self.queues[name].open for name in self.lineage[job.queue]):
            return allowed
        if not self._may_reclaim(job, own):
            return allowed
        held = np.array([self.allocated[name] for name in self._names])
        deserved = np.array([self.deserved[name] for name in self._names])
        guarantee = np.array([self.guarantee[name] for name in self._names])
        above: BoolArray = np.asarray(((held > deserved) & self.shared).any(axis=1))
        queue_ok = above & np.array([self.queues[name].reclaimable for name in self._names])
        root = self._position.get(ROOT_QUEUE)
        if root is not None:
            # Every queue shares Volcano's root: its ancestor checks pass over it.
            above[root] = True
        queue_ok[self._names.index(job.queue)] = False
        # Within an ancestor the job's queue shares, reclaim moves resources, not out.
        common = np.isin(self._names, self.lineage[job.queue])
        index = self._victim_queues(victims)
        known = index >= 0
        row = np.where(known, index, 0)
        allowed = known & queue_ok[row]
        live, level, depth = allowed.copy(), row, 0
        while live.any():
            kept = guarantee[level]
            breaks = (((held[level] - victims.vecs) < kept) & (kept > 0)).any(axis=1)
            if 0 < depth <= self.ancestor_levels:
                breaks |= ~above[level]
            allowed &= ~(live & ~common[level] & breaks)
            level = self._up[level]
            depth += 1
            live &= level >= 0
            level = np.where(live, level, 0)
        return allowed

    def _may_reclaim(self, job: JobInfo, own: FloatArray) -> bool:
        """Whether the job's queue is below its share in a resource the job asks for;
        for capacity, whether one of its pods would leave it within what it deserves
        in a resource the pod asks for and the queue deserves (Volcano's preemptive
        check of each reclaiming task)."""
        held = self.allocated[job.queue]
        if self.by_weight:
            asks = self.shared & (sum((t.vec for t in job.pending), np.zeros_like(own)) > 0)
            return bool((held < own)[asks].any())
        return any(
            ((held + t.vec <= own) & (t.vec > 0) & (own > 0) & self.shared).any()
            for t in job.pending
        )

    def _victim_queues(self, victims: "Victims") -> IntArray:
        """Each victim's queue as an index into `_names` (-1: none we share out), from
        the victims' own queue numbering."""
        lookup = np.full(len(victims.queue_names), -1, dtype=np.int64)
        for name, number in victims.queue_names.items():
            lookup[number] = self._position.get(name, -1)
        found: IntArray = lookup[victims.queue_ids]
        return found

    def _counted(self, job: JobInfo, task: TaskInfo, step: int) -> None:
        for name in self.lineage.get(job.queue, ()):
            # In place, without a `step * vec` array made at every placement.
            if step > 0:
                self.allocated[name] += task.vec
            else:
                self.allocated[name] -= task.vec
        if job.queue in self.lineage:
            self.device_quota.take(job.queue, task.pod, step)

    def _vector(self, resources: Mapping[str, int]) -> IntArray:
        column = self.session.snapshot.column
        vector = np.zeros(len(column), dtype=np.int64)
        for name, value in resources.items():
            vector[column[name]] = value
        return vector


def _level(total: float, weight: FloatArray, floor: FloatArray, limit: FloatArray) -> FloatArray:
    """One resource's shares: `weight` times a common level, each clipped to its
    [floor, limit], the level set so the shares add up to `total` (or every queue gets
    its limit, or floors beyond `total` are scaled down). Exact, from the breakpoints
    where a queue's share stops being pinned, so 8 CPUs weighted 1:3 give 2 and 6."""
    if total <= 0:
        return np.zeros_like(limit)
    if limit.sum() <= total:
        return limit
    if floor.sum() >= total:
        scaled: FloatArray = floor * (total / floor.sum())
        return scaled
    points = np.unique(np.concatenate([floor / weight, limit / weight]))
    filled = np.clip(points[:, None] * weight, floor, limit).sum(axis=1)
    at = int(np.searchsorted(filled, total, side="right")) - 1
    rising = (floor / weight <= points[at]) & (limit / weight >= points[at + 1])
    level = points[at] + (total - filled[at]) / weight[rising].sum()
    shares: FloatArray = np.clip(level * weight, floor, limit)
    return shares


class Capacity(Proportion):
    """capacity: Volcano's queue plugin of that name. A queue deserves what its
    `deserved` states, not a weighted share; its pods go up to its capability and the
    room the other queues' guarantees leave it, whatever it deserves, and no queue waits
    for being at its share. Reclaim, guarantees, the tree of `parent`s and enqueue's
    checks are proportion's (docs/drop-in.md lists how they differ from Volcano's)."""

    name = "capacity"
    by_weight = False
