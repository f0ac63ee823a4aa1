"""Room a preemption freed, kept for the pods nominated to it while the victims go.

A nominated job that still does not fit keeps its nodes' room for this session, so
that nothing else slips into what its victims leave, as long as pods on those nodes
are still terminating. Once none is, the nomination is stale (the victims were
replaced, or the room was taken by another scheduler): it is cleared, and the job is
placed afresh, preempting again if it must.
"""

from batchsched.framework.session import Session
from batchsched.model.decisions import Nomination
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo


def keep_or_clear(session: Session, job: JobInfo, terminating: set[int]) -> bool:
    """Keep the job's nominated room (True) while `terminating` rows include one of
    its nodes; otherwise clear its nominations (False)."""
    nominated = [(t, t.nominated) for t in job.pending if t.nominated is not None]
    rows = {row for _, row in nominated}
    if rows & terminating:
        for task, row in nominated:
            session.allocate(job, task, row)
        session.awaiting_victims.add(job.key)
        session.pin(job.key, len(nominated))
        names = ", ".join(sorted(session.snapshot.nodes[row].name for row in rows))
        session.job_reasons[job.key] = Reason(
            Code.PREEMPTING,
            SESSION,
            f"nominated to node(s) {names}: waiting for the pods preempted there to terminate",
        )
        return True
    session.decisions.nominations.extend(
        Nomination(namespace=p.namespace, name=p.name, uid=p.uid, node="", job=job.key)
        for p in (t.pod for t in job.pending)
        if p.nominated_node is not None
    )
    return False


def terminating_rows(session: Session) -> set[int]:
    """Node rows holding a pod that is being deleted."""
    return {row for row, task in session.snapshot.placed if task.deleting}
