"""predicates: may this pod run on this node at all (docs/constraints.md)?

Required pod affinity and anti-affinity are checked by InterPodAffinity, which opens
here only in sessions where some pod states a term; topology spread constraints with
DoNotSchedule by TopologySpread, only in sessions where some pending pod states one;
claims by VolumeBinding, only in sessions where some pending pod mounts one.

Constraint checks (selectors, affinity, taints, node condition) do not change within a
session, so they run once per distinct set of constraints; resource fit and host ports
are re-checked on the nodes that changed.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.api.objects import BLOCKING_EFFECTS, Constraints, Node, Taint, Toleration
from batchsched.api.resources import PODS
from batchsched.api.selectors import term_matches
from batchsched.framework.plugin import Explained, slots, widest
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys
from batchsched.plugins.interpodaffinityfilter import InterPodAffinity
from batchsched.plugins.podtopologyspreadfilter import TopologySpread, own_constraints, stated
from batchsched.plugins.volumefilters import VolumeBinding

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")

_NEVER_SHORT = np.iinfo(np.int64).min
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"


class Predicates:
    name = "predicates"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, set())

    def open(self, session: Session) -> None:
        self.session = session
        self.nodes = session.snapshot.nodes
        self.resources = session.snapshot.resources
        self._static: dict[Constraints, BoolArray] = {}
        self._needs: dict[tuple[object, ...], IntArray] = {}
        self._plain: BoolArray = np.array([n.plain for n in self.nodes], dtype=np.bool_)
        session.filters.append(self)
        session.allowed = self._static_mask
        # In kube-scheduler's order of filters, which is the order of pending reasons.
        if VolumeBinding.needed(session):
            VolumeBinding(session)
        if stated(session):
            TopologySpread(session, constraints_of=own_constraints, allowed=self._static_mask)
        if InterPodAffinity.needed(session):
            InterPodAffinity(session)

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        ok = self._static_mask(task.pod.constraints)[nodes]
        ok &= (self.session.free[nodes] >= self._need(task)).all(axis=1)
        for port in task.pod.host_ports:
            users = self.session.port_users.get(port)
            if users:
                ok &= ~np.isin(nodes, np.fromiter(users, dtype=np.int64))
        return ok

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        reasons: Counter[str] = Counter()
        constraints = task.pod.constraints
        static = self._static_mask(constraints)
        for row in nodes[~static[nodes]]:
            reasons[_constraint_failure(self.nodes[row], constraints) or SELECTOR_MISMATCH] += 1
        passing = nodes[static[nodes]]
        # Ports before resources, as kube-scheduler's NodePorts runs before its Fit.
        taken: BoolArray = np.zeros(len(passing), dtype=np.bool_)
        for port in task.pod.host_ports:
            users = self.session.port_users.get(port, set())
            taken |= np.isin(passing, np.fromiter(users, dtype=np.int64))
        if taken.any():
            reasons[PORTS_TAKEN] += int(taken.sum())
        passing = passing[~taken]
        free = self.session.free[passing]
        short = free < task.vec
        for column in np.flatnonzero(task.vec):
            count = int(short[:, column].sum())
            if count:
                name = self.resources[column]
                reasons["Too many pods" if name == PODS else f"Insufficient {name}"] += count
        return reasons, passing[(free >= self._need(task)).all(axis=1)]

    def room_for(self, tasks: Sequence[TaskInfo]) -> IntArray | None:
        """Room for the most each resource is asked by one of them, where the
        constraints of all of them allow; none said with a host port, which a pod
        placed on the node takes from all the others."""
        if any(task.pod.host_ports for task in tasks):
            return None
        allowed = np.logical_and.reduce([self._static_mask(t.pod.constraints) for t in tasks])
        held: IntArray = np.where(allowed, slots(self.session.free, widest(tasks)), 0)
        return held

    def _need(self, task: TaskInfo) -> IntArray:
        """The request with unrequested resources set so low they never rule a node out,
        even an overcommitted one."""
        need = self._needs.get(task.pod.shape_key)
        if need is None:
            need = self._needs[task.pod.shape_key] = np.where(task.vec > 0, task.vec, _NEVER_SHORT)
        return need

    def _static_mask(self, constraints: Constraints) -> BoolArray:
        mask = self._static.get(constraints)
        if mask is None:
            if constraints == Constraints():
                mask = self._plain
            else:
                mask = allowed_nodes(self.nodes, constraints)
            self._static[constraints] = mask
        return mask


def allowed_nodes(nodes: Sequence[Node], constraints: Constraints) -> BoolArray:
    """Where pods with these constraints may run, whatever runs there already."""
    return np.array([_constraint_failure(n, constraints) is None for n in nodes], dtype=np.bool_)


def _constraint_failure(node: Node, constraints: Constraints) -> str | None:
    """Why the node is ruled out by the pod's constraints, in kube-scheduler's words."""
    tolerations = constraints.tolerations
    if not node.ready and not _tolerated(NOT_READY_TAINT, tolerations):
        return "node(s) were not ready"
    if node.unschedulable and not _tolerated(UNSCHEDULABLE_TAINT, tolerations):
        return "node(s) were unschedulable"
    if any(node.labels.get(k) != v for k, v in constraints.node_selector):
        return SELECTOR_MISMATCH
    if constraints.affinity and not any(term_matches(node, t) for t in constraints.affinity):
        return SELECTOR_MISMATCH
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not _tolerated(taint, tolerations):
            shown = f"{taint.key}: {taint.value}" if taint.value else taint.key
            return f"node(s) had untolerated taint {{{shown}}}"
    return None


def _tolerated(taint: Taint, tolerations: tuple[Toleration, ...]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)
