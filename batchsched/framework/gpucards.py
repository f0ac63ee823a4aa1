"""Per-card GPU accounting for one session (README, "GPU sharing"; api/gpu.py says how pods ask).

Node-level resource columns cannot tell a node with one free card from one with two half
free cards, so the session keeps the free milli of every card here and always filters
with it: no configuration can put more on a card than it has. Which card a pod gets is
the `chooser`'s decision, best fit unless a plugin (gpufragmentation) installs its own.
"""

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GPU_MILLI, GpuDemand
from batchsched.api.resources import GPU
from batchsched.framework.plugin import UNBOUNDED, Explained
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import Snapshot, TaskInfo

# (task, node row) -> the cards to take on that node for the task; they must fit.
CardChooser = Callable[[TaskInfo, int], tuple[int, ...]]


class GpuCards:
    name = "GpuCards"

    def __init__(self, snapshot: Snapshot, requested: IntArray) -> None:
        """`requested` is the session's node usage, which only explain() reads."""
        self.allocatable = snapshot.allocatable
        self.requested = requested
        column = snapshot.column
        self.columns = np.array(
            [column[n] for n in (GPU, GPU_MILLI) if n in column], dtype=np.int64
        )
        counts = [node.gpu_cards for node in snapshot.nodes]
        width = max(counts, default=0)
        self.count: IntArray = np.array(counts, dtype=np.int64)
        # Free milli per node row and card; cards a node does not have are 0, never free.
        self.free: IntArray = np.where(
            np.arange(width) < self.count[:, None], CARD_MILLI, 0
        ).astype(np.int64)
        # Per node row, kept with `free` so that filtering and scoring need no card scan:
        # free milli in all, fully free cards, and the most free on one card.
        self.idle: IntArray = self.free.sum(axis=1)
        self.whole: IntArray = (self.free == CARD_MILLI).sum(axis=1)
        self.largest: IntArray = self.free.max(axis=1, initial=0)
        # Task key -> cards taken by this session's placements, for bindings and undo.
        self.placed: dict[str, tuple[int, ...]] = {}
        self.chooser: CardChooser = self.best_fit
        self._hold_bound(snapshot.gpu_used, snapshot.gpu_unnamed)

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        return self.fits(task.gpu, nodes)

    def room_for(self, tasks: Sequence[TaskInfo]) -> IntArray | None:
        """Whole free cards by as many as the most any of them asks: a pod takes its
        whole cards from those. None with a share of a card, whose room is not counted
        in pods: which card it takes decides what is left on the node."""
        if any(task.gpu.shared for task in tasks):
            return None
        most = max(task.gpu.cards for task in tasks)
        if not most:
            return np.full(len(self.whole), UNBOUNDED, dtype=np.int64)
        held: IntArray = self.whole // most
        return held

    def fits(self, demand: GpuDemand, nodes: IntArray) -> BoolArray:
        if demand.cards == 0:
            return np.ones(len(nodes), dtype=np.bool_)
        if demand.shared:
            return np.asarray(self.largest[nodes] >= demand.milli, dtype=np.bool_)
        return np.asarray(self.whole[nodes] >= demand.cards, dtype=np.bool_)

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        """Asked after predicates, so it sees only nodes with room at node level: what
        is short here is how the free milli is spread over the cards."""
        demand = task.gpu
        fits = self.fits(demand, nodes)
        short = int((~fits).sum())
        if not short:
            return Counter(), nodes
        if demand.shared:
            reason = f"node(s) didn't have a GPU card with {demand.milli} milli free"
        else:
            reason = f"node(s) didn't have {demand.cards} whole free GPU card(s)"
        return Counter({reason: short}), nodes[fits]

    def take(self, task: TaskInfo, node: int) -> None:
        if task.gpu.cards == 0:
            return
        cards = self.chooser(task, node)
        self.free[node, list(cards)] -= task.gpu.milli
        self._refresh(node)
        self.placed[task.key] = cards

    def release(self, task: TaskInfo, node: int) -> None:
        cards = self.placed.pop(task.key, ())
        if cards:
            self.free[node, list(cards)] += task.gpu.milli
            self._refresh(node)

    def best_fit(self, task: TaskInfo, node: int) -> tuple[int, ...]:
        return self._best_fit(node, task.gpu)

    def _best_fit(self, node: int, demand: GpuDemand) -> tuple[int, ...]:
        """The lowest-numbered whole cards, or for a share the fitting card with least free
        (lowest-numbered on ties)."""
        free = self.free[node]
        if not demand.shared:
            whole: list[int] = np.flatnonzero(free == CARD_MILLI)[: demand.cards].tolist()
            return tuple(whole)
        return (int(np.where(free >= demand.milli, free, CARD_MILLI + 1).argmin()),)

    def _refresh(self, node: int) -> None:
        free = self.free[node]
        self.idle[node] = free.sum()
        self.whole[node] = (free == CARD_MILLI).sum()
        self.largest[node] = free.max(initial=0)

    def _hold_bound(self, used: IntArray | None, unnamed: list[tuple[int, GpuDemand]]) -> None:
        """Count the cards of pods already bound: those naming valid cards, summed per
        card by the snapshot, then the rest (bound by another scheduler, or before
        their annotation was written) best fit. A card claimed beyond its size is
        clamped at zero rather than trusted to be free."""
        if used is not None and used.size:
            self.free = np.maximum(self.free - used, 0)
            self.idle = self.free.sum(axis=1)
            self.whole = (self.free == CARD_MILLI).sum(axis=1)
            self.largest = self.free.max(axis=1, initial=0)
        for row, demand in unnamed:
            if self.fits(demand, np.array([row]))[0]:
                chosen = self._best_fit(row, demand)
            else:
                chosen = tuple(int(c) for c in np.argsort(-self.free[row], kind="stable"))
            self._hold(row, chosen[: demand.cards], demand.milli)

    def _hold(self, row: int, cards: tuple[int, ...], milli: int) -> None:
        for card in cards:
            self.free[row, card] = max(int(self.free[row, card]) - milli, 0)
        self._refresh(row)
