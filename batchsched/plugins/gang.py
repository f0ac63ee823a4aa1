"""gang: a group's pods start together or not at all, and its status says where it stands.

Readiness counts members already bound plus those placed in the current statement; the
allocate action commits a statement only when this says ready.
"""

from collections.abc import Mapping
from typing import Any

from batchsched.cache.snapshot import JobInfo
from batchsched.framework.decisions import Condition, JobStatus
from batchsched.framework.session import Session
from batchsched.plugins.arguments import check_keys


class Gang:
    name = "gang"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        self.session = session
        session.valid_checks.append(self._invalid)
        session.ready_checks.append(lambda job, placed: job.bound + placed >= job.min_member)
        session.closers.append(self._write_statuses)

    def _invalid(self, job: JobInfo) -> str | None:
        if job.error:
            return job.error
        if job.is_gang and job.total - job.failed < job.min_member:
            return (
                f"gang {job.key}: {job.total - job.failed} pods exist, "
                f"minMember is {job.min_member}"
            )
        return None

    def _write_statuses(self) -> None:
        for job in self.session.snapshot.jobs.values():
            if job.is_gang:
                self.session.decisions.jobs[job.key] = self._status(job)

    def _status(self, job: JobInfo) -> JobStatus:
        session = self.session
        scheduled = job.bound + session.placed[job.key]
        active = scheduled + job.succeeded
        if job.failed and job.total - job.failed < job.min_member:
            phase = "Failed"
        elif job.succeeded >= job.min_member and scheduled == 0 and not job.pending:
            phase = "Completed"
        elif active >= job.min_member:
            phase = "Running"
        elif job.key in session.enqueued or job.phase in ("Inqueue", "Running"):
            phase = "Inqueue"
        else:
            phase = "Pending"
        status = JobStatus(
            key=job.key,
            namespace=job.namespace,
            name=job.name,
            phase=phase,
            min_member=job.min_member,
            scheduled=scheduled,
            running=job.running,
            succeeded=job.succeeded,
            failed=job.failed,
        )
        if phase == "Running":
            status.condition = Condition(
                "Scheduled", "Scheduled", f"{scheduled}/{job.min_member} members scheduled"
            )
        elif phase in ("Pending", "Inqueue"):
            status.condition = self._unschedulable(job)
        return status

    def _unschedulable(self, job: JobInfo) -> Condition:
        message = self.session.job_messages.get(job.key, "waiting to be scheduled")
        reason = "Invalid" if job.error else "NotEnoughResources"
        timeout = job.group.schedule_timeout_seconds if job.group else None
        waited = self.session.snapshot.now - job.creation
        if timeout is not None and waited > timeout:
            reason = "ScheduleTimeout"
            message = f"still short of minMember after {timeout:g}s: {message}"
        return Condition("Unschedulable", reason, message)
