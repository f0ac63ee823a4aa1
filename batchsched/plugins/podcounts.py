"""Pods counted per topology domain, kept current as a session places and undoes pods.

Pod affinity reads it twice: the filter (required terms) and the score (preferred
terms). Placed pods are found by the label pairs that selectors require, and a term
tuple's counts are built the first time a pod asks about it, then changed with every
pod placed or undone in the session, tentative ones included. Topology spread counts
per node instead (`by_row`): which nodes' pods count depends on the pod asking.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from batchsched.api.namespaces import implied_labels
from batchsched.api.objects import Task
from batchsched.api.podaffinity import AffinityTerm
from batchsched.api.selectors import Selector
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.model.topology import Topology

Terms = tuple[AffinityTerm, ...]
# Domain id -> how many pods count there; domains without any are left out. Few domains
# hold pods of one term, so this stays small where an array per term would not.
Counts = dict[int, int]
K = TypeVar("K")


class SelectorIndex(Generic[K]):
    """Keys by the label pairs their selectors require, so that the keys whose selector
    a pod may match are found from its few labels, not by trying every key."""

    def __init__(self) -> None:
        self._by_label: dict[tuple[str, str], list[K]] = {}
        self._unindexed: list[K] = []

    def add(self, key: K, selector: Selector) -> None:
        pairs = selector.indexed_by()
        if pairs is None:
            self._unindexed.append(key)
        for pair in pairs or ():
            self._by_label.setdefault(pair, []).append(key)

    def candidates(self, labels: Mapping[str, str]) -> list[K]:
        found = list(self._unindexed)
        for pair in labels.items():
            found += self._by_label.get(pair, ())
        return found


@dataclass(slots=True)
class Selected:
    """Per domain of each term's key: the pods that every one of `terms` selects."""

    terms: Terms
    counts: list[Counts]
    total: int = 0


@dataclass(slots=True)
class PlacedPods:
    """The pods holding nodes in the session, by key, with an index by label pair built
    the first time a selector needs it."""

    placed: dict[str, tuple[int, Task]] = field(default_factory=dict)
    by_label: dict[tuple[str, str], set[str]] | None = None

    def add(self, row: int, task: Task) -> None:
        self.placed[task.key] = (row, task)
        if self.by_label is not None:
            for pair in task.labels.items():
                self.by_label.setdefault(pair, set()).add(task.key)

    def remove(self, task: Task) -> None:
        del self.placed[task.key]
        if self.by_label is not None:
            for pair in task.labels.items():
                self.by_label[pair].discard(task.key)

    def selected_by(self, selector: Selector) -> Iterable[tuple[int, Task]]:
        pairs = selector.indexed_by()
        if pairs is None:
            return self.placed.values()
        if self.by_label is None:
            self.by_label = {}
            for key, (_, task) in self.placed.items():
                for pair in task.labels.items():
                    self.by_label.setdefault(pair, set()).add(key)
        keys = set().union(*(self.by_label.get(pair, ()) for pair in pairs))
        return [self.placed[key] for key in keys]


class PodCounts:
    """Placed pods and, for each term tuple asked about, the pods all its terms select.

    Subclasses count what placed pods state (`stated`).
    """

    def __init__(self, session: Session) -> None:
        snapshot = session.snapshot
        self.session = session
        self.topology = snapshot.topology
        self.namespace_labels = snapshot.namespace_labels
        self.pods = PlacedPods()
        self.selections: dict[Terms, Selected] = {}
        self.selection_index: SelectorIndex[Terms] = SelectorIndex()
        self.rows: dict[AffinityTerm, Counts] = {}
        self.row_index: SelectorIndex[AffinityTerm] = SelectorIndex()
        for row, task in snapshot.placed:
            self.pods.add(row, task)
            self.stated(task, row, 1)
        session.on_allocate.append(self._allocated)
        session.on_deallocate.append(self._deallocated)

    def stated(self, pod: Task, row: int, delta: int) -> None:
        """Count (or, with a negative `delta`, uncount) the terms `pod` states."""

    def selected(self, terms: Terms) -> Selected:
        found = self.selections.get(terms)
        if found is None:
            found = self.selections[terms] = Selected(terms, [{} for _ in terms])
            self.selection_index.add(terms, terms[0].selector)
            for row, pod in self.pods.selected_by(terms[0].selector):
                if self.selects(terms, pod):
                    self._count(found, row, 1)
        return found

    def by_row(self, term: AffinityTerm) -> Counts:
        """Node row -> the placed pods `term` selects there, terminating pods aside (as
        topology spread counts them: they are about to leave); its key is not read."""
        found = self.rows.get(term)
        if found is None:
            found = self.rows[term] = {}
            self.row_index.add(term, term.selector)
            for row, pod in self.pods.selected_by(term.selector):
                if not pod.deleting and self.selects((term,), pod):
                    found[row] = found.get(row, 0) + 1
        return found

    def selects(self, terms: Iterable[AffinityTerm], pod: Task) -> bool:
        namespace_labels = self.namespace_labels_of(pod.namespace)
        return all(t.matches(pod.namespace, pod.labels, namespace_labels) for t in terms)

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str]:
        labels = self.namespace_labels.get(namespace)
        return implied_labels(namespace) if labels is None else labels

    def _count(self, selected: Selected, row: int, delta: int) -> None:
        for term, counts in zip(selected.terms, selected.counts, strict=True):
            if add(counts, self.topology, term.topology_key, row, delta):
                selected.total += delta

    def _allocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.pods.add(node, task.pod)
        self._update(task.pod, node, 1)

    def _deallocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.pods.remove(task.pod)
        self._update(task.pod, node, -1)

    def _update(self, pod: Task, row: int, delta: int) -> None:
        self.stated(pod, row, delta)
        for terms in self.selection_index.candidates(pod.labels):
            if self.selects(terms, pod):
                self._count(self.selections[terms], row, delta)
        if pod.deleting:
            return
        for term in self.row_index.candidates(pod.labels):
            if self.selects((term,), pod):
                counts = self.rows[term]
                total = counts.get(row, 0) + delta
                if total:
                    counts[row] = total
                else:
                    del counts[row]


def add(counts: Counts, topology: Topology, key: str, row: int, delta: int) -> bool:
    """Count a pod on `row` in its domain of `key`; False when the node lacks the key."""
    domain = int(topology.ids(key)[row])
    if domain == topology.size(key):
        return False
    total = counts.get(domain, 0) + delta
    if total:
        counts[domain] = total
    else:
        del counts[domain]
    return True


def occupied(counts: Counts, topology: Topology, key: str, nodes: IntArray) -> BoolArray:
    """Where the nodes' domains of `key` hold a counted pod: a table over the domains
    read at the nodes' ids, far cheaper than a set test per node."""
    if not counts:
        return np.zeros(len(nodes), dtype=np.bool_)
    table: BoolArray = np.zeros(topology.size(key) + 1, dtype=np.bool_)
    table[np.fromiter(counts, dtype=np.int64, count=len(counts))] = True
    return table[topology.ids(key)[nodes]]


def per_node(counts: Counts, topology: Topology, key: str) -> IntArray:
    """Every node's count: that of its domain of `key`, 0 without the key."""
    table = np.zeros(topology.size(key) + 1, dtype=np.int64)
    for domain, count in counts.items():
        table[domain] = count
    return table[topology.ids(key)]
