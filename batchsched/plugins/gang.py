"""gang: a group's pods start together or not at all, and its status says where it stands.

Readiness counts members already bound plus those placed in the current statement; the
allocate action commits a statement only when this says ready. A Volcano PodGroup's
`minTaskMember` holds each task role (the pods' `volcano.sh/task-spec`) to its own
minimum as well, unless minMember is below their sum (Volcano then counts the total
alone); a gang with fewer pods of a role than its minimum waits. Members beyond the
minimum (minMember 0: every member) are elastic: the session holds each of them to its
queue's share (`Session.minimum_checks`).

A PodGroup's schedule timeout (scheduleTimeoutSeconds, maxScheduleTime) runs from the
PodGroup's creation, or from its oldest pending member's if that is later: pods deleted
and recreated, or a lost member replaced, start it afresh. Once it passes without the
group reaching minMember, the `scheduleTimeoutAction` argument says what follows: `Wait`
(the default) keeps trying and says the timeout passed; `Fail` marks the group Failed and
stops trying its pending pods, leaving bound members alone, until the timeout starts
afresh or the PodGroup is recreated.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.api.groups import OUR_API
from batchsched.api.nativegroups import NATIVE_API, awaiting_members
from batchsched.api.objects import GroupPhase
from batchsched.framework.session import Session
from batchsched.framework.topology import whole_ask
from batchsched.model.decisions import (
    SCHEDULED,
    UNSCHEDULABLE,
    Condition,
    Decisions,
    JobStatus,
    TopologyDomain,
)
from batchsched.model.reasons import Code
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.arguments import check_keys

TIMEOUT_ACTION = "scheduleTimeoutAction"
TIMEOUT_ACTIONS = ("Wait", "Fail")
TIMEOUT_REASON = "ScheduleTimeout"
# An admitted group none of whose pods exists yet (its controller creates them now).
AWAITING_PODS = "admitted: waiting for its pods to be created"


class Gang:
    name = "gang"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {TIMEOUT_ACTION})
        action = arguments.get(TIMEOUT_ACTION, "Wait")
        if action not in TIMEOUT_ACTIONS:
            raise InvalidObject(
                f"plugin {self.name}: {TIMEOUT_ACTION} must be one of "
                f"{', '.join(TIMEOUT_ACTIONS)}, got {action!r}"
            )
        self.fail_on_timeout = action == "Fail"

    def open(self, session: Session) -> None:
        self.session = session
        session.valid_checks.append(self._invalid)
        session.ready_checks.append(self._ready)
        session.minimum_checks.append(self._needed)
        session.shortfalls.append(self._short_role)
        # Members placed per (job, task role) in this session, for groups that state
        # minTaskMember; counted only when some job being placed has one.
        self.roles: Counter[tuple[str, str]] = Counter()
        if any(job.role_minimum for job in session.placing):
            session.on_count.append(self._count_role)
        session.closers.append(self._write_statuses)
        session.deadlines.append(self._times_out_at)

    def _ready(self, job: JobInfo, placed: int) -> bool:
        if job.bound + placed < job.min_member:
            return False
        return all(
            self._role_count(job, role) >= needed for role, needed in job.role_minimum.items()
        )

    def _short_role(self, job: JobInfo, placed: int) -> str | None:
        """The first task role short of its minimum, once the total is not."""
        if job.bound + placed < job.min_member:
            return None
        for role, needed in sorted(job.role_minimum.items()):
            count = self._role_count(job, role)
            if count < needed:
                return f"room for {count} of the {needed} pods of task {role!r} minTaskMember needs"
        return None

    def _needed(self, job: JobInfo, task: TaskInfo) -> bool:
        """Short of minMember, or of the minimum of the task's own role. Each member of
        a basic Kubernetes PodGroup is needed as a lone pod is: basic is pod by pod."""
        if job.group is not None and job.group.basic:
            return True
        if job.bound + self.session.allocations[job.key] < job.min_member:
            return True
        needed = job.role_minimum.get(task.pod.role)
        return needed is not None and self._role_count(job, task.pod.role) < needed

    def _role_count(self, job: JobInfo, role: str) -> int:
        return job.role_bound.get(role, 0) + self.roles[job.key, role]

    def _count_role(self, job: JobInfo, task: TaskInfo, step: int) -> None:
        if job.role_minimum:
            self.roles[job.key, task.pod.role] += step

    def _invalid(self, job: JobInfo) -> str | None:
        if job.error:
            return job.error
        if self.fail_on_timeout and (timeout := self._overdue(job)) is not None:
            return _failed(job, timeout)
        if native(job):
            missing = pods_missing(job)
            if missing:
                alive = job.min_member - missing
                return awaiting_members(job.key, alive=alive, needed=job.min_member)
        elif job.is_gang and not job.awaits_pods and job.total - job.failed < job.min_member:
            return (
                f"gang {job.key}: {job.total - job.failed} pods exist, "
                f"minMember is {job.min_member}"
            )
        for role, needed in job.role_minimum.items():
            alive = job.role_alive.get(role, 0)
            if job.total and alive < needed:
                return (
                    f"gang {job.key}: {alive} pods of task {role!r} exist, "
                    f"minTaskMember needs {needed}"
                )
        return None

    def _overdue(self, job: JobInfo) -> float | None:
        """The group's schedule timeout if it passed before the group reached minMember.
        A malformed group keeps its own reason, and a gang cut off mid-bind is finished
        first: failing it would leave part of it bound for nothing."""
        due = self._times_out_at(job)
        if due is None or self.session.snapshot.now <= due:
            return None
        return job.group.schedule_timeout_seconds if job.group else None

    def _times_out_at(self, job: JobInfo) -> float | None:
        """When the group's schedule timeout passes, if it applies (see _overdue)."""
        timeout = job.group.schedule_timeout_seconds if job.group else None
        if timeout is None or job.error or job.resumes:
            return None
        if job.bound + job.succeeded >= job.min_member:
            return None
        oldest = min((t.pod.creation for t in job.pending), default=job.creation)
        return max(job.creation, oldest) + timeout

    def _write_statuses(self) -> None:
        """For our PodGroups, and peers' ones whose pods name a scheduler served here:
        a peer's group whose pods are all another scheduler's is not ours to report on."""
        snapshot, decisions = self.session.snapshot, self.session.decisions
        changed = snapshot.changed_jobs
        landed: dict[str, list[str]] | None = None
        for job in snapshot.jobs.values():
            foreign = job.group is not None and job.group.api_version != OUR_API
            if not job.is_gang or (foreign and not job.served):
                continue
            # A large cluster's thousands of running groups would otherwise cost every
            # session, and the event loop, their statuses again.
            if changed is not None and job.key not in changed and not job.pending:
                phase = _phase(job, job.bound)
                if phase is not None:
                    decisions.running_unchanged[job.queue] += phase == "Running"
                    continue
            status = decisions.jobs[job.key] = self._status(job)
            if whole_ask(job) is not None:
                if landed is None:
                    landed = _landed(decisions)
                nodes = [*job.hosts, *landed.get(job.key, ())]
                status.domain = self.session.topology.placed_in(job, nodes)
                if status.domain is not None and status.condition is not None:
                    status.condition = _in_domain(status.condition, status.domain)

    def _status(self, job: JobInfo) -> JobStatus:
        session = self.session
        scheduled = job.bound + session.placed[job.key]
        overdue = None
        phase = _phase(job, scheduled)
        if phase is None:
            overdue = self._overdue(job)
            if overdue is not None and self.fail_on_timeout:
                phase = "Failed"
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
                SCHEDULED, SCHEDULED, f"{scheduled}/{job.min_member} members scheduled"
            )
        elif overdue is not None:
            status.condition = self._timed_out(job, overdue)
        elif phase in ("Pending", "Inqueue"):
            reason = "Invalid" if job.error else "NotEnoughResources"
            admitted = job.awaits_pods and phase == "Inqueue"
            waiting = AWAITING_PODS if admitted else "waiting to be scheduled"
            message = session.job_reasons.get(job.key, waiting)
            status.condition = Condition(UNSCHEDULABLE, reason, message)
        return status

    def _timed_out(self, job: JobInfo, timeout: float) -> Condition:
        """The group's condition once its timeout passed; its pending members (but gated
        ones, whose message marks them gated) are told the same."""
        pending = self.session.decisions.pending
        for task in job.pending:
            reason = pending.get(task.key)
            if reason is not None and reason.code is not Code.GATED:
                pending[task.key] = reason.reworded(self._after_timeout(job, timeout, reason))
        message = self.session.job_reasons.get(job.key, "waiting to be scheduled")
        return Condition(UNSCHEDULABLE, TIMEOUT_REASON, self._after_timeout(job, timeout, message))

    def _after_timeout(self, job: JobInfo, timeout: float, message: str) -> str:
        if self.fail_on_timeout:
            return _failed(job, timeout)
        return f"still short of minMember after {timeout:g}s: {message}"


