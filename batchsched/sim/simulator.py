"""Running sessions on an in-memory cluster until nothing more can be placed.

Bound pods are marked Running at once, standing in for the kubelet, and PodGroup phases
are written back, just as the operator's status writer would do.
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.snapshot import Snapshot, take_snapshot
from batchsched.framework.config import SchedulerConfig, run_session
from batchsched.framework.decisions import Decisions

# A guard against a plugin that keeps binding forever; real inputs settle far sooner.
MAX_SESSIONS = 10_000


@dataclass
class Simulation:
    cache: ClusterCache
    snapshot: Snapshot
    decisions: Decisions
    sessions: int
    elapsed_seconds: float
    errors: list[str] = field(default_factory=list)


def simulate(objects: Iterable[dict[str, Any]], config: SchedulerConfig) -> Simulation:
    cache = ClusterCache()
    errors: list[str] = []
    for obj in objects:
        try:
            cache.apply(obj)
        except InvalidObject as error:
            errors.append(str(error))
    # A malformed PodGroup is kept so that its pods can wait with its error; say it here too.
    errors += [group.error for group in cache.pod_groups.values() if group.error]
    now = max((t.creation for t in cache.tasks.values()), default=0.0)
    elapsed = 0.0
    sessions = 0
    while True:
        started = time.perf_counter()
        snapshot = take_snapshot(cache, now=now, scheduler_name=config.scheduler_name)
        decisions = run_session(snapshot, config)
        elapsed += time.perf_counter() - started
        sessions += 1
        for binding in decisions.bindings:
            cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
            cache.tasks[binding.key].phase = "Running"
        for status in decisions.jobs.values():
            group = cache.pod_groups.get(status.key)
            if group is not None:
                group.phase = status.phase
        if not decisions.bindings or sessions >= MAX_SESSIONS:
            break
        now += config.schedule_period
    final = take_snapshot(cache, now=now, scheduler_name=config.scheduler_name)
    return Simulation(
        cache=cache,
        snapshot=final,
        decisions=decisions,
        sessions=sessions,
        elapsed_seconds=elapsed,
        errors=errors,
    )
