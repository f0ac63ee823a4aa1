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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from batchsched.api.namespaces import implied_labels
from batchsched.api.objects import Task
from batchsched.api.podaffinity import AffinityTerm
from batchsched.api.selectors import Selector
from batchsched.cache.snapshot import IntArray, JobInfo, TaskInfo
from batchsched.framework.plugin import BoolArray
from batchsched.framework.session import Session
from batchsched.plugins.topology import Topology

AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Terms = tuple[AffinityTerm, ...]
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


# Domain id -> how many pods count there; domains without any are left out. Few domains
# hold pods of one term, so this stays small where an array per term would not.
Counts = dict[int, int]


@dataclass(slots=True)
class _Matches:
    """Per domain of each term's key: the pods that every one of `terms` selects."""

    terms: Terms
    counts: list[Counts]
    total: int = 0
    # Read by an affinity check, whose first-pod rule changes every node when `total`
    # leaves or returns to zero.
    for_affinity: bool = False


@dataclass(slots=True)
class _Pods:
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


class InterPodAffinity:
    """The filter; opened by the predicates plugin, whose concern it shares."""

    def __init__(self, session: Session) -> None:
        snapshot = session.snapshot
        self.session = session
        self.topology = Topology(snapshot.nodes)
        self.namespace_labels = snapshot.namespace_labels
        self.pods = _Pods()
        # Required anti-affinity terms of placed pods -> per domain, how many state them.
        self.holders: dict[AffinityTerm, Counts] = {}
        self.holder_index: SelectorIndex[AffinityTerm] = SelectorIndex()
        self.matches: dict[Terms, _Matches] = {}
        self.match_index: SelectorIndex[Terms] = SelectorIndex()
        for row, task in snapshot.placed:
            self.pods.add(row, task)
            if task.affinity is not None:
                self._hold(task, row, 1)

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

    def open(self) -> None:
        session = self.session
        session.filters.append(self)
        session.on_allocate.append(self._allocated)
        session.on_deallocate.append(self._deallocated)
        session.shape_parts.append(_identity)

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
        namespace_labels = self._namespace_labels(pod.namespace)
        for term in self.holder_index.candidates(pod.labels):
            if term.matches(pod.namespace, pod.labels, namespace_labels):
                held |= _occupied(self.holders[term], self.topology, term.topology_key, nodes)
        return held

    def _repelled(self, terms: Terms, nodes: IntArray) -> BoolArray:
        """Where a pod that one of the anti-affinity `terms` selects is in the domain."""
        repelled: BoolArray = np.zeros(len(nodes), dtype=np.bool_)
        for term in terms:
            counts = self._matches((term,)).counts[0]
            repelled |= _occupied(counts, self.topology, term.topology_key, nodes)
        return repelled

    def _attracted(self, pod: Task, terms: Terms, nodes: IntArray) -> BoolArray:
        """Where every affinity term finds a pod that all of `terms` select in its domain."""
        matches = self._matches(terms)
        matches.for_affinity = True
        keyed: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        found: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for term, counts in zip(terms, matches.counts, strict=True):
            ids = self.topology.ids(term.topology_key)[nodes]
            keyed &= ids < self.topology.size(term.topology_key)
            found &= _occupied(counts, self.topology, term.topology_key, nodes)
        if matches.total == 0 and self._selects(terms, pod):
            return keyed
        return keyed & found

    # Counting pods as they are placed and undone.

    def _matches(self, terms: Terms) -> _Matches:
        found = self.matches.get(terms)
        if found is None:
            found = self.matches[terms] = _Matches(terms, [{} for _ in terms])
            self.match_index.add(terms, terms[0].selector)
            for row, pod in self.pods.selected_by(terms[0].selector):
                if self._selects(terms, pod):
                    self._count(found, row, 1)
        return found

    def _count(self, matches: _Matches, row: int, delta: int) -> set[str]:
        """Count a pod on `row` in `matches`; the topology keys whose domains changed."""
        changed = set()
        for term, counts in zip(matches.terms, matches.counts, strict=True):
            if _add(counts, self.topology, term.topology_key, row, delta):
                matches.total += delta
                changed.add(term.topology_key)
        return changed

    def _hold(self, pod: Task, row: int, delta: int) -> set[str]:
        changed = set()
        for term in pod.affinity.anti_affinity if pod.affinity else ():
            counts = self.holders.get(term)
            if counts is None:
                counts = self.holders[term] = {}
                self.holder_index.add(term, term.selector)
            if _add(counts, self.topology, term.topology_key, row, delta):
                changed.add(term.topology_key)
        return changed

    def _allocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.pods.add(node, task.task)
        self._changed(task.task, node, 1)

    def _deallocated(self, job: JobInfo, task: TaskInfo, node: int) -> None:
        self.pods.remove(task.task)
        self._changed(task.task, node, -1)

    def _changed(self, pod: Task, row: int, delta: int) -> None:
        """Update every count the pod is in, and mark for re-evaluation the nodes whose
        outcome may have changed: those sharing a changed domain with `row`, or all of
        them when an affinity's first-pod rule flips."""
        keys = self._hold(pod, row, delta)
        everything = False
        for terms in self.match_index.candidates(pod.labels):
            if self._selects(terms, pod):
                matches = self.matches[terms]
                before = matches.total
                keys |= self._count(matches, row, delta)
                everything |= matches.for_affinity and (before == 0) != (matches.total == 0)
        touched = self.session.touched
        if everything:
            touched.extend(range(len(self.topology.nodes)))
            return
        for key in keys:
            members = self.topology.members(key, row)
            if len(members) > 1:
                touched.extend(members.tolist())

    def _selects(self, terms: Terms, pod: Task) -> bool:
        namespace_labels = self._namespace_labels(pod.namespace)
        return all(t.matches(pod.namespace, pod.labels, namespace_labels) for t in terms)

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        labels = self.namespace_labels.get(namespace)
        return implied_labels(namespace) if labels is None else labels


def _add(counts: Counts, topology: Topology, key: str, row: int, delta: int) -> bool:
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


def _occupied(counts: Counts, topology: Topology, key: str, nodes: IntArray) -> BoolArray:
    """Where the nodes' domains of `key` hold a counted pod: a table over the domains
    read at the nodes' ids, far cheaper than a set test per node."""
    ids = topology.ids(key)[nodes]
    if not counts:
        return np.zeros(len(ids), dtype=np.bool_)
    table: BoolArray = np.zeros(topology.size(key) + 1, dtype=np.bool_)
    table[np.fromiter(counts, dtype=np.int64, count=len(counts))] = True
    return table[ids]


def _identity(task: TaskInfo) -> object:
    """What pod affinity reads of a pod besides its shape."""
    return (task.task.namespace, frozenset(task.task.labels.items()))
