"""GPU fragmentation measured against a workload's task classes (Weng et al., USENIX ATC 2023).

The FGD paper's measure (FragmentationModel): idle GPU milli on a node is fragmented for
a class of tasks when that class cannot use it: all of it when the class cannot run there
at all (it asks no GPU, the node has the wrong model, too little CPU, or too few cards
with enough free), otherwise the cards with less free than the class asks per card. A
node's fragmentation is that amount summed over the classes, weighted by how many tasks
of each class the workload has; divided by the total weight it is in GPU milli. The
cluster's is the sum over nodes. Replay reports this measure.

The gpufragmentation plugin places by a stricter reading (InstanceFragmentationModel):
what a class can use is as many of its tasks as still fit, by cards and by CPU together,
so a card that holds one 470 share but not two, or a node with CPU for one more task but
GPUs for three, counts its remainder as fragmented too.

Both are sums over cards of per-card statistics followed by a per-class rule, so a
placement, which changes one card (a share) or takes whole cards, is evaluated from the
node's sums without rebuilding them. Counts stay integers, so equal placements compare
exactly equal.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GpuDemand, gpu_demand
from batchsched.api.objects import Constraints, Node, Task
from batchsched.api.resources import CPU
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.plugins.predicates import allowed_nodes

_WHOLE_CARD_TAKEN = np.array([CARD_MILLI, 0], dtype=np.int64)
# More tasks than any node's cards could hold: how many fit by CPU when none is asked.
_UNLIMITED = 1 << 32
# Fewer rows than this are evaluated as they are: finding equal states would cost more.
_FEW_ROWS = 64


@dataclass(frozen=True, slots=True)
class TaskClass:
    """What decides whether a task can use a node's idle GPUs (memory rarely binds)."""

    cpu: int
    demand: GpuDemand
    constraints: Constraints


def task_class(task: Task) -> TaskClass:
    return TaskClass(task.request.get(CPU, 0), gpu_demand(task.request), task.constraints)


@dataclass(slots=True)
class Placement:
    """Per node row: the change in fragmentation a task would cause, and on which card."""

    delta: IntArray
    card: IntArray  # the card a share of one card goes to; -1 otherwise


