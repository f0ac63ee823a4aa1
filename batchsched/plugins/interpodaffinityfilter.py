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
per domain and changed as pods are placed and undone. The filter is not cached per
node with the others: a pod placed in a zone changes the outcome on every node of the
zone, so the session asks it afresh over all nodes, a few array operations per term,
and pods that differ only in their terms share the cached evaluation of the rest.
Nothing is kept, and no filter is added, in a session where no pod states a term.
"""

from collections import Counter

import numpy as np

from batchsched.api.objects import Task
from batchsched.api.podaffinity import AffinityTerm
from batchsched.framework.plugin import Explained
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
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

    name = "InterPodAffinity"

    def __init__(self, session: Session) -> None:
        # Required anti-affinity terms of placed pods -> per domain, how many state them.
        self.holders: dict[AffinityTerm, Counts] = {}
        self.holder_index: SelectorIndex[AffinityTerm] = SelectorIndex()
        super().__init__(session)
        self.all_nodes = session.all_nodes
        session.fresh_filters.append(self)

    @staticmethod
    def needed(session: Session) -> bool:
        """Whether any placed pod has required anti-affinity or any pending pod of ours
        states a required term: otherwise the filter would pass every node."""
        if any(t.affinity and t.affinity.anti_affinity for _, t in session.snapshot.placed_affine):
            return True
        return any(
            t.pod.affinity is not None and (t.pod.affinity.affinity or t.pod.affinity.anti_affinity)
            for job in session.placing
            for t in job.pending
        )

    def concerns(self, task: TaskInfo) -> bool:
        """The pod states required terms, or placed pods' anti-affinity selects it."""
        affinity = task.pod.affinity
        states = affinity is not None and bool(affinity.affinity or affinity.anti_affinity)
        return states or bool(self._holding(task.pod))

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """Where the pod may go, over all nodes; None when no term concerns it."""
        if not self.concerns(task):
            return None
        return self.filter(task, self.all_nodes)

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        ok = ~self._held_off(task.pod, nodes)
        affinity = task.pod.affinity
        if affinity is not None:
            if affinity.anti_affinity:
                ok &= ~self._repelled(affinity.anti_affinity, nodes)
            if affinity.affinity:
                ok &= self._attracted(task.pod, affinity.affinity, nodes)
        return ok

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        """One reason per node, the first kube-scheduler's filter would give."""
        reasons: Counter[str] = Counter()
        left: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        affinity = task.pod.affinity
        failures = []
        if affinity is not None and affinity.affinity:
            failures.append(
                (AFFINITY_MISMATCH, ~self._attracted(task.pod, affinity.affinity, nodes))
            )
        if affinity is not None and affinity.anti_affinity:
            failures.append((ANTI_AFFINITY_MISMATCH, self._repelled(affinity.anti_affinity, nodes)))
        failures.append((EXISTING_ANTI_AFFINITY, self._held_off(task.pod, nodes)))
        for reason, failing in failures:
            count = int((failing & left).sum())
            if count:
                reasons[reason] += count
            left &= ~failing
        return reasons, nodes[left]

    # The three checks, each over an array of node rows.

    def _holding(self, pod: Task) -> list[AffinityTerm]:
        """The required anti-affinity terms of placed pods that select `pod`."""
        if not self.holders:
            return []
        namespace_labels = self.namespace_labels_of(pod.namespace)
        return [
            term
            for term in self.holder_index.candidates(pod.labels)
            if self.holders[term] and term.matches(pod.namespace, pod.labels, namespace_labels)
        ]

    def _held_off(self, pod: Task, nodes: IntArray) -> BoolArray:
        """Where a placed pod's required anti-affinity term selects `pod`."""
        held: BoolArray = np.zeros(len(nodes), dtype=np.bool_)
        for term in self._holding(pod):
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
        keyed: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        found: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for term, counts in zip(terms, selected.counts, strict=True):
            ids = self.topology.ids(term.topology_key)[nodes]
            keyed &= ids < self.topology.size(term.topology_key)
            found &= occupied(counts, self.topology, term.topology_key, nodes)
        if selected.total == 0 and self.selects(terms, pod):
            return keyed
        return keyed & found

    # What placed pods state.

    def stated(self, pod: Task, row: int, delta: int) -> None:
        for term in pod.affinity.anti_affinity if pod.affinity else ():
            counts = self.holders.get(term)
            if counts is None:
                counts = self.holders[term] = {}
                self.holder_index.add(term, term.selector)
            add(counts, self.topology, term.topology_key, row, delta)
