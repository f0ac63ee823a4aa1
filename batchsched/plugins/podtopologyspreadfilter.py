"""Topology spread constraints with whenUnsatisfiable DoNotSchedule, with kube-scheduler's
PodTopologySpread filter.

For each constraint, in the pod's namespace, the pods its selector selects are counted
per domain of its topology key, over the eligible nodes only: those that carry every
key of the pod's constraints and that its node inclusion policies admit (the pod's
required node affinity with nodeAffinityPolicy Honor, the default; its tolerations of
NoSchedule and NoExecute taints with nodeTaintsPolicy Honor). A node passes when, for
every constraint, it has the key and

    pods in its domain + 1 if the pod matches the selector itself - global minimum <= maxSkew

where the global minimum is the least count over the eligible domains, or 0 when there
are fewer of them than minDomains. Terminating pods do not count.

Pods placed tentatively in the session count like bound ones, so the members of a gang
spread among themselves before any of them is bound. Like pod affinity, the filter is
asked afresh over all nodes at each choice: a pod placed in one domain can move the
global minimum and so change every node's outcome. Which nodes are eligible does not
change in a session, and is kept per set of constraints. Nothing is kept, and no filter
is added, in a session where no pod states such a constraint.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from batchsched.api.objects import Constraints, Task, Toleration
from batchsched.api.podaffinity import AffinityTerm
from batchsched.api.selectors import NOTHING
from batchsched.api.topologyspread import Spread, SpreadConstraint
from batchsched.framework.plugin import CheckedFilter
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.podcounts import Counts, PodCounts

CONSTRAINTS_MISMATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = f"{CONSTRAINTS_MISMATCH} (missing required label)"
# Tolerates every taint: node affinity alone decides where such constraints allow.
_ANY_TAINT = (Toleration("", "Exists", "", ""),)

# The constraints a pod is held to (its own, or defaults the configuration gives).
ConstraintsOf = Callable[[Task], Spread]
# Where pods with the given constraints may run, whatever runs there (predicates').
Allowed = Callable[[Constraints], BoolArray]


def own_constraints(pod: Task) -> Spread:
    return pod.spread


def stated(session: Session) -> bool:
    """Whether any pending pod of ours states a DoNotSchedule constraint."""
    return any(c.hard for job in session.placing for t in job.pending for c in t.pod.spread)


@dataclass(slots=True)
class Planned:
    """One of a pod's constraints with what does not change in a session resolved."""

    constraint: SpreadConstraint
    ids: IntArray  # the domain id of every node row, for the constraint's key
    size: int  # how many domains; also the id of nodes without the key
    keyed: BoolArray  # the nodes that carry every key of the pod's constraints
    eligible: BoolArray  # the nodes whose pods and domains count
    domains: IntArray  # the ids of the domains the eligible nodes make up
    rows: Counts | None  # node row -> the pods it selects, kept current; None: none count


class SpreadCounts(PodCounts):
    """Matching pods per eligible domain, for the filter and the score."""

    def __init__(
        self, session: Session, *, constraints_of: ConstraintsOf, allowed: Allowed
    ) -> None:
        self.constraints_of = constraints_of
        self.allowed = allowed
        self._keyed: dict[frozenset[str], BoolArray] = {}
        # By the identity of the pod's constraints and node constraints (shared by the
        # pods of one template), not by their value: hashing them is what would cost.
        self._plans: dict[tuple[int, int, str, bool], tuple[Spread, Constraints, list[Planned]]]
        self._plans = {}
        super().__init__(session)

    def planned(self, pod: Task, *, hard: bool) -> list[Planned]:
        """The pod's DoNotSchedule (`hard`) or ScheduleAnyway constraints, resolved."""
        source = self.constraints_of(pod)
        if not source:
            return []
        key = (id(source), id(pod.constraints), pod.namespace, hard)
        found = self._plans.get(key)
        if found is None or found[0] is not source or found[1] is not pod.constraints:
            constraints = tuple(c for c in source if c.hard == hard)
            plans = [self._plan(pod, constraints, c) for c in constraints]
            found = self._plans[key] = (source, pod.constraints, plans)
        return found[2]

    def domain_counts(self, planned: Planned) -> IntArray:
        """Per domain id (one more for no domain), the selected pods on eligible nodes."""
        counts: IntArray = np.zeros(planned.size + 1, dtype=np.int64)
        if planned.rows:
            found = planned.rows
            rows = np.fromiter(found, dtype=np.int64, count=len(found))
            pods = np.fromiter(found.values(), dtype=np.int64, count=len(found))
            keep = planned.eligible[rows]
            np.add.at(counts, planned.ids[rows[keep]], pods[keep])
        return counts

    def row_counts(self, planned: Planned) -> IntArray:
        """Per node row, the selected pods, wherever they are."""
        counts: IntArray = np.zeros(self.session.node_count, dtype=np.int64)
        for row, pods in (planned.rows or {}).items():
            counts[row] = pods
        return counts

    def _plan(self, pod: Task, constraints: Spread, constraint: SpreadConstraint) -> Planned:
        key = constraint.topology_key
        ids, size = self.topology.ids(key), self.topology.size(key)
        keyed = self._keyed_by(constraints)
        eligible = keyed.copy()
        if constraint.honor_affinity:
            own = pod.constraints
            eligible &= self.allowed(Constraints(own.node_selector, own.affinity, _ANY_TAINT))
        if constraint.honor_taints:
            eligible &= self.allowed(Constraints(tolerations=pod.constraints.tolerations))
        rows = None
        if constraint.counts_pods:
            namespace = frozenset({pod.namespace})
            rows = self.by_row(AffinityTerm(constraint.selector, namespace, NOTHING, key))
        return Planned(constraint, ids, size, keyed, eligible, np.unique(ids[eligible]), rows)

    def _keyed_by(self, constraints: Spread) -> BoolArray:
        keys = frozenset(c.topology_key for c in constraints)
        found = self._keyed.get(keys)
        if found is None:
            found = np.ones(self.session.node_count, dtype=np.bool_)
            for key in keys:
                found &= self.topology.ids(key) < self.topology.size(key)
            self._keyed[keys] = found
        return found


class TopologySpread(SpreadCounts, CheckedFilter):
    """The filter, for the DoNotSchedule constraints `constraints_of` gives a pod."""

    name = "TopologySpread"

    def __init__(
        self, session: Session, *, constraints_of: ConstraintsOf, allowed: Allowed
    ) -> None:
        super().__init__(session, constraints_of=constraints_of, allowed=allowed)
        session.fresh_filters.append(self)

    def concerns(self, task: TaskInfo) -> bool:
        return bool(self.planned(task.pod, hard=True))

    def failures(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        """Per constraint, over all nodes: those without its key, then those where the
        pod would make the skew exceed maxSkew."""
        pod = task.pod
        failures = []
        for plan in self.planned(pod, hard=True):
            constraint, domains = plan.constraint, plan.domains
            counts = self.domain_counts(plan)
            lowest = int(counts[domains].min()) if len(domains) >= constraint.min_domains else 0
            itself = int(constraint.selector.matches(pod.labels))
            skewed = counts[plan.ids] + itself - lowest > constraint.max_skew
            failures += [(MISSING_LABEL, plan.ids >= plan.size), (CONSTRAINTS_MISMATCH, skewed)]
        return failures
