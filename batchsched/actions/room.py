"""Which jobs preempt and reclaim make room for."""

from batchsched.actions.enqueue import min_resources
from batchsched.framework.session import Session
from batchsched.model.snapshot import JobInfo


def wants_room(session: Session, job: JobInfo) -> bool:
    """Short of minMember after allocate, allowed to run, and with a member that may
    evict. A job enqueue held back only for want of idle resources counts: making room
    is what it waits for. A job of BestEffort pods (asking for nothing but a pod slot)
    evicts only BestEffort pods, as Volcano's preempt has it (evicting_placement.py)."""
    if (
        job.bound >= job.min_member
        or job.key in session.awaiting_victims
        or session.placed[job.key]
    ):
        return False
    if not any(t.preempts for t in job.pending):
        return False
    admitted = job.key in session.enqueued or (
        job.key in session.short_of_room and _could_fit(session, job)
    )
    if session.enqueue_ran and not admitted:
        return False
    return session.invalid(job) is None


def _could_fit(session: Session, job: JobInfo) -> bool:
    """Whether the job's minResources fit the cluster's capacity, every pod evicted."""
    total = session.snapshot.allocatable.sum(axis=0)
    return bool((min_resources(session, job) <= total).all())
