"""Room held on specific nodes for gangs that have waited too long.

A starving gang that would fit once some nodes drain gets those nodes' room held for
it: every other pod, of any queue, may use such a node only while what is left there
still covers what the gang was promised. Jobs that fit elsewhere, or beside the held
room, keep running; what frees up on the held nodes accumulates until the gang fits.
The filter joins the session at its first reservation, so sessions without a starving
gang pay nothing for it.
"""

from collections import Counter

import numpy as np

from batchsched.cache.snapshot import IntArray, TaskInfo
from batchsched.framework.plugin import BoolArray, Explained


class Reservations:
    def __init__(self, free: IntArray) -> None:
        """`free` is the session's free room per node, which placements keep current."""
        self.free = free
        self.held: IntArray = np.zeros_like(free)
        # Node row -> the gangs holding room there, for pending reasons.
        self.holders: dict[int, dict[str, None]] = {}

    def hold(self, job: str, rows: list[int], vecs: list[IntArray]) -> None:
        for row, vec in zip(rows, vecs, strict=True):
            self.held[row] += vec
            self.holders.setdefault(row, {})[job] = None

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        wanted = task.vec > 0
        left = self.free[np.ix_(nodes, wanted)] - task.vec[wanted]
        return np.asarray((left >= self.held[np.ix_(nodes, wanted)]).all(axis=1), dtype=np.bool_)

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        fits = self.filter(task, nodes)
        reasons: Counter[str] = Counter()
        for row in nodes[~fits].tolist():
            gangs = ", ".join(self.holders.get(row, ()))
            reasons[f"node(s) had room held for starving gang(s) {gangs}"] += 1
        return reasons, nodes[fits]
