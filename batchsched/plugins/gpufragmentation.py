"""gpufragmentation: place each task where it adds the least GPU fragmentation (FGD).

The FGD policy of Weng et al. (USENIX ATC 2023): of all feasible nodes (and, for a share
of a card, all cards) pick the one whose fragmentation, measured against the workload's
task-class mix, grows least. Fragmentation is measured by InstanceFragmentationModel
(plugins/fragmentation.py), which counts how many tasks of each class still fit by cards
and CPU together; on the openb traces that allocates more than the paper's own measure.
The plugin also picks the card a share goes to, so the binding's card is the one that
was scored.

The mix is what the plugin has seen of the workload: each pod counts once, when it is
first seen pending at a session's open (the queue ahead of the scheduler) or first tried.
A scheduler never has the whole workload in advance, so a prior mix (assume; e.g. other
clusters' workloads) may stand in while little has been seen. The two combine as a
Dirichlet prior with its multinomial observations do: the prior counts as `strength`
pods spread as its own mix, and each pod seen counts as one, so the observed mix takes
over as it accumulates and the prior only decides while fewer pods than that were seen.
The model is rebuilt each time the evidence (strength plus pods seen) has doubled, so the
mix in use never rests on less than half of what was seen, at a logarithmic count of
rebuilds.

Everything the score depends on comes from that mix, none of it fitted to a trace. A
class counts only on the nodes its constraints allow, so each GPU model is weighed by
the tasks that may use it. A placement's score falls with its excess: the GPU it
strands for the average task of the mix beyond what it takes itself. The excess is
measured in units of the smallest GPU request in the mix: less than one such unit is
stranded space no task of the mix could have used, so such placements score almost
alike; past a few units the placement is poor either way, and the scores, rounded to
integers, tie so that those nodes go to the session's first-fit order, which keeps
filling the same nodes rather than spreading pods.

Devices asked through DRA claims are not cards of this model: they are packed by binpack's
device term (plugins/binpack.py, DevicePacking) with this plugin's weight, so a request
goes where it fills the free devices best and a partition where a GPU is already split.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from math import gcd
from typing import Any

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GpuDemand
from batchsched.api.objects import Constraints
from batchsched.api.resources import CPU
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.binpack import pack_devices
from batchsched.plugins.fragmentation import (
    InstanceFragmentationModel,
    TaskClass,
    task_class,
)

# A shape's score and card on a node state not evaluated yet.
_UNKNOWN = -1


class GpuFragmentation:
    name = "gpufragmentation"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 1), low=1, high=100)
        self.prior: Counter[TaskClass] = Counter()
        self.strength = 0
        self.observed: Counter[TaskClass] = Counter()
        self._observed_pods = 0
        # Whether pods pending at a session's open count as seen: they have arrived in
        # a cluster, but a replay holds every pod it will ever place pending from the
        # start, so its evaluation turns this off and counts pods as they are tried.
        self.lookahead = True
        # Uids of the pods counted so far that were still pending at the last open.
        self._counted: set[str] = set()

    def assume(self, prior: Mapping[TaskClass, int], *, lookahead: bool = True) -> None:
        """Start from `prior` until pods are seen; without `lookahead`, count pods only
        as they are tried (bench/replay.py's leave-one-out: a mix from other workloads,
        and nothing of the replayed one before it arrives).

        The prior counts as one pod per class it has (`strength`): it says which classes
        exist and in what proportion, but no more than one sighting of each would.
        """
        self.prior = +Counter(prior)
        self.strength = len(self.prior)
        self.lookahead = lookahead

    @property
    def mix(self) -> Counter[TaskClass]:
        """The prior scaled to `strength` pods plus the pods seen, in integers (both
        sides multiplied by the prior's size, over their common divisor)."""
        size = self.prior.total()
        if size == 0:
            return +self.observed
        common = gcd(self.strength, size)
        mix = Counter({c: count * (self.strength // common) for c, count in self.prior.items()})
        for c, count in self.observed.items():
            mix[c] += count * (size // common)
        return +mix

    def open(self, session: Session) -> None:
        self.session = session
        self._classes: dict[tuple[object, ...], TaskClass] = {}
        # The nodes each constraint allows, for every model of this session's nodes.
        self._masks: dict[Constraints, BoolArray] = {}
        pending = {
            task.pod.uid: task for job in session.snapshot.jobs.values() for task in job.pending
        }
        self._counted &= pending.keys()
        if self.lookahead:
            for task in pending.values():
                self._count(task)
        cpu = session.snapshot.column[CPU]
        self.cpu_allocatable = session.snapshot.allocatable[:, cpu]
        self.cpu_column = cpu
        self._build()
        session.scorers.append((self, self.weight))
        session.allocate_checks.append(self._tried)
        # Without lookahead the mix grows with the pods tried, in the order tried.
        session.tries_observed = not self.lookahead
        session.gpu.chooser = self._choose
        pack_devices(session, self.name, self.weight)

    def _build(self) -> None:
        """The model of the mix as it is now, and everything kept per node state."""
        session = self.session
        self._evidence = self.strength + self._observed_pods
        mix = self.mix
        self.model = InstanceFragmentationModel(mix, session.snapshot.nodes, self._masks)
        self.unit = smallest_request(mix)
        # Per node row: its card sums, weighted fragmentation and state number, as of
        # the first `_seen` entries of Session.touched. A node's state (its classes'
        # weights there, free CPU and each card's free milli) alone decides what a
        # placement on it does, and a cluster revisits states, so scores are kept per
        # shape and state: pods that differ in memory or constraints share them.
        rows = session.all_nodes
        self._sums = self.model.card_sums(session.gpu.free)
        self._base = self.model.weighted(rows, self._sums, session.gpu.idle, self._cpu_free(rows))
        self._states: dict[bytes, int] = {}
        self._state = np.zeros(session.node_count, dtype=np.int64)
        self._number(rows)
        self._seen = len(session.touched)
        self._shapes: dict[tuple[int, GpuDemand], _ShapeScores] = {}

    def _tried(self, job: JobInfo, task: TaskInfo) -> str | None:
        """Count a pod tried for the first time; rebuild once the evidence has doubled.

        Every cached score predates the new mix, so every node row is marked touched:
        the session then asks for its scores afresh, as it does after a reservation.
        """
        if self._count(task) and self.strength + self._observed_pods >= max(2 * self._evidence, 1):
            self._build()
            self.session.touched.extend(self.session.all_nodes.tolist())
            self._seen = len(self.session.touched)
        return None

    def _count(self, task: TaskInfo) -> bool:
        uid = task.pod.uid
        if uid in self._counted:
            return False
        self._counted.add(uid)
        self.observed[self._class(task)] += 1
        self._observed_pods += 1
        return True

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        found = self._class(task)
        scores = self._scores(found)
        states = self._state[nodes]
        points = scores.points[states]
        unknown = points == _UNKNOWN
        if unknown.any():
            new, first = np.unique(states[unknown], return_index=True)
            scores.points[new], scores.card[new] = self._evaluate(found, nodes[unknown][first])
            points = scores.points[states]
        return points

    def _choose(self, task: TaskInfo, node: int) -> tuple[int, ...]:
        if not task.gpu.shared:
            return self.session.gpu.best_fit(task, node)
        rows = np.array([node], dtype=np.int64)
        self.score(task, rows)
        return (int(self._scores(self._class(task)).card[self._state[node]]),)

    def _scores(self, found: TaskClass) -> "_ShapeScores":
        """The shape's scores per state, with room for every state numbered so far."""
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
            self._number(changed)
            self._seen = len(touched)
        key = (found.cpu, found.demand)
        scores = self._shapes.get(key)
        if scores is None:
            scores = self._shapes[key] = _ShapeScores.empty(len(self._states))
        elif len(scores.points) < len(self._states):
            scores.grow(len(self._states))
        return scores

    def _number(self, rows: IntArray) -> None:
        """Give each row the number of its state, numbering states not met before."""
        group = self.model.group[rows]
        state = np.column_stack((group, self._cpu_free(rows), self.session.gpu.free[rows]))
        numbers = self._states
        for i, row in enumerate(rows.tolist()):
            self._state[row] = numbers.setdefault(state[i].tobytes(), len(numbers))

    def _evaluate(self, task: TaskClass, rows: IntArray) -> tuple[IntArray, IntArray]:
        free, sums, cpu_free = self.session.gpu.free[rows], self._sums[rows], self._cpu_free(rows)
        placement = self.model.placement(
            rows, free, sums, cpu_free, task, self._base[rows], distinct=True
        )
        return _points(placement.delta, self.model.total_weight, task, self.unit), placement.card

    def _cpu_free(self, rows: IntArray) -> IntArray:
        free: IntArray = self.cpu_allocatable[rows] - self.session.requested[rows, self.cpu_column]
        return free

    def _class(self, task: TaskInfo) -> TaskClass:
        found = self._classes.get(task.pod.shape_key)
        if found is None:
            found = self._classes[task.pod.shape_key] = task_class(task.pod)
        return found


@dataclass(slots=True)
class _ShapeScores:
    """Per node state: the shape's score, and the card a share goes to (-1 otherwise)."""

    points: IntArray
    card: IntArray

    @staticmethod
    def empty(states: int) -> "_ShapeScores":
        size = max(2 * states, 64)
        return _ShapeScores(
            np.full(size, _UNKNOWN, dtype=np.int64), np.full(size, _UNKNOWN, dtype=np.int64)
        )

    def grow(self, states: int) -> None:
        more = _ShapeScores.empty(states)
        more.points[: len(self.points)] = self.points
        more.card[: len(self.card)] = self.card
        self.points, self.card = more.points, more.card


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
