"""Placing one job by evicting running pods: what preempt and reclaim share.

The job is placed inside a Statement as allocate places it; a member no node has room
for gets room made on the node where that disturbs least, and one its queue's
capability refuses gets room made in its queue (preempt: lowest priority first), the
evictions tentative with the statement. If the job cannot reach minMember even so,
nothing is evicted; once it can, its other members take only the room there is. When
it can, its pods are nominated to their nodes rather than bound: the victims still hold
them until they terminate.

Victims follow kube-scheduler's preemption where it has a rule: a node is chosen by
the fewest PodDisruptionBudgets exceeded, then the lowest highest-priority victim, the
lowest sum of priorities, the fewest victims, the most recently created victims; on a
node, victims go lowest priority first and any the pod turns out not to need are
spared. Gangs add one rule: a running gang loses only members above its minMember, or
all of them, never enough to leave it running short.

Member by member is node by node: a gang evicted whole for one member frees room on
other nodes that the next members use. So the whole set is ranked (`_Plan.rank`), and
the first member's other choices that free room beyond their node are tried too, the
cheapest set kept; then every victim the job turns out not to need is given back
(`_Plan.prune`), so that no smaller set of the same victims would have done.

A gang asking for a topology domain (framework/topology.py) makes room inside one: the
candidate domains come in the order allocate tries them (lowest tier first, the
fullest first), counting as room what the victims allowed there would free; in each of
the first few the cheapest set is found as above with no node outside it chosen, and the
cheapest domain of the lowest tier where one is found wins. Its parts (sub-groups,
slices) each make room in a domain of their own inside it. A soft ask that no domain
holds makes room anywhere; within its softWait (docs/topology.md) only in the tier it
waits for, and room that could be made across domains starts its softWait.
"""

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np

from batchsched.api.topology import TopologyAsk
from batchsched.framework.session import Session, VictimCheck
from batchsched.framework.statement import Statement
from batchsched.framework.topology import CANDIDATE_DOMAINS, Domain, Part, Plan, of_tier
from batchsched.framework.victims import Victims, queue_mask
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.decisions import Eviction, EvictionAction
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import JobInfo, TaskInfo

# Nodes whose victims are worked out exactly for one pod, after a cheap ranking: as
# kube-scheduler's minCandidateNodesAbsolute, enough to find a good node without
# looking at every node of a large cluster.
CANDIDATE_NODES = 100
# Priorities are int32; shifted so that sums of them order as kube-scheduler's do.
_PRIORITY_OFFSET = 2**31
# Which victims an action may take from, for a job: its own queue or the others.
Scope = Callable[[JobInfo, Victims], BoolArray]
# Other first choices tried for a job, beside the one member-by-member placement takes.
ALTERNATIVES = 3
# A victim set's cost, least first: budgets exceeded, highest priority, pods, gangs
# evicted whole, sum of priorities, then the most recently created victim first.
Rank = tuple[int, int, int, int, int, float]


@dataclass(slots=True)
class _Choice:
    node: int
    groups: list[list[int]]
    rank: tuple[int, int, int, int, float]


@dataclass(slots=True)
class _Outcome:
    """A placement found: its victims' cost, the victims in the order they went (each
    group a pod or a gang evicted whole) and where the members went."""

    rank: Rank
    groups: list[list[int]]
    placed: list[tuple[TaskInfo, int]]


