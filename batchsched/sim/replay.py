"""Trace replay by the FGD paper's method (README, "Replaying the openb GPU trace").

Pods are shuffled with the seed, then pods drawn with replacement from the trace are
appended until GPU requests reach `inflate` times the cluster's GPUs. Every pod arrives
once, in that order, is placed or fails at once, and never leaves. The curve samples GPU
allocation and fragmentation at every 1 % of arrived GPU demand.

The scheduling is the operator's: one Session over the whole cluster with the
configured plugins, each pod placed through a Statement as the allocate action does.
Only the order differs (arrival, not queue share), and no reasons are worked out for
pods that fail, which would cost more than the replay itself.
"""

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from tqdm import tqdm

from batchsched.api.gpu import CARD_MILLI, gpu_demand, node_cards
from batchsched.api.pods import ShapeMemo, task_from_pod
from batchsched.api.resources import CPU
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.arrays import IntArray
from batchsched.model.snapshot import JobInfo
from batchsched.plugins.fragmentation import FragmentationModel, TaskClass, task_class
from batchsched.scheduler import open_session

# Wraps the pods in arrival order, as tqdm wraps an iterable, to show how far a replay is.
Track = Callable[[Sequence[JobInfo]], Iterable[JobInfo]]


@dataclass(frozen=True, slots=True)
class CurvePoint:
    arrived_gpu_pct: float
    allocated_gpu_pct: float
    fragmented_gpu_pct: float


@dataclass(slots=True)
class ReplayResult:
    curve: list[CurvePoint]
    pods: int
    bound: int
    gpu_cards: int
    seed: int
    inflate: float
    elapsed_seconds: float

    @property
    def at_100(self) -> CurvePoint | None:
        return next((p for p in self.curve if p.arrived_gpu_pct >= 100.0), None)

    def to_json(self) -> dict[str, Any]:
        at_100 = self.at_100
        return {
            "curve": [dataclasses.asdict(p) for p in self.curve],
            "at_100": _point_json(at_100) if at_100 else None,
            "final": _point_json(self.curve[-1]) if self.curve else None,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "pods": self.pods,
            "bound": self.bound,
            "gpu_cards": self.gpu_cards,
            "seed": self.seed,
            "inflate": self.inflate,
        }


def _point_json(point: CurvePoint) -> dict[str, float]:
    return {
        "allocated_gpu_pct": point.allocated_gpu_pct,
        "fragmented_gpu_pct": point.fragmented_gpu_pct,
    }


def terminal_progress(*, label: str, stream: TextIO) -> Track | None:
    """A tqdm bar on `stream` if it is a terminal; None otherwise, since a log file or a
    pipe would only collect the bar's carriage-return redraws."""
    if not stream.isatty():
        return None

    def track(jobs: Sequence[JobInfo]) -> Iterable[JobInfo]:
        return tqdm(jobs, desc=f"replay {label}", unit="pod", file=stream)

    return track


def replay(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    config: SchedulerConfig,
    *,
    seed: int,
    inflate: float,
    track: Track | None = None,
) -> ReplayResult:
    started = time.perf_counter()
    cache = ClusterCache()
    for node in nodes:
        cache.apply(node)
    capacity = CARD_MILLI * sum(node_cards(n.allocatable) for n in cache.nodes.values())
    for pod in arrivals(pods, seed=seed, inflate=inflate, capacity=capacity):
        cache.apply(pod)
    snapshot = take_snapshot(cache, now=0.0, scheduler_names=config.scheduler_names)
    # The paper's method has no reservation for pods that waited: each is tried once.
    session = open_session(snapshot, dataclasses.replace(config, starvation_seconds=None))
    jobs = sorted(snapshot.jobs.values(), key=lambda job: job.creation)
    mix = Counter(task_class(t.pod) for job in jobs for t in job.pending)
    sampler = _Sampler(session, mix, capacity)
    bound = 0
    for job in jobs if track is None else track(jobs):
        placed = _place(session, job)
        bound += placed
        sampler.arrive(job, placed=placed)
    return ReplayResult(
        curve=sampler.curve,
        pods=len(jobs),
        bound=bound,
        gpu_cards=capacity // CARD_MILLI,
        seed=seed,
        inflate=inflate,
        elapsed_seconds=time.perf_counter() - started,
    )