def _landed(decisions: Decisions) -> dict[str, list[str]]:
    """Job key -> the nodes the session bound or nominated its members to."""
    found: dict[str, list[str]] = {}
    placed = [(b.job, b.node) for b in decisions.bindings]
    placed += [(n.job, n.node) for n in decisions.nominations]
    for job, node in placed:
        if node:
            found.setdefault(job, []).append(node)
    return found


def _in_domain(condition: Condition, domain: TopologyDomain) -> Condition:
    """A running gang's condition names the domain holding it."""
    if condition.type != SCHEDULED:
        return condition
    return replace(condition, message=f"{condition.message} in {domain.tier} {domain.name}")


def native(job: JobInfo) -> bool:
    """Whether the job is a PodGroup of Kubernetes' own API."""
    return job.group is not None and job.group.api_version == NATIVE_API


def pods_missing(job: JobInfo) -> int:
    """How many more pods a Kubernetes gang needs before it is tried at all, as
    kube-scheduler's GangScheduling counts them: the group's pods it sees, which leaves
    finished ones out (its informer does not list them)."""
    if not native(job):
        return 0
    return max(job.min_member - (job.total - job.failed - job.succeeded), 0)


def _phase(job: JobInfo, scheduled: int) -> GroupPhase | None:
    """Failed, Completed or Running, as `scheduled` members make it; None while it is
    short of minMember, when admission and time decide. A group of minMember 0 needs
    one member to be running or done: with none it has not started."""
    needed = max(job.min_member, 1)
    if job.failed and job.total - job.failed < job.min_member:
        return "Failed"
    if job.succeeded >= needed and scheduled == 0 and not job.pending:
        return "Completed"
    if scheduled + job.succeeded >= needed:
        return "Running"
    return None


def _failed(job: JobInfo, timeout: float) -> str:
    """Stable from one session to the next (no running clock), so it is written once."""
    return (
        f"gang {job.key}: did not reach minMember {job.min_member} within its schedule "
        f"timeout (waited over {timeout:g}s, {job.bound} bound); its pending pods are "
        "no longer tried"
    )