class FragmentationModel:
    """The measure over a workload's classes, grouped by shape.

    Only a class's CPU and GPU demand decide how much of a node it can use, and only its
    constraints decide on which nodes it may, so classes are grouped by shape (CPU and
    GPU demand) with a per-node weight: how many tasks of that shape may use the node.
    Work is then proportional to the number of shapes, however many distinct GPU-model
    constraints the workload states. Classes without GPUs never use idle GPUs; they count
    in the total weight only.
    """

    def __init__(
        self,
        mix: Mapping[TaskClass, int],
        nodes: Sequence[Node],
        masks: dict[Constraints, BoolArray] | None = None,
    ) -> None:
        """`masks`, the nodes each class's constraints allow, is filled as needed; pass
        the same dict to models of other mixes over the same nodes to work them out once."""
        classes = [c for c, count in mix.items() if count > 0]
        self.total_weight = sum(mix[c] for c in classes)
        shapes: dict[tuple[int, GpuDemand], int] = {}
        for c in classes:
            if c.demand.cards > 0:
                shapes.setdefault((c.cpu, c.demand), len(shapes))
        self.cpu: IntArray = np.array([cpu for cpu, _ in shapes], dtype=np.int64)
        self.cards: IntArray = np.array([d.cards for _, d in shapes], dtype=np.int64)
        self.milli: IntArray = np.array([d.milli for _, d in shapes], dtype=np.int64)
        masks = {} if masks is None else masks
        # Node row x shape: the weight of the classes of that shape that may use the node.
        self.weights: IntArray = np.zeros((len(nodes), len(shapes)), dtype=np.int64)
        used: dict[Constraints, None] = {}
        for c in classes:
            if c.demand.cards == 0:
                continue
            if c.constraints not in masks:
                masks[c.constraints] = allowed_nodes(nodes, c.constraints)
            used[c.constraints] = None
            self.weights[:, shapes[c.cpu, c.demand]] += mix[c] * masks[c.constraints]
        # Rows that the same constraints allow (nodes of one GPU model, mostly) have equal
        # weights and share a group number.
        allowed = np.zeros((len(nodes), 1), dtype=np.bool_)
        if used:
            allowed = np.column_stack([masks[constraints] for constraints in used])
        packed = np.packbits(allowed, axis=1)
        self.group: IntArray = np.unique(packed, axis=0, return_inverse=True)[1].ravel()

    def per_card(self, free: IntArray) -> IntArray:
        """free (any shape) -> free.shape x statistics x shapes, summed over a node's cards.

        Here: does the card fit the shape, and its free milli if it does not.
        """
        fits = free[..., None] >= self.milli
        return np.stack([fits, np.where(fits, 0, free[..., None])], axis=-2)

    def usable(self, sums: IntArray, idle: IntArray, cpu_free: IntArray) -> IntArray:
        """rows x shapes: the idle milli a task of each shape can use, from the card sums."""
        fitting, stranded = sums[:, 0], sums[:, 1]
        runs = (cpu_free[:, None] >= self.cpu) & (fitting >= self.cards)
        usable: IntArray = np.where(runs, idle[:, None] - stranded, 0)
        return usable

    def weighted(
        self, rows: IntArray, sums: IntArray, idle: IntArray, cpu_free: IntArray
    ) -> IntArray:
        """Weighted fragmentation of the rows (divide by total_weight for milli): idle
        milli for every class, less what the classes allowed there can use."""
        usable = self.usable(sums, idle, cpu_free)
        used: IntArray = np.einsum("ij,ij->i", usable, self.weights[rows])
        return idle * self.total_weight - used

    def card_sums(self, free: IntArray) -> IntArray:
        """rows x statistics x shapes, from the rows' cards (rows x cards)."""
        sums: IntArray = self.per_card(free).sum(axis=1)
        return sums

    def measure(self, rows: IntArray, free: IntArray, cpu_free: IntArray) -> IntArray:
        """Weighted fragmentation of the node rows (divide by total_weight for milli)."""
        return self.weighted(rows, self.card_sums(free), free.sum(axis=1), cpu_free)

    def placement(
        self,
        rows: IntArray,
        free: IntArray,
        sums: IntArray,
        cpu_free: IntArray,
        task: TaskClass,
        base: IntArray | None = None,
        *,
        distinct: bool = False,
    ) -> Placement:
        """The fragmentation change of placing `task` on each node row, on its best card.

        `free` holds the rows' cards and `sums` their card_sums. A share of a card that
        fits nowhere on a row gets the largest delta; other demands that do not fit get
        meaningless ones, as the card filter rules those rows out anyway. Rows in the
        same state (weights, free CPU, free milli of each card) are evaluated once: a
        cluster has few node types, and most of its nodes stay in a handful of states.
        `base`, the rows' weighted fragmentation now, may be given when already known;
        `distinct` says the rows are known to be in distinct states already.
        """
        if len(rows) >= _FEW_ROWS and not distinct:
            state = np.column_stack((self.group[rows], cpu_free, free))
            _, first, inverse = np.unique(state, axis=0, return_index=True, return_inverse=True)
            if len(first) < len(rows):
                known = None if base is None else base[first]
                each = self._placement(
                    rows[first], free[first], sums[first], cpu_free[first], task, known
                )
                inverse = inverse.ravel()
                return Placement(each.delta[inverse], each.card[inverse])
        return self._placement(rows, free, sums, cpu_free, task, base)

    def _placement(
        self,
        rows: IntArray,
        free: IntArray,
        sums: IntArray,
        cpu_free: IntArray,
        task: TaskClass,
        base: IntArray | None = None,
    ) -> Placement:
        idle = free.sum(axis=1)
        if base is None:
            base = self.weighted(rows, sums, idle, cpu_free)
        cpu_after = cpu_free - task.cpu
        demand = task.demand
        if not demand.shared:
            whole = self.per_card(_WHOLE_CARD_TAKEN)
            after_sums = sums + demand.cards * (whole[1] - whole[0])
            after = self.weighted(rows, after_sums, idle - demand.total, cpu_after)
            return Placement(after - base, np.full(len(rows), -1, dtype=np.int64))
        # A share changes one card; cards with equal free are interchangeable, so each
        # distinct (row, free) pair is tried once, on its lowest-numbered card.
        positions = np.flatnonzero(free >= demand.milli)
        width = free.shape[1]
        keys = positions // width * (CARD_MILLI + 1) + free.ravel()[positions]
        keys, first = np.unique(keys, return_index=True)
        pair_row = keys // (CARD_MILLI + 1)
        before = keys % (CARD_MILLI + 1)
        pair_sums = sums[pair_row] + self.per_card(before - demand.milli) - self.per_card(before)
        pair_after = self.weighted(
            rows[pair_row], pair_sums, idle[pair_row] - demand.milli, cpu_after[pair_row]
        )
        pair_delta = pair_after - base[pair_row]
        # Best pair per row: least added fragmentation, then the fullest card (best fit).
        order = np.lexsort((before, pair_delta, pair_row))
        best_rows, best_first = np.unique(pair_row[order], return_index=True)
        chosen = order[best_first]
        delta = np.full(len(rows), np.iinfo(np.int64).max, dtype=np.int64)
        card = np.full(len(rows), -1, dtype=np.int64)
        delta[best_rows] = pair_delta[chosen]
        card[best_rows] = positions[first[chosen]] % width
        return Placement(delta, card)


