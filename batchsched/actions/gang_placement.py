"""Placing one job inside a Statement: all of its gang, or nothing."""

from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo

# Why a job none of whose members was tried is not placed.
NO_PENDING = Reason(Code.UNSCHEDULABLE, SESSION, "no pending pods")


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
    to the node its preemption freed. A shape that failed once
    is not tried again for this job: within one attempt nodes only fill up, so it would
    fail again.
    """
    statement = Statement(session, job)
    needed = job.min_member - job.bound
    failed: dict[object, Reason] = {}
    task_failures: dict[str, Reason] = {}
    ordered = session.task_order(tasks)
    if job.resumes or job.nominated:
        # Members with a node held go first, so the others cannot take their room.
        ordered = sorted(ordered, key=lambda t: preferred_node(t) is None)
    for index, task in enumerate(ordered):
        # Filters asked afresh (pod affinity, spread) also read a pod's namespace and
        # labels, which its shape leaves out: members alike in shape may differ there.
        fresh = any(f.concerns(task) for f in session.fresh_filters.callbacks)
        kind = _failure_key(task) if fresh else task.pod.shape_key
        reason = task.error or failed.get(kind)
        if reason is None:
            reason = session.not_allocatable(job, task)
        if reason is None:
            node = preferred_node(task)
            if node is None or not session.fits(task, node):
                node = session.best_node(task)
            if node is not None:
                statement.allocate(task, node)
                continue
            reason = session.explain(task)
        failed[kind] = reason
        task_failures[task.key] = reason
        if len(statement.placed) + len(ordered) - index - 1 < needed:
            break
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
    session.job_reasons[job.key] = first
    return False


def preferred_node(task: TaskInfo) -> int | None:
    """The node held for the task: by its gang's recorded placement, or else by the
    preemption that nominated it."""
    return task.reserved if task.reserved is not None else task.nominated


def _failure_key(task: TaskInfo) -> object:
    pod = task.pod
    return (pod.shape_key, pod.namespace, frozenset(pod.labels.items()))
