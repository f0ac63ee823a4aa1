"""Naming why a pod, group or queue waits, and a remedy, from one session's view.

Causes are tried from the most specific to the least: what is wrong with the objects
themselves (a missing PodGroup or queue), what the session decided for the job (bind,
preempt, hold room because it starves), its queue's limits, then the nodes: constraints
no node meets, then room. The scheduler's own pending message is kept alongside.
"""

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batchsched.api.nativegroups import NATIVE_API, native_origin
from batchsched.api.resources import ResourceList, format_amount
from batchsched.api.volumes import BIND_TIMEOUT_SECONDS, Claim, Volume
from batchsched.explain import remedies
from batchsched.explain.remedies import Finding, some
from batchsched.explain.scores import NodeScore, scores_of
from batchsched.explain.session import Ran, Refusal
from batchsched.explain.target import Target
from batchsched.framework.deviceclaims import Diagnosis
from batchsched.framework.reservations import Reservations
from batchsched.framework.statement import Statement
from batchsched.framework.topology import DomainWait
from batchsched.model.decisions import ClaimBinding
from batchsched.model.reasons import Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.gang import native, pods_missing
from batchsched.plugins.volumefilters import awaited


@dataclass(kw_only=True)
class GroupView:
    key: str
    gang: bool
    phase: str
    min_member: int
    bound: int
    pending: int
    # Members minMember counts on that do not exist yet.
    missing: int
    queue: str
    # For Kubernetes' own PodGroups, its policy and what made it (api/nativegroups.py).
    origin: str = ""


@dataclass(kw_only=True)
class QueueView:
    name: str
    weight: int
    deserved: ResourceList
    guarantee: ResourceList
    capability: ResourceList
    allocated: ResourceList
    jobs_pending: int
    jobs_running: int


@dataclass(kw_only=True)
class Explanation:
    target: Target
    found: bool
    summary: str
    cause: str
    remedy: str
    # The scheduler's own pending reason for the pod (or the group's first pod).
    reason: Reason | None = None
    group: GroupView | None = None
    queue: QueueView | None = None
    nodes: int = 0
    refusals: list[Refusal] = field(default_factory=list)
    # Filter -> a few of the nodes it refused.
    examples: dict[str, list[str]] = field(default_factory=dict)
    # A bound pod's node, and the score of it and the best others.
    node: str | None = None
    scores: list[NodeScore] = field(default_factory=list)
    # For a queue: its waiting jobs and why, a few.
    waiting: dict[str, str] = field(default_factory=dict)


def explain(ran: Ran, target: Target) -> Explanation:
    if target.kind == "queue":
        return _queue(ran, target)
    if target.kind == "pg":
        job = ran.snapshot.jobs.get(target.key)
        if job is None:
            return _missing(ran, target, f"PodGroup {target.key} does not exist")
        return _job(ran, target, job, None)
    return _pod(ran, target)


def _missing(ran: Ran, target: Target, cause: str) -> Explanation:
    where = "" if target.kind == "queue" else f" in namespace {target.namespace}"
    return Explanation(
        target=target,
        found=False,
        summary=f"{target}: not found{where}",
        cause=cause,
        remedy="check the name, and the namespace (-n)",
        nodes=len(ran.snapshot.nodes),
    )


def _pod(ran: Ran, target: Target) -> Explanation:
    key = target.key
    bound = next((pod for row, pod in ran.snapshot.placed if pod.key == key), None)
    if bound is not None:
        return _bound(ran, target, bound.node_name or "", bound.phase)
    for job in ran.snapshot.jobs.values():
        for info in job.pending:
            if info.key == key:
                return _job(ran, target, job, info)
    return _missing(ran, target, f"pod {key} does not exist, has finished or is not ours")


def _bound(ran: Ran, target: Target, node: str, phase: str) -> Explanation:
    found = scores_of(ran, target.key)
    # Bound is not running: the kubelet starts it (phase Running) once it has pulled
    # its images and mounted its volumes.
    if phase == "Running":
        summary = f"{target}: running on node {node}"
    else:
        summary = f"{target}: bound to node {node}, not running yet (phase {phase})"
    if not found:
        return Explanation(
            target=target,
            found=True,
            summary=summary,
            cause=f"bound to node {node}; its scores cannot be compared (no scorer configured)",
            remedy="nothing to do",
            node=node,
            nodes=len(ran.snapshot.nodes),
        )
    own = next((s for s in found if s.node == node), None)
    others = [s for s in found if s.node != node]
    mine = f"{node} scores {own.total}" if own is not None else f"{node} was not scored"
    best = f"the best other, {others[0].node}, {others[0].total}" if others else "none other fits"
    return Explanation(
        target=target,
        found=True,
        summary=summary,
        cause=f"placed where it scored best for its shape: {mine}, {best}",
        remedy="to steer it, set nodeSelector or affinity on the pod, or the scorers' "
        "weights in the scheduler configuration",
        node=node,
        scores=found,
        nodes=len(ran.snapshot.nodes),
    )


