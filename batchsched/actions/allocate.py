"""allocate: queues by share, jobs by order, each job placed whole or not at all.

Jobs whose placement was recorded but not finished (a leader lost mid-bind) go first,
before any ordering: their room was promised to them, and a gang left partly bound
would hold its members' resources for nothing. Jobs nominated to the room a preemption
freed come next, for the same reason (nominations.py).

A job that does not fit is undone and the next one is tried, so a large gang never
blocks smaller jobs behind it, unless its queue asks for that (Volcano's
`dequeueStrategy: fifo`: the rest of that queue waits for the next session). To keep
it from starving, once it has waited longer than the session's starvation threshold
(or the waiting time a plugin gives it), room is held for it on the nodes closest to
holding it (framework/reservations.py): jobs of every queue still run, elsewhere or
beside that room, and what frees up there
accumulates until the gang fits. A gang that could not fit even the empty cluster is
never waited for.
"""

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice

import numpy as np

from batchsched.actions.gang_placement import eligible, place_job
from batchsched.actions.nominations import keep_or_clear, terminating_rows
from batchsched.api.objects import Constraints, Dequeue
from batchsched.api.topology import TopologyAsk
from batchsched.framework.session import Session
from batchsched.framework.topology import CANDIDATE_DOMAINS, Plan
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo

# Node rows and the requests to hold there, one per member.
Packing = tuple[list[int], list[IntArray]]


def allocate(session: Session) -> None:
    by_queue: dict[str, list[JobInfo]] = defaultdict(list)
    resumed: list[JobInfo] = []
    nominated: list[JobInfo] = []
    for job in session.placing:
        if any(not t.best_effort for t in job.pending) and eligible(session, job):
            if job.resumes:
                resumed.append(job)
            elif job.nominated:
                nominated.append(job)
            else:
                by_queue[job.queue].append(job)
    for job in session.job_order(resumed):
        place_job(session, job, job.pending)
    terminating = terminating_rows(session) if nominated else set()
    for job in session.job_order(nominated):
        if not place_job(session, job, job.pending) and not keep_or_clear(
            session, job, terminating
        ):
            by_queue[job.queue].append(job)
    queues = {name: session.job_order(jobs) for name, jobs in by_queue.items()}
    cursor = dict.fromkeys(queues, 0)
    while queues:
        name = min(queues, key=session.queue_order_key) if len(queues) > 1 else next(iter(queues))
        jobs = queues[name]
        judge = session.overused(name)
        if judge is not None:
            fair = Reason(Code.AT_FAIR_SHARE, judge, f"queue {name} is at its fair share")
            _leave_waiting(session, jobs[cursor[name] :], fair)
            del queues[name]
            continue
        job = jobs[cursor[name]]
        cursor[name] += 1
        placed = place_job(session, job, job.pending)
        reserved = not placed and _reserve_if_starving(session, job)
        # A job held to its queue's share waits for the share, not for room.
        if not placed and not reserved and job.key not in session.share_refused:
            session.unplaced.add(job.key)
        if not placed and _dequeues_in_order(session, name) and cursor[name] < len(jobs):
            ahead = (
                f"queue {name} dequeues in order (dequeueStrategy fifo) and job {job.key} "
                "ahead cannot start"
            )
            _leave_waiting(session, jobs[cursor[name] :], Reason(Code.IN_ORDER, SESSION, ahead))
            del queues[name]
        elif cursor[name] == len(jobs):
            del queues[name]


def _dequeues_in_order(session: Session, name: str) -> bool:
    queue = session.snapshot.queues.get(name)
    return queue is not None and queue.dequeue is Dequeue.FIFO


def _reserve_if_starving(session: Session, job: JobInfo) -> bool:
    """Hold room for the job if it is short of minMember past the threshold yet able to
    fit the cluster once it drains. A job already at minMember runs, so it is not
    starving; and holding room for a gang that could not fit even an empty cluster
    would hold it for ever. Whether it holds room."""
    limit = session.waiting_limit(job)
    if limit is None or session.snapshot.now - job.creation <= limit:
        return False
    if job.bound >= job.min_member:
        return False
    topology = session.topology
    if topology.waits_by_choice(job) and topology.span_since(job) is not None:
        # It could start across domains and waits for one by its own choice
        # (topology.softWait); room held in one domain would idle till all of it came.
        # Until it could, it starves as any gang does.
        return False
    packing = _pack_drained_cluster(session, job)
    if packing is None:
        return False
    rows, vecs = packing
    session.reserve(job.key, rows, vecs)
    names = ", ".join(sorted({session.snapshot.nodes[r].name for r in rows}))
    waited = (
        "the starvation threshold"
        if limit == session.starvation_seconds
        else "the waiting time it is given"
    )
    waiting = session.job_reasons[job.key]
    session.job_reasons[job.key] = Reason(
        Code.STARVING,
        waiting.plugin,
        f"{waiting} It has waited past {waited}: room is held for it on node(s) {names}.",
    )
    return True


