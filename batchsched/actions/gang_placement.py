"""Placing one job inside a Statement: all of its gang, or nothing.

A job asking for topology (framework/topology.py) is tried domain by domain, in the
planner's order, each try undone unless the gang is ready in it: the first domain that
holds the gang wins. Its parts (sub-groups, pod sets, slices) are each tried in the
domains of their own ask inside the job's, and a part counts only whole. A try's
waiting reasons (Session.explain, a pass over the domain's nodes per filter) are worked
out only for the try they are reported from: a failed domain's try leaves them out, and
the one reported is tried again with them (tries are undone, so it places as before,
unless a plugin learns from the tries: a try that held the gang and then falls short,
explained, is not committed).
Once a try placed no member, a domain with no node any member could go to is passed
over: its try would do just what that one did.
"""

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import TypeVar

import numpy as np

from batchsched.api.topology import TopologyAsk
from batchsched.framework.plugin import slots
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.framework.topology import Domain, DomainWait, Part, Plan, of_tier
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.model.topology import Tier

# Why a job none of whose members was tried is not placed.
NO_PENDING = Reason(Code.UNSCHEDULABLE, SESSION, "no pending pods")
# A member no node took in a try whose reasons are not reported: never shown, the try
# is made again with the reasons worked out before any of its reasons is kept.
UNEXPLAINED = Reason(Code.UNSCHEDULABLE, SESSION, "no node takes it (reasons not worked out)")

V = TypeVar("V")


def eligible(session: Session, job: JobInfo) -> bool:
    """Admitted by enqueue (when it ran this session) and not ruled out by a plugin."""
    if session.enqueue_ran and job.key not in session.enqueued:
        return False
    problem = session.invalid(job)
    if problem:
        session.job_reasons[job.key] = problem
        return False
    return True