def _job(ran: Ran, target: Target, job: JobInfo, focus: TaskInfo | None) -> Explanation:
    decisions = ran.decisions
    status = decisions.jobs.get(job.key)
    phase = status.phase if status is not None else job.phase
    missing = max(job.min_member - job.bound - len(job.pending), 0)
    group = GroupView(
        key=job.key,
        gang=job.is_gang,
        phase=phase,
        min_member=job.min_member,
        bound=job.bound,
        pending=len(job.pending),
        missing=missing,
        queue=job.queue,
        origin=native_origin(job.group, ran.workloads) if job.group and native(job) else "",
    )
    if job.is_gang:
        # Each API's own word for the minimum.
        minimum = "minCount" if native(job) else "minMember"
        summary = (
            f"{target}: {phase}; gang {job.key} has {job.bound} of {minimum} "
            f"{job.min_member} bound, {len(job.pending)} pending, {missing} missing; "
            f"queue {job.queue}"
        )
    else:
        summary = f"{target}: {phase}; queue {job.queue}"
    task = focus or _first_refused(ran, job) or _hardest(ran, job)
    explanation = Explanation(
        target=target,
        found=True,
        summary=summary,
        cause="",
        remedy="",
        group=group,
        queue=_queue_view(ran, job.queue),
        nodes=len(ran.snapshot.nodes),
    )
    if task is not None:
        explanation.reason = decisions.pending.get(task.key)
        with _members_before(ran, job, task):
            refusals, examples, _ = ran.refusals(task)
        explanation.refusals, explanation.examples = refusals, examples
    explanation.cause, explanation.remedy = _cause(ran, job, task, explanation)
    return explanation


@contextlib.contextmanager
def _members_before(ran: Ran, job: JobInfo, task: TaskInfo) -> Iterator[None]:
    """The job's members tried before `task` placed as the session places them, while
    the refusals are counted: the session refused `task` beside them, and some filters
    (topology spread, pod affinity, room itself) refuse a node for what they take."""
    session = ran.session
    statement = Statement(session, job)
    try:
        for member in session.task_order(job.pending):
            if member.key == task.key:
                break
            node = None if session.not_allocatable(job, member) else session.best_node(member)
            if node is None:
                break
            statement.allocate(member, node)
        yield
    finally:
        statement.discard()


def _first_refused(ran: Ran, job: JobInfo) -> TaskInfo | None:
    """The first member, in the order the session tries them, that finds no node once
    those before it are placed: where the gang stops. None when all would fit."""
    session = ran.session
    statement = Statement(session, job)
    try:
        for member in session.task_order(job.pending):
            node = None if session.not_allocatable(job, member) else session.best_node(member)
            if node is None:
                return member
            statement.allocate(member, node)
        return None
    finally:
        statement.discard()


def _hardest(ran: Ran, job: JobInfo) -> TaskInfo | None:
    """The pending member whose shape fits the fewest nodes now: the one to explain."""
    shapes: dict[tuple[object, ...], TaskInfo] = {}
    for info in job.pending:
        shapes.setdefault((info.pod.shape_key, info.pod.constraints), info)
    if len(shapes) <= 1:
        return next(iter(shapes.values()), None)
    free = ran.session.free
    return min(
        shapes.values(),
        key=lambda t: int(
            (remedies.fits(free, t.vec) * ran.session.allowed(t.pod.constraints)).sum()
        ),
    )


