"""leastallocated and balancedallocation: kube-scheduler's NodeResourcesFit LeastAllocated
and NodeResourcesBalancedAllocation scores, for configurations written for kube-scheduler
or Volcano's nodeorder, which spread pods where batchsched's default packs them.

leastallocated: per resource r with allocatable > 0, (allocatable - requested) * 100 //
allocatable (0 when over), requested counting the pod; the node score is the weighted
mean, truncated. CPU and memory count requests of containers that state none as 100m and
200 MiB, as kube-scheduler's non-zero requests do. Other resources are scored only for
pods that request them.

balancedallocation: the fractions requested / allocatable (capped at 1) of the scored
resources, with the pod's plain requests; the node scores (1 - their standard deviation)
* 100, truncated: nodes whose resources fill alike score highest.

Both depend only on the node's requests and the task's shape, so the session caches them
per shape like the other resource scores.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.errors import InvalidObject
from batchsched.api.resources import CPU, MEMORY
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.framework.topology import Weighing
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.snapshot import NO_EXTRA, TaskInfo
from batchsched.plugins.arguments import check_keys, integer

# kube-scheduler's defaults: NodeResourcesFit scores CPU and memory alike, and
# BalancedAllocation looks at the same two.
DEFAULT_RESOURCES = {CPU: 1, MEMORY: 1}


class _AllocationScore:
    """What both scores share: the scored columns, and the pod's and nodes' usage there."""

    name: str
    default_weight = 1
    # Whether CPU and memory count containers without requests as kube-scheduler's
    # non-zero defaults (NodeResourcesFit) or as 0 (BalancedAllocation).
    counts_defaults: bool

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight", "resources"})
        self.weight = integer(
            self.name, "weight", arguments.get("weight", self.default_weight), low=1, high=100
        )
        raw = arguments.get("resources", DEFAULT_RESOURCES)
        if not isinstance(raw, Mapping) or not raw:
            raise InvalidObject(f"plugin {self.name}: resources must map resource names to weights")
        self.resources = {
            str(name): integer(self.name, f"resources.{name}", weight, low=1, high=100)
            for name, weight in raw.items()
        }

    def open(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        scored = [
            (snapshot.column[n], w) for n, w in self.resources.items() if n in snapshot.column
        ]
        self.columns = np.array([c for c, _ in scored], dtype=np.int64)
        self.column_weights = np.array([w for _, w in scored], dtype=np.int64)
        names = [snapshot.resources[c] for c, _ in scored]
        # CPU and memory are scored for every pod, other resources only when requested.
        self.always = np.array([n in (CPU, MEMORY) for n in names], dtype=np.bool_)
        self.capacity = snapshot.allocatable[:, self.columns]
        self.extra_at = [names.index(n) if n in names else -1 for n in (CPU, MEMORY)]
        self.extra: IntArray | None = None
        if self.counts_defaults and snapshot.score_extra is not None:
            self.extra = np.zeros((len(snapshot.nodes), len(self.columns)), dtype=np.int64)
            for side, at in enumerate(self.extra_at):
                if at >= 0:
                    self.extra[:, at] = snapshot.score_extra[:, side]
        if self.counts_defaults:
            session.on_allocate.append(lambda _, task, node: self._move(task, node, +1))
            session.on_deallocate.append(lambda _, task, node: self._move(task, node, -1))
        session.scorers.append((self, self.weight))

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        """0..MAX_NODE_SCORE per node; each score says how."""
        raise NotImplementedError

    def _move(self, task: TaskInfo, node: int, step: int) -> None:
        if task.pod.score_extra == NO_EXTRA:
            return
        if self.extra is None:
            self.extra = np.zeros((len(self.capacity), len(self.columns)), dtype=np.int64)
        for side, at in enumerate(self.extra_at):
            if at >= 0:
                self.extra[node, at] += step * task.pod.score_extra[side]

    def _usage(self, task: TaskInfo, nodes: IntArray) -> tuple[IntArray, IntArray, BoolArray]:
        """Per node and scored column: requested with the pod, allocatable, and whether
        the column counts (allocatable > 0, and CPU, memory or requested by the pod)."""
        request = task.vec[self.columns].copy()
        used = self.session.requested[nodes[:, None], self.columns]
        if self.counts_defaults:
            for side, at in enumerate(self.extra_at):
                if at >= 0:
                    request[at] += task.pod.score_extra[side]
            if self.extra is not None:
                used = used + self.extra[nodes]
        capacity = self.capacity[nodes]
        counted = (capacity > 0) & (self.always | (request > 0))
        return used + request, capacity, counted


class LeastAllocated(_AllocationScore):
    name = "leastallocated"
    counts_defaults = True

    def open(self, session: Session) -> None:
        # kube-scheduler scores a placement with NodeResourcesFit's resources.
        session.topology.weigh(self.resources, Weighing.NODE_FIT)
        super().open(session)

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        requested, capacity, counted = self._usage(task, nodes)
        free = np.where(requested > capacity, 0, capacity - requested)
        points = free * MAX_NODE_SCORE // np.maximum(capacity, 1)
        weights = np.where(counted, self.column_weights, 0)
        total = (points * weights).sum(axis=1)
        scores: IntArray = total // np.maximum(weights.sum(axis=1), 1)
        return scores


class BalancedAllocation(_AllocationScore):
    name = "balancedallocation"
    counts_defaults = False

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        requested, capacity, counted = self._usage(task, nodes)
        fractions: FloatArray = np.minimum(requested / np.maximum(capacity, 1), 1.0)
        fractions = np.where(counted, fractions, 0.0)
        count = counted.sum(axis=1)
        mean = fractions.sum(axis=1) / np.maximum(count, 1)
        spread = np.where(counted, (fractions - mean[:, None]) ** 2, 0.0).sum(axis=1)
        std: FloatArray = np.sqrt(spread / np.maximum(count, 1))
        if fractions.shape[1] >= 2:
            # kube-scheduler takes half the difference when two resources count; the
            # same value, but computed so that truncation below agrees with it.
            ends = np.sort(np.where(counted, fractions, -1.0), axis=1)[:, -2:]
            std = np.where(count == 2, np.abs((ends[:, 1] - ends[:, 0]) / 2), std)
        scores: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return scores