def place_job(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
    """Try the job's pending tasks; commit only if the gang reaches minMember.

    A task whose gang's recorded placement holds a node for it goes there if it still
    fits, so a gang cut off mid-bind ends as it was meant to; so does a task nominated
    to the node its preemption freed.
    """
    ordered = session.task_order(tasks)
    if job.resumes or job.nominated:
        # Members with a node held go first, so the others cannot take their room.
        ordered = sorted(ordered, key=lambda t: preferred_node(t) is None)
    plan = session.topology.plan(job, tasks)
    if plan is None:
        statement = Statement(session, job)
        needed = job.min_member - job.bound
        failures = _place_tasks(session, job, ordered, statement, needed, None, set())
        return _conclude(session, job, statement, failures, None)
    if plan.error:
        session.job_reasons[job.key] = _invalid(job, plan.error)
        return False
    if _place_in_domains(session, job, ordered, plan):
        return True
    topology = session.topology
    # A gang without parts had its clock started before its wait was said (see
    # `_place_in_domains`); a part's wait is said in the middle of the try.
    if not plan.parts or not topology.waits_by_choice(job):
        return False
    if not _starts_clock(session, job, ordered, plan, None):
        return False
    # Tried again, to say how long it waits now (its tries are undone: it places as before).
    return _place_in_domains(session, job, ordered, plan)


def _starts_clock(
    session: Session, job: JobInfo, ordered: list[TaskInfo], plan: Plan, tried: Tier | None
) -> bool:
    """For a job waiting for a domain within its softWait (its tries undone): start its
    softWait if it has not started and the gang could be placed across domains, as it
    will be once its softWait is over (Slurm's wait4switch_start); whether it started.
    `tried`: as `_place_in_domains` takes it."""
    topology = session.topology
    if topology.span_since(job) is not None:
        return False
    if not _could_span(session, job, ordered, plan, tried):
        return False
    topology.start_clock(job)
    return True


def _could_span(
    session: Session, job: JobInfo, ordered: list[TaskInfo], plan: Plan, tried: Tier | None
) -> bool:
    """Whether the job could be placed with its soft asks spanning domains; what it
    would place is undone, and what the try said of it forgotten. Answered without the
    try where that is sure to be its answer, unless tries are observed (they then are
    all made, as they would be)."""
    if not session.tries_observed:
        if _too_big(session, job, ordered):
            return False
        whole = plan.ask is None or not plan.ask.required
        if whole and not plan.parts and _places_all(session, job, ordered):
            return True
    topology = session.topology
    wait, reason = topology.waits.get(job.key), session.job_reasons.get(job.key)
    topology.spanning = True
    try:
        return _place_in_domains(session, job, ordered, plan, tried)
    finally:
        topology.spanning = False
        _put(topology.waits, job.key, wait)
        _put(session.job_reasons, job.key, reason)


def _too_big(session: Session, job: JobInfo, ordered: list[TaskInfo]) -> bool:
    """Whether the cluster's free room could not hold the fewest members that would make
    the gang ready, whatever the nodes they went to (a member goes only where its
    requests fit the room left, which a try only takes): the members of one shape that
    many need, a node holding so many of them as its room does; or all of them together
    need more of some resource than the room summed."""
    fewest = _fewest(session, job, len(ordered))
    if fewest is None:
        return True
    free = np.maximum(session.free, 0)
    shapes: dict[bytes, tuple[IntArray, int]] = {}
    for task in ordered:
        vec, count = shapes.get(task.vec.tobytes(), (task.vec, 0))
        shapes[task.vec.tobytes()] = (vec, count + 1)
    for vec, count in shapes.values():
        # Of this shape at least, when every member of the others is placed.
        least = fewest - (len(ordered) - count)
        # Counted up to that many a node: enough to compare, and no sum overflows.
        if least > 0 and vec.any() and np.minimum(slots(free, vec), least).sum() < least:
            return True
    # Per resource, the least any `fewest` members ask together.
    need = np.sort(np.array([t.vec for t in ordered]), axis=0)[:fewest].sum(axis=0)
    asked = np.flatnonzero(need)
    return bool((np.minimum(free[:, asked], need[asked]).sum(axis=0) < need[asked]).any())


def _fewest(session: Session, job: JobInfo, pending: int) -> int | None:
    """The fewest of `pending` members a try must place for the gang to be ready: one at
    least, and as many as the ready checks (the gang plugin's minMember, counting those
    bound) refuse fewer than; None when all of them would not do."""
    needed = max(job.min_member - job.bound, 1)
    if needed > 1 and not session.ready(job, needed - 1):
        return needed if needed <= pending else None
    return 1 if pending else None


def _places_all(session: Session, job: JobInfo, ordered: list[TaskInfo]) -> bool:
    """Whether the try across the whole cluster, the last one of a try across domains,
    would place every member and find the gang ready, known without choosing nodes:
    where the filters bound how many of the members each node takes whichever go first
    (Session.room_for) and the bounds add up to all of them, each member finds a node
    wherever the others went. The members are then counted in order on no node, asking
    the checks the try asks (their queue's, their gang's: they read what is counted,
    not where it went), and counted out; none refusing and the gang ready, the try
    would say yes. Only for a gang that needs every member: any try that finds it ready
    then asks the checks of all of them in this order, as counted here, so a check
    that keeps what it refused (proportion's share) keeps what the try would."""
    count = len(ordered)
    if any(task.error for task in ordered) or _fewest(session, job, count) != count:
        return False
    room = session.room_for(ordered)
    if room is None or np.minimum(room, count).sum() < count:
        return False
    counted: list[TaskInfo] = []
    try:
        for task in ordered:
            if session.not_allocatable(job, task) is not None:
                return False
            session.count(job, task, 1)
            counted.append(task)
        return session.ready(job, count)
    finally:
        for task in reversed(counted):
            session.count(job, task, -1)


def _put(kept: dict[str, V], key: str, value: V | None) -> None:
    """Set `key` to `value`, or remove it when None."""
    if value is None:
        kept.pop(key, None)
    else:
        kept[key] = value


def _place_in_domains(
    session: Session, job: JobInfo, ordered: list[TaskInfo], plan: Plan, tried: Tier | None = None
) -> bool:
    """The job in each of its candidate domains in turn, until one holds it; while its
    soft asks are tried spanning domains (TopologyPlanner.spanning), only whether one
    would (its tries undone, no reasons worked out). `tried`: a tier of the gang's own
    ask whose domains its try just made (from this state, its parts none) found no room
    in or failed in, as in those of the tiers below: passed over."""
    ask = plan.ask
    spanning = session.topology.spanning
    # Kept for explain: the wait of this attempt's gang or of one of its parts.
    session.topology.waits.pop(job.key, None)
    outer: Iterable[Domain | None] = [None]
    # The one domain tried when none has room for the gang: its try is reported.
    alone: Domain | None = None
    awaited: Tier | None = None
    # Whether the gang's own ask found a domain with room for it (else it waits too).
    roomy = False
    if ask is not None:
        domains, error = session.topology.domains(ask, ordered, job.hosts, None, above=tried)
        if error:
            session.job_reasons[job.key] = _invalid(job, error)
            return False
        # A soft ask within its wait is tried as a hard ask of the tier it waits for.
        awaited = session.topology.awaited(job, ask, ordered)
        domains = of_tier(domains, awaited)
        head = _held_for(session, ask, ordered, job.hosts, None)
        if head is not None and (awaited is None or head.tier.number == awaited.number):
            # Its room was held or made in a domain (a recorded placement, a
            # preemption): that one first, so that it does not take another's.
            domains = (d for d in domains if (d.tier.name, d.index) != (head.tier.name, head.index))
        else:
            head = next(domains, None)
        waits = ask.required or awaited is not None
        if head is None and waits:
            # None has room: the one closest to it is tried, to say what it holds.
            head = alone = session.topology.closest(ask, ordered, job.hosts, None, awaited)
        roomy = head is not None and head is not alone
        outer = chain([head] if head else [], domains, [] if waits else [None])
    best: tuple[int, str | None] | None = None
    first = Reason(Code.UNSCHEDULABLE, SESSION, "no domain of its tiers holds a node for it")
    # The try `first` comes from: the last to raise `best` with a member left out.
    reported: Domain | None = None
    # Members refused wherever they go (their queue, their own error): once too few are
    # left to reach the minimum, no other domain is tried.
    refused: set[str] = set()
    # Once a try placed no one: where some member could go. A try in a domain with none
    # of those nodes would place no one either, and do what that try did (tries start
    # from the same state and take the members in one order), so it is passed over.
    # Not for parts (tried in domains of their own, found afresh in each domain), nor
    # for members with a node held, which they take whatever its score.
    nobody = False
    reach: BoolArray | None = None
    by_scores = not plan.parts and all(preferred_node(t) is None for t in ordered)
    for domain in outer:
        if domain is not None and len(ordered) - len(refused) < job.min_member - job.bound:
            continue
        if nobody and domain is not None:
            if reach is None:
                reach = _reach(session, ordered)
            if not reach[domain.nodes].any():
                continue
        statement = Statement(session, job)
        # Only these tries are sure to be the ones reported.
        explained = not spanning and (domain is None or domain is alone)
        failures = _place_plan(session, job, ordered, plan, statement, domain, refused, explained)
        placed = len(statement.placed)
        if spanning and (domain is None or (placed and session.ready(job, placed))):
            statement.discard()
            return bool(placed) and session.ready(job, placed)
        if domain is None:
            wanted = _wanted(session, ask, best, job, awaited, roomy)
            return _conclude(session, job, statement, failures, wanted)
        ready = bool(placed) and session.ready(job, placed)
        if ready and any(reason is UNEXPLAINED for reason in failures.values()):
            # Its left-out members' reasons are kept: the same try, explained. A plugin
            # learning from the tries (gpufragmentation without lookahead) may let it
            # place fewer: it then counts as a try that did not hold the gang.
            statement.discard()
            failures = _place_plan(session, job, ordered, plan, statement, domain, refused)
            placed = len(statement.placed)
            ready = bool(placed) and session.ready(job, placed)
        if ready:
            statement.commit()
            session.task_reasons.update(failures)
            return True
        if best is None or placed > best[0]:
            best = (placed, session.topology.named(domain))
            if failures:
                first, reported = next(iter(failures.values())), domain
        nobody = nobody or (by_scores and not placed)
        statement.discard()
    if spanning:
        return False
    if first is UNEXPLAINED and reported is not None:
        statement = Statement(session, job)
        failures = _place_plan(session, job, ordered, plan, statement, reported, refused)
        statement.discard()
        # A plugin learning from the tries (gpufragmentation without lookahead) may let
        # the same try place every member now: the first try's reason stands.
        first = next(iter(failures.values()), first)
    if awaited is not None and not plan.parts:
        # Waiting for a domain by its own choice: its softWait may start now, before its
        # wait is said (its reasons, from members' tries, say nothing of the clock).
        # Below the tier awaited no domain could hold it, and that tier's were tried.
        _starts_clock(session, job, ordered, plan, awaited)
    wanted = _wanted(session, ask, best, job, awaited, roomy)
    said = f"{wanted}; {first}" if wanted else str(first)
    session.job_reasons[job.key] = first.reworded(f"gang {job.key}: {said}")
    return False


def _reach(session: Session, members: list[TaskInfo]) -> BoolArray:
    """The nodes some member could be placed on now, by the filters asked once per
    shape (those asked afresh only rule out more)."""
    shapes = {t.pod.fit_key or t.pod.shape_key: t for t in members}
    reach: BoolArray = np.zeros(session.node_count, dtype=np.bool_)
    for task in shapes.values():
        reach |= session.scores(task) >= 0
    return reach


def _held_for(
    session: Session,
    ask: TopologyAsk,
    members: list[TaskInfo],
    hosts: list[str],
    within: BoolArray | None,
) -> Domain | None:
    """The domain holding the nodes held for the members (and `hosts`, those of their
    running ones), if they share one that has room for them."""
    nodes = session.snapshot.nodes
    held = [nodes[row].name for t in members if (row := preferred_node(t)) is not None]
    if not held:
        return None
    found, _ = session.topology.domains(ask, members, [*hosts, *held], within)
    return next(found, None)


def _held_first(
    session: Session,
    ask: TopologyAsk,
    members: list[TaskInfo],
    hosts: list[str],
    within: BoolArray | None,
    domains: Iterator[Domain],
) -> Iterator[Domain]:
    """`domains` with the one holding the members' held nodes first: its room was made
    or recorded for them, and another domain's may have been made for another job."""
    head = _held_for(session, ask, members, hosts, within)
    if head is None:
        return domains
    key = (head.tier.name, head.index)
    return chain([head], (d for d in domains if (d.tier.name, d.index) != key))


def _wanted(
    session: Session,
    ask: TopologyAsk | None,
    best: tuple[int, str | None] | None,
    job: JobInfo,
    awaited: Tier | None,
    roomy: bool,
) -> str | None:
    """What a waiting gang's topology ask needs (the tiers it may take a domain of), and
    the domain that came closest; kept for explain (TopologyPlanner.waits). None when
    the gang's ask found a domain with room and a part waits there within its softWait:
    the part's wait, kept, is what the gang waits for."""
    if ask is None:
        return None
    kept = session.topology.waits.get(job.key)
    if roomy and kept is not None:
        return None
    placed, closest = best if best is not None else (0, None)
    wait = DomainWait(
        ask=ask,
        tiers=session.topology.tier_names(ask) if awaited is None else awaited.name,
        closest=closest,
        holds=job.bound + placed,
        # A basic group (minimum 0) asks the domain for every member it has.
        needs=job.min_member or job.bound + len(job.pending),
        chosen=awaited is not None,
        soft_wait=session.topology.soft_wait,
        spans_in=None if awaited is None else _spans_in(session, job),
        anywhere=session.topology.spans_cluster(ask),
    )
    if ask.required or awaited is not None or kept is None:
        # A soft whole ask past its wait leaves a part's wait the one to explain.
        session.topology.waits[job.key] = wait
    return str(wait)


def _spans_in(session: Session, job: JobInfo) -> float | None:
    """The seconds left before the job's soft asks may span domains; None while its
    softWait has not started."""
    ends = session.topology.wait_ends(job)
    return None if ends is None else ends - session.snapshot.now


def _place_plan(
    session: Session,
    job: JobInfo,
    ordered: list[TaskInfo],
    plan: Plan,
    statement: Statement,
    domain: Domain | None,
    refused: set[str],
    explained: bool = True,
) -> dict[str, Reason]:
    """The plan's parts, each whole in a domain of its own inside `domain`, then the
    members in no part; the failures of the members left out, by task key (UNEXPLAINED
    for those no node took, unless `explained`)."""
    outer = None if domain is None else domain.nodes
    failures: dict[str, Reason] = {}
    in_parts: set[str] = set()
    for part in plan.parts:
        keys = {t.key for t in part.tasks}
        in_parts |= keys
        members = [t for t in ordered if t.key in keys]
        if len(members) < part.size:
            # Its other members do not exist yet (a job controller creates pods one by
            # one): placed now, the part could be split once they come.
            exist = len(members) + len(part.hosts)
            short = f"{part.label}: {exist} of its {part.size + len(part.hosts)} members exist"
            why = Reason(Code.UNSCHEDULABLE, SESSION, short)
            failures.update(dict.fromkeys((t.key for t in members), why))
            continue
        candidates: Iterable[Domain | None] = [None]
        awaited: Tier | None = None
        if part.ask is not None:
            found, error = session.topology.domains(part.ask, members, part.hosts, outer)
            if error:
                invalid = Reason(Code.INVALID, SESSION, error)
                failures.update(dict.fromkeys((t.key for t in members), invalid))
                continue
            found = _held_first(session, part.ask, members, part.hosts, outer, found)
            # A soft ask within its gang's wait is tried as a hard ask of that tier.
            awaited = session.topology.awaited(job, part.ask, members, outer)
            if awaited is not None:
                found = _awaited_domains(session, part, members, outer, found, awaited)
            candidates = chain(found, [] if part.ask.required or awaited is not None else [None])
        best: tuple[int, str | None] | None = None
        for inner in candidates:
            trial = Statement(session, job)
            within = outer if inner is None else inner.nodes
            failed = _place_tasks(
                session, job, members, trial, part.size, within, refused, explained
            )
            if len(trial.placed) >= part.size:
                statement.placed.extend(trial.placed)
                break
            if inner is not None and (best is None or len(trial.placed) > best[0]):
                best = (len(trial.placed), session.topology.named(inner))
            trial.discard()
            failures.update(failed)
        else:
            if awaited is None:
                why = Reason(
                    Code.UNSCHEDULABLE,
                    SESSION,
                    f"{part.label}: no domain of its ask holds its {part.size} members",
                )
                failures.update({t.key: why for t in members if t.key not in failures})
            else:
                _part_waits(session, job, part, members, awaited, best, failures)
    rest = [t for t in ordered if t.key not in in_parts]
    needed = job.min_member - job.bound - len(statement.placed)
    failures.update(_place_tasks(session, job, rest, statement, needed, outer, refused, explained))
    return failures


def _awaited_domains(
    session: Session,
    part: Part,
    members: list[TaskInfo],
    outer: BoolArray | None,
    found: Iterator[Domain],
    awaited: Tier,
) -> Iterator[Domain]:
    """The domains of the tier a part within its wait waits for, in `found`'s order;
    when none has room, the one closest to it, whose try says what it holds."""
    assert part.ask is not None
    found = of_tier(found, awaited)
    head = next(found, None)
    if head is None:
        head = session.topology.closest(part.ask, members, part.hosts, outer, awaited)
    return chain([head] if head else [], found)


def _part_waits(
    session: Session,
    job: JobInfo,
    part: Part,
    members: list[TaskInfo],
    awaited: Tier,
    best: tuple[int, str | None] | None,
    failures: dict[str, Reason],
) -> None:
    """Say of each of the part's members that it waits within its softWait for a domain
    of the tier awaited (and why the closest did not hold it), as a whole gang does."""
    assert part.ask is not None
    holds, closest = best if best is not None else (0, None)
    wait = DomainWait(
        ask=part.ask,
        tiers=awaited.name,
        closest=closest,
        holds=holds,
        needs=part.size,
        chosen=True,
        soft_wait=session.topology.soft_wait,
        spans_in=_spans_in(session, job),
        part=part.label,
    )
    session.topology.waits[job.key] = wait
    for task in members:
        reason = failures.get(task.key)
        if reason is None:
            failures[task.key] = Reason(Code.UNSCHEDULABLE, SESSION, str(wait))
        elif reason is not UNEXPLAINED:
            # UNEXPLAINED stays itself: the try is made again with reasons to report.
            failures[task.key] = reason.reworded(f"{wait}; {reason}")


def _place_tasks(
    session: Session,
    job: JobInfo,
    ordered: list[TaskInfo],
    statement: Statement,
    needed: int,
    within: BoolArray | None,
    refused: set[str],
    explained: bool = True,
) -> dict[str, Reason]:
    """Each task on its best node (within `within`, when given), until too few are left
    to place `needed`; why each task left unplaced was (UNEXPLAINED where no node took
    it, unless `explained`), and in `refused` those refused whatever the nodes. A shape
    that failed once is not tried again: within one attempt nodes only fill up, so it
    would fail again."""
    failed: dict[object, Reason] = {}
    anywhere: set[object] = set()
    task_failures: dict[str, Reason] = {}
    start = len(statement.placed)
    outer, session.within = session.within, within
    try:
        for index, task in enumerate(ordered):
            # Filters asked afresh (pod affinity, spread) also read a pod's namespace and
            # labels, which its shape leaves out: members alike in shape may differ there.
            fresh = any(f.concerns(task) for f in session.fresh_filters.callbacks)
            kind = _failure_key(task) if fresh else task.pod.shape_key
            reason = task.error or failed.get(kind)
            if reason is None:
                reason = session.not_allocatable(job, task)
                if reason is not None:
                    anywhere.add(kind)
            if task.error or kind in anywhere:
                refused.add(task.key)
            if reason is None:
                node = preferred_node(task)
                if node is None or not session.fits(task, node):
                    node = session.best_node(task)
                if node is not None:
                    statement.allocate(task, node)
                    continue
                reason = session.explain(task) if explained else UNEXPLAINED
                session.post_filter(task)
            failed[kind] = reason
            task_failures[task.key] = reason
            if len(statement.placed) - start + len(ordered) - index - 1 < needed:
                break
    finally:
        session.within = outer
    return task_failures


def _conclude(
    session: Session,
    job: JobInfo,
    statement: Statement,
    task_failures: dict[str, Reason],
    topology: str | None,
) -> bool:
    """Commit the statement if the gang is ready, else undo it and say why it waits."""
    placed = len(statement.placed)
    ready = session.ready(job, placed)
    if placed and ready:
        statement.commit()
        session.task_reasons.update(task_failures)
        return True
    # Asked before the placements are undone, which it counts. A gang already at its
    # minimum is short of nothing: its members beyond it wait for room alone.
    short = None
    if job.is_gang and not ready:
        short = session.shortfall(job, placed) or (
            f"room for {job.bound + placed} of {job.min_member}"
        )
    statement.discard()
    first = next(iter(task_failures.values()), NO_PENDING)
    if short:
        first = first.reworded(f"gang {job.key}: {short}; {first}")
    if topology:
        first = first.reworded(f"{first}; {topology}")
    session.job_reasons[job.key] = first
    return False


def _invalid(job: JobInfo, error: str) -> Reason:
    """Why a gang whose topology ask cannot be kept as written waits."""
    return Reason(Code.INVALID, SESSION, f"gang {job.key}: {error}")


def preferred_node(task: TaskInfo) -> int | None:
    """The node held for the task: by its gang's recorded placement, or else by the
    preemption that nominated it."""
    return task.reserved if task.reserved is not None else task.nominated


def _failure_key(task: TaskInfo) -> object:
    pod = task.pod
    return (pod.shape_key, pod.namespace, frozenset(pod.labels.items()))