def _cause(ran: Ran, job: JobInfo, task: TaskInfo | None, seen: Explanation) -> Finding:
    if job.error:
        return job.error, _fix_object(ran, job, job.error)
    missing = pods_missing(job)
    if missing:
        return (
            seen.reason or f"{missing} more pod(s) of {job.key} must exist",
            f"create {missing} more pod(s) naming PodGroup {job.key} in "
            "spec.schedulingGroup.podGroupName (a Job's controller creates them; a "
            "suspended Job none until it is resumed), or recreate the PodGroup with a "
            "lower minCount",
        )
    if task is None:
        return (
            f"no member is pending: {job.min_member - job.bound} more must be created",
            f"create the missing pods of {job.key}, or lower its minMember",
        )
    if task.error:
        return task.error, "fix the pod as the message says"
    session, decisions = ran.session, ran.decisions
    blocker = session.blocker(task)
    if blocker:
        return blocker, "fix the pod as the message says"
    keys = {t.key for t in job.pending}
    placed = sorted({b.node for b in decisions.bindings if b.key in keys})
    if placed:
        claims = [c for b in decisions.bindings if b.key in keys for c in b.claims]
        volumes = _volume_binding(ran, claims)
        if volumes is not None:
            return volumes
        return (
            f"nothing holds it back: the scheduler places it now, on node(s) {some(placed)}",
            "if it stays pending, check that batch-scheduler runs and serves its "
            f"schedulerName {task.pod.scheduler_name!r}",
        )
    nominated = sorted({n.node for n in decisions.nominations if n.key in keys and n.node})
    if nominated:
        return (
            f"preempting: room is being made for it on node(s) {some(nominated)}",
            "it binds once the evicted pods have terminated",
        )
    released = [d.key for d in decisions.deallocations if d.pod in keys]
    if released:
        return (
            f"claim(s) {some(released)} hold devices on nodes where the pod no longer fits, "
            "so no node takes it; deallocated now, as kube-scheduler's PostFilter does",
            "nothing to do: the next attempt allocates the claim again where the pod fits",
        )
    wanted = _wanted(job, task)
    queue = _queue_limit(ran, job, task, wanted)
    if queue is not None:
        return queue
    reason = seen.reason
    if reason is not None and reason.code is Code.AT_FAIR_SHARE:
        return (
            reason.message,
            f"it runs as queue {job.queue}'s usage falls to its deserved share; "
            f"raise Queue {job.queue}'s spec.weight for a larger share",
        )
    held = _held_for(ran, job.key)
    if held:
        names = [ran.snapshot.nodes[r].name for r in held]
        jobs = remedies.holders(ran, held, besides=job.key)
        verb = "finishes" if len(jobs) == 1 else "finish"
        waiting = f"once {some(jobs)} {verb} there" if jobs else "as soon as they drain"
        return (
            f"starving: it waited past starvationThreshold and room is held for it on "
            f"node(s) {some(names)}",
            f"it binds {waiting}; nothing without a deadline is placed in that room meanwhile",
        )
    found = remedies.constraints(ran, task) or _devices(ran, task)
    if found is not None:
        return found
    if seen.refusals and all(r.filter == Reservations.name for r in seen.refusals):
        gangs = _starving_gangs(ran, task)
        return (
            f"starving gang(s) {some(gangs)} hold the room it needs on "
            f"{sum(r.count for r in seen.refusals)} node(s)",
            f"it runs once {some(gangs)} bind(s); a pod with activeDeadlineSeconds "
            "ending before then may use the held room",
        )
    wait = session.topology.waits.get(job.key)
    # A hard ask that may span the cluster waits for room, as any gang does.
    if wait is not None and ((wait.ask.required and not wait.anywhere) or wait.chosen):
        return (reason or session.explain(task)).message, _domain_remedy(wait)
    found = remedies.room(ran, job, task, wanted)
    if found is not None:
        return _unreclaimable(ran, job, task) or found
    message = (reason or session.explain(task)).message
    return message, "see the refusals below: each names the filter and how many nodes"


def _domain_remedy(wait: DomainWait) -> str:
    """What lets a gang waiting for a domain in: room in the closest one, or a looser ask."""
    looser = f"or loosen {wait.ask.where} (a higher tier, or mode soft)"
    if wait.spans_in is not None:
        looser = f"or it spans domains in {wait.spans_in:.0f}s (topology.softWait)"
    elif wait.chosen:
        looser = (
            f"or it spans domains {wait.soft_wait:.0f}s after it first could (topology.softWait)"
        )
    if wait.closest is None:
        return f"no domain of {wait.tiers} has a node for it: add nodes to one, {looser}"
    more = wait.needs - wait.holds
    of = "" if wait.part is None else f" of {wait.part}"
    return (
        f"it runs once {wait.closest} has room for {more} more member(s){of} (as its pods "
        f"end, or nodes are added to it), {looser}"
    )


def _devices(ran: Ran, task: TaskInfo) -> Finding | None:
    """The request, selector or constraint of its resource claims no node meets."""
    claims = ran.session.device_claims
    if claims is None:
        return None
    return Diagnosis(claims, [node.name for node in ran.snapshot.nodes]).of(task)