class _Plan:
    """Evictions made for one job, undone together unless committed."""

    def __init__(
        self,
        session: Session,
        job: JobInfo,
        *,
        action: EvictionAction,
        allowed: Callable[[], BoolArray],
        layout: Plan | None,
    ) -> None:
        self.session = session
        # What the job asks of the topology (None: nothing); its parts are each placed
        # in a domain of their own.
        self.layout = layout
        # The domain the job's room is made in, for its reason.
        self.domain: Domain | None = None
        self.victims = session.victims
        self.job = job
        self.action = action
        self.allowed = allowed
        self.statement = Statement(session, job)
        self.ordered = session.task_order(job.pending)
        self.needed = job.min_member - job.bound
        # Victim index -> the budget its eviction exceeds ("" when none).
        self.taken: dict[int, str] = {}
        # Victim index -> its gang, when evicted whole.
        self.whole: dict[int, str] = {}
        # What was taken, group by group, in order.
        self.groups: list[list[int]] = []
        # The choices the first member that needed room was offered (None: none yet),
        # and the one to take for it in this attempt.
        self.first: list[_Choice] | None = None
        self.forced: _Choice | None = None

    def attempt(self, forced: _Choice | None = None) -> bool:
        """Place the job's members, making room as needed (for the first member that
        needs it, with `forced` when given); whether it reached minMember."""
        session, job, statement = self.session, self.job, self.statement
        self.forced = forced
        if self.layout is not None and self.layout.parts:
            self._fill_parts(self.layout.parts, evicting=True)
        else:
            self._fill(self.ordered, self.needed, evicting=True)
        placed = len(statement.placed)
        return bool(placed and self.taken and session.ready(job, placed))

    def _fill(self, tasks: list[TaskInfo], needed: int, *, evicting: bool) -> None:
        """Place the tasks in order, making room when `evicting`, until too few are left
        to place `needed` of them."""
        session, job, statement = self.session, self.job, self.statement
        start = len(statement.placed)
        for index, task in enumerate(tasks):
            node = None
            # Once the job can start, its other members take only the room there is, as
            # Volcano's preempt stops once the job is pipelined (after its first member):
            # nothing is evicted for members beyond what the gang needs.
            placed = len(statement.placed)
            evicts = evicting and task.preempts and not (placed and session.ready(job, placed))
            if task.error is None and session.refused(job, task) is None:
                if evicts:
                    self.make_quota(task)
                if session.over_capacity(job, task) is None:
                    node = session.best_node(task)
                    if node is None and evicts:
                        node = self.make_room(task)
            if node is not None:
                statement.allocate(task, node)
            elif len(statement.placed) - start + len(tasks) - index - 1 < needed:
                break

    def _fill_parts(self, parts: list[Part], *, evicting: bool) -> None:
        """Each part whole in a domain of its own inside the one being tried (the first
        of its candidates where it fits, room made there when `evicting`), then the
        members in no part; a part that fits nowhere is left out, as allocate leaves it."""
        session, statement = self.session, self.statement
        outer = session.within
        in_parts: set[str] = set()
        try:
            for part in parts:
                keys = {t.key for t in part.tasks}
                in_parts |= keys
                members = [t for t in self.ordered if t.key in keys]
                mark = (len(statement.placed), len(self.groups))
                for inner in self._inner(part, members, outer, evicting=evicting):
                    session.within = inner
                    self._fill(members, part.size, evicting=evicting)
                    if len(statement.placed) - mark[0] >= part.size:
                        break
                    self._undo(mark)
        finally:
            session.within = outer
        rest = [t for t in self.ordered if t.key not in in_parts]
        self._fill(rest, self.needed - len(statement.placed), evicting=evicting)

    def _inner(
        self, part: Part, members: list[TaskInfo], outer: BoolArray | None, *, evicting: bool
    ) -> Iterable[BoolArray | None]:
        """Where a part is tried: the domains of its own ask inside `outer` (then `outer`
        itself for a soft ask), or `outer` for a part asking none."""
        if part.ask is None:
            return [outer]
        freeable = self.freeable() if evicting else None
        found, error = self.session.topology.domains(
            part.ask, members, part.hosts, outer, freeable=freeable
        )
        if error:
            return []
        # As allocate tries it: within its softWait, a hard ask of the tier it waits for.
        awaited = self.session.topology.awaited(self.job, part.ask, members, outer)
        found = of_tier(found, awaited)
        nodes = (domain.nodes for domain in islice(found, CANDIDATE_DOMAINS))
        return chain(nodes, [] if part.ask.required or awaited is not None else [outer])

    def _undo(self, mark: tuple[int, int]) -> None:
        """Take back the placements and victims after `mark` (counts of each)."""
        placed, groups = mark
        statement = self.statement
        for task, node in reversed(statement.placed[placed:]):
            self.session.deallocate(self.job, task, node)
        del statement.placed[placed:]
        self._release([i for group in self.groups[groups:] for i in group])

    def freeable(self) -> IntArray:
        """Per node, what evicting every victim the job may take would free."""
        victims = self.victims
        candidates = np.flatnonzero(self.allowed())
        freed = np.zeros_like(self.session.free)
        np.add.at(freed, victims.rows[candidates], victims.vecs[candidates])
        return freed

    def outcome(self) -> _Outcome:
        return _Outcome(
            rank=self.rank(),
            groups=[list(g) for g in self.groups],
            placed=list(self.statement.placed),
        )

    def rank(self) -> Rank:
        victims = self.victims
        taken = list(self.taken)
        priority = victims.priority[taken]
        return (
            sum(bool(budget) for budget in self.taken.values()),
            int(priority.max()),
            len(taken),
            len(set(self.whole.values())),
            int(priority.sum()),
            -float(victims.creation[taken].max()),
        )

    def alternatives(self, best: Rank) -> list[_Choice]:
        """The first member's other choices that free room beyond their own node (a gang
        evicted whole) and whose victims alone cost less than `best`: the sets that
        member-by-member placement passes over."""
        rows = self.victims.rows
        found = []
        for choice in self.first or []:
            spans = any(len(g) > 1 and bool((rows[g] != choice.node).any()) for g in choice.groups)
            if not spans or choice.groups == self.groups[: len(choice.groups)]:
                continue
            taken = [i for group in choice.groups for i in group]
            bound = (
                choice.rank[0],
                choice.rank[1],
                len(taken),
                sum(len(group) > 1 for group in choice.groups),
            )
            if bound < best[:4]:
                found.append(choice)
                if len(found) == ALTERNATIVES:
                    break
        return found

    def reset(self) -> None:
        self.statement.discard()
        self._release([i for group in self.groups for i in group])

    def replay(self, outcome: _Outcome) -> None:
        """Take the outcome's victims and placements again (from a reset plan)."""
        self._take(outcome.groups, check=False)
        for task, node in outcome.placed:
            self.statement.allocate(task, node)

    def prune(self) -> None:
        """Give back each group of victims (the costliest first) whose room the job
        does without, placed afresh as many as before, until none can be: no smaller
        set of these victims would do."""
        statement = self.statement
        count = len(statement.placed)
        tried: set[frozenset[int]] = set()
        units = self._units()
        while units:
            unit = units.pop(0)
            if frozenset(unit) in tried:
                continue
            tried.add(frozenset(unit))
            placed = list(statement.placed)
            statement.discard()
            saved = self._release(unit)
            if self._place_plainly(count):
                # What may be given back has changed (a gang now partly running).
                units = self._units()
                continue
            statement.discard()
            self._take(saved, check=False)
            for task, node in placed:
                statement.allocate(task, node)
        if self.victims.budgets:
            self.recount_budgets()

    def _units(self) -> list[list[int]]:
        """What may be given back alone, the costliest first: a pod whose gang keeps
        minMember with it back (or that is in none), and every taken member of a gang
        evicted whole."""
        victims = self.victims
        in_gang = (victims.gang_ids >= 0) & ~victims.taken
        untaken = np.bincount(victims.gang_ids[in_gang], minlength=len(victims.gang_min))
        by_gang: dict[int, list[int]] = {}
        units: list[list[int]] = []
        for index in self.taken:
            gang = int(victims.gang_ids[index])
            if gang < 0 or untaken[gang] + victims.pinned[gang] + 1 >= victims.gang_min[gang]:
                units.append([index])
            if gang >= 0 and not untaken[gang]:
                by_gang.setdefault(gang, []).append(index)
        units.extend(group for group in by_gang.values() if len(group) > 1)

        def cost(unit: list[int]) -> tuple[int, int, int, float]:
            return (
                -any(self.taken[i] for i in unit),
                -max(int(victims.priority[i]) for i in unit),
                -len(unit),
                min(float(victims.creation[i]) for i in unit),
            )

        return sorted(units, key=cost)

    def _place_plainly(self, count: int) -> bool:
        """Place `count` members without evicting; whether the job is then ready."""
        session, job, statement = self.session, self.job, self.statement
        if not self._room_for(count):
            return False
        if self.layout is not None and self.layout.parts:
            self._fill_parts(self.layout.parts, evicting=False)
            placed = len(statement.placed)
            return placed >= count and session.ready(job, placed)
        for index, task in enumerate(self.ordered):
            if len(statement.placed) == count:
                break
            if len(statement.placed) + len(self.ordered) - index < count:
                return False
            if task.error is None and session.not_allocatable(job, task) is None:
                node = session.best_node(task)
                if node is not None:
                    statement.allocate(task, node)
        placed = len(statement.placed)
        return placed == count and session.ready(job, placed)

    def _room_for(self, count: int) -> bool:
        """Whether the free room could hold `count` members, counting resources alone:
        no placement can do better, and most often it cannot, found at once."""
        session = self.session
        free = session.free if session.within is None else session.free[session.within]
        shapes = Counter(t.pod.shape_key for t in self.ordered)
        fits = 0
        for task in {t.pod.shape_key: t for t in self.ordered}.values():
            wanted = task.vec > 0
            if not wanted.any():
                return True
            slots = (free[:, wanted] // task.vec[wanted]).min(axis=1).clip(min=0).sum()
            fits += min(shapes[task.pod.shape_key], int(slots))
        return fits >= count

    def recount_budgets(self) -> None:
        """Say again which victims exceed a budget, now that some were given back."""
        order = list(self.taken)
        for index in order:
            self.victims.mark(index, taken=False)
        for index in order:
            self.taken[index] = self.victims.exceeded(index)
            self.victims.mark(index, taken=True)

    def allowed_for(self, task: TaskInfo) -> BoolArray:
        """The victims the task may take: a BestEffort pod takes only BestEffort pods,
        as Volcano's preempt has it."""
        mask = self.allowed()
        if task.best_effort:
            mask &= self.victims.best_effort
        return mask

    def make_quota(self, task: TaskInfo) -> None:
        """Evict pods of the job's queue, lowest priority first, until its capability
        takes the task; evicting nothing when that cannot be done."""
        session, victims, job = self.session, self.victims, self.job
        if session.over_capacity(job, task) is None:
            return
        candidates = np.flatnonzero(self.allowed_for(task) & queue_mask(victims, job.queue))
        if not candidates.size:
            return
        costs = victims.costs()
        order = candidates[
            np.lexsort(
                (
                    -victims.creation[candidates],
                    victims.own_priority[candidates],
                    costs[candidates],
                    victims.priority[candidates],
                    victims.exceeding()[candidates],
                )
            )
        ]
        groups: list[list[int]] = []
        chosen: set[int] = set()
        for index in order.tolist():
            group = None if index in chosen else victims.whole(index, chosen)
            if group is None:
                continue
            if self._take([group]) is None:
                continue
            groups.append(group)
            chosen.update(group)
            if session.over_capacity(job, task) is None:
                break
        else:
            self._release(list(chosen))
            return
        # Spare what turned out not to be needed, most costly first, unless that would
        # leave a gang short.
        for group in reversed(groups[:-1]):
            saved = self._release(group)
            if session.over_capacity(job, task) is not None or victims.leaves_short(set(), group):
                self._take(saved, check=False)

    def make_room(self, task: TaskInfo) -> int | None:
        """Evict what gives the task a node, and return that node; None, evicting
        nothing, when no eviction of the victims allowed (asked afresh, as evictions
        change what queues hold) would do."""
        session, victims = self.session, self.victims
        candidates = np.flatnonzero(self.allowed_for(task))
        if not candidates.size:
            return None
        rows = victims.rows[candidates]
        freeable = np.zeros_like(session.free)
        np.add.at(freeable, rows, victims.vecs[candidates])
        wanted = task.vec > 0
        room = (session.free[:, wanted] + freeable[:, wanted] >= task.vec[wanted]).all(axis=1)
        room &= session.allowed(task.pod.constraints) & freeable.any(axis=1)
        if session.within is not None:
            room &= session.within
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
        # lowest priority of the pod's own, most recently created.
        order = np.lexsort(
            (
                -victims.creation[candidates],
                victims.own_priority[candidates],
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
        choices.sort(key=lambda c: (c.rank, c.node))
        if self.first is None:
            self.first = choices
        if self.forced is not None:
            choices.insert(0, self.forced)
            self.forced = None
        for choice in choices:
            if self._take(choice.groups) is None:
                continue
            if session.fits(task, choice.node):
                return choice.node
            self._release([i for group in choice.groups for i in group])
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
            group = None if index in chosen else victims.whole(index, chosen)
            if group is None:
                continue
            groups.append(group)
            chosen.update(group)
            free += self._on_node(group, node)[:, wanted].sum(axis=0)
            if (free >= need).all():
                break
        else:
            return None
        # Spare what turned out not to be needed, most costly first, unless the gang of
        # a later group went whole counting on it.
        for group in reversed(groups[:-1]):
            kept = free - self._on_node(group, node)[:, wanted].sum(axis=0)
            if (kept >= need).all() and not victims.leaves_short(chosen - set(group), group):
                groups.remove(group)
                chosen -= set(group)
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

    def _take(self, groups: list[list[int]], *, check: bool = True) -> list[list[int]] | None:
        """Evict the groups one pod at a time, each still allowed once the ones before
        are gone (a queue may lend one pod's worth above its guarantee, not four); None,
        having given back what it took, when one is not (`check`: when asked)."""
        victims = self.victims
        taken: list[int] = []
        for group in groups:
            whole = len(group) > 1
            for index in group:
                if check and taken and not self.allowed()[index]:
                    self._release(taken)
                    return None
                self.taken[index] = victims.exceeded(index)
                job = victims.jobs[index]
                if whole and job is not None:
                    self.whole[index] = job.key
                self.session.evict(index)
                taken.append(index)
            self.groups.append(list(group))
        return groups

    def _release(self, indices: list[int]) -> list[list[int]]:
        """Put the victims back; the groups they were taken in, to take them again."""
        gone = set(indices)
        saved = [[i for i in group if i in gone] for group in self.groups]
        saved = [group for group in saved if group]
        self.groups = [kept for g in self.groups if (kept := [i for i in g if i not in gone])]
        for index in reversed(indices):
            self.session.restore(index)
            del self.taken[index]
            self.whole.pop(index, None)
        return saved

    def commit(self) -> None:
        session, victims, job = self.session, self.victims, self.job
        placed = self.statement.placed
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
        named = None if self.domain is None else session.topology.named(self.domain)
        inside = "" if named is None else f" in {named}"
        session.job_reasons[job.key] = Reason(
            Code.PREEMPTING,
            SESSION,
            f"{self.action}: evicting {len(self.taken)} pod(s) to make room on node(s) "
            f"{', '.join(landing)}{inside}; waiting for them to terminate",
        )
        self.statement.nominate()
        session.awaiting_victims.add(job.key)


def place_by_evicting(
    session: Session,
    job: JobInfo,
    *,
    action: EvictionAction,
    checks: Iterable[VictimCheck],
    scope: Scope,
    failed: set[object],
) -> bool:
    """Place the job whole, evicting what `scope` and every one of `checks` allow.

    True when it was placed (its pods nominated); nothing changes otherwise. `failed`
    holds, for the action's session, the kinds of job that could not be placed: within
    it victims only go and nodes only fill, so a job like one that failed fails too
    (a backlog of thousands of equal pods is looked at once).
    """
    layout = session.topology.plan(job, job.pending)
    if layout is not None and layout.error is not None:
        # The ask cannot be kept as written: allocate said so, and no eviction helps.
        return False
    # A starving gang's own held room is its to take: held against it, the room would be
    # made elsewhere at the cost of more victims. Holding room, it is like no other job.
    held = session.unreserve(job.key)
    kind = None if held is not None else _kind(session, job, layout)
    placed = kind not in failed and _place(
        session, job, layout, action=action, checks=checks, scope=scope
    )
    if not placed:
        if held is not None:
            session.reserve(job.key, *held)
        elif kind is not None:
            failed.add(kind)
    return placed


def _place(
    session: Session,
    job: JobInfo,
    layout: Plan | None,
    *,
    action: EvictionAction,
    checks: Iterable[VictimCheck],
    scope: Scope,
) -> bool:
    """place_by_evicting's search for one job; whether it was placed."""
    victims = session.victims

    def allowed() -> BoolArray:
        mask = victims.evictable & ~victims.taken & ~victims.stuck() & scope(job, victims)
        for check in checks:
            mask &= check(job, victims)
        return mask

    if not allowed().any():
        # Nothing it may evict: allocate already placed it if it could be placed.
        return False
    plan = _Plan(session, job, action=action, allowed=allowed, layout=layout)
    ask = None if layout is None else layout.ask
    found = _search(plan) if ask is None else _in_domains(plan, ask)
    if found:
        plan.commit()
    elif _could_span(plan, ask):
        # Room made across domains would start it: its softWait starts now, as when
        # allocate finds free room across domains for it.
        session.topology.start_clock(job)
    return found


def _could_span(plan: _Plan, ask: TopologyAsk | None) -> bool:
    """Whether a job that waits for a domain by choice (a soft ask of its gang or of a
    part within its softWait), its softWait not started, could be placed by evicting
    with its soft asks spanning domains, as it will be once its softWait is over; the
    room found is given back."""
    topology, job = plan.session.topology, plan.job
    if not topology.waits_by_choice(job) or topology.span_since(job) is not None:
        return False
    topology.spanning = True
    try:
        found = _search(plan) if ask is None else _in_domains(plan, ask)
    finally:
        topology.spanning = False
    if found:
        plan.reset()
    return found


def _search(plan: _Plan) -> bool:
    """The cheapest victim set found for the job where the session lets it go (the
    member-by-member one and the alternatives for its first member), pruned; the plan
    holds it. Whether one was found (nothing is taken otherwise)."""
    plan.first = None
    if not plan.attempt():
        plan.reset()
        return False
    best = plan.outcome()
    for choice in plan.alternatives(best.rank):
        plan.reset()
        if plan.attempt(forced=choice) and plan.rank() < best.rank:
            best = plan.outcome()
            continue
        plan.reset()
        plan.replay(best)
    plan.prune()
    return True


def _in_domains(plan: _Plan, ask: TopologyAsk) -> bool:
    """The cheapest victim set inside one domain of the ask: over the first
    CANDIDATE_DOMAINS candidates, the cheapest of the lowest tier where one is found
    (ties to the one allocate would try first; then anywhere, for a soft ask); the plan
    holds it. Within a tier, the domains whose victims could be cheapest are searched
    first, and one that cannot beat the best found is not searched at all."""
    session, job = plan.session, plan.job
    freeable = plan.freeable()
    found, error = session.topology.domains(ask, plan.ordered, job.hosts, None, freeable=freeable)
    if error:
        return False
    # Room made outside the tier a soft ask waits for would not be taken until its
    # softWait ends.
    awaited = session.topology.awaited(job, ask, plan.ordered)
    found = of_tier(found, awaited)
    candidates = list(islice(found, CANDIDATE_DOMAINS))
    floors = [_priority_floor(plan, domain) for domain in candidates]
    order = sorted(range(len(candidates)), key=lambda i: (candidates[i].tier.number, floors[i], i))
    best: tuple[Rank, int, _Outcome] | None = None
    for index in order:
        domain = candidates[index]
        if best is not None:
            chosen = candidates[best[1]]
            if domain.tier.number > chosen.tier.number or best[0][:2] < (0, floors[index]):
                continue
        session.within = domain.nodes
        try:
            if not _search(plan):
                continue
        finally:
            session.within = None
        outcome = plan.outcome()
        plan.reset()
        if best is None or (outcome.rank, index) < best[:2]:
            best = (outcome.rank, index, outcome)
    if best is None:
        # A soft ask within its softWait makes no room across domains (`_could_span`
        # learns whether it could).
        return not ask.required and awaited is None and _search(plan)
    _, index, outcome = best
    plan.domain = candidates[index]
    plan.replay(outcome)
    if plan.victims.budgets:
        plan.recount_budgets()
    return True


def _priority_floor(plan: _Plan, domain: Domain) -> int:
    """No victim set inside the domain has a highest priority below this: the victims
    it allows, lowest priority first, must at least free what the members the gang
    needs (the smallest of them) ask beyond the domain's free room."""
    session, victims = plan.session, plan.victims
    nodes = domain.nodes
    inside = np.flatnonzero(plan.allowed() & nodes[victims.rows])
    if not inside.size:
        return np.iinfo(np.int64).max
    needed = max(plan.needed, 1)
    asks = np.sort(np.array([t.vec for t in plan.ordered]), axis=0)[:needed].sum(axis=0)
    short = np.maximum(asks - session.free[nodes].sum(axis=0), 0)
    inside = inside[np.argsort(victims.priority[inside], kind="stable")]
    freed = np.cumsum(victims.vecs[inside], axis=0)
    covering = np.flatnonzero((freed >= short).all(axis=1))
    # Not even all of them: a lower bound still, as the search will find no set.
    last = int(covering[0]) if covering.size else len(inside) - 1
    return int(victims.priority[inside[last]])


def _kind(session: Session, job: JobInfo, layout: Plan | None) -> object:
    """What decides whether and where a job can be placed by evicting: its queue,
    priority, members still needed and their shapes, and its topology ask, the nodes
    its running members hold and the tier it waits for within its softWait (as
    `_in_domains` asks it) and whether that softWait started; None for a job whose
    members are placed by their labels and namespace too (pod affinity, spread,
    sub-groups), never alike."""
    pending = job.pending
    if any(t.pod.fit_key is not None for t in pending):
        return None
    if layout is not None and layout.parts:
        return None
    # A member that may not be placed at all (say its PriorityClass is missing) makes
    # its job fail where one whose members all may be placed need not.
    shapes = frozenset(
        Counter((t.pod.shape_key, t.preempts, t.error is None) for t in pending).items()
    )
    ask: object = None
    if layout is not None and layout.ask is not None:
        awaited = session.topology.awaited(job, layout.ask, pending)
        tier = None if awaited is None else awaited.number
        # A soft ask whose softWait has not started starts it where one that has would not.
        started = session.topology.span_since(job) is not None
        ask = (layout.ask, tuple(sorted(job.hosts)), tier, started)
    return (job.queue, job.priority, job.min_member - job.bound, shapes, ask)
