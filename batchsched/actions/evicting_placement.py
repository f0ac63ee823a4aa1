"""Placing one job by evicting running pods: what preempt and reclaim share.

The job is placed inside a Statement as allocate places it; a member no node has room
for gets room made on the node where that disturbs least, and the evictions are
tentative with the statement. If the job cannot reach minMember even so, nothing is
evicted. When it can, its pods are nominated to their nodes rather than bound: the
victims still hold them until they terminate.

Victims follow kube-scheduler's preemption where it has a rule: a node is chosen by
the fewest PodDisruptionBudgets exceeded, then the lowest highest-priority victim, the
lowest sum of priorities, the fewest victims, the most recently created victims; on a
node, victims go lowest priority first and any the pod turns out not to need are
spared. Gangs add one rule: a running gang loses only members above its minMember, or
all of them, never enough to leave it running short.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from batchsched.cache.snapshot import IntArray, JobInfo, TaskInfo
from batchsched.framework.decisions import Eviction
from batchsched.framework.plugin import BoolArray
from batchsched.framework.session import Session, VictimCheck
from batchsched.framework.statement import Statement
from batchsched.framework.victims import Victims

# Nodes whose victims are worked out exactly for one pod, after a cheap ranking: as
# kube-scheduler's minCandidateNodesAbsolute, enough to find a good node without
# looking at every node of a large cluster.
CANDIDATE_NODES = 100
# Priorities are int32; shifted so that sums of them order as kube-scheduler's do.
_PRIORITY_OFFSET = 2**31
# Which victims an action may take from, for a job: its own queue or the others.
Scope = Callable[[JobInfo, Victims], BoolArray]


@dataclass(slots=True)
class _Choice:
    node: int
    groups: list[list[int]]
    rank: tuple[int, int, int, int, float]


class _Plan:
    """Evictions made for one job, undone together unless committed."""

    def __init__(self, session: Session, job: JobInfo, *, action: str) -> None:
        self.session = session
        self.victims = session.victims
        self.job = job
        self.action = action
        # Victim index -> the budget its eviction exceeds ("" when none).
        self.taken: dict[int, str] = {}
        # Victim index -> its gang, when evicted whole.
        self.whole: dict[int, str] = {}

    def make_room(self, task: TaskInfo, allowed: Callable[[], BoolArray]) -> int | None:
        """Evict what gives the task a node, and return that node; None, evicting
        nothing, when no eviction of victims `allowed` (asked afresh, as evictions
        change what queues hold) would do."""
        session, victims = self.session, self.victims
        candidates = np.flatnonzero(allowed())
        if not candidates.size:
            return None
        rows = victims.rows[candidates]
        freeable = np.zeros_like(session.free)
        np.add.at(freeable, rows, victims.vecs[candidates])
        wanted = task.vec > 0
        room = (session.free[:, wanted] + freeable[:, wanted] >= task.vec[wanted]).all(axis=1)
        room &= session.allowed(task.task.constraints) & freeable.any(axis=1)
        nodes = np.flatnonzero(room)
        if not nodes.size:
            return None
        # Cheap ranking first: nodes whose allowed victims are all of low priority, then
        # those where one victim may go without taking its gang along.
        highest = np.full(len(session.free), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(highest, rows, victims.priority[candidates])
        costs = victims.costs()
        cheapest = np.full(len(session.free), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(cheapest, rows, costs[candidates])
        nodes = nodes[np.lexsort((nodes, cheapest[nodes], highest[nodes]))][:CANDIDATE_NODES]
        exceeding = victims.exceeding()
        # Candidates by node, and on each node in the order they would go: those
        # sparing every budget, lowest priority, alone rather than with their gang,
        # most recently created.
        order = np.lexsort(
            (
                -victims.creation[candidates],
                costs[candidates],
                victims.priority[candidates],
                exceeding[candidates],
                rows,
            )
        )
        by_row = rows[order]
        starts = np.searchsorted(by_row, nodes)
        ends = np.searchsorted(by_row, nodes, side="right")
        # Most often the first victim alone makes room: those choices are ranked at once.
        first = candidates[order[starts]]
        alone = (costs[first] == 1) & (
            session.free[nodes][:, wanted] + victims.vecs[first][:, wanted] >= task.vec[wanted]
        ).all(axis=1)
        choices = [
            _Choice(
                node=node,
                groups=[[index]],
                rank=(
                    int(exceeding[index]),
                    priority,
                    priority + _PRIORITY_OFFSET,
                    1,
                    -float(victims.creation[index]),
                ),
            )
            for node, index, priority in zip(
                nodes[alone].tolist(),
                first[alone].tolist(),
                victims.priority[first[alone]].tolist(),
                strict=True,
            )
        ]
        for node, low, high in zip(
            nodes[~alone].tolist(), starts[~alone].tolist(), ends[~alone].tolist(), strict=True
        ):
            choice = self._choose(task, node, candidates[order[low:high]].tolist())
            if choice is not None:
                choices.append(choice)
        for choice in sorted(choices, key=lambda c: (c.rank, c.node)):
            taken = self._take(choice.groups, allowed)
            if taken is not None and session.fits(task, choice.node):
                return choice.node
            self._give_back(taken or [])
        return None

    def _choose(self, task: TaskInfo, node: int, ordered: list[int]) -> _Choice | None:
        """The victims on `node` (`ordered` as they would go) that make room for the task
        at least cost, or None."""
        victims = self.victims
        wanted = task.vec > 0
        need = task.vec[wanted]
        free = self.session.free[node, wanted].copy()
        groups: list[list[int]] = []
        chosen: set[int] = set()
        for index in ordered:
            if index in chosen:
                continue
            group = self._group(index, chosen)
            groups.append(group)
            chosen.update(group)
            free += self._on_node(group, node)[:, wanted].sum(axis=0)
            if (free >= need).all():
                break
        else:
            return None
        # Spare what turned out not to be needed, most costly first.
        for group in reversed(groups[:-1]):
            kept = free - self._on_node(group, node)[:, wanted].sum(axis=0)
            if (kept >= need).all():
                groups.remove(group)
                free = kept
        taken = [i for group in groups for i in group]
        return _Choice(
            node=node,
            groups=groups,
            rank=(
                self._exceeding(taken),
                max(int(victims.priority[i]) for i in taken),
                sum(int(victims.priority[i]) + _PRIORITY_OFFSET for i in taken),
                len(taken),
                -max(float(victims.creation[i]) for i in taken),
            ),
        )

    def _group(self, index: int, chosen: set[int]) -> list[int]:
        """What evicting `index` takes: itself, or its whole gang when fewer than
        minMember would be left running."""
        victims = self.victims
        job = victims.jobs[index]
        if job is None or not job.is_gang:
            return [index]
        left = [m for m in victims.members[job.key] if not victims.taken[m] and m not in chosen]
        return [index] if len(left) - 1 >= job.min_member else left

    def _on_node(self, group: list[int], node: int) -> IntArray:
        victims = self.victims
        if len(group) == 1:
            return victims.vecs[group]
        rows = np.array([i for i in group if victims.rows[i] == node], dtype=np.int64)
        return victims.vecs[rows]

    def _exceeding(self, taken: list[int]) -> int:
        """How many of `taken` exceed a budget, counting each against the ones before."""
        victims = self.victims
        left = victims.budget_left.copy()
        count = 0
        for index in taken:
            budgets = victims.protected_by[index]
            count += any(left[b] <= 0 for b in budgets)
            for budget in budgets:
                left[budget] -= 1
        return count

    def _take(self, groups: list[list[int]], allowed: Callable[[], BoolArray]) -> list[int] | None:
        """Evict the groups one pod at a time, each still allowed once the ones before
        are gone (a queue may lend one pod's worth above its guarantee, not four); None,
        having given back what it took, when one is not."""
        taken: list[int] = []
        for group in groups:
            whole = len(group) > 1
            for index in group:
                if taken and not allowed()[index]:
                    self._give_back(taken)
                    return None
                self.taken[index] = self.victims.exceeded(index)
                job = self.victims.jobs[index]
                if whole and job is not None:
                    self.whole[index] = job.key
                self.session.evict(index)
                taken.append(index)
        return taken

    def _give_back(self, taken: list[int]) -> None:
        for index in reversed(taken):
            self.session.restore(index)
            del self.taken[index]
            self.whole.pop(index, None)

    def discard(self) -> None:
        self._give_back(list(self.taken))

    def commit(self, placed: list[tuple[TaskInfo, int]]) -> None:
        session, victims, job = self.session, self.victims, self.job
        nodes = session.snapshot.nodes
        kind = "gang" if job.is_gang else "pod"
        preemptor = job.key if job.is_gang else job.key.removeprefix("pod:")
        landing = sorted({nodes[node].name for _, node in placed})
        if self.action == "preempt":
            why = f"preempted by {kind} {preemptor} (priority {job.priority}, queue {job.queue})"
        else:
            why = f"reclaimed for queue {job.queue}, below its fair share, by {kind} {preemptor}"
        for index, budget in self.taken.items():
            task = victims.tasks[index]
            message = f"{why}, to make room on node(s) {', '.join(landing)}"
            gang = self.whole.get(index)
            if gang is not None:
                message += f"; gang {gang} is evicted whole, as it would run short of minMember"
            if budget:
                message += f"; exceeds PodDisruptionBudget {budget}, no other victim would do"
            session.decisions.evictions.append(
                Eviction(
                    namespace=task.namespace,
                    name=task.name,
                    uid=task.uid,
                    node=nodes[int(victims.rows[index])].name,
                    action=self.action,
                    preemptor=job.key,
                    message=message,
                    budget=budget,
                )
            )
        session.job_messages[job.key] = (
            f"{self.action}: evicting {len(self.taken)} pod(s) to make room on node(s) "
            f"{', '.join(landing)}; waiting for them to terminate"
        )


def place_by_evicting(
    session: Session,
    job: JobInfo,
    *,
    action: str,
    checks: list[VictimCheck],
    scope: Scope,
    failed: set[object],
) -> bool:
    """Place the job whole, evicting what `scope` and every one of `checks` allow.

    True when it was placed (its pods nominated); nothing changes otherwise. `failed`
    holds, for the action's session, the kinds of job that could not be placed: within
    it victims only go and nodes only fill, so a job like one that failed fails too
    (a backlog of thousands of equal pods is looked at once).
    """
    kind = _kind(job)
    if kind in failed:
        return False
    statement = Statement(session, job)
    plan = _Plan(session, job, action=action)
    victims = session.victims

    def allowed() -> BoolArray:
        mask = victims.evictable & ~victims.taken & scope(job, victims)
        for check in checks:
            mask &= check(job, victims)
        return mask

    if not allowed().any():
        # Nothing it may evict: allocate already placed it if it could be placed.
        if kind is not None:
            failed.add(kind)
        return False
    needed = job.min_member - job.bound
    ordered = session.task_order(job.pending)
    for index, task in enumerate(ordered):
        node = None
        if task.error is None and session.not_allocatable(job, task) is None:
            node = session.best_node(task)
            if node is None and task.preempts:
                node = plan.make_room(task, allowed)
        if node is not None:
            statement.allocate(task, node)
        elif len(statement.placed) + len(ordered) - index - 1 < needed:
            break
    placed = len(statement.placed)
    if placed and plan.taken and session.ready(job, placed):
        plan.commit(statement.placed)
        statement.nominate()
        session.held.add(job.key)
        return True
    statement.discard()
    plan.discard()
    if kind is not None:
        failed.add(kind)
    return False


def _kind(job: JobInfo) -> object:
    """What decides whether and where a job can be placed by evicting: its queue,
    priority, members still needed and their shapes; None for a job whose members are
    placed by their labels and namespace too (pod affinity, spread), never alike."""
    pending = job.pending
    if any(t.task.fit_key is not None for t in pending):
        return None
    shapes = frozenset(Counter((t.task.shape_key, t.preempts) for t in pending).items())
    return (job.queue, job.priority, job.min_member - job.bound, shapes)