def _volume_binding(ran: Ran, claims: list[ClaimBinding]) -> Finding | None:
    """A job placed on the node its claims were asked for already (a selected node, a
    volume given them): it waits for them to be bound; what each waits on, since when."""
    storage = ran.snapshot.storage
    asked = []
    for binding in claims:
        claim = storage.claims.get(binding.key)
        if claim is None:
            continue
        since = _asked(binding, claim, storage.volumes)
        if since is None:
            continue
        what = awaited(binding, claim, storage.classes)
        if since > 0:
            what += f" (asked {max(ran.snapshot.now - since, 0):.0f}s ago)"
        asked.append(what)
    if not asked:
        return None
    return (
        f"waiting for volume binding: {'; '.join(asked)}",
        "its pods are bound once every claim is; if one stays unbound, look at the claim "
        "(kubectl describe pvc) and its provisioner; after "
        f"{BIND_TIMEOUT_SECONDS:g}s the scheduler gives the placement up and decides again",
    )


def _asked(binding: ClaimBinding, claim: Claim, volumes: Mapping[str, Volume]) -> float | None:
    """When the claim's volume was asked for, as the objects say (0: at an unknown
    time); None when it was not asked for yet."""
    if binding.volume:
        volume = volumes.get(binding.volume)
        if volume is None or volume.claim is None or not volume.claim.names(claim):
            return None
        return volume.binding_since or 0.0
    if claim.selected_node != binding.node:
        return None
    return claim.binding_since or 0.0


def _unreclaimable(ran: Ran, job: JobInfo, task: TaskInfo) -> Finding | None:
    """Its queue is below its deserved share, so reclaim would take room back for it,
    but the queues holding the nodes it may use are `reclaimable: false`."""
    proportion: Any = ran.plugin("proportion")
    if "reclaim" not in ran.config.actions or proportion is None:
        return None
    deserved = ran.decisions.deserved.get(job.queue, {})
    allocated = proportion.allocated.get(job.queue)
    resources = ran.snapshot.resources
    below = [
        resources[c]
        for c in np.flatnonzero(task.vec)
        if allocated is not None and allocated[c] + task.vec[c] <= deserved.get(resources[c], 0)
    ]
    if not below:
        return None
    rows = np.flatnonzero(ran.session.allowed(task.pod.constraints))
    usable = {ran.snapshot.nodes[int(r)].name for r in rows}
    queues = ran.snapshot.queues
    kept = sorted(
        {
            other.queue
            for other in ran.snapshot.jobs.values()
            if other.queue != job.queue
            and other.queue in queues
            and not queues[other.queue].reclaimable
            and usable.intersection(other.hosts)
        }
    )
    if not kept:
        return None
    return (
        f"queue {job.queue} is below its deserved {below[0]}, but the nodes it may use are "
        f"held by queue(s) {some(kept)}, which are reclaimable: false, so reclaim takes "
        "nothing back from them",
        f"it runs once their jobs finish; or set spec.reclaimable: true on Queue {kept[0]}",
    )


def _wanted(job: JobInfo, task: TaskInfo) -> int:
    """Members of the task's shape that must be placed together for the job to run."""
    short = max(job.min_member - job.bound, 1)
    alike = sum(
        1
        for t in job.pending
        if t.pod.shape_key == task.pod.shape_key and t.pod.constraints == task.pod.constraints
    )
    return min(short, alike)


def _named_natively(job: JobInfo) -> bool:
    """Whether the job's pods name their group by spec.schedulingGroup."""
    return any(t.pod.group is not None and t.pod.group.native for t in job.pending)


def _fix_object(ran: Ran, job: JobInfo, error: Reason) -> str:
    if error.code is Code.NO_POD_GROUP and _named_natively(job):
        return (
            f"create PodGroup {job.key} of {NATIVE_API} (spec.schedulingPolicy: gang "
            "minCount or basic; a Job's controller creates it when the WorkloadWithJob "
            "gate is on), or remove spec.schedulingGroup from its pods"
        )
    if error.code is Code.NO_POD_GROUP:
        return (
            f"create PodGroup {job.key} (spec.minMember: the pods that must start "
            "together), or remove the group annotation or label from its pods"
        )
    if error.code is Code.NO_QUEUE:
        queues = ", ".join(sorted(ran.snapshot.queues))
        return f"create that Queue, or name an existing one ({queues})"
    if error.code is Code.NO_PRIORITY_CLASS:
        return "create the PriorityClass, or fix priorityClassName"
    return "fix the object as the message says"


