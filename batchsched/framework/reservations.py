"""Room held on specific nodes for gangs that have waited too long.

A starving gang that would fit once some nodes drain gets those nodes' room held for
it: every other pod, of any queue, may use such a node only while what is left there
still covers what the gang was promised. Jobs that fit elsewhere, or beside the held
room, keep running; what frees up on the held nodes accumulates until the gang fits.

A pod may also run inside the held room if it is sure to end before that room would be
ready anyway (backfill): its `activeDeadlineSeconds` bounds how long it runs, and the
room is ready once the pods that must leave have run out their own deadlines. As in
Slurm's backfill the deadlines stand for when pods end, so what shares the room never
delays the time the gang was promised; on a node where a pod that must leave has no
deadline, that time is unknown, and nothing shares the room.

Preempt and reclaim give a gang's held room back while they make room for that gang
(`release`, held again if it cannot be placed): the room is its own, and held against
it, more victims would go elsewhere.

The filter joins the session at its first reservation, so sessions without a starving
gang pay nothing for it.
"""

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from batchsched.framework.plugin import Explained, slots, widest
from batchsched.model.arrays import BoolArray, FloatArray, IntArray, request_row
from batchsched.model.snapshot import Snapshot, TaskInfo


class Reservations:
    name = "Reservations"

    def __init__(self, snapshot: Snapshot, free: IntArray) -> None:
        """`free` is the session's free room per node, which placements keep current."""
        self.snapshot = snapshot
        self.free = free
        self.held: IntArray = np.zeros_like(free)
        # Per node row, when its held room is sure to be free: the latest a pod sharing
        # it may end (as Slurm's backfill, by the deadlines pods state).
        self.ready_at: FloatArray = np.full(len(free), math.inf)
        # Node row -> the gangs holding room there, for pending reasons.
        self.holders: dict[int, dict[str, None]] = {}
        # Gang -> the rows and requests it holds, one per member, to give them back.
        self.held_by: dict[str, tuple[list[int], list[IntArray]]] = {}

    def hold(self, job: str, rows: list[int], vecs: list[IntArray]) -> None:
        for row, vec in zip(rows, vecs, strict=True):
            self.held[row] += vec
            self.holders.setdefault(row, {})[job] = None
        self.held_by[job] = (rows, vecs)
        self._settle_times(set(rows))

    def release(self, job: str) -> tuple[list[int], list[IntArray]] | None:
        """Give back the room held for `job`; what it held (None: nothing), to hold again."""
        holding = self.held_by.pop(job, None)
        if holding is None:
            return None
        rows, vecs = holding
        for row, vec in zip(rows, vecs, strict=True):
            self.held[row] -= vec
        still: set[int] = set()
        for row in set(rows):
            gangs = self.holders[row]
            del gangs[job]
            if gangs:
                still.add(row)
            else:
                del self.holders[row]
                self.ready_at[row] = math.inf
        self._settle_times(still)
        return holding

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        wanted = task.vec > 0
        left = self.free[np.ix_(nodes, wanted)] - task.vec[wanted]
        beside = (left >= self.held[np.ix_(nodes, wanted)]).all(axis=1)
        deadline = task.pod.deadline_seconds
        if deadline is None:
            return np.asarray(beside, dtype=np.bool_)
        ends_first = self.snapshot.now + deadline <= self.ready_at[nodes]
        return np.asarray(beside | ends_first, dtype=np.bool_)

    def room_for(self, tasks: Sequence[TaskInfo]) -> IntArray | None:
        """Room beside what is held, for the most each resource is asked by one of them
        (a pod that ends before the held room is ready may go further: not counted)."""
        return slots(self.free - self.held, widest(tasks))

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        fits = self.filter(task, nodes)
        reasons: Counter[str] = Counter()
        for row in nodes[~fits].tolist():
            gangs = ", ".join(self.holders.get(row, ()))
            reasons[f"node(s) had room held for starving gang(s) {gangs}"] += 1
        return reasons, nodes[fits]

    def refusing(self, task: TaskInfo, nodes: IntArray) -> list[str]:
        """The gangs whose held room keeps `task` off some of `nodes`."""
        refused = nodes[~self.filter(task, nodes)].tolist()
        return sorted({gang for row in refused for gang in self.holders.get(row, ())})

    def _settle_times(self, rows: set[int]) -> None:
        """When the held room of each of `rows` is sure to be free: once enough of the
        pods there have reached their deadlines, soonest first."""
        snapshot = self.snapshot
        column = snapshot.column
        ends: dict[int, list[tuple[float, IntArray]]] = {row: [] for row in rows}
        for row, pod in snapshot.placed:
            if row not in ends:
                continue
            vec = request_row(pod.request, column)
            deadline = pod.deadline_seconds
            start = pod.started if pod.started is not None else pod.creation
            ends[row].append((math.inf if deadline is None else start + deadline, vec))
        for row, pods in ends.items():
            held = self.held[row]
            short = np.where(held > 0, held - self.free[row], 0)
            ready = snapshot.now
            for end, vec in sorted(pods, key=lambda p: p[0]):
                if (short <= 0).all() or end == math.inf:
                    break
                short = short - vec
                ready = end
            # Not known: it may be ready at any moment, and nothing may delay it.
            self.ready_at[row] = ready if (short <= 0).all() else snapshot.now
