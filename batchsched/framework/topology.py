"""Turning a gang's topology asks into the domains its placement is tried in.

A job's Plan is what it asks as a whole (one domain for all its members) and its parts
(Volcano's sub-groups, Kueue's pod sets and slices), each asking one domain of its own
inside the whole's. Candidate domains come tier by tier, lowest first (the closest
domains), and within a tier the fullest first, by the share of the gang's resources
already requested there, as Volcano's and kube-scheduler's bin-packing scores rank
placements; a domain whose free room falls short of what the members ask in sum is
never tried. A soft ask ends with the whole cluster; a hard one waits. For the
configured `softWait` after its gang is created, a soft ask (the gang's, or a part's
inside the gang's domain) is tried only in the lowest tier whose domains could hold
it, as a hard ask of that tier (Slurm's
`--switches=count@max-time`): room freed in a domain then goes to it whole, rather than
the gang starting across domains the moment the cluster has room anywhere.

The tiers are the configured node labels (`topology.tiers`, finest first) when the
configuration names some, else the HyperNodes' tiers (model/topology.py).
"""

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import cached_property
from itertools import chain

import numpy as np

from batchsched.api.objects import Task
from batchsched.api.resources import BASE_RESOURCES, PODS
from batchsched.api.topology import Mode, TopologyAsk
from batchsched.framework.drain import Placed, Running, idle_held, jobs_to_end
from batchsched.framework.plugin import slots as node_slots
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.decisions import SpanClock, TopologyDomain
from batchsched.model.snapshot import JobInfo, Snapshot, TaskInfo, job_key
from batchsched.model.topology import NO_DOMAIN, Tier

# The name of the one domain of the tier above the highest (TopologyPlanner.whole_cluster).
CLUSTER = "cluster"

# The pod count's column (every snapshot's columns start with BASE_RESOURCES): a slot,
# not a resource a domain is ranked by unless the configuration weighs it.
POD_COUNT = BASE_RESOURCES.index(PODS)


class Weighing(IntEnum):
    """Whose resource weights rank domains (TopologyPlanner.weigh), the first over the
    next: a domain binpack score's (network-topology-aware), a node fit score's."""

    DOMAIN_BINPACK = 0
    NODE_FIT = 1


# Domains looked at closely (a victim set worked out, a starving gang packed) for a
# gang asking for one, in the planner's order: enough to find a good one, without a
# search per domain of a cluster of hundreds of racks.
CANDIDATE_DOMAINS = 16


@dataclass(frozen=True, slots=True)
class LabelTier:
    """A configured tier: its name (highestTierName names it) and node label key."""

    name: str
    key: str


@dataclass(frozen=True, slots=True)
class Domain:
    tier: Tier
    index: int
    # The tier's ids as the domain was found in (narrowed to an enclosing domain).
    ids: IntArray

    @property
    def nodes(self) -> BoolArray:
        nodes: BoolArray = self.ids == self.index
        return nodes

    @property
    def name(self) -> str:
        return f"{self.tier.name} {self.tier.domains[self.index]}"


@dataclass(slots=True)
class Part:
    """Members to place in one domain of `ask`; it counts once `size` of them are."""

    label: str
    # None: no domain of its own, yet placed whole (to `size`) or not at all.
    ask: TopologyAsk | None
    tasks: list[TaskInfo]
    size: int
    # The nodes its members already running are on: its domain is the one holding them.
    hosts: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DomainWait:
    """Why a gang asking for a domain waits: its ask, the tiers it may take a domain of,
    and the domain that came closest (None: none had a node for it), holding `holds` of
    the `needs` members."""

    ask: TopologyAsk
    tiers: str
    closest: str | None
    holds: int
    needs: int
    # A soft ask waiting by choice within its softWait (of `soft_wait` seconds).
    chosen: bool = False
    soft_wait: float = 0.0
    # The seconds left before it may span domains; None while its softWait has not
    # started (it could not start across domains yet either).
    spans_in: float | None = None
    # The part asking (Part.label), when the ask is not the whole gang's.
    part: str | None = None
    # The ask may span the whole cluster (TopologyPlanner.spans_cluster): short of room.
    anywhere: bool = False

    def __str__(self) -> str:
        where = f"{self.tiers}, or anywhere" if self.anywhere else self.tiers
        what = f"{self.ask.where} asks its members in one domain of {where} ({self.ask.mode})"
        if self.part is not None:
            what = f"{self.part}: {what}"
        if self.spans_in is not None:
            what += (
                f" and waits {self.spans_in:.0f}s more for one before spanning domains "
                "(topology.softWait)"
            )
        elif self.chosen:
            what += (
                f"; its softWait of {self.soft_wait:.0f}s starts once it could start across "
                "domains (topology.softWait)"
            )
        if self.closest is None:
            return what
        return f"{what}; the best, {self.closest}, holds {self.holds} of {self.needs}"


@dataclass(slots=True)
class Plan:
    ask: TopologyAsk | None
    parts: list[Part] = field(default_factory=list)
    # Why the asks cannot be kept whatever the cluster holds (bad input), naming the
    # object and field; the job waits for it.
    error: str | None = None


