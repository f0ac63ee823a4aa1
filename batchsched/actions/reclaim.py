"""reclaim: a queue below its fair share takes back what queues above theirs borrowed.

The proportion plugin says which pods may be reclaimed (queues above their deserved
share, reclaimable, kept at their guarantee); queues are served furthest below their
share first, and each job is placed as preempt places it, whatever the victims'
priority.
"""

from collections import defaultdict

from batchsched.actions.evicting_placement import place_by_evicting
from batchsched.actions.room import wants_room
from batchsched.framework.session import Session
from batchsched.framework.victims import Victims, queue_mask
from batchsched.model.arrays import BoolArray
from batchsched.model.snapshot import JobInfo


def reclaim(session: Session) -> None:
    by_queue: dict[str, list[JobInfo]] = defaultdict(list)
    for job in session.placing:
        if wants_room(session, job):
            by_queue[job.queue].append(job)
    failed: set[object] = set()
    for queue in sorted(by_queue, key=session.queue_order_key):
        for job in session.job_order(by_queue[queue]):
            place_by_evicting(
                session,
                job,
                action="reclaim",
                checks=session.reclaimable,
                scope=_other_queues,
                failed=failed,
            )


def _other_queues(job: JobInfo, victims: Victims) -> BoolArray:
    return ~queue_mask(victims, job.queue)
