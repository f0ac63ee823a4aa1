"""proportion: share the cluster between queues by weight, within each queue's capability.

Each session computes every queue's deserved share by water-filling: the capacity of the
nodes its jobs can reach is handed out in proportion to weight, no queue gets more than
it asks for (allocated + pending) or than its capability, and what one queue cannot use
goes to the others. The queue furthest below its share is served first; a queue at or
above its share waits while others have work.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from batchsched.api.resources import PODS, format_amount
from batchsched.cache.snapshot import IntArray, JobInfo, TaskInfo
from batchsched.framework.plugin import BoolArray
from batchsched.framework.session import Session
from batchsched.plugins.arguments import check_keys

FloatArray = npt.NDArray[np.float64]


class Proportion:
    name = "proportion"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        self.session = session
        snapshot = session.snapshot
        width = len(snapshot.resources)
        self.queues = snapshot.queues
        # Pod slots are a per-node limit, not something queues share out.
        self.shared = np.array([name != PODS for name in snapshot.resources], dtype=np.bool_)
        self.allocated: dict[str, IntArray] = {
            name: np.zeros(width, dtype=np.int64) for name in self.queues
        }
        # Resources held by jobs admitted (Inqueue) but not yet placed, per queue.
        self.reserved: dict[str, IntArray] = {
            name: np.zeros(width, dtype=np.int64) for name in self.queues
        }
        demand = {name: np.zeros(width, dtype=np.int64) for name in self.queues}
        column = snapshot.column
        self.capability: dict[str, FloatArray] = {}
        for name, queue in self.queues.items():
            cap = np.full(width, np.inf)
            for resource, value in queue.capability.items():
                if resource in column:
                    cap[column[resource]] = value
            self.capability[name] = cap
        for job in snapshot.jobs.values():
            if job.queue in self.queues:
                self.allocated[job.queue] += job.allocated
                demand[job.queue] += job.allocated
                for task in job.pending:
                    demand[job.queue] += task.vec
        self.demand = demand
        self._deserved: dict[str, FloatArray] | None = None
        # Holding a queue back at its share only helps when another queue is waiting.
        waiting = [q for q in demand if (demand[q] > self.allocated[q])[self.shared].any()]
        self.contended = len(waiting) > 1
        session.valid_checks.append(self._invalid)
        session.enqueue_checks.append(self._enqueue_blocked)
        session.allocate_checks.append(self._over_capability)
        session.queue_keys.append(self._share)
        session.overused_checks.append(self._overused)
        session.on_allocate.append(self._allocated)
        session.on_deallocate.append(self._deallocated)
        session.closers.append(self._report)

    @property
    def deserved(self) -> dict[str, FloatArray]:
        """Worked out when first asked in a session, once every plugin is open: which
        nodes a pod may use is the predicates plugin's to say, wherever the configuration
        lists it."""
        if self._deserved is None:
            self._deserved = self._water_fill(self._reachable(), self.demand)
        return self._deserved

    def _report(self) -> None:
        resources = self.session.snapshot.resources
        self.session.decisions.deserved = {
            name: {resources[column]: int(share[column]) for column in np.flatnonzero(share >= 1)}
            for name, share in self.deserved.items()
        }

    def _reachable(self) -> IntArray:
        """The capacity queues compete for: that of the nodes some pending pod may use
        (its selectors, affinity and tolerations, as predicates reads them) or some pod
        of ours runs on. Shares of nodes no job can use would be shares of nothing: two
        queues weighted 1:3 on an 8-CPU pool of a larger cluster deserve 2 and 6 CPUs."""
        snapshot = self.session.snapshot
        reach: BoolArray = np.zeros(len(snapshot.nodes), dtype=np.bool_)
        seen = set()
        for job in snapshot.jobs.values():
            for task in job.pending:
                constraints = task.task.constraints
                if constraints not in seen:
                    seen.add(constraints)
                    reach |= self.session.allowed(constraints)
        for row, pod in snapshot.placed:
            reach[row] |= pod.scheduler_name == snapshot.scheduler_name
        total: IntArray = snapshot.allocatable[reach].sum(axis=0)
        return total

    def _water_fill(self, total: IntArray, demand: dict[str, IntArray]) -> dict[str, FloatArray]:
        limit = {q: np.minimum(demand[q].astype(np.float64), self.capability[q]) for q in demand}
        deserved = {q: np.zeros(len(total)) for q in demand}
        remaining = total.astype(np.float64)
        hungry = [q for q in demand if (limit[q] > 0).any()]
        while hungry and (remaining > 0).any():
            weight_sum = sum(self.queues[q].weight for q in hungry)
            for q in hungry:
                offer = remaining * self.queues[q].weight / weight_sum
                deserved[q] = np.minimum(deserved[q] + offer, limit[q])
            given = sum(deserved.values(), np.zeros(len(total)))
            left = np.maximum(total - given, 0)
            if np.allclose(left, remaining):
                break
            remaining = left
            hungry = [q for q in hungry if (deserved[q] < limit[q] - 1e-9).any()]
        return deserved

    def _invalid(self, job: JobInfo) -> str | None:
        if job.queue in self.queues:
            return None
        why = self.session.snapshot.rejected_queues.get(job.queue)
        if why is not None:
            return f"queue {job.queue!r} is invalid: {why}"
        return f"queue {job.queue!r} does not exist"

    def _enqueue_blocked(self, job: JobInfo) -> str | None:
        queue = self.queues[job.queue]
        if not queue.open:
            return f"queue {queue.name} is closed"
        minimum = self._vector(job.min_resources)
        after = self.allocated[job.queue] + self.reserved[job.queue] + minimum
        over = np.flatnonzero(after > self.capability[job.queue])
        if len(over):
            return self._over_message(job.queue, int(over[0]), "minResources")
        self.reserved[job.queue] += minimum
        return None

    def _over_capability(self, job: JobInfo, task: TaskInfo) -> str | None:
        if not self.queues[job.queue].capability:
            return None
        after = self.allocated[job.queue] + task.vec
        over = np.flatnonzero((after > self.capability[job.queue]) & (task.vec > 0))
        if len(over):
            return self._over_message(job.queue, int(over[0]), f"pod {task.key}")
        return None

    def _over_message(self, queue: str, column: int, what: str) -> str:
        name = self.session.snapshot.resources[column]
        cap = int(self.capability[queue][column])
        used = int(self.allocated[queue][column])
        return (
            f"queue {queue}: {what} would exceed its capability for {name} "
            f"({format_amount(name, used)} of {format_amount(name, cap)} in use)"
        )

    def _share(self, queue: str) -> float:
        deserved = self.deserved.get(queue)
        if deserved is None:
            return 0.0
        counted = (deserved > 0) & self.shared
        if not counted.any():
            return 0.0
        return float((self.allocated[queue][counted] / deserved[counted]).max())

    def _overused(self, queue: str) -> bool:
        deserved = self.deserved.get(queue)
        if not self.contended or deserved is None or not deserved[self.shared].any():
            return False
        return bool((deserved <= self.allocated[queue])[self.shared].all())

    def _allocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.allocated[job.queue] += task.vec

    def _deallocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.allocated[job.queue] -= task.vec

    def _vector(self, resources: Mapping[str, int]) -> IntArray:
        column = self.session.snapshot.column
        vector = np.zeros(len(column), dtype=np.int64)
        for name, value in resources.items():
            vector[column[name]] = value
        return vector
