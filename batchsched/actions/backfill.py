"""backfill: place jobs whose pending pods request nothing (BestEffort).

They take no queue share, so they skip the allocate action's queue ordering; gang
rules still hold for them.
"""

from batchsched.actions.gang_placement import eligible, place_job
from batchsched.framework.session import Session


def backfill(session: Session) -> None:
    jobs = [job for job in session.placing if all(t.best_effort for t in job.pending)]
    for job in session.job_order(jobs):
        if eligible(session, job):
            place_job(session, job, job.pending)
