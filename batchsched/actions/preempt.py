"""preempt: within a queue, a job that allocate could not place evicts lower-priority work.

Which pods are lower priority is the priority plugin's to say; where they go and which
are spared is evicting_placement's. Only jobs short of minMember preempt (a running
gang's extra members do not), and pods whose preemptionPolicy is Never never do. A job
its queue's capability refuses evicts pods of that queue to fit in it; a BestEffort pod
evicts only BestEffort pods.
"""

from batchsched.actions.evicting_placement import place_by_evicting
from batchsched.actions.room import wants_room
from batchsched.framework.session import Session
from batchsched.framework.victims import Victims, queue_mask
from batchsched.model.arrays import BoolArray
from batchsched.model.snapshot import JobInfo


def preempt(session: Session) -> None:
    jobs = [job for job in session.placing if wants_room(session, job)]
    failed: set[object] = set()
    for job in session.job_order(jobs):
        place_by_evicting(
            session,
            job,
            action="preempt",
            checks=session.preemptable,
            scope=_same_queue,
            failed=failed,
        )


def _same_queue(job: JobInfo, victims: Victims) -> BoolArray:
    """Its queue's pods, and those of no queue: other schedulers' (when they may be
    evicted at all) share no queue with anyone, so priority alone decides for them."""
    return queue_mask(victims, job.queue) | queue_mask(victims, "")
