"""podtopologyspread: topology spread constraints with whenUnsatisfiable ScheduleAnyway,
scored as kube-scheduler's PodTopologySpread scores them, and cluster-level defaults.

Nodes that fit but lack a key of the pod's constraints score 0. On the others, each
constraint adds

    matching pods in the node's domain * log(domains + 2) + maxSkew - 1

where pods count on eligible nodes as in the filter (podtopologyspreadfilter.py) and the domains
are those of the nodes that fit; for `kubernetes.io/hostname`, the pods on the node
itself, and the nodes that fit. The sum is rounded, then inverted and normalized:
100 * (max + min - score) / max over those nodes (100 everywhere when max is 0), and
weighted by `weight` (kube-scheduler's default profile weighs this plugin 2).

Defaults (`defaultConstraints`) hold pods that state no constraint of their own, as
kube-scheduler's PodTopologySpreadArgs with `defaultingType: List`. kube-scheduler
finds a pod's peers for a default constraint through the Services, ReplicationControllers,
ReplicaSets and StatefulSets that select it, and its `System` defaulting relies on that;
batchsched does not watch those objects, so it offers `List` only, and a default
constraint names its peers with matchLabelKeys: the pods sharing the pod's values of
those labels. A pod carrying none of them is not held to the constraint. Its
DoNotSchedule defaults are filtered here, its ScheduleAnyway ones scored.

Nothing is kept, and nothing scored, in a session where no pod is held to a constraint.
"""

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import sequence
from batchsched.api.objects import Task
from batchsched.api.topologyspread import (
    Spread,
    check_unique,
    match_label_keys,
    spread_constraint,
)
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.podtopologyspreadfilter import (
    Allowed,
    Planned,
    SpreadCounts,
    TopologySpread,
    own_constraints,
)
from batchsched.plugins.predicates import allowed_nodes

HOSTNAME = "kubernetes.io/hostname"
LIST, SYSTEM = "List", "System"
RESOLVED_LIMIT = 4096


class PodTopologySpreadScore:
    name = "podtopologyspread"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight", "defaultingType", "defaultConstraints"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 2), low=1, high=100)
        defaulting = arguments.get("defaultingType", LIST)
        if defaulting == SYSTEM:
            raise InvalidObject(
                f"plugin {self.name}: defaultingType System is not supported: its defaults "
                "find a pod's peers through the Services, ReplicationControllers, "
                "ReplicaSets and StatefulSets that select it, which batchsched does not "
                "watch; use List with defaultConstraints naming matchLabelKeys"
            )
        if defaulting != LIST:
            raise InvalidObject(
                f"plugin {self.name}: defaultingType must be {LIST}, got {defaulting!r}"
            )
        self.defaults = Defaults(arguments.get("defaultConstraints"), plugin=self.name)

    def open(self, session: Session) -> None:
        session.scored.add(self.name)
        pending = [t.pod for job in session.placing for t in job.pending]
        defaults = self.defaults
        held = own_constraints if not defaults else lambda pod: pod.spread or defaults.of(pod)
        # One cache of node tests for the filter and the score.
        allowed = _allowed(session)
        if defaults.hard and any(not pod.spread for pod in pending):
            TopologySpread(session, constraints_of=defaults.of, allowed=allowed)
        if any(not c.hard for pod in pending for c in held(pod)):
            scorer = _Spreading(session, constraints_of=held, allowed=allowed)
            session.normalized_scorers.append((scorer, self.weight))


