"""GPU fragmentation as the FGD paper measures it (Weng et al., USENIX ATC 2023).

Idle GPU milli on a node is fragmented for a class of tasks when that class cannot use
it: all of it when the class cannot run there at all (it asks no GPU, the node has the
wrong model, too little CPU, or too few cards with enough free), otherwise the cards with
less free than the class asks per card. A node's fragmentation is that amount summed
over the workload's classes, weighted by how many tasks of each class it has; divided by
the total weight it is in GPU milli. The cluster's is the sum over nodes.

Counts stay integers so equal placements compare exactly equal. Per node, the model
keeps how many cards fit each class and how much free lies on cards too small for it,
recomputed only for nodes that changed; a placement changes one node's cards by one
value, so its effect is derived from those sums without rebuilding them.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from batchsched.api.gpu import CARD_MILLI, GpuDemand, gpu_demand
from batchsched.api.objects import Constraints, Node, Task
from batchsched.api.resources import CPU
from batchsched.cache.snapshot import IntArray
from batchsched.framework.plugin import BoolArray
from batchsched.plugins.predicates import allowed_nodes


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
    def __init__(self, mix: Mapping[TaskClass, int], nodes: Sequence[Node]) -> None:
        classes = [c for c, count in mix.items() if count > 0]
        self.weight: IntArray = np.array([mix[c] for c in classes], dtype=np.int64)
        self.total_weight = int(self.weight.sum())
        self.cpu: IntArray = np.array([c.cpu for c in classes], dtype=np.int64)
        self.cards: IntArray = np.array([c.demand.cards for c in classes], dtype=np.int64)
        self.milli: IntArray = np.array([c.demand.milli for c in classes], dtype=np.int64)
        masks: dict[Constraints, BoolArray] = {}
        for c in classes:
            if c.constraints not in masks:
                masks[c.constraints] = allowed_nodes(nodes, c.constraints)
        allowed = np.array([masks[c.constraints] for c in classes], dtype=np.bool_)
        # Node row x class: may the class use this node's GPUs at all? Never without GPUs.
        self.allowed: BoolArray = allowed.reshape(len(classes), len(nodes)).T & (self.cards > 0)

    def card_sums(self, free: IntArray) -> tuple[IntArray, IntArray]:
        """Per row of `free` (rows x cards) and class: cards that fit it, free on the rest."""
        fits = free[:, :, None] >= self.milli
        fitting: IntArray = fits.sum(axis=1)
        stranded: IntArray = np.where(fits, 0, free[:, :, None]).sum(axis=1)
        return fitting, stranded

    def cluster(self, free: IntArray, cpu_free: IntArray) -> int:
        """Weighted fragmentation of all nodes, given every node's cards and free CPU."""
        rows = np.arange(len(free), dtype=np.int64)
        fitting, stranded = self.card_sums(free)
        return int(self.measure(rows, fitting, stranded, free.sum(axis=1), cpu_free).sum())

    def measure(
        self,
        rows: IntArray,
        fitting: IntArray,
        stranded: IntArray,
        idle: IntArray,
        cpu_free: IntArray,
    ) -> IntArray:
        """Weighted fragmentation of the given node rows (divide by total_weight for milli).

        `fitting` and `stranded` come from card_sums, `idle` is the free milli per row.
        """
        usable = self.allowed[rows] & (cpu_free[:, None] >= self.cpu) & (fitting >= self.cards)
        lost: IntArray = np.where(usable, stranded, idle[:, None])
        return lost @ self.weight

    def placement(
        self,
        rows: IntArray,
        free: IntArray,
        cpu_free: IntArray,
        task: TaskClass,
    ) -> Placement:
        """The fragmentation change of placing `task` on each node row, on its best card.

        `free` holds the rows' cards. A share of a card that fits nowhere on a row gets
        the largest delta; other demands that do not fit get meaningless ones, as the
        card filter rules those rows out anyway.
        """
        fitting, stranded = self.card_sums(free)
        idle = free.sum(axis=1)
        base = self.measure(rows, fitting, stranded, idle, cpu_free)
        cpu_after = cpu_free - task.cpu
        demand = task.demand
        if not demand.shared:
            after = self.measure(
                rows, fitting - demand.cards, stranded, idle - demand.total, cpu_after
            )
            return Placement(after - base, np.full(len(rows), -1, dtype=np.int64))
        # A share changes one card; cards with equal free are interchangeable, so each
        # distinct (row, free) pair is tried once, on its lowest-numbered card.
        positions = np.flatnonzero(free >= demand.milli)
        width = free.shape[1]
        keys = positions // width * (CARD_MILLI + 1) + free.ravel()[positions]
        keys, first = np.unique(keys, return_index=True)
        pair_row = keys // (CARD_MILLI + 1)
        before = keys % (CARD_MILLI + 1)
        after_value = before - demand.milli
        fits_before = before[:, None] >= self.milli
        fits_after = after_value[:, None] >= self.milli
        pair_fitting = fitting[pair_row] - fits_before + fits_after
        pair_stranded = (
            stranded[pair_row]
            - np.where(fits_before, 0, before[:, None])
            + np.where(fits_after, 0, after_value[:, None])
        )
        pair_delta = (
            self.measure(
                rows[pair_row],
                pair_fitting,
                pair_stranded,
                idle[pair_row] - demand.milli,
                cpu_after[pair_row],
            )
            - base[pair_row]
        )
        # Best pair per row: least added fragmentation, then the fullest card (best fit).
        order = np.lexsort((before, pair_delta, pair_row))
        best_rows, best_first = np.unique(pair_row[order], return_index=True)
        chosen = order[best_first]
        delta = np.full(len(rows), np.iinfo(np.int64).max, dtype=np.int64)
        card = np.full(len(rows), -1, dtype=np.int64)
        delta[best_rows] = pair_delta[chosen]
        card[best_rows] = positions[first[chosen]] % width
        return Placement(delta, card)
