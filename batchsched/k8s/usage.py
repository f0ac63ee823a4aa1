"""What one session leaves the cluster looking like, for Queue status and the gauges.

Pure: a snapshot and its decisions in, totals out. Binds decided in the session count
as allocated already, as they do in the cache.
"""

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from batchsched.api.resources import ResourceList
from batchsched.k8s.status import QueueUsage
from batchsched.model.arrays import IntArray
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import Snapshot

# Group phases that count as waiting, and the Queue status field each phase counts in.
WAITING_PHASES = ("Pending", "Inqueue")
QUEUE_COUNTS = {"Pending": "pending", "Inqueue": "inqueue", "Running": "running"}


@dataclass(frozen=True)
class Usage:
    pending_groups: int
    # Pending pods holding a nominated node once the session's nominations are written.
    nominated: int = 0
    queues: dict[str, QueueUsage] = field(default_factory=dict)
    cluster_allocatable: ResourceList = field(default_factory=dict)
    cluster_allocated: ResourceList = field(default_factory=dict)


def summarize(snapshot: Snapshot, decisions: Decisions) -> Usage:
    width = len(snapshot.resources)
    placed: dict[str, IntArray] = defaultdict(lambda: np.zeros(width, dtype=np.int64))
    decided = {b.key for b in decisions.bindings}
    for job in snapshot.jobs.values():
        for task in job.pending:
            if task.key in decided:
                placed[job.key] += task.vec
    queue_allocated: dict[str, IntArray] = defaultdict(lambda: np.zeros(width, dtype=np.int64))
    for job in snapshot.jobs.values():
        queue_allocated[job.queue] += job.allocated
        if job.key in placed:
            queue_allocated[job.queue] += placed[job.key]
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(QUEUE_COUNTS.values(), 0))
    for key, status in decisions.jobs.items():
        field_name = QUEUE_COUNTS.get(status.phase)
        if field_name is not None:
            counts[snapshot.jobs[key].queue][field_name] += 1
    for name, running in decisions.running_unchanged.items():
        counts[name]["running"] += running
    held = _with_descendants(snapshot, queue_allocated)
    queues = {
        name: QueueUsage(allocated=_resources(snapshot, held[name]), **counts[name])
        for name in snapshot.queues
    }
    allocated = snapshot.used.sum(axis=0) + sum(placed.values(), np.zeros(width, dtype=np.int64))
    return Usage(
        pending_groups=sum(s.phase in WAITING_PHASES for s in decisions.jobs.values()),
        nominated=_nominated(snapshot, decisions, decided),
        queues=queues,
        cluster_allocatable=_resources(snapshot, snapshot.allocatable.sum(axis=0)),
        cluster_allocated=_resources(snapshot, allocated),
    )


def _with_descendants(snapshot: Snapshot, own: dict[str, IntArray]) -> defaultdict[str, IntArray]:
    """What each queue holds with the queues under it, as Volcano's Queue status shows
    it: a parent's allocation is its children's too (cycles, refused, end the walk)."""
    width = len(snapshot.resources)
    held: defaultdict[str, IntArray] = defaultdict(lambda: np.zeros(width, dtype=np.int64))
    for name, amount in own.items():
        seen: set[str] = set()
        at: str | None = name
        while at is not None and at not in seen:
            seen.add(at)
            held[at] += amount
            found = snapshot.queues.get(at)
            at = found.parent if found is not None else None
    return held


def _nominated(snapshot: Snapshot, decisions: Decisions, decided: set[str]) -> int:
    """Pending pods showing a nominated node, with the session's nominations applied
    (an empty node clears one), and not bound by it."""
    held = {
        task.key
        for job in snapshot.jobs.values()
        for task in job.pending
        if task.pod.nominated_node
    }
    for nomination in decisions.nominations:
        if nomination.node:
            held.add(nomination.key)
        else:
            held.discard(nomination.key)
    return len(held - decided)


def _resources(snapshot: Snapshot, vector: IntArray) -> ResourceList:
    return {name: int(vector[i]) for i, name in enumerate(snapshot.resources)}