class Defaults:
    """The default constraints, resolved against each pod's labels."""

    def __init__(self, raw: object, *, plugin: str) -> None:
        where = f"plugin {plugin}: defaultConstraints"
        self.entries: Sequence[Any] = sequence(raw, where=where)
        self.where = where
        parsed = []
        keys: set[str] = set()
        for i, entry in enumerate(self.entries):
            at = f"{where}[{i}]"
            parsed.append(spread_constraint(entry, labels={}, where=at, selector_allowed=False))
            named = match_label_keys(entry.get("matchLabelKeys"), where=at)
            if not named:
                raise InvalidObject(
                    f"{at}.matchLabelKeys: needed: the labels whose values a pod shares "
                    "with the pods it spreads among"
                )
            keys.update(named)
        check_unique(tuple(parsed), where=where)
        self.hard = any(c.hard for c in parsed)
        self.keys = sorted(keys)
        self._resolved: dict[tuple[object, ...], Spread] = {}

    def __bool__(self) -> bool:
        return bool(self.entries)

    def of(self, pod: Task) -> Spread:
        """The defaults that hold a pod stating no constraint of its own: those for
        which it carries some of the matchLabelKeys."""
        if pod.spread:
            return ()
        labels = {k: pod.labels[k] for k in self.keys if k in pod.labels}
        key = tuple(labels.items())
        found = self._resolved.get(key)
        if found is None:
            resolved = (
                spread_constraint(
                    entry, labels=labels, where=f"{self.where}[{i}]", selector_allowed=False
                )
                for i, entry in enumerate(self.entries)
            )
            found = tuple(c for c in resolved if not c.selector.nothing)
            # Kept across sessions, bounded: label values come and go with rollouts.
            if len(self._resolved) >= RESOLVED_LIMIT:
                self._resolved.clear()
            self._resolved[key] = found
        return found


def _allowed(session: Session) -> Allowed:
    """predicates' test of a node against a pod's constraints, kept per constraints."""
    nodes = session.snapshot.nodes
    return functools.cache(lambda constraints: allowed_nodes(nodes, constraints))


class _Spreading(SpreadCounts):
    """The score of the ScheduleAnyway constraints `constraints_of` gives a pod."""

    name = PodTopologySpreadScore.name

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        planned = self.planned(task.pod, hard=False)
        if not planned:
            return None
        candidates = feasible & planned[0].keyed
        if not candidates.any():
            return None
        if len(planned) == 1 and planned[0].constraint.topology_key != HOSTNAME:
            return self._by_domain(planned[0], candidates, feasible)
        score = np.zeros(self.session.node_count, dtype=np.float64)
        for plan in planned:
            if plan.constraint.topology_key == HOSTNAME:
                counts = self.row_counts(plan)
                domains = int(candidates.sum())
            else:
                counts = self.domain_counts(plan)[plan.ids]
                domains = int(np.count_nonzero(np.bincount(plan.ids[candidates])))
            score += counts * math.log(domains + 2) + (plan.constraint.max_skew - 1)
        normal = np.where(candidates, _inverted(_rounded(score), candidates), 0)
        shown = normal[feasible]
        return None if (shown == shown[0]).all() else normal

    def _by_domain(
        self, plan: Planned, candidates: BoolArray, feasible: BoolArray
    ) -> IntArray | None:
        """The same for one constraint, other than on hostname: every node of a domain
        scores alike, so the score is reckoned per domain and read at the nodes."""
        present = np.bincount(plan.ids[candidates], minlength=plan.size + 1) > 0
        weight = math.log(int(present.sum()) + 2)
        score = self.domain_counts(plan) * weight + (plan.constraint.max_skew - 1)
        normal = _inverted(_rounded(score), present)
        alike = normal[present]
        if (alike == alike[0]).all() and not (feasible & ~candidates).any():
            return None
        found: IntArray = np.where(candidates, normal[plan.ids], 0)
        return found


def _rounded(score: npt.NDArray[np.floating[Any]]) -> IntArray:
    """Go's math.Round: halves away from zero (numpy's round goes to even)."""
    whole = np.floor(score)
    rounded: IntArray = np.where(score - whole >= 0.5, whole + 1, whole).astype(np.int64)
    return rounded


def _inverted(raw: IntArray, among: BoolArray) -> IntArray:
    """100 * (max + min - raw) / max over `among` (100 everywhere when max is 0)."""
    low, high = int(raw[among].min()), int(raw[among].max())
    if high == 0:
        return np.full(len(raw), MAX_NODE_SCORE, dtype=np.int64)
    inverted: IntArray = MAX_NODE_SCORE * (high + low - raw) // high
    return inverted
