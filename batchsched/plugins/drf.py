"""drf: dominant resource fairness between jobs, as Volcano's drf plugin orders them.

A job's dominant share is the largest, over the cluster's resources, of what its bound
and placed pods request divided by the cluster's allocatable. Jobs with the smaller
share go first (after the orderings of plugins listed before drf), and the share moves
as the session places and evicts pods, so a job that just got room yields to one that
has none.

Its preemptable vote, unless turned off with Volcano's `enablePreemptable: false` (as
Volcano's chart does): a running pod may be preempted when the preemptor's share, with
its first pending pod placed, stays at or below the victim's job's share without that
pod, so preemption never makes the cluster less fair. Volcano asks this per preempting
pod; batchsched's victims are chosen per job, with its first pending pod standing for it.
Volcano's hierarchical mode (`enableHierarchy`) is not implemented and is refused.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.resources import PODS
from batchsched.framework.session import Session
from batchsched.framework.victims import Victims
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.arguments import check_keys

# Volcano's tolerance when comparing shares for preemption.
SHARE_DELTA = 1e-6


class Drf:
    name = "drf"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        total = snapshot.allocatable.sum(axis=0).astype(np.float64)
        # Pod slots are a per-node limit, not a resource jobs share.
        counted = (total > 0) & np.array([n != PODS for n in snapshot.resources], dtype=np.bool_)
        self.divisor: FloatArray = np.where(counted, total, np.inf)
        self.allocated: dict[str, IntArray] = {
            key: job.allocated.copy()
            if len(job.allocated)
            else np.zeros(len(snapshot.resources), dtype=np.int64)
            for key, job in snapshot.jobs.items()
        }
        session.job_keys.append(lambda job: self.share(self.allocated[job.key]))
        session.on_allocate.append(lambda job, task, _: self._move(job, task, +1))
        session.on_deallocate.append(lambda job, task, _: self._move(job, task, -1))
        session.preemptable.append(self._preemptable)

    def share(self, allocated: IntArray) -> float:
        return float((allocated / self.divisor).max(initial=0.0))

    def _move(self, job: JobInfo, task: TaskInfo, step: int) -> None:
        held = self.allocated.get(job.key)
        if held is not None:
            held += step * task.vec

    def _preemptable(self, job: JobInfo, victims: Victims) -> BoolArray:
        first = self.session.task_order(job.pending)[:1]
        mine = self.allocated[job.key] + (first[0].vec if first else 0)
        own_share = self.share(mine)
        # Each victim's job's allocation without it; a pod of no known job is its own.
        held = np.array(
            [
                self.allocated[j.key] if j is not None and j.key in self.allocated else vec
                for j, vec in zip(victims.jobs, victims.vecs, strict=True)
            ],
            dtype=np.int64,
        ).reshape(victims.vecs.shape)
        after = ((held - victims.vecs) / self.divisor).max(axis=1, initial=0.0)
        allowed: BoolArray = own_share <= after + SHARE_DELTA
        return allowed