def arrivals(
    pods: Sequence[dict[str, Any]], *, seed: int, inflate: float, capacity: int
) -> list[dict[str, Any]]:
    """The trace shuffled, then resampled with replacement up to `inflate` x capacity."""
    rng = np.random.default_rng(seed)
    order = [pods[i] for i in rng.permutation(len(pods))]
    # Pods of a trace come in few shapes: each is parsed once.
    shapes = ShapeMemo()
    demands = [gpu_demand(task_from_pod(pod, shapes=shapes).request).total for pod in pods]
    requested = sum(demands)
    copies = 0
    # Pods without GPUs never raise GPU demand: a trace of only those is not resampled.
    while any(demands) and requested < inflate * capacity:
        pick = int(rng.integers(len(pods)))
        copies += 1
        # Parsing never changes a pod, so a copy shares all but its metadata.
        metadata = {
            **pods[pick]["metadata"],
            "name": f"{pods[pick]['metadata']['name']}-copy{copies}",
        }
        order.append({**pods[pick], "metadata": metadata})
        requested += demands[pick]
    return order


def _place(session: Session, job: JobInfo) -> bool:
    task = job.pending[0]
    if task.error or session.not_allocatable(job, task):
        return False
    node = session.best_node(task)
    if node is None:
        return False
    statement = Statement(session, job)
    statement.allocate(task, node)
    statement.commit()
    return True


class _Sampler:
    """Records the curve each time arrived GPU demand crosses another 1 % of capacity.

    Fragmentation is kept per node and re-measured only on the nodes placements touched.
    """

    def __init__(self, session: Session, mix: Counter[TaskClass], capacity: int) -> None:
        self.session = session
        self.model = FragmentationModel(mix, session.snapshot.nodes)
        self.capacity = capacity
        cpu = session.snapshot.column[CPU]
        self.cpu_allocatable = session.snapshot.allocatable[:, cpu]
        self.cpu_column = cpu
        self.by_node = self._measure(session.all_nodes)
        self.seen = len(session.touched)
        self.arrived = 0
        self.allocated = 0
        self.next_percent = 1
        self.curve: list[CurvePoint] = []

    def arrive(self, job: JobInfo, *, placed: bool) -> None:
        demand = job.pending[0].gpu.total
        self.arrived += demand
        self.allocated += demand if placed else 0
        if self.capacity == 0 or self.arrived * 100 < self.next_percent * self.capacity:
            return
        while self.arrived * 100 >= self.next_percent * self.capacity:
            self.next_percent += 1
        touched = self.session.touched
        changed = np.unique(np.array(touched[self.seen :], dtype=np.int64))
        self.by_node[changed] = self._measure(changed)
        self.seen = len(touched)
        fragmented = int(self.by_node.sum()) / max(self.model.total_weight, 1)
        self.curve.append(
            CurvePoint(
                arrived_gpu_pct=round(100 * self.arrived / self.capacity, 3),
                allocated_gpu_pct=round(100 * self.allocated / self.capacity, 3),
                fragmented_gpu_pct=round(100 * fragmented / self.capacity, 3),
            )
        )

    def _measure(self, rows: IntArray) -> IntArray:
        cpu_free = self.cpu_allocatable[rows] - self.session.requested[rows, self.cpu_column]
        return self.model.measure(rows, self.session.gpu.free[rows], cpu_free)


def replay_table(result: ReplayResult) -> str:
    """The curve at every 10 % of arrival, then totals, for people."""
    rows = ["ARRIVED%  ALLOCATED%  FRAGMENTED%"]
    step = 10.0
    for point in result.curve:
        if point.arrived_gpu_pct >= step:
            rows.append(
                f"{point.arrived_gpu_pct:8.1f}  {point.allocated_gpu_pct:10.2f}  "
                f"{point.fragmented_gpu_pct:11.2f}"
            )
            while step <= point.arrived_gpu_pct:
                step += 10.0
    rows.append(
        f"\n{result.bound}/{result.pods} pods bound on {result.gpu_cards} GPUs "
        f"(seed {result.seed}, inflate {result.inflate:g}) in {result.elapsed_seconds:.1f} s"
    )
    return "\n".join(rows)
