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

from collections import Counter
from collections.abc import Callable

import numpy as np

from batchsched.api.objects import Constraints, Task, Toleration
from batchsched.api.podaffinity import AffinityTerm
from batchsched.api.selectors import NOTHING
from batchsched.api.topologyspread import Spread, SpreadConstraint
from batchsched.cache.snapshot import IntArray, TaskInfo
from batchsched.framework.plugin import BoolArray
from batchsched.framework.session import Session
from batchsched.plugins.podcounts import PodCounts

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
    return any(
        c.hard for job in session.snapshot.jobs.values() for t in job.pending for c in t.task.spread
    )


class SpreadCounts(PodCounts):
    """Matching pods per eligible domain, for the filter and the score."""

    def __init__(self, session: Session, *, allowed: Allowed) -> None:
        self.allowed = allowed
        self._keyed: dict[frozenset[str], BoolArray] = {}
        self._eligible: dict[
            tuple[frozenset[str], SpreadConstraint, Constraints], tuple[BoolArray, IntArray]
        ] = {}
        self._terms: dict[tuple[str, SpreadConstraint], AffinityTerm] = {}
        super().__init__(session)

    def keyed(self, constraints: Spread) -> BoolArray:
        """The nodes that carry the topology key of every one of `constraints`."""
        keys = frozenset(c.topology_key for c in constraints)
        found = self._keyed.get(keys)
        if found is None:
            found = np.ones(self.session.node_count, dtype=np.bool_)
            for key in keys:
                found &= self.topology.ids(key) < self.topology.size(key)
            self._keyed[keys] = found
        return found

    def eligible(
        self, constraints: Spread, constraint: SpreadConstraint, pod: Task
    ) -> tuple[BoolArray, IntArray]:
        """The nodes whose pods and domains count for `constraint`, one of the pod's,
        and the ids of the domains they make up."""
        keys = frozenset(c.topology_key for c in constraints)
        key = (keys, constraint, pod.constraints)
        found = self._eligible.get(key)
        if found is None:
            nodes = self.keyed(constraints).copy()
            if constraint.honor_affinity:
                own = pod.constraints
                nodes &= self.allowed(Constraints(own.node_selector, own.affinity, _ANY_TAINT))
            if constraint.honor_taints:
                nodes &= self.allowed(Constraints(tolerations=pod.constraints.tolerations))
            domains = np.unique(self.topology.ids(constraint.topology_key)[nodes])
            found = self._eligible[key] = (nodes, domains)
        return found

    def domain_counts(
        self, constraint: SpreadConstraint, namespace: str, eligible: BoolArray
    ) -> IntArray:
        """Per domain id of the constraint's key (one more for no domain), the pods of
        `namespace` it selects on eligible nodes."""
        key = constraint.topology_key
        counts: IntArray = np.zeros(self.topology.size(key) + 1, dtype=np.int64)
        if not constraint.counts_pods:
            return counts
        by_row = self.by_row(self._term(namespace, constraint))
        if not by_row:
            return counts
        rows = np.fromiter(by_row, dtype=np.int64, count=len(by_row))
        pods = np.fromiter(by_row.values(), dtype=np.int64, count=len(by_row))
        keep = eligible[rows]
        np.add.at(counts, self.topology.ids(key)[rows[keep]], pods[keep])
        return counts

    def row_counts(self, constraint: SpreadConstraint, namespace: str) -> IntArray:
        """Per node row, the pods of `namespace` the constraint selects, wherever they are."""
        counts: IntArray = np.zeros(self.session.node_count, dtype=np.int64)
        if constraint.counts_pods:
            for row, pods in self.by_row(self._term(namespace, constraint)).items():
                counts[row] = pods
        return counts

    def _term(self, namespace: str, constraint: SpreadConstraint) -> AffinityTerm:
        """The constraint as a term selecting pods of one namespace, for PodCounts."""
        found = self._terms.get((namespace, constraint))
        if found is None:
            found = self._terms[(namespace, constraint)] = AffinityTerm(
                constraint.selector, frozenset({namespace}), NOTHING, constraint.topology_key
            )
        return found


class TopologySpread(SpreadCounts):
    """The filter, for the DoNotSchedule constraints `constraints_of` gives a pod."""

    def __init__(
        self, session: Session, *, constraints_of: ConstraintsOf, allowed: Allowed
    ) -> None:
        self.constraints_of = constraints_of
        super().__init__(session, allowed=allowed)
        session.fresh_filters.append(self)

    def hard(self, pod: Task) -> Spread:
        return tuple(c for c in self.constraints_of(pod) if c.hard)

    def mask(self, task: TaskInfo) -> BoolArray | None:
        constraints = self.hard(task.task)
        if not constraints:
            return None
        ok: BoolArray = np.ones(self.session.node_count, dtype=np.bool_)
        for has_key, skewed in self._checks(task.task, constraints):
            ok &= has_key & ~skewed
        return ok

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        allowed = self.mask(task)
        return np.ones(len(nodes), dtype=np.bool_) if allowed is None else allowed[nodes]

    def explain(self, task: TaskInfo, nodes: IntArray) -> Counter[str]:
        """One reason per node: that of the first constraint it fails, as kube-scheduler's."""
        reasons: Counter[str] = Counter()
        constraints = self.hard(task.task)
        if not constraints:
            return reasons
        left: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for has_key, skewed in self._checks(task.task, constraints):
            for reason, failing in ((MISSING_LABEL, ~has_key), (CONSTRAINTS_MISMATCH, skewed)):
                failed = failing[nodes] & left
                if failed.any():
                    reasons[reason] += int(failed.sum())
                left &= ~failed
        return reasons

    def _checks(self, pod: Task, constraints: Spread) -> list[tuple[BoolArray, BoolArray]]:
        """Per constraint, over all nodes: whether the node has the key, and whether the
        pod there would make the skew exceed maxSkew."""
        checks = []
        for constraint in constraints:
            key = constraint.topology_key
            ids, size = self.topology.ids(key), self.topology.size(key)
            eligible, domains = self.eligible(constraints, constraint, pod)
            counts = self.domain_counts(constraint, pod.namespace, eligible)
            lowest = int(counts[domains].min()) if len(domains) >= constraint.min_domains else 0
            itself = int(constraint.selector.matches(pod.labels))
            skewed = counts[ids] + itself - lowest > constraint.max_skew
            checks.append((ids < size, skewed))
        return checks
