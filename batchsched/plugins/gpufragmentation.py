"""gpufragmentation: place each task where it adds the least GPU fragmentation (FGD).

The FGD policy of Weng et al. (USENIX ATC 2023): of all feasible nodes (and, for a share
of a card, all cards) pick the one whose fragmentation, measured against the workload's
task-class mix, grows least. Fragmentation is measured by InstanceFragmentationModel
(plugins/fragmentation.py), which counts how many tasks of each class still fit by cards
and CPU together; on the openb traces that allocates more than the paper's own measure.

The mix is learnt from the pending pods the scheduler sees, each counted once when it
first appears, so it follows the workload in the operator and is the whole trace in a
replay. The plugin also picks the card a share goes to, so the binding's card is the one
that was scored.

Everything the score depends on comes from that mix, none of it fitted to a trace. A
class counts only on the nodes its constraints allow, so each GPU model is weighed by
the tasks that may use it. A placement's score falls with its excess: the GPU it
strands for the average task of the mix beyond what it takes itself. The excess is
measured in units of the smallest GPU request in the mix: less than one such unit is
stranded space no task of the mix could have used, so such placements score almost
alike; past a few units the placement is poor either way, and the scores, rounded to
integers, tie so that those nodes go to the session's first-fit order, which keeps
filling the same nodes rather than spreading pods.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GpuDemand
from batchsched.api.resources import CPU
from batchsched.cache.snapshot import IntArray, TaskInfo
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.fragmentation import (
    InstanceFragmentationModel,
    TaskClass,
    task_class,
)


class GpuFragmentation:
    name = "gpufragmentation"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 1), low=1, high=100)
        self.mix: Counter[TaskClass] = Counter()
        # Uids of the pending pods counted so far that were still pending last session.
        self._counted: set[str] = set()
        self._learning = True

    def assume(self, mix: Mapping[TaskClass, int]) -> None:
        """Score by `mix` from now on and learn nothing from the pods seen: how a policy
        tuned on one workload does on another (bench/replay.py's leave-one-out)."""
        self.mix = Counter(mix)
        self._learning = False

    def open(self, session: Session) -> None:
        self.session = session
        self._learn(session)
        self.model = InstanceFragmentationModel(self.mix, session.snapshot.nodes)
        self.unit = smallest_request(self.mix)
        cpu = session.snapshot.column[CPU]
        self.cpu_allocatable = session.snapshot.allocatable[:, cpu]
        self.cpu_column = cpu
        self._classes: dict[tuple[object, ...], TaskClass] = {}
        # Per node row, its card sums and weighted fragmentation, as of the first
        # `_seen` entries of Session.touched.
        self._sums = self.model.card_sums(session.gpu.free)
        self._base = self.model.weighted(
            session.all_nodes, self._sums, session.gpu.idle, self._cpu_free(session.all_nodes)
        )
        self._seen = len(session.touched)
        # Per shape (CPU and GPU demand, which alone decide a placement's effect): its
        # scores and chosen cards over all node rows, refreshed on the rows placements
        # touched since. Pods that differ in memory or constraints share them.
        self._shapes: dict[tuple[int, GpuDemand], _ShapeScores] = {}
        session.scorers.append((self, self.weight))
        session.gpu.chooser = self._choose

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        return self._scores(task).points[nodes]

    def _choose(self, task: TaskInfo, node: int) -> tuple[int, ...]:
        if not task.gpu.shared:
            return self.session.gpu.best_fit(task, node)
        return (int(self._scores(task).card[node]),)

    def _scores(self, task: TaskInfo) -> "_ShapeScores":
        touched = self.session.touched
        if self._seen < len(touched):
            changed = _rows(touched[self._seen :])
            self._sums[changed] = self.model.card_sums(self.session.gpu.free[changed])
            self._base[changed] = self.model.weighted(
                changed,
                self._sums[changed],
                self.session.gpu.idle[changed],
                self._cpu_free(changed),
            )
            self._seen = len(touched)
        found = self._class(task)
        key = (found.cpu, found.demand)
        scores = self._shapes.get(key)
        if scores is None:
            rows = self.session.all_nodes
            scores = self._shapes[key] = _ShapeScores(*self._evaluate(found, rows), len(touched))
        elif scores.seen < len(touched):
            rows = _rows(touched[scores.seen :])
            scores.points[rows], scores.card[rows] = self._evaluate(found, rows)
            scores.seen = len(touched)
        return scores

    def _evaluate(self, task: TaskClass, rows: IntArray) -> tuple[IntArray, IntArray]:
        free, sums, cpu_free = self.session.gpu.free[rows], self._sums[rows], self._cpu_free(rows)
        placement = self.model.placement(rows, free, sums, cpu_free, task, self._base[rows])
        return _points(placement.delta, self.model.total_weight, task, self.unit), placement.card

    def _cpu_free(self, rows: IntArray) -> IntArray:
        free: IntArray = self.cpu_allocatable[rows] - self.session.requested[rows, self.cpu_column]
        return free

    def _class(self, task: TaskInfo) -> TaskClass:
        found = self._classes.get(task.task.shape_key)
        if found is None:
            found = self._classes[task.task.shape_key] = task_class(task.task)
        return found

    def _learn(self, session: Session) -> None:
        if not self._learning:
            return
        pending = {
            task.task.uid: task.task
            for job in session.snapshot.jobs.values()
            for task in job.pending
        }
        for uid, task in pending.items():
            if uid not in self._counted:
                self.mix[task_class(task)] += 1
        self._counted = set(pending)


@dataclass(slots=True)
class _ShapeScores:
    points: IntArray
    card: IntArray  # the card a share goes to on each row; -1 otherwise
    seen: int  # how much of Session.touched `points` and `card` reflect


def _rows(touched: list[int]) -> IntArray:
    return np.array(touched if len(touched) == 1 else sorted(set(touched)), dtype=np.int64)


def smallest_request(mix: Mapping[TaskClass, int]) -> int:
    """The least GPU milli one task of the mix asks of a card (a whole card if none asks)."""
    asked = [c.demand.milli for c, count in mix.items() if count > 0 and c.demand.cards]
    return min(asked, default=CARD_MILLI)


def _points(delta: IntArray, total_weight: int, task: TaskClass, unit: int) -> IntArray:
    """0..100, more for less added fragmentation.

    A placement can lower fragmentation by at most the GPU it takes, so `excess` >= 0
    is how far it falls short of that ideal, in milli; the score halves at an excess of
    one `unit` (the mix's smallest request). Steps are under a milli wide near the ideal
    for the openb traces' unit of 50 and coarse far from it, so nodes that are about
    equally poor tie and go to the session's first-fit order.
    """
    if total_weight == 0:
        return np.zeros(len(delta), dtype=np.int64)
    excess = np.maximum(delta / total_weight + task.demand.total, 0.0)
    return np.rint(MAX_NODE_SCORE * unit / (unit + excess)).astype(np.int64)
