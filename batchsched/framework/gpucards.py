"""Per-card GPU accounting for one session (DESIGN section 8; api/gpu.py says how pods ask).

Node-level resource columns cannot tell a node with one free card from one with two half
free cards, so the session keeps the free milli of every card here and always filters
with it: no configuration can put more on a card than it has. Which card a pod gets is
the `chooser`'s decision, best fit unless a plugin (gpufragmentation) installs its own.
"""

from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GPU_MILLI, NO_GPU, GpuDemand, gpu_demand, node_cards
from batchsched.api.objects import Task
from batchsched.api.resources import GPU
from batchsched.cache.snapshot import IntArray, Snapshot, TaskInfo
from batchsched.framework.plugin import BoolArray

# (task, node row) -> the cards to take on that node for the task; they must fit.
CardChooser = Callable[[TaskInfo, int], tuple[int, ...]]


class GpuCards:
    def __init__(self, snapshot: Snapshot, requested: IntArray) -> None:
        """`requested` is the session's node usage, which only explain() reads."""
        self.allocatable = snapshot.allocatable
        self.requested = requested
        column = snapshot.column
        self.columns = np.array(
            [column[n] for n in (GPU, GPU_MILLI) if n in column], dtype=np.int64
        )
        counts = [node_cards(node.allocatable) for node in snapshot.nodes]
        width = max(counts, default=0)
        self.count: IntArray = np.array(counts, dtype=np.int64)
        # Free milli per node row and card; cards a node does not have are 0, never free.
        self.free: IntArray = np.where(
            np.arange(width) < self.count[:, None], CARD_MILLI, 0
        ).astype(np.int64)
        # Task key -> cards taken by this session's placements, for bindings and undo.
        self.placed: dict[str, tuple[int, ...]] = {}
        self.chooser: CardChooser = self.best_fit
        self._demands: dict[tuple[object, ...], GpuDemand] = {}
        self._hold_bound(snapshot.gpu_holders)

    def demand(self, task: TaskInfo) -> GpuDemand:
        shape = task.task.shape_key
        found = self._demands.get(shape)
        if found is None:
            found = self._demands[shape] = gpu_demand(task.task.request)
        return found

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        return self.fits(self.demand(task), nodes)

    def fits(self, demand: GpuDemand, nodes: IntArray) -> BoolArray:
        if demand.cards == 0:
            return np.ones(len(nodes), dtype=np.bool_)
        usable = (self.free[nodes] >= demand.milli).sum(axis=1)
        return np.asarray(usable >= demand.cards, dtype=np.bool_)

    def explain(self, task: TaskInfo, nodes: IntArray) -> Counter[str]:
        demand = self.demand(task)
        # Nodes short at node level are left to the predicates plugin's message.
        columns = self.columns
        free = self.allocatable[np.ix_(nodes, columns)] - self.requested[np.ix_(nodes, columns)]
        node_level = (free >= task.vec[columns]).all(axis=1)
        short = int((~self.fits(demand, nodes) & node_level).sum())
        if not short:
            return Counter()
        if demand.shared:
            reason = f"node(s) didn't have a GPU card with {demand.milli} milli free"
        else:
            reason = f"node(s) didn't have {demand.cards} whole free GPU card(s)"
        return Counter({reason: short})

    def take(self, task: TaskInfo, node: int) -> None:
        demand = self.demand(task)
        if demand == NO_GPU:
            return
        cards = self.chooser(task, node)
        self.free[node, list(cards)] -= demand.milli
        self.placed[task.key] = cards

    def release(self, task: TaskInfo, node: int) -> None:
        cards = self.placed.pop(task.key, ())
        self.free[node, list(cards)] += self.demand(task).milli

    def best_fit(self, task: TaskInfo, node: int) -> tuple[int, ...]:
        return self._best_fit(node, self.demand(task))

    def _best_fit(self, node: int, demand: GpuDemand) -> tuple[int, ...]:
        """The fitting cards with the least free, lowest index first on ties.

        Whole-card demands always get fully free cards, so for them this is first fit.
        """
        free = self.free[node]
        fitting = np.flatnonzero(free >= demand.milli)
        chosen = fitting[np.argsort(free[fitting], kind="stable")[: demand.cards]]
        return tuple(int(card) for card in np.sort(chosen))

    def _hold_bound(self, holders: Iterable[tuple[int, Task]]) -> None:
        """Count the cards of pods already bound.

        Pods that name valid cards keep them; the rest (bound by another scheduler, or
        before their annotation was written) are put best fit after them. A card claimed
        beyond its size is clamped at zero rather than trusted to be free.
        """
        later: list[tuple[int, GpuDemand]] = []
        for row, task in holders:
            demand = gpu_demand(task.request)
            cards = task.gpu_index
            if len(set(cards)) == demand.cards and all(c < self.count[row] for c in cards):
                self._hold(row, cards, demand.milli)
            else:
                later.append((row, demand))
        for row, demand in later:
            if self.fits(demand, np.array([row]))[0]:
                cards = self._best_fit(row, demand)
            else:
                cards = tuple(int(c) for c in np.argsort(-self.free[row], kind="stable"))
            self._hold(row, cards[: demand.cards], demand.milli)

    def _hold(self, row: int, cards: tuple[int, ...], milli: int) -> None:
        for card in cards:
            self.free[row, card] = max(int(self.free[row, card]) - milli, 0)