class InstanceFragmentationModel(FragmentationModel):
    """Idle milli a class cannot use once as many of its tasks as fit are counted.

    How many tasks fit by cards depends on a shape's GPU demand only, and how many by CPU
    on its CPU only, so both are counted per distinct demand and per distinct CPU request
    and then combined per shape: a workload has far fewer of each than shapes, and
    counting per card (a division per card) is most of the work.
    """

    def __init__(
        self,
        mix: Mapping[TaskClass, int],
        nodes: Sequence[Node],
        masks: dict[Constraints, BoolArray] | None = None,
    ) -> None:
        super().__init__(mix, nodes, masks)
        demands, self.demand_of = np.unique(
            np.column_stack((self.cards, self.milli)).reshape(-1, 2), axis=0, return_inverse=True
        )
        cards, milli = demands[:, 0], demands[:, 1]
        self.demand_of = self.demand_of.ravel()
        cpus, self.cpu_of = np.unique(self.cpu, return_inverse=True)
        self.cpu_of = self.cpu_of.ravel()
        # Per demand: is it a share of one card, what it divides a card's free milli by,
        # and how many of the counted cards one task takes.
        self.shares: IntArray = (cards == 1) & (milli < CARD_MILLI)
        self.divisor: IntArray = np.maximum(milli, 1)
        self.per_task: IntArray = np.where(self.shares, 1, np.maximum(cards, 1))
        # Per CPU request: its divisor; a request of none fits without limit.
        self.cpu_divisor: IntArray = np.maximum(cpus, 1)
        self.cpu_unlimited: BoolArray = cpus == 0
        # Per shape: a task's GPU milli.
        self.each: IntArray = self.cards * self.milli

    def per_card(self, free: IntArray) -> IntArray:
        """How many tasks of a share demand fit on the card; for the rest, is it whole."""
        whole = free[..., None] == CARD_MILLI
        counted: IntArray = np.where(self.shares, free[..., None] // self.divisor, whole)
        return counted[..., None, :]

    def usable(self, sums: IntArray, idle: IntArray, cpu_free: IntArray) -> IntArray:
        """What fits by cards never exceeds the idle milli it is counted from, so unlike
        the paper's measure no cap at `idle` is needed (the arrays are the largest here)."""
        by_cards = sums[:, 0] // self.per_task
        fit_cpu = np.maximum(cpu_free, 0)[:, None] // self.cpu_divisor
        by_cpu = np.where(self.cpu_unlimited, _UNLIMITED, fit_cpu)
        usable: IntArray = np.minimum(by_cards[:, self.demand_of], by_cpu[:, self.cpu_of])
        np.multiply(usable, self.each, out=usable)
        return usable
