"""binpack: prefer the nodes a pod fills most (RequestedToCapacityRatio; README, "Binpack").

For each scored resource r: u_r = floor((node requested + pod request) * 100 / allocatable),
capped at 100; f is the configured broken-line shape; the node score is
round(sum(f(u_r) * w_r) / sum(w_r)) over resources with f(u_r) > 0, from 0 to 100.
CPU and memory are always scored; other resources only when the pod requests them,
unless listed in `alwaysScored`: with `nvidia.com/gpu` there, pods without GPUs prefer
nodes whose GPUs are busy and leave idle GPUs to the pods that need them.

GPU utilisation counts the session's cards (framework/gpucards.py) in milli, so shares of
a card fill it as whole cards do; on nodes without shares it is the plain column ratio.

Devices a pod asks for through DRA claims are scored too, by the same shape, as a term of
their own with the plugin's weight: the utilisation of the devices its requests may take
on the node once they have them (framework/deviceclaims.py, `packing`), so a pod goes
where its request fills the free devices best and whole devices elsewhere stay whole;
partitionable devices count by the shared counters consumed, so a partition goes to a
GPU already split rather than split a whole one. The term is taken afresh at each
choice, as devices change hands with every pod placed.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.api.errors import InvalidObject
from batchsched.api.gpu import CARD_MILLI
from batchsched.api.resources import CPU, GPU, MEMORY
from batchsched.framework.deviceclaims import DeviceClaims
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.framework.topology import Weighing
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import NO_EXTRA, TaskInfo
from batchsched.plugins.arguments import check_keys, integer

MAX_UTILIZATION = 100
# The modern `shape` scores from 0 to 10 (scaled x10); the seed's legacy `functionshape`
# already scores from 0 to 100.
SHAPE_KEYS = {"shape": 10, "functionshape": 100}
WEIGHT_KEYS = ("resources", "resourcetoweightmap")
ALWAYS_KEY = "alwaysScored"
DEFAULT_SHAPE = ((0, 0), (100, 10))
DEFAULT_WEIGHTS = {CPU: 1, MEMORY: 1}
# Points equal to the utilisation: the default shape's table.
LINEAR: IntArray = np.arange(MAX_UTILIZATION + 1, dtype=np.int64) * MAX_NODE_SCORE // 100


class Binpack:
    name = "binpack"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight", ALWAYS_KEY, *SHAPE_KEYS, *WEIGHT_KEYS})
        self.weight = integer(self.name, "weight", arguments.get("weight", 1), low=1, high=100)
        self.table = _score_table(_shape(arguments))
        self.weights = _weights(arguments)
        self.always_scored = {CPU, MEMORY} | _always_scored(arguments, self.weights)

    def open(self, session: Session) -> None:
        self.session = session
        session.topology.weigh(self.weights, Weighing.NODE_FIT)
        column = session.snapshot.column
        scored = [(column[name], w) for name, w in self.weights.items() if name in column]
        self.columns = np.array([c for c, _ in scored], dtype=np.int64)
        self.column_weights = np.array([w for _, w in scored], dtype=np.int64)
        names = [session.snapshot.resources[c] for c, _ in scored]
        self.always = np.array([name in self.always_scored for name in names], dtype=np.bool_)
        capacity = session.snapshot.allocatable[:, self.columns]
        self.gpu_at = names.index(GPU) if GPU in names else None
        if self.gpu_at is not None:
            capacity[:, self.gpu_at] = session.gpu.count * CARD_MILLI
        self.has_capacity = capacity > 0
        self.divisor = np.maximum(capacity, 1)
        self._shapes: dict[tuple[object, ...], tuple[IntArray, IntArray]] = {}
        # Where CPU and memory sit among the scored columns, for what scores count on
        # top of requests; -1 where one is not scored.
        self.extra_at = [names.index(n) if n in names else -1 for n in (CPU, MEMORY)]
        self.extra = self._node_extra(session)
        session.scorers.append((self, self.weight))
        pack_devices(session, self.name, self.weight, self.table)

    def _node_extra(self, session: Session) -> IntArray | None:
        """Per node, the scored columns' counts beyond requests; kept up to date as the
        session places pods, or None in sessions where no pod has any."""
        snapshot = session.snapshot
        pending = any(t.pod.score_extra != NO_EXTRA for job in session.placing for t in job.pending)
        if snapshot.score_extra is None and not pending:
            return None
        extra = np.zeros((len(snapshot.nodes), len(self.columns)), dtype=np.int64)
        for side, at in enumerate(self.extra_at):
            if at >= 0 and snapshot.score_extra is not None:
                extra[:, at] = snapshot.score_extra[:, side]
        session.on_allocate.append(lambda _, task, node: self._move(task, node, +1))
        session.on_deallocate.append(lambda _, task, node: self._move(task, node, -1))
        return extra

    def _move(self, task: TaskInfo, node: int, step: int) -> None:
        assert self.extra is not None
        for side, at in enumerate(self.extra_at):
            if at >= 0:
                self.extra[node, at] += step * task.pod.score_extra[side]

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        request, weights = self._request_and_weights(task)
        used = self.session.requested[nodes[:, None], self.columns] + request
        if self.extra is not None:
            used += self.extra[nodes]
        if self.gpu_at is not None:
            cards = self.session.gpu
            used[:, self.gpu_at] = (
                cards.count[nodes] * CARD_MILLI - cards.idle[nodes] + request[self.gpu_at]
            )
        utilization = np.minimum(used * MAX_UTILIZATION // self.divisor[nodes], MAX_UTILIZATION)
        points = self.table[utilization]
        counted = np.where(self.has_capacity[nodes] & (points > 0), weights, 0)
        total = (points * counted).sum(axis=1)
        weight_sum = counted.sum(axis=1)
        # Round half up, like Go's math.Round on these non-negative values; a node with
        # nothing to score gets 0 / 1 = 0.
        rounded: IntArray = (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1)
        return rounded

    def _request_and_weights(self, task: TaskInfo) -> tuple[IntArray, IntArray]:
        found = self._shapes.get(task.pod.shape_key)
        if found is None:
            request = task.vec[self.columns].copy()
            if self.gpu_at is not None:
                request[self.gpu_at] = task.gpu.total
            for side, at in enumerate(self.extra_at):
                if at >= 0:
                    request[at] += task.pod.score_extra[side]
            weights = np.where(self.always | (request > 0), self.column_weights, 0)
            found = self._shapes[task.pod.shape_key] = (request, weights)
        return found


class DevicePacking:
    """The DRA devices' term (the module says how), by a binpack shape's `table` (points
    per utilisation 0..100); for the plugin `name`."""

    def __init__(self, name: str, session: Session, table: IntArray = LINEAR) -> None:
        self.name = name
        self.session = session
        self.table = table

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        claims = self.session.device_claims
        percent = None if claims is None else claims.packing(task)
        if percent is None:
            return None
        points: IntArray = self.table[np.minimum(percent, MAX_UTILIZATION)]
        return points


def pack_devices(session: Session, name: str, weight: int, table: IntArray = LINEAR) -> None:
    """Score DRA devices for plugin `name` with `weight`, in sessions placing claims."""
    if DeviceClaims.needed(session.placing, session.backed):
        session.normalized_scorers.append((DevicePacking(name, session, table), weight))


def _shape(arguments: Mapping[str, Any]) -> list[tuple[int, int]]:
    given = [key for key in SHAPE_KEYS if key in arguments]
    if len(given) > 1:
        raise InvalidObject("plugin binpack: give either shape or functionshape, not both")
    if not given:
        return [(u, s * MAX_NODE_SCORE // 10) for u, s in DEFAULT_SHAPE]
    key = given[0]
    top = SHAPE_KEYS[key]
    raw = arguments[key]
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise InvalidObject(f"plugin binpack: {key} must be a non-empty list of points")
    points: list[tuple[int, int]] = []
    for i, point in enumerate(raw):
        if not isinstance(point, Mapping) or set(point) != {"utilization", "score"}:
            raise InvalidObject(
                f"plugin binpack: {key}[{i}] must have exactly utilization and score"
            )
        where = f"{key}[{i}]"
        utilization = integer("binpack", f"{where}.utilization", point["utilization"], low=0)
        if utilization > MAX_UTILIZATION:
            raise InvalidObject(f"plugin binpack: {where}.utilization must be from 0 to 100")
        score = integer("binpack", f"{where}.score", point["score"], low=0, high=top)
        if points and utilization <= points[-1][0]:
            raise InvalidObject(f"plugin binpack: {key} utilization must increase at {where}")
        points.append((utilization, score * MAX_NODE_SCORE // top))
    return points


def _weights(arguments: Mapping[str, Any]) -> dict[str, int]:
    given = [key for key in WEIGHT_KEYS if key in arguments]
    if len(given) > 1:
        raise InvalidObject("plugin binpack: give either resources or resourcetoweightmap")
    if not given:
        return dict(DEFAULT_WEIGHTS)
    raw = arguments[given[0]]
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidObject(f"plugin binpack: {given[0]} must map resource names to weights")
    return {
        str(name): integer("binpack", f"{given[0]}.{name}", weight, low=1, high=100)
        for name, weight in raw.items()
    }


def _score_table(points: list[tuple[int, int]]) -> IntArray:
    """f(u) for every integer utilization 0..100, with Go's truncating integer division."""
    table = np.zeros(MAX_UTILIZATION + 1, dtype=np.int64)
    for u in range(MAX_UTILIZATION + 1):
        table[u] = _broken_line(points, u)
    return table


def _broken_line(points: list[tuple[int, int]], u: int) -> int:
    for i, (x, y) in enumerate(points):
        if u <= x:
            if i == 0:
                return y
            x0, y0 = points[i - 1]
            rise = (y - y0) * (u - x0)
            step = abs(rise) // (x - x0)
            return y0 + (step if rise >= 0 else -step)
    return points[-1][1]


def _always_scored(arguments: Mapping[str, Any], weights: Mapping[str, int]) -> set[str]:
    raw = arguments.get(ALWAYS_KEY, [])
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise InvalidObject(f"plugin binpack: {ALWAYS_KEY} must be a list of resource names")
    names = {str(name) for name in raw}
    unweighted = sorted(names - set(weights))
    if unweighted:
        raise InvalidObject(
            f"plugin binpack: {ALWAYS_KEY} names {unweighted[0]!r}, which has no weight "
            f"(weighted: {', '.join(sorted(weights))})"
        )
    return names