def _queue_limit(ran: Ran, job: JobInfo, task: TaskInfo, wanted: int) -> Finding | None:
    """A queue (the job's or an ancestor) whose capability leaves no room for the
    members that must start together."""
    proportion: Any = ran.plugin("proportion")
    if proportion is None or job.queue not in proportion.lineage:
        return None
    resources = ran.snapshot.resources
    for name in proportion.lineage[job.queue]:
        capability = proportion.capability[name]
        allocated = proportion.allocated[name]
        need = task.vec * wanted
        over = np.flatnonzero((allocated + need > capability) & (task.vec > 0))
        if not len(over):
            continue
        column = int(over[0])
        resource = resources[column]
        used, cap = int(allocated[column]), int(capability[column])
        fmt = format_amount
        status = f"({fmt(resource, used)} of {fmt(resource, cap)} in use)"
        if allocated[column] + task.vec[column] > capability[column]:
            cause = f"queue {name} is at its capability for {resource} {status}"
        else:
            cause = f"queue {name}'s capability for {resource} is short of {wanted} members "
            cause += status
        least = fmt(resource, used + int(need[column]))
        return (
            cause,
            f"it runs once the queue's jobs free {resource}; or raise Queue {name}'s "
            f"spec.capability.{resource} to at least {least}",
        )
    return None


def _held_for(ran: Ran, key: str) -> list[int]:
    reservations = ran.session.reservations
    if reservations is None:
        return []
    return sorted(row for row, gangs in reservations.holders.items() if key in gangs)


def _starving_gangs(ran: Ran, task: TaskInfo | None) -> list[str]:
    """The gangs whose held room refuses `task` every node its other filters pass."""
    reservations = ran.session.reservations
    if reservations is None or task is None:
        return []
    return reservations.refusing(task, ran.session.all_nodes)


def _queue_view(ran: Ran, name: str) -> QueueView | None:
    queue = ran.snapshot.queues.get(name)
    if queue is None:
        return None
    resources = ran.snapshot.resources
    proportion: Any = ran.plugin("proportion")
    if proportion is not None and name in proportion.allocated:
        used = proportion.allocated[name]
    else:
        used = sum(
            (j.allocated for j in ran.snapshot.jobs.values() if j.queue == name and j.bound),
            np.zeros(len(resources), dtype=np.int64),
        )
    jobs = [j for j in ran.snapshot.jobs.values() if j.queue == name]
    return QueueView(
        name=name,
        weight=queue.weight,
        deserved=dict(ran.decisions.deserved.get(name, {})),
        guarantee=dict(queue.guarantee),
        capability=dict(queue.capability),
        allocated={resources[c]: int(used[c]) for c in np.flatnonzero(used)},
        jobs_pending=sum(1 for j in jobs if j.pending),
        jobs_running=sum(1 for j in jobs if j.bound),
    )


def _queue(ran: Ran, target: Target) -> Explanation:
    view = _queue_view(ran, target.name)
    if view is None:
        why = ran.snapshot.rejected_queues.get(target.name)
        if why is not None:
            return Explanation(
                target=target,
                found=True,
                summary=f"{target}: invalid",
                cause=f"queue {target.name} is invalid: {why}",
                remedy="fix the Queue as the message says",
                nodes=len(ran.snapshot.nodes),
            )
        return _missing(ran, target, f"queue {target.name} does not exist")
    waiting: dict[str, str] = {}
    for job in ran.session.job_order(ran.snapshot.jobs.values()):
        if job.queue == target.name and job.pending and len(waiting) < 10:
            reason = ran.decisions.pending.get(job.pending[0].key)
            if reason is not None:
                waiting[job.key] = reason
    summary = (
        f"{target}: weight {view.weight}, {view.jobs_running} job(s) running, "
        f"{view.jobs_pending} waiting"
    )
    cause, remedy = _queue_cause(ran, view, waiting)
    return Explanation(
        target=target,
        found=True,
        summary=summary,
        cause=cause,
        remedy=remedy,
        queue=view,
        waiting=waiting,
        nodes=len(ran.snapshot.nodes),
    )


def _queue_cause(ran: Ran, view: QueueView, waiting: dict[str, str]) -> Finding:
    fmt = format_amount
    for resource, cap in sorted(view.capability.items()):
        used = view.allocated.get(resource, 0)
        if used >= cap:
            return (
                f"queue {view.name} is at its capability for {resource} "
                f"({fmt(resource, used)} of {fmt(resource, cap)} in use)",
                f"its jobs wait until its running jobs free {resource}; or raise "
                f"spec.capability.{resource}",
            )
    if not waiting:
        return f"queue {view.name} has no waiting job", "nothing to do"
    first, reason = next(iter(waiting.items()))
    lone = first.startswith("pod:")
    namespace, _, name = first.removeprefix("pod:").partition("/")
    return (
        f"{len(waiting)} job(s) wait; the first, {first}: {reason}",
        f"explain it: batchsched explain {'pod' if lone else 'pg'}/{name} -n {namespace}",
    )