class TopologyPlanner:
    def __init__(
        self,
        snapshot: Snapshot,
        requested: IntArray,
        free: IntArray,
        label_tiers: Sequence[LabelTier] = (),
        touched: list[int] | None = None,
        soft_wait: float = 0.0,
    ) -> None:
        self.snapshot = snapshot
        self.soft_wait = soft_wait
        # Job key -> now, for the jobs whose softWait this session started.
        self.started: dict[str, float] = {}
        # Set while a job waiting for a domain is tried across domains, as it would be
        # once its softWait is over, to learn whether its softWait starts: its soft asks
        # wait for no tier, and placement only says whether the job would be placed.
        self.spanning = False
        self.topology = snapshot.topology
        self.nodes = snapshot.nodes
        self.allocatable = snapshot.allocatable
        # The session's own arrays, changed in place as it places pods.
        self.requested, self.free = requested, free
        self.label_tiers = tuple(label_tiers)
        # Per resource column, its weight in a domain's fullness (0: not counted): every
        # resource alike but the pod count, until a plugin gives its own (`weigh`).
        self.weights: FloatArray = np.ones(self.allocatable.shape[1])
        self.weights[POD_COUNT] = 0.0
        self._weighed_by: Weighing | None = None
        # The session's list of nodes whose requests changed, appended as it places and
        # undoes pods; the domain sums `fullest` ranks by follow it.
        self.touched = [] if touched is None else touched
        # Per tier's ids (and shape): per-node values summed per domain, kept current
        # from `touched` (requests; slots for one shape).
        self._tracked: dict[tuple[int, bytes], _Tracked] = {}
        self._present: dict[tuple[int, bytes], BoolArray] = {}
        # Per tier's ids and resource columns: allocatable summed per domain; and per
        # tier's ids, the ids with the nodes of no domain in an extra one.
        self._totals: dict[tuple[int, bytes], FloatArray] = {}
        # Job key -> why it waits for a domain, as allocate last found (for explain).
        self.waits: dict[str, DomainWait] = {}
        self._binned: dict[int, IntArray] = {}
        # Starving gangs' drain counts per tier, candidates, requests and own running
        # jobs, with the free room and placements they were counted in (`_jobs_to_end`).
        self._drains: dict[tuple[int, bytes, bytes, tuple[str, ...]], tuple[bytes, FloatArray]] = {}
        # Pods this session placed, by task key: their node row, job and request, which
        # a starving gang's domain must see end as much as the bound ones; and bound
        # pods it evicted, whose room is free already. `_placed_token` is the XOR of
        # their keys' hashes, which a try undone restores.
        self._placed_now: dict[str, Placed] = {}
        self._evicted: set[str] = set()
        self._placed_jobs: Counter[str] = Counter()
        self._placed_token = 0
        self._running_now: tuple[int, Running] | None = None
        if label_tiers:
            # A tier's domains are told apart by the coarser tiers' labels too.
            keys = [tier.key for tier in label_tiers]
            self.tiers = tuple(
                replace(self.topology.nested(tier.key, keys[:at:-1]), number=at + 1, name=tier.name)
                for at, tier in enumerate(label_tiers)
            )
        else:
            self.tiers = self.topology.tiers

    def weigh(self, weights: Mapping[str, int], by: Weighing) -> None:
        """Rank domains by the resources of `weights` (name -> weight), as the plugin
        scoring `by` weighs them: the domain binpack's over a node fit score's, and of
        two alike the first opened (kube-scheduler scores a placement with
        NodeResourcesFit's resources, Volcano a HyperNode with network-topology-aware's)."""
        if self._weighed_by is not None and self._weighed_by <= by:
            return
        self._weighed_by = by
        column = self.snapshot.column
        self.weights = np.zeros(self.allocatable.shape[1])
        for name, weight in weights.items():
            if name in column:
                self.weights[column[name]] = weight

    @cached_property
    def whole_cluster(self) -> Tier:
        """The tier above the highest, of one domain holding every node: what a limit
        above every tier allows, as Volcano adds its cluster-top HyperNode (every node,
        a tier above the real ones) and lets a job whose highestTierAllowed reaches it
        span the cluster."""
        numbers = [t.number for t in self.tiers]
        if not self.label_tiers:
            # Above the HyperNodes left out of the tree too: theirs is a tier stated.
            numbers += [h.tier for h in self.topology.hypernodes.values()]
        ids = np.zeros(len(self.nodes), dtype=np.int64)
        return Tier(max(numbers, default=0) + 1, CLUSTER, ids, (CLUSTER,))

    def named(self, domain: Domain) -> str | None:
        """The domain's name for reasons; None for the whole cluster, which is no domain."""
        return None if domain.tier is self.whole_cluster else domain.name

    @cached_property
    def index(self) -> dict[str, int]:
        """Node name -> row, for the hosts of running gangs (built when first asked)."""
        return {node.name: row for row, node in enumerate(self.nodes)}

    def plan(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> Plan | None:
        """What the job asks of the topology; None when it asks nothing."""
        group = job.group
        ask = group.network_topology if group is not None else None
        plan = Plan(ask)
        podsets = any(t.pod.podset_topology is not None for t in tasks)
        if not podsets and (group is None or not group.sub_groups):
            return None if ask is None else plan
        running = self._running(job)
        if group is not None and group.sub_groups:
            _sub_groups(plan, job, tasks, running)
        if podsets:
            plan.error = plan.error or _podsets(plan, tasks, running)
        if plan.ask is None and not plan.parts and plan.error is None:
            return None
        return plan

    def _running(self, job: JobInfo) -> list[Task]:
        """The job's members holding a node, for the parts they belong to (only a job
        with parts asks; most jobs have none running)."""
        return self._placed_by_job.get(job.key, []) if job.bound else []

    def _jobs_to_end(
        self,
        tier: Tier,
        free: IntArray,
        binned: IntArray,
        candidates: IntArray,
        shapes: Sequence[tuple[IntArray, int]],
        own: Sequence[str],
        tracked: bool,
    ) -> FloatArray:
        """framework/drain.py's count for the candidates, kept for the next starving gang
        alike (the same members' requests, in the whole tier) while the free room is
        the same (`tracked`: `free` is the session's, the tier whole): under overload
        many gangs starve, most of them alike, and tries undone between them leave the
        room as it was."""
        bound = self._bound_pods
        key = (
            id(tier.ids),
            candidates.tobytes(),
            b"".join(vec.tobytes() + number.to_bytes(8) for vec, number in shapes),
            tuple(k for k in own if k in bound.keys or self._placed_jobs[k]),
        )
        # The same room with other pods placed this session is not the same count.
        room = free.tobytes() + self._placed_token.to_bytes(8, signed=True)
        kept = self._drains.get(key) if tracked else None
        if kept is not None and kept[0] == room:
            return kept[1]
        found = jobs_to_end(self._holding_nodes(), free, binned, candidates, shapes, own)
        if tracked:
            self._drains[key] = (room, found)
        return found

    def on_placed(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        """A pod placed by this session, or a bound one it evicted put back (an
        `on_allocate` handler)."""
        if task.pod.node_name is not None:
            if task.key not in self._evicted:
                return
            self._evicted.discard(task.key)
        elif task.key not in self._placed_now:
            self._placed_now[task.key] = (node, job.key, task.vec)
            self._placed_jobs[job.key] += 1
        else:
            return
        self._placed_token ^= hash(task.key)

    def on_unplaced(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        """A pod this session placed, undone, or a bound one evicted (an
        `on_deallocate` handler)."""
        if task.pod.node_name is not None:
            if task.key in self._evicted:
                return
            self._evicted.add(task.key)
        elif task.key in self._placed_now:
            del self._placed_now[task.key]
            self._placed_jobs[job.key] -= 1
        else:
            return
        self._placed_token ^= hash(task.key)

    def _holding_nodes(self) -> Running:
        """The pods holding a node, by job: the bound ones but those this session
        evicted, and those it placed (kept while none of that changes)."""
        if self._running_now is None or self._running_now[0] != self._placed_token:
            placed = list(self._placed_now.values())
            running = self._bound_pods.changed(self._evicted, placed)
            self._running_now = (self._placed_token, running)
        return self._running_now[1]

    @cached_property
    def _bound_pods(self) -> Running:
        """The pods bound before the session (built when a starving gang first asks)."""
        return Running.of(self.snapshot)

    @cached_property
    def _placed_by_job(self) -> dict[str, list[Task]]:
        """Job key -> its members holding a node (built when first asked)."""
        snapshot = self.snapshot
        found: dict[str, list[Task]] = {}
        for _, task in snapshot.placed:
            job = snapshot.job_of(task)
            if job is not None and not task.deleting:
                found.setdefault(job.key, []).append(task)
        return found

    def domains(
        self,
        ask: TopologyAsk,
        members: Sequence[TaskInfo],
        hosts: Sequence[str],
        within: BoolArray | None,
        *,
        roomiest: bool = False,
        draining: bool = False,
        freeable: IntArray | None = None,
        above: Tier | None = None,
    ) -> tuple[Iterator[Domain], str | None]:
        """The domains to try for `members`, in order, and why none may be tried (bad
        input) when so. `hosts` are the nodes members already run on: only a domain
        holding them all is a candidate. `roomiest`: every domain, those with the most
        room for the members first (to say which came closest when none has room).
        `draining` (with `roomiest`): of the 16 roomiest, those where the least would
        idle while held for the members first, from the running jobs (bound or placed by
        this session, less those it evicted) that must end for them to fit and the room
        free now (framework/drain.py), then the roomiest; the rest after. `freeable`:
        per node, what evicting the victims allowed would free, counted as room (for
        preempt and reclaim). `above`: only the ask's tiers above it.

        Lazy, a tier at a time, as most gangs take the first domain: each tier is
        ranked on the room there is when it is first reached (tries are undone before
        the next domain is asked for, so that is the room there was)."""
        tiers, error = self._tiers(ask)
        if error:
            return iter(()), error
        if above is not None:
            # The ask's tiers come lowest first.
            numbers = [t.number for t in tiers]
            tiers = tiers[numbers.index(above.number) + 1 :] if above.number in numbers else tiers
        need = np.sum([t.vec for t in members], axis=0) if members else None
        shapes: dict[bytes, tuple[IntArray, int]] = {}
        for task in members:
            vec, count = shapes.get(task.vec.tobytes(), (task.vec, 0))
            shapes[task.vec.tobytes()] = (vec, count + 1)
        index = self.index if hosts else {}
        rows = np.array([index[h] for h in hosts if h in index], dtype=np.int64)
        found = chain.from_iterable(
            self._tier_domains(
                tier,
                need,
                list(shapes.values()),
                rows,
                within,
                roomiest=roomiest,
                draining=draining,
                freeable=freeable,
                with_members=not ask.levelled,
                own=sorted({job_key(t.pod) for t in members}) if draining else (),
            )
            for tier in tiers
        )
        return found, None

    def closest(
        self,
        ask: TopologyAsk,
        members: Sequence[TaskInfo],
        hosts: Sequence[str],
        within: BoolArray | None,
        tier: Tier | None,
    ) -> Domain | None:
        """Of the domains the ask may take (of `tier` only, when given), the one with the
        most room for the members though none has room enough: its try says what it
        holds, for a gang or part that waits for a domain."""
        found, _ = self.domains(ask, members, hosts, within, roomiest=True)
        return next(of_tier(found, tier), None)

    def awaited(
        self,
        job: JobInfo,
        ask: TopologyAsk,
        members: Sequence[TaskInfo],
        within: BoolArray | None = None,
    ) -> Tier | None:
        """The tier a soft ask (the gang's or a part's) still waits for a domain of (its
        gang's `softWait` not yet run out): the lowest of its tiers with a domain (inside
        `within`, the gang's, when given) whose nodes could hold the members' requests
        in sum once empty; None for a hard ask, or once the wait is over."""
        if ask.required or not members or not self._waiting(job):
            return None
        tiers, error = self._tiers(ask)
        if error:
            return None
        need = np.sum([t.vec for t in members], axis=0)
        columns = np.flatnonzero(need > 0)
        for tier in tiers:
            if tier is self.whole_cluster:
                # Spanning the cluster is no domain to wait for: an ask no lower tier's
                # domain could hold is short of room, not waiting by choice.
                break
            if within is None:
                # The last row is the nodes in no domain of the tier.
                total = self._domain_total(tier)[:-1, columns]
            else:
                count = len(tier.domains)
                binned = np.where(within, self._bins(tier), count)
                total = _per_bin(binned, self.allocatable, count + 1, columns)[:-1]
            if (total >= need[columns]).all(axis=1).any():
                return tier
        return None

    def waits_by_choice(self, job: JobInfo) -> bool:
        """Whether the job's last placement attempt left it waiting for a domain by its
        own choice: a soft ask (its gang's or a part's) within its softWait, as placement
        tried it (the wait kept in `waits`), so that what holds room for it and when it
        is woken follow placement."""
        wait = self.waits.get(job.key)
        return wait is not None and wait.chosen

    def span_since(self, job: JobInfo) -> float | None:
        """When the job's softWait started: the first session that found its soft asks
        could place it across domains (Slurm's wait4switch_start); None: none has yet."""
        return self.started.get(job.key, job.span_since)

    def start_clock(self, job: JobInfo) -> None:
        """Start the job's softWait now: it could have been placed across domains."""
        self.started[job.key] = self.snapshot.now

    def wait_ends(self, job: JobInfo) -> float | None:
        """When the job's soft asks may span domains (topology.softWait); None while its
        softWait has not started."""
        since = self.span_since(job)
        return None if since is None else since + self.soft_wait

    def clocks(self) -> dict[str, SpanClock]:
        """Every softWait started, this session or before, of the jobs not holding their
        minimum in the snapshot: what the cache keeps for the next session
        (Decisions.span_clocks). A placement of this session keeps the clock until a
        snapshot shows it carried out, so that a bind dropped or failed does not start
        the softWait afresh."""
        return {
            key: SpanClock(since, job.owner)
            for key, job in self.snapshot.jobs.items()
            if job.bound < job.min_member
            and (since := self.started.get(key, job.span_since)) is not None
        }

    def _waiting(self, job: JobInfo) -> bool:
        """Whether the job is within its softWait (or its softWait has not started), and
        not being tried across domains (`spanning`)."""
        if self.soft_wait <= 0 or self.spanning:
            return False
        ends = self.wait_ends(job)
        return ends is None or self.snapshot.now < ends

    def placed_in(self, job: JobInfo, nodes: Iterable[str]) -> TopologyDomain | None:
        """The domain a gang that asked for one as a whole has its members in (`nodes`:
        bound, placed or nominated), as its PodGroup's status names it; None when it
        asked for none or they share no domain of its tiers."""
        ask = whole_ask(job)
        if ask is None:
            return None
        index = self.index
        rows = np.array([index[n] for n in nodes if n in index], dtype=np.int64)
        domain = self.holding(ask, rows)
        if domain is None:
            return None
        return TopologyDomain(domain.tier.name, domain.tier.domains[domain.index])

    def holding(self, ask: TopologyAsk, rows: IntArray) -> Domain | None:
        """The lowest-tier domain the ask may take that holds every node of `rows` (where
        a gang's members are), or None: what PodGroup status names as its domain."""
        tiers, error = self._tiers(ask)
        if error or not rows.size:
            return None
        for tier in tiers:
            if tier is self.whole_cluster:
                # Spanning the cluster is no domain to name.
                break
            held = np.unique(tier.ids[rows])
            if held.size == 1 and held[0] != NO_DOMAIN:
                return Domain(tier, int(held[0]), tier.ids)
        return None

    def fullest(self, task: TaskInfo, tied: BoolArray, first: int) -> int:
        """Of the nodes tied for the best score, one in the fullest domain (of the
        lowest tier, then the next; `_fullness` of the resources the task asks, as
        requested there now), `first` when all are alike or no tiers are known: a pod
        that could go to either fills the domain already in use and leaves whole
        domains to the gangs that ask for one, as Volcano's HyperNode binpack does for
        pods that ask for none. The pod's own request is left out (Volcano counts it):
        with it the smaller of two empty domains would win, where Kueue places an
        unconstrained pod set in the first (its TestFindTopologyAssignments)."""
        if not self.tiers or np.count_nonzero(tied) < 2:
            return first
        columns = np.flatnonzero((task.vec > 0) & (self.weights > 0))
        if not columns.size:
            return first
        rows = np.flatnonzero(tied)
        weights, nothing = self.weights[columns], np.zeros(columns.size, dtype=np.int64)
        for tier in self.tiers:
            used, total = self._domain_used(tier), self._domain_total(tier)
            share = _fullness(used[:, columns], total[:, columns], nothing, weights)
            # The extra bin holds the nodes in no domain of the tier: they come last.
            share[-1] = -1.0
            held = share[self._bins(tier)[rows]]
            rows = rows[held == held.max()]
            if rows.size == 1:
                break
        # Rows stay in ascending order: the lowest index among the fullest.
        return int(rows[0])

    def domain_sums(self, tier: Tier) -> tuple[IntArray, FloatArray]:
        """Per domain of the tier and, in a last row, the nodes in none (a node's row is
        `bins`): requests summed, kept current as the session places pods, and
        allocatable summed; every resource column. Not to be changed."""
        return self._domain_used(tier), self._domain_total(tier)

    def bins(self, tier: Tier) -> IntArray:
        """Per node, its row in `domain_sums` (past the domains: in none). Not to be changed."""
        return self._bins(tier)

    def _bins(self, tier: Tier) -> IntArray:
        """The tier's ids with the nodes of no domain in an extra last bin."""
        binned = self._binned.get(id(tier.ids))
        if binned is None:
            binned = np.where(tier.ids == NO_DOMAIN, len(tier.domains), tier.ids)
            self._binned[id(tier.ids)] = binned
        return binned

    def _has_nodes(self, tier: Tier) -> BoolArray:
        """Per domain of the tier, whether any node is in it (not to be changed)."""
        key = (id(tier.ids), b"nodes")
        found = self._present.get(key)
        if found is None:
            found = self._present[key] = _has_nodes(self._bins(tier), len(tier.domains))
        return found

    def _domain_total(self, tier: Tier) -> FloatArray:
        """Allocatable summed per domain (and the extra bin), every resource column."""
        key = (id(tier.ids), b"all")
        total = self._totals.get(key)
        if total is None:
            bins = len(tier.domains) + 1
            total = self._totals[key] = _per_bin(self._bins(tier), self.allocatable, bins)
        return total

    def _domain_used(self, tier: Tier) -> IntArray:
        """Requests summed per domain of the tier (and the extra bin), every column."""
        return self._track(tier, b"used", lambda rows: self.requested[rows])

    def _domain_slots(self, tier: Tier, vec: IntArray) -> IntArray:
        """Per domain of the tier (and the extra bin): how many pods asking `vec` its
        nodes' free room holds, a node at a time."""
        return self._track(tier, vec.tobytes(), lambda rows: node_slots(self.free[rows], vec))

    def _track(
        self, tier: Tier, what: bytes, values: Callable[[IntArray | slice], IntArray]
    ) -> IntArray:
        """`values` of the nodes (rows given) summed per bin of the tier, kept current
        from the nodes the session changed since the last call (`touched`) instead of
        summed afresh: a session asks for them at every gang, and changes few nodes
        between two gangs."""
        key = (id(tier.ids), what)
        tracked = self._tracked.get(key)
        bins = self._bins(tier)
        if tracked is None:
            per_node = values(slice(None)).copy()
            per_bin = np.zeros((len(tier.domains) + 1, *per_node.shape[1:]), dtype=np.int64)
            np.add.at(per_bin, bins, per_node)
            tracked = self._tracked[key] = _Tracked(per_node, per_bin, len(self.touched))
        elif tracked.seen < len(self.touched):
            # Sorted in Python: a few rows at a time, where np.unique costs more.
            rows = np.array(sorted(set(self.touched[tracked.seen :])), dtype=np.int64)
            tracked.seen = len(self.touched)
            fresh = values(rows)
            np.add.at(tracked.per_bin, bins[rows], fresh - tracked.per_node[rows])
            tracked.per_node[rows] = fresh
        return tracked.per_bin

    def tier_names(self, ask: TopologyAsk) -> str:
        """The tiers whose domains the ask may take, lowest first, for waiting reasons
        (the whole cluster is none: `spans_cluster` says whether it may take that);
        with a HyperNode of those tiers left out of the tree (or a node left out of
        their domains), if any, since a gang waiting for a domain may be waiting for
        that one."""
        tiers, _ = self._tiers(ask)
        names = " or ".join(t.name for t in tiers if t is not self.whole_cluster) or "any tier"
        broken = self._broken(ask)
        return names if broken is None else f"{names} (left out: {broken})"

    def spans_cluster(self, ask: TopologyAsk) -> bool:
        """Whether the ask may span the whole cluster: it waits for room, not a domain."""
        tiers, _ = self._tiers(ask)
        return self.whole_cluster in tiers

    def _tiers(self, ask: TopologyAsk) -> tuple[Sequence[Tier], str | None]:
        """The tiers the ask may take domains of, or why none (bad input). HyperNodes
        that do not form a tree (a cycle, a member missing, a member listed by two, a
        HyperNode not read) are left out with those above them, and the rest of the tree
        serves: a broken HyperNode keeps no gang out of the healthy ones. Volcano stops
        placing every gang with a network topology instead, which one bad HyperNode
        would make of the whole cluster's."""
        # No tier at all (configured label tiers are never none): every HyperNode broken.
        if ask.key is None and not self.tiers and self.topology.errors:
            first = self.topology.errors[min(self.topology.errors)]
            return [], f"{ask.where}: the topology is not usable: {first}"
        broken = self._broken(ask)
        tiers, error = self._asked_tiers(ask)
        if broken is not None and error is not None:
            return [], f"{error} (left out: {broken})"
        return tiers, error

    def _asked_tiers(self, ask: TopologyAsk) -> tuple[Sequence[Tier], str | None]:
        if ask.key is not None:
            # A configured tier's label, asked by Kueue's levels: its domains as the tier
            # tells them apart.
            keys = [t.key for t in self.label_tiers]
            at = keys.index(ask.key) if ask.key in keys else None
            tier = (
                replace(self.tiers[at], number=0, name=ask.key)
                if at is not None and ask.levelled
                else self.topology.label(ask.key)
            )
            if not tier.domains:
                return [], f"{ask.where}: no node has the label {ask.key}"
            if ask.required:
                return [tier], None
            # Preferred: that label, then the coarser configured tiers, as Kueue climbs.
            above = () if at is None else self.tiers[at + 1 :]
            return [tier, *above], None
        if not self.tiers:
            return [], (
                f"{ask.where}: no topology tiers are known (no HyperNode, and the "
                "configuration names no topology.tiers)"
            )
        if ask.tier_name is not None:
            named = [t.number for t in self.tiers if t.name == ask.tier_name]
            if not self.label_tiers:
                # Any HyperNode's tierName names its tier, as Volcano maps them, though
                # the tier's name in messages is one of them.
                named += [
                    h.tier
                    for name, h in self.topology.hypernodes.items()
                    if h.tier_name == ask.tier_name and name not in self.topology.errors
                ]
            if not named:
                names = ", ".join(t.name for t in self.tiers)
                return (
                    [],
                    f"{ask.where}.highestTierName: no tier is named {ask.tier_name!r} "
                    f"(tiers: {names})",
                )
            return [t for t in self.tiers if t.number <= min(named)], None
        if ask.highest_tier is not None:
            allowed = [t for t in self.tiers if t.number <= ask.highest_tier]
            if ask.highest_tier >= self.whole_cluster.number:
                allowed.append(self.whole_cluster)
            if not allowed and ask.required:
                return (
                    [],
                    f"{ask.where}.highestTierAllowed: no tier is numbered "
                    f"{ask.highest_tier} or lower",
                )
            return allowed, None
        return self.tiers, None

    def _broken(self, ask: TopologyAsk) -> str | None:
        """The first HyperNode left out of the tree of a tier the ask may take (or of a
        tier unknown, not read), else the first node left out of the domains of such a
        tier for being in several, when the tiers are HyperNodes'."""
        errors, shared = self.topology.errors, self.topology.shared
        if self.label_tiers or ask.key is not None or not (errors or shared):
            return None
        hypernodes = self.topology.hypernodes
        limit = ask.highest_tier
        if ask.tier_name is not None:
            named = [h.tier for h in hypernodes.values() if h.tier_name == ask.tier_name]
            named += [t.number for t in self.tiers if t.name == ask.tier_name]
            limit = min(named, default=None)
        lost = [
            name
            for name in errors
            if name not in hypernodes or limit is None or hypernodes[name].tier <= limit
        ]
        if lost:
            return errors[min(lost)]
        doubts = [key for key in shared if limit is None or key[0] <= limit]
        return shared[min(doubts)] if doubts else None

    def _tier_domains(
        self,
        tier: Tier,
        need: IntArray | None,
        shapes: Sequence[tuple[IntArray, int]],
        rows: IntArray,
        within: BoolArray | None,
        *,
        roomiest: bool,
        draining: bool,
        freeable: IntArray | None,
        with_members: bool,
        own: Sequence[str],
    ) -> Iterator[Domain]:
        # `with_members`: a domain is ranked by how full it is once the members are in,
        # as kube-scheduler and Volcano score a placement; Kueue's asks rank it by what
        # is requested there now, as Kueue's BestFit does. Either way by the weighted
        # resources alone (`_fullness`).
        ids = tier.ids if within is None else np.where(within, tier.ids, NO_DOMAIN)
        count = len(tier.domains)
        if rows.size:
            held = np.unique(ids[rows])
            if held.size != 1 or held[0] == NO_DOMAIN:
                return
            candidates = held
        else:
            candidates = np.arange(count)
        # Nodes in no domain are counted in one extra bin, left out of every sum.
        binned = self._bins(tier) if within is None else np.where(ids == NO_DOMAIN, count, ids)
        if need is None:
            need = np.zeros(self.free.shape[1], dtype=np.int64)
        columns = np.flatnonzero(need > 0)

        def per_domain(values: IntArray) -> FloatArray:
            """Sums over each domain's nodes, one column per resource the members ask."""
            return _per_bin(binned, values, count + 1, columns)[:count]

        # The whole tier's sums are kept current from the session's changes (but for
        # the narrowed ids of a part, or room that evictions would free: afresh).
        tracked = within is None and freeable is None
        # What a domain holds changes with nothing a session does: summed once per tier.
        key = (id(ids), columns.tobytes())
        total = self._totals.get(key) if within is None else None
        if total is None:
            total = per_domain(self.allocatable)
            if within is None:
                self._totals[key] = total
        used = self._domain_used(tier)[:count, columns] if tracked else per_domain(self.requested)
        free = total - used
        node_free = self.free
        if freeable is not None:
            free = free + per_domain(freeable)
            node_free = node_free + freeable
        room = self._has_nodes(tier) if within is None else _has_nodes(binned, count)
        if roomiest:
            # The share of the members' asks the domain's free room covers.
            rank = (
                (free / np.maximum(need[columns], 1)).min(axis=1)
                if columns.size
                else free.sum(axis=1)
            )
            spare = np.zeros(count)
        else:
            room = room & (free >= need[columns]).all(axis=1)
            # Of domains alike full, the one whose nodes hold the members the fewest
            # times over (the tightest fit, counted in pods as Kueue's BestFit counts
            # them) comes first: the roomier ones stay for larger gangs.
            spare = np.full(count, np.inf)
            for vec, number in shapes:
                # Members of one shape each need a node with room for them: the slots
                # for that shape summed per domain must reach their number.
                if not vec.any():
                    continue
                if tracked:
                    slots = self._domain_slots(tier, vec)
                else:
                    slots = np.bincount(binned, node_slots(node_free, vec), count + 1)
                room &= slots[:count] >= number
                spare = np.minimum(spare, slots[:count] / number)
            weights = self.weights[columns]
            added = need[columns] if with_members else np.zeros(columns.size, dtype=np.int64)
            rank = _fullness(used, total, added, weights)
        candidates = candidates[room[candidates]]
        first, then = -rank[candidates], spare[candidates]
        if draining:
            # Where the least would idle while it drains first (from the jobs that must
            # end and the room free now), then the roomiest; counted for the roomiest
            # few only (a count is a pass per domain), the rest after them.
            roomiest_first = candidates[np.lexsort((candidates, then, first))]
            counted = roomiest_first[:CANDIDATE_DOMAINS]
            ends = np.full(count, np.inf)
            ends[counted] = self._jobs_to_end(
                tier, node_free, binned, counted, shapes, own, tracked
            )
            first, then = idle_held(ends, rank)[candidates], first
        order = np.lexsort((candidates, then, first))
        for index in candidates[order]:
            yield Domain(tier, int(index), ids)


def _fullness(
    used: FloatArray | IntArray, total: FloatArray, added: IntArray, weights: FloatArray
) -> FloatArray:
    """Per domain (row), the share of its allocatable requested once `added` is in,
    averaged over the columns with their `weights` (a column the domain has none of
    left out): kube-scheduler scores a placement so (NodeResourcesFit's MostAllocated
    over its nodes, the group's pods in, with the fit score's resource weights), as
    Volcano scores a HyperNode (with network-topology-aware's), so that of two empty
    domains the smaller one the gang fills more is taken first. With `added` zero,
    the share requested now, as Kueue's asks are ranked."""
    counted = np.where(total > 0, weights, 0.0)
    weight_sum = counted.sum(axis=1)
    after = (used + added) / np.maximum(total, 1)
    fullness: FloatArray = (after * counted).sum(axis=1) / np.maximum(weight_sum, 1)
    return fullness


def _sub_groups(
    plan: Plan, job: JobInfo, tasks: Sequence[TaskInfo], running: Sequence[Task]
) -> None:
    """Volcano's sub-groups: for each policy, the members its selector takes, grouped by
    their values of its matchLabelKeys (a member lacking one is in none of its groups),
    as Volcano forms sub-jobs. A sub-group's running members count toward its size and
    keep it in the domain holding them, as Volcano recovers a sub-job's HyperNode from
    its tasks' nodes; one with no member pending is not placed, and one with fewer
    members than its subGroupSize waits for the rest, as a Volcano sub-job is ready only
    at its size."""
    assert job.group is not None
    for policy in job.group.sub_groups:
        groups: dict[tuple[str, ...], tuple[list[TaskInfo], list[str]]] = {}
        members: Iterable[tuple[Task, TaskInfo | None]] = chain(
            ((t.pod, t) for t in tasks), ((t, None) for t in running)
        )
        for pod, task in members:
            labels = pod.labels
            if policy.selector is not None and not policy.selector.matches(labels):
                continue
            values = tuple(labels.get(key, "") for key in policy.match_keys)
            if all(values):
                pending, hosts = groups.setdefault(values, ([], []))
                if task is not None:
                    pending.append(task)
                elif pod.node_name is not None:
                    hosts.append(pod.node_name)
        for values, (pending, hosts) in sorted(groups.items()):
            if not pending:
                continue
            label = f"sub-group {policy.name}" + (f" {'/'.join(values)}" if values else "")
            size = policy.size - len(hosts)
            plan.parts.append(Part(label, policy.ask, pending, max(size, 0), hosts))


def _stated(task: TaskInfo) -> tuple[Mode, str | None] | None:
    """What a member's Kueue annotations ask of its pod set's domain (its slices may
    differ: a group's leader has none), without where it is stated."""
    stated = task.pod.podset_topology
    assert stated is not None
    return None if stated.ask is None else (stated.ask.mode, stated.ask.key)


def of_tier(domains: Iterator[Domain], tier: Tier | None) -> Iterator[Domain]:
    """`domains` of `tier` only (all when None): within its softWait a soft ask is tried
    as a hard one of the tier it waits for (TopologyPlanner.awaited)."""
    if tier is None:
        return domains
    return (d for d in domains if d.tier.number == tier.number)


def whole_ask(job: JobInfo) -> TopologyAsk | None:
    """What the gang asks of the topology as a whole: its PodGroup's networkTopology,
    else the ask of the one Kueue pod set every member pending or holding a node is in."""
    if job.group is not None and job.group.network_topology is not None:
        return job.group.network_topology
    podset = job.whole_podset
    return None if podset is None else podset.ask


def _podsets(plan: Plan, tasks: Sequence[TaskInfo], running: Sequence[Task]) -> str | None:
    """Kueue's pod sets: each in one domain of its ask, and cut into slices of its
    slice size (in name order, running members with the pending), each slice in one
    domain of the slice label, the one holding its running members if it has some."""
    sets: dict[str, list[TaskInfo]] = {}
    for task in tasks:
        if task.pod.podset_topology is not None:
            sets.setdefault(task.pod.podset_topology.part, []).append(task)
    # The pod set's ask is the gang's only when every member, pending or running, is
    # in it (as JobInfo.whole_podset counts): else the others' nodes are not its own.
    whole = (
        len(sets) == 1
        and len(next(iter(sets.values()))) == len(tasks)
        and all(t.podset_topology is not None and t.podset_topology.part in sets for t in running)
    )
    for name, members in sorted(sets.items()):
        stated = members[0].pod.podset_topology
        assert stated is not None
        label = f"pod set {name}" if name else "pod set"
        other = next((t for t in members if _stated(t) != _stated(members[0])), None)
        if other is not None:
            # Kueue asks one domain of a pod set (or of a group of them, which it
            # requires to ask alike): pods asking otherwise name no one ask to keep.
            return (
                f"Pod {other.key}.metadata.annotations: its Kueue topology ask differs "
                f"from that of Pod {members[0].key}, in the same {label}"
            )
        ran = [
            t for t in running if t.podset_topology is not None and t.podset_topology.part == name
        ]
        hosts = [t.node_name for t in ran if t.node_name is not None]
        if stated.ask is not None:
            if whole and plan.ask is None:
                plan.ask = stated.ask
            else:
                plan.parts.append(Part(label, stated.ask, members, len(members), hosts))
        if stated.slice_key is None or stated.slice_size is None:
            continue
        if not whole:
            return f"{stated.slice_where}: slices are kept for a gang of one pod set only"
        size = stated.slice_size
        count = len(members) + len(ran)
        if count % size:
            return (
                f"{stated.slice_where}: slice size {size} does not divide the "
                f"{count} members of {label}"
            )
        ordered = sorted([*((t.pod, t) for t in members), *((t, None) for t in ran)], key=_by_name)
        ask = TopologyAsk(Mode.HARD, where=stated.slice_where, key=stated.slice_key, levelled=True)
        for start in range(0, len(ordered), size):
            chunk = ordered[start : start + size]
            pending = [task for _, task in chunk if task is not None]
            if pending:
                placed = [p.node_name for p, task in chunk if task is None and p.node_name]
                where = f"slice {start // size + 1} of {label}"
                plan.parts.append(Part(where, ask, pending, len(pending), placed))
    return None


def _by_name(member: tuple[Task, TaskInfo | None]) -> str:
    return member[0].name


@dataclass(slots=True)
class _Tracked:
    """Per-node values as last summed, their sums per bin, and how much of the session's
    `touched` they reflect."""

    per_node: IntArray
    per_bin: IntArray
    seen: int


def _has_nodes(binned: IntArray, count: int) -> BoolArray:
    """Per domain (of `count`, the nodes in none binned past them), whether any node is."""
    present: BoolArray = np.bincount(binned, minlength=count + 1)[:count] > 0
    return present


def _per_bin(
    binned: IntArray, values: IntArray, bins: int, columns: Iterable[int] | None = None
) -> FloatArray:
    """`values` (node x column; only `columns` when given) summed per bin of `binned`
    (a tier's domains, and in a last row the nodes in none)."""
    picked = range(values.shape[1]) if columns is None else columns
    sums = [np.bincount(binned, values[:, c], bins) for c in picked]
    return np.stack(sums, axis=1) if sums else np.zeros((bins, 0))
