"""Required pod affinity and anti-affinity, with kube-scheduler's InterPodAffinity filter.

A node passes when, in the order and words kube-scheduler uses:
- every required affinity term of the pod finds a pod it selects in the node's domain
  of the term's topology key (the node must have the key); when no pod anywhere matches
  all the terms, a pod that matches them itself may start the series on any node that
  has every key;
- no required anti-affinity term of the pod finds a pod it selects in the node's domain;
- no pod with a required anti-affinity term that selects this pod is in the node's
  domain of that term's key (the symmetric check).

Pods placed tentatively in the session count like bound ones, so the members of one
gang keep each other apart (or together) before any of them is bound. Counts are kept
per domain and changed as pods are placed and undone; what depends on them is
re-evaluated only on the nodes of the domains that changed. Nothing is kept, and no
filter is added, in a session where no pod states a term.
"""

from collections import Counter

import numpy as np

from batchsched.api.objects import Task
from batchsched.api.podaffinity import AffinityTerm
from batchsched.cache.snapshot import IntArray, TaskInfo
from batchsched.framework.plugin import BoolArray
from batchsched.framework.session import Session
from batchsched.plugins.podcounts import (
    Counts,
    PodCounts,
    SelectorIndex,
    Terms,
    add,
    occupied,
)

AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


class InterPodAffinity(PodCounts):
    """The filter; opened by the predicates plugin, whose concern it shares."""

    def __init__(self, session: Session) -> None:
        # Required anti-affinity terms of placed pods -> per domain, how many state them.
        self.holders: dict[AffinityTerm, Counts] = {}
        self.holder_index: SelectorIndex[AffinityTerm] = SelectorIndex()
        super().__init__(session)
        snapshot = session.snapshot
        stating = [t for _, t in snapshot.placed if t.affinity and t.affinity.anti_affinity]
        stating += [t.task for job in snapshot.jobs.values() for t in job.pending]
        # Every label key a required term of the session may read.
        self.read_keys = frozenset(
            requirement.key
            for pod in stating
            if pod.affinity is not None
            for term in (*pod.affinity.affinity, *pod.affinity.anti_affinity)
            for requirement in term.selector.requirements
        )
        session.filters.append(self)
        session.shape_parts.append(self.identity)

    @staticmethod
    def needed(session: Session) -> bool:
        """Whether any placed pod has required anti-affinity or any pending pod of ours
        states a required term: otherwise the filter would pass every node."""
        if any(t.affinity and t.affinity.anti_affinity for _, t in session.snapshot.placed):
            return True
        return any(
            t.task.affinity is not None
            and (t.task.affinity.affinity or t.task.affinity.anti_affinity)
            for job in session.snapshot.jobs.values()
            for t in job.pending
        )

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        ok = ~self._held_off(task.task, nodes)
        affinity = task.task.affinity
        if affinity is not None:
            if affinity.anti_affinity:
                ok &= ~self._repelled(affinity.anti_affinity, nodes)
            if affinity.affinity:
                ok &= self._attracted(task.task, affinity.affinity, nodes)
        return ok

    def explain(self, task: TaskInfo, nodes: IntArray) -> Counter[str]:
        """One reason per node, the first kube-scheduler's filter would give."""
        reasons: Counter[str] = Counter()
        left: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        affinity = task.task.affinity
        failures = []
        if affinity is not None and affinity.affinity:
            failures.append(
                (AFFINITY_MISMATCH, ~self._attracted(task.task, affinity.affinity, nodes))
            )
        if affinity is not None and affinity.anti_affinity:
            failures.append((ANTI_AFFINITY_MISMATCH, self._repelled(affinity.anti_affinity, nodes)))
        failures.append((EXISTING_ANTI_AFFINITY, self._held_off(task.task, nodes)))
        for reason, failing in failures:
            count = int((failing & left).sum())
            if count:
                reasons[reason] += count
            left &= ~failing
        return reasons

    # The three checks, each over an array of node rows.

    def _held_off(self, pod: Task, nodes: IntArray) -> BoolArray:
        """Where a placed pod's required anti-affinity term selects `pod`."""
        held: BoolArray = np.zeros(len(nodes), dtype=np.bool_)
        if not self.holders:
            return held
        namespace_labels = self.namespace_labels_of(pod.namespace)
        for term in self.holder_index.candidates(pod.labels):
            if term.matches(pod.namespace, pod.labels, namespace_labels):
                held |= occupied(self.holders[term], self.topology, term.topology_key, nodes)
        return held

    def _repelled(self, terms: Terms, nodes: IntArray) -> BoolArray:
        """Where a pod that one of the anti-affinity `terms` selects is in the domain."""
        repelled: BoolArray = np.zeros(len(nodes), dtype=np.bool_)
        for term in terms:
            counts = self.selected((term,)).counts[0]
            repelled |= occupied(counts, self.topology, term.topology_key, nodes)
        return repelled

    def _attracted(self, pod: Task, terms: Terms, nodes: IntArray) -> BoolArray:
        """Where every affinity term finds a pod that all of `terms` select in its domain."""
        selected = self.selected(terms)
        selected.for_affinity = True
        keyed: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        found: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for term, counts in zip(terms, selected.counts, strict=True):
            ids = self.topology.ids(term.topology_key)[nodes]
            keyed &= ids < self.topology.size(term.topology_key)
            found &= occupied(counts, self.topology, term.topology_key, nodes)
        if selected.total == 0 and self.selects(terms, pod):
            return keyed
        return keyed & found

    # What placed pods state, and the nodes to look at again when counts change.

    def stated(self, pod: Task, row: int, delta: int) -> set[str]:
        changed = set()
        for term in pod.affinity.anti_affinity if pod.affinity else ():
            counts = self.holders.get(term)
            if counts is None:
                counts = self.holders[term] = {}
                self.holder_index.add(term, term.selector)
            if add(counts, self.topology, term.topology_key, row, delta):
                changed.add(term.topology_key)
        return changed

    def changed(self, row: int, keys: set[str], *, everything: bool) -> None:
        """Mark for re-evaluation the nodes whose outcome may have changed: those sharing
        a changed domain with `row`, or all of them when an affinity's first-pod rule
        flips. The session has marked `row` itself."""
        touched = self.session.touched
        if everything:
            touched.extend(range(len(self.topology.nodes)))
            return
        for key in keys:
            members = self.topology.members(key, row)
            if len(members) > 1:
                touched.extend(members.tolist())

    def identity(self, task: TaskInfo) -> object:
        """What the filter reads of a pod besides its shape: its namespace and the labels
        some term of the session reads. Pods told apart only by labels no term reads (a
        StatefulSet's pod name, a Job's completion index) share one evaluation."""
        pod = task.task
        read = self.read_keys
        return pod.namespace, tuple(sorted(kv for kv in pod.labels.items() if kv[0] in read))
