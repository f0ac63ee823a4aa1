"""enqueue: admit a job (Pending -> Inqueue) once its minResources fit its queue and the cluster.

A PodGroup none of whose pods exists yet is admitted too, on its minResources alone,
as Volcano's enqueue admits it: Volcano's job controller creates the pods only then.
Admission reserves the job's minResources against the cluster's idle capacity, so jobs
admitted together cannot each count the same free resources; jobs without minResources
are admitted at once, and the allocate action's statements keep them safe. Plugins may
add headroom beyond what is idle (overcommit), so that jobs wait admitted, pods created,
for resources about to free up. A job past the waiting time a plugin gives it (Volcano's
sla) is admitted without idle room, within its queue's limits, so that allocate holds
room for it.
"""

import numpy as np

from batchsched.api.resources import format_amount
from batchsched.framework.session import Session
from batchsched.model.arrays import IntArray
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo


def enqueue(session: Session) -> None:
    session.enqueue_ran = True
    snapshot = session.snapshot
    # Per node first: a node whose pods overcommit it (bound by nodeName, or allocatable
    # shrunk under them) has nothing idle, and takes nothing from the others' room.
    idle: IntArray = np.maximum(snapshot.allocatable - session.requested, 0).sum(axis=0)
    for headroom in session.enqueue_headroom:
        idle += headroom
    room = "idle" if not session.enqueue_headroom else "idle with overcommit"
    waiting: list[JobInfo] = []
    for job in snapshot.jobs.values():
        if not job.pending and not job.awaits_pods:
            continue
        if job.phase in ("Inqueue", "Running") or job.bound or job.nominated:
            # Admitted earlier, or room was made for it by evicting others: its
            # minResources stay reserved, unless it may not be placed any more (a gang
            # failed at its schedule timeout).
            problem = session.invalid(job)
            if problem:
                session.job_reasons[job.key] = problem
                continue
            session.enqueued.add(job.key)
            idle -= np.maximum(min_resources(session, job) - job.allocated, 0)
        else:
            waiting.append(job)
    for job in session.job_order(waiting):
        problem = session.invalid(job) or session.not_enqueueable(job)
        if problem:
            session.job_reasons[job.key] = problem
            continue
        minimum = min_resources(session, job)
        short = np.flatnonzero(minimum > np.maximum(idle, 0))
        if len(short) and not session.overdue(job):
            name = snapshot.resources[int(short[0])]
            session.job_reasons[job.key] = Reason(
                Code.NOT_ADMITTED,
                SESSION,
                f"waiting for resources: minResources needs {name} "
                f"{format_amount(name, int(minimum[short[0]]))}, the cluster has "
                f"{format_amount(name, max(int(idle[short[0]]), 0))} {room}",
            )
            session.short_of_room.add(job.key)
            continue
        idle -= minimum
        session.enqueued.add(job.key)


def min_resources(session: Session, job: JobInfo) -> IntArray:
    """The job's minResources as a row over the snapshot's resources."""
    column = session.snapshot.column
    vector = np.zeros(len(column), dtype=np.int64)
    for name, value in job.min_resources.items():
        vector[column[name]] = value
    return vector