def _pack_drained_cluster(session: Session, job: JobInfo) -> Packing | None:
    """Where first-fit decreasing packs the members the job still needs, each on nodes
    its selectors, affinity and tolerations allow, once the cluster drains of all but
    the room already held for others; nodes with the most room free now are tried
    first, so the room held is what comes soonest. None when no packing is found
    (fragmentation, pods larger than any node), or when members state what an empty
    cluster cannot vouch for (pod affinity, spread, claims): holding room for a job
    that might never fit would hold it for ever.

    A gang asking for a topology domain is packed inside one (its parts each inside one
    of their own): room scattered over domains would never let it start. Those where
    the least would idle while they drain come first: what is free or frees in a held
    domain idles until the last running job the gang needs gone ends (framework/drain.py)."""
    pending = job.pending
    if any(f.concerns(t) for f in session.fresh_filters for t in pending):
        return None
    needed = job.min_member - job.bound
    if len(pending) < needed:
        return None
    drained = _Drained(session)
    layout = session.topology.plan(job, pending)
    if layout is None:
        return drained.pack(pending, needed, None)
    if layout.error is not None:
        return None
    outer: Iterable[BoolArray | None] = [None]
    if layout.ask is not None:
        outer = drained.domains(layout.ask, pending, needed, job.hosts, None)
    for within in outer:
        packing = drained.pack_layout(layout, pending, needed, within)
        if packing is not None:
            return packing
    return None


class _Drained:
    """The cluster drained of all but the room held for others, its nodes in the order
    they are tried: most room free now first (ties by row)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        held = session.reservations.held if session.reservations is not None else 0
        capacity = snapshot.allocatable - held
        self.largest = np.maximum(snapshot.allocatable.max(axis=0, initial=0), 1)
        self.order = np.lexsort(
            (np.arange(len(capacity)), -(session.free / self.largest).sum(axis=1))
        )
        self.free = capacity[self.order]

    def domains(
        self,
        ask: TopologyAsk,
        members: list[TaskInfo],
        needed: int,
        hosts: Sequence[str],
        within: BoolArray | None,
    ) -> Iterator[BoolArray | None]:
        """Where a starving gang (or part) asking for a domain is packed: the domains
        where the least would idle until `needed` of its members fit first (counted
        for the smallest, the least it could start with, where the packing then places
        the largest that fit; of domains alike, the roomiest now), then,
        for a soft ask, `within` itself. Lazily: a tier's jobs are counted only once the
        domains before it were tried, and most gangs pack in the first."""
        smallest = sorted(members, key=lambda t: float((t.vec / self.largest).sum()))[:needed]
        found, error = self.session.topology.domains(
            ask, smallest, hosts, within, roomiest=True, draining=True
        )
        if error:
            return iter(())
        nodes = (d.nodes for d in islice(found, CANDIDATE_DOMAINS))
        return nodes if ask.required else chain(nodes, [within])

    def pack_layout(
        self, layout: Plan, pending: list[TaskInfo], needed: int, within: BoolArray | None
    ) -> Packing | None:
        """The parts each in a domain of their own inside `within` (one that fits
        nowhere left out, as allocate leaves it), then the members in no part, until
        `needed` are packed; None, the room given back, when they are not."""
        saved = self.free.copy()
        rows: list[int] = []
        vecs: list[IntArray] = []
        in_parts: set[str] = set()
        for part in layout.parts:
            in_parts |= {t.key for t in part.tasks}
            inner: Iterable[BoolArray | None] = [within]
            if part.ask is not None:
                inner = self.domains(part.ask, part.tasks, part.size, part.hosts, within)
            for mask in inner:
                packed = self.pack(part.tasks, part.size, mask)
                if packed is not None:
                    rows += packed[0]
                    vecs += packed[1]
                    break
        rest = [t for t in pending if t.key not in in_parts]
        packed = self.pack(rest, needed - len(rows), within)
        if packed is None:
            self.free = saved
            return None
        return rows + packed[0], vecs + packed[1]

    def pack(self, tasks: list[TaskInfo], needed: int, within: BoolArray | None) -> Packing | None:
        """First-fit decreasing of `needed` of the tasks on the nodes of `within` (all
        when None), the room taken kept; None, taking none, when they do not fit."""
        if needed <= 0:
            return [], []
        free, order, session = self.free, self.order, self.session
        allowed_nodes = None if within is None else within[order]
        requests = np.array([t.vec for t in tasks])
        room = free if allowed_nodes is None else free[allowed_nodes]
        # Cheap refusal first: the smallest requests summed must fit the room's total.
        if (
            len(tasks) < needed
            or (np.sort(requests, axis=0)[:needed].sum(axis=0) > room.sum(axis=0)).any()
        ):
            return None
        saved = free.copy()
        rows: list[int] = []
        vecs: list[IntArray] = []
        # Per request and constraints: the position it last went to. Nodes only fill
        # up, so the ones before it have no room for it, and a gang of identical pods
        # is packed in one pass.
        cursor: dict[tuple[bytes, Constraints], int] = {}
        for task in sorted(tasks, key=lambda t: -float((t.vec / self.largest).sum())):
            constraints = task.pod.constraints
            key = (task.vec.tobytes(), constraints)
            start = cursor.get(key, 0)
            allowed = session.allowed(constraints)[order]
            if allowed_nodes is not None:
                allowed &= allowed_nodes
            hits = np.flatnonzero((free[start:] >= task.vec).all(axis=1) & allowed[start:])
            if not hits.size:
                cursor[key] = len(free)
                continue
            position = cursor[key] = start + int(hits[0])
            free[position] -= task.vec
            rows.append(int(order[position]))
            vecs.append(task.vec)
            if len(rows) == needed:
                return rows, vecs
        self.free[:] = saved
        return None


def _leave_waiting(session: Session, jobs: list[JobInfo], reason: Reason) -> None:
    for job in jobs:
        session.job_reasons.setdefault(job.key, reason)
