"""allocate: queues by share, jobs by order, each job placed whole or not at all.

A job that does not fit is undone and the next one is tried, so a large gang never
blocks smaller jobs behind it. To keep it from starving, once it has waited longer
than the session's starvation threshold its queue stops handing resources to the jobs
behind it: what frees up in the cluster then accumulates until the gang fits.
"""

from collections import defaultdict

from batchsched.actions.gang_placement import eligible, place_job
from batchsched.cache.snapshot import JobInfo
from batchsched.framework.session import Session


def allocate(session: Session) -> None:
    by_queue: dict[str, list[JobInfo]] = defaultdict(list)
    for job in session.snapshot.jobs.values():
        if any(not t.best_effort for t in job.pending) and eligible(session, job):
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
    limit = session.starvation_seconds
    return limit is not None and session.snapshot.now - job.creation > limit


def _leave_waiting(session: Session, jobs: list[JobInfo], message: str) -> None:
    for job in jobs:
        session.job_messages.setdefault(job.key, message)
