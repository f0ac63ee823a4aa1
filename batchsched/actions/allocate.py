"""allocate: queues by share, jobs by order, each job placed whole or not at all.

Jobs whose placement was recorded but not finished (a leader lost mid-bind) go first,
before any ordering: their room was promised to them, and a gang left partly bound
would hold its members' resources for nothing. Jobs nominated to the room a preemption
freed come next, for the same reason (nominations.py).

A job that does not fit is undone and the next one is tried, so a large gang never
blocks smaller jobs behind it. To keep it from starving, once it has waited longer
than the session's starvation threshold its queue stops handing resources to the jobs
behind it: what frees up in the cluster then accumulates until the gang fits. A gang
that could not fit even the empty cluster is never waited for.
"""

from collections import defaultdict

import numpy as np

from batchsched.actions.gang_placement import eligible, place_job
from batchsched.actions.nominations import hold_or_clear, terminating_rows
from batchsched.api.objects import Constraints
from batchsched.cache.snapshot import JobInfo
from batchsched.framework.session import Session


def allocate(session: Session) -> None:
    by_queue: dict[str, list[JobInfo]] = defaultdict(list)
    resumed: list[JobInfo] = []
    nominated: list[JobInfo] = []
    for job in session.snapshot.jobs.values():
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
        if not place_job(session, job, job.pending) and not hold_or_clear(
            session, job, terminating
        ):
            by_queue[job.queue].append(job)
    queues = {name: session.job_order(jobs) for name, jobs in by_queue.items()}
    cursor = dict.fromkeys(queues, 0)
    while queues:
        name = min(queues, key=session.queue_order_key) if len(queues) > 1 else next(iter(queues))
        jobs = queues[name]
        if session.overused(name):
            _leave_waiting(session, jobs[cursor[name] :], f"queue {name} is at its fair share")
            del queues[name]
            continue
        job = jobs[cursor[name]]
        cursor[name] += 1
        placed = place_job(session, job, job.pending)
        if not placed and _starving(session, job):
            _leave_waiting(
                session,
                jobs[cursor[name] :],
                f"queue {name} is holding resources for starving job {job.key}",
            )
            del queues[name]
        elif cursor[name] == len(jobs):
            del queues[name]


def _starving(session: Session, job: JobInfo) -> bool:
    """Short of minMember past the threshold, yet able to fit the cluster once it drains.

    A job already at minMember runs, so it is not starving; and holding resources for a
    gang that could not fit even an empty cluster would block its queue forever.
    """
    limit = session.starvation_seconds
    if limit is None or session.snapshot.now - job.creation <= limit:
        return False
    return job.bound < job.min_member and _fits_empty_cluster(session, job)


def _fits_empty_cluster(session: Session, job: JobInfo) -> bool:
    """Whether first-fit decreasing packs the members it still needs onto the empty
    cluster, each on nodes its selectors, affinity and tolerations allow. A packing found
    proves the gang fits once the cluster drains; when none is found (fragmentation, pods
    larger than any node), or when members state what an empty cluster cannot vouch for
    (pod affinity, spread, claims), the queue is not held for it: it might never fit,
    and would block the queue for ever."""
    pending = job.pending
    if any(f.concerns(t) for f in session.fresh_filters for t in pending):
        return False
    free = session.snapshot.allocatable.copy()
    needed = job.min_member - job.bound
    if len(pending) < needed:
        return False
    # Cheap refusal first: the smallest requests summed must fit the cluster's total.
    requests = np.array([t.vec for t in pending])
    if (np.sort(requests, axis=0)[:needed].sum(axis=0) > free.sum(axis=0)).any():
        return False
    largest = np.maximum(free.max(axis=0), 1)
    # Per request and constraints: the node it last went to. Nodes only fill up, so the
    # ones before it have no room for it, and a gang of identical pods is packed in one pass.
    cursor: dict[tuple[bytes, Constraints], int] = {}
    for task in sorted(pending, key=lambda t: -float((t.vec / largest).sum())):
        constraints = task.task.constraints
        key = (task.vec.tobytes(), constraints)
        start = cursor.get(key, 0)
        fits = (free[start:] >= task.vec).all(axis=1) & session.allowed(constraints)[start:]
        hits = np.flatnonzero(fits)
        if not hits.size:
            cursor[key] = len(free)
            continue
        row = cursor[key] = start + int(hits[0])
        free[row] -= task.vec
        needed -= 1
        if needed <= 0:
            return True
    return False


def _leave_waiting(session: Session, jobs: list[JobInfo], message: str) -> None:
    for job in jobs:
        session.job_messages.setdefault(job.key, message)
