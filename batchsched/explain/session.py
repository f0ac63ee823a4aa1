"""One run of the scheduling core over the cluster, kept open so it can be asked why."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from batchsched.api.nativegroups import Workload
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig
from batchsched.framework.plugin import NodeFilter
from batchsched.framework.session import FreshFilter, Plugin, Session
from batchsched.model.arrays import IntArray
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import Snapshot, TaskInfo
from batchsched.scheduler import open_session, run_actions


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """How many nodes one filter refused for one reason (kube-scheduler's words)."""

    filter: str
    reason: str
    count: int


@dataclass(kw_only=True)
class Ran:
    config: SchedulerConfig
    snapshot: Snapshot
    session: Session
    decisions: Decisions
    # Kubernetes' Workloads, which explain names beside the PodGroups made from them.
    workloads: Mapping[str, Workload]

    def plugin(self, name: str) -> Plugin | None:
        """The configured plugin of that name, its state as the session left it."""
        return next((p for tier in self.config.tiers for p in tier if p.name == name), None)

    def vector(self, request: dict[str, int]) -> IntArray:
        column = self.snapshot.column
        vec = np.zeros(len(column), dtype=np.int64)
        for name, value in request.items():
            if name in column:
                vec[column[name]] = value
        return vec

    def refusals(self, task: TaskInfo) -> tuple[list[Refusal], dict[str, list[str]], IntArray]:
        """Per filter, in the session's order, how many nodes it refused for each reason
        and a few of them by name, then the nodes every filter passes. As in
        kube-scheduler a node counts for the first filter it fails only."""
        found: list[Refusal] = []
        examples: dict[str, list[str]] = {}
        left = self.session.all_nodes
        for node_filter in self._filters():
            if not len(left):
                break
            counted, passing = node_filter.explain(task, left)
            if not counted:
                left = passing
                continue
            name = node_filter.name
            ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
            found += [Refusal(filter=name, reason=why, count=n) for why, n in ranked]
            refused = np.setdiff1d(left, passing)[:3]
            examples[name] = [self.snapshot.nodes[int(row)].name for row in refused]
            left = passing
        return found, examples, left

    def _filters(self) -> Iterator[NodeFilter | FreshFilter]:
        yield from self.session.filters
        yield from self.session.fresh_filters


def run_once(cache: ClusterCache, config: SchedulerConfig, *, now: float) -> Ran:
    """What `run_session` does, the session kept: nothing is bound or written."""
    snapshot = take_snapshot(cache, now=now, scheduler_names=config.scheduler_names)
    session = open_session(snapshot, config)
    decisions = run_actions(session, config.actions)
    return Ran(
        config=config,
        snapshot=snapshot,
        session=session,
        decisions=decisions,
        workloads=dict(cache.workloads),
    )
