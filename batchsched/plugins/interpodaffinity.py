"""interpodaffinity: preferred pod affinity and anti-affinity, scored as kube-scheduler's
InterPodAffinity scores them.

A node's raw score sums, over the topology domains it belongs to:
- for each preferred term of the pod, its weight (negative for anti-affinity) times the
  placed pods the term selects in the domain;
- for each placed pod in the domain, the weight of each of its preferred terms that
  selects the pod (negative for anti-affinity), and `hardPodAffinityWeight` for each of
  its required affinity terms that does.
Raw scores are then normalized to 0..100 over the nodes that fit, (raw - min) / (max -
min), and weighted by `weight` (kube-scheduler's default profile weighs this plugin 2).
Pods placed tentatively in the session count like bound ones. Nothing is scored in a
session where no pod states a term that could weigh.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.objects import Task
from batchsched.api.podaffinity import AffinityTerm
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys, integer
from batchsched.plugins.podcounts import Counts, PodCounts, SelectorIndex, add, per_node

# A placed pod's term and what it adds where it selects the pod being placed.
Wish = tuple[AffinityTerm, int]


class InterPodAffinityScore:
    name = "interpodaffinity"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight", "hardPodAffinityWeight"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 2), low=1, high=100)
        self.hard_weight = integer(
            self.name,
            "hardPodAffinityWeight",
            arguments.get("hardPodAffinityWeight", 1),
            low=0,
            high=100,
        )

    def open(self, session: Session) -> None:
        session.scored.add(self.name)
        if _needed(session):
            scorer = _Wishes(session, hard_weight=self.hard_weight)
            session.normalized_scorers.append((scorer, self.weight))


class _Wishes(PodCounts):
    """The terms placed pods state that weigh on where other pods go, counted per
    domain, and the raw score of a pod against them and against its own preferences."""

    name = InterPodAffinityScore.name

    def __init__(self, session: Session, *, hard_weight: int) -> None:
        self.hard_weight = hard_weight
        self.wishes: dict[Wish, Counts] = {}
        self.wish_index: SelectorIndex[Wish] = SelectorIndex()
        super().__init__(session)

    def stated(self, pod: Task, row: int, delta: int) -> None:
        affinity = pod.affinity
        if affinity is None:
            return
        wishes = [(t, self.hard_weight) for t in affinity.affinity if self.hard_weight]
        wishes += [(w.term, w.weight) for w in affinity.preferred_affinity]
        wishes += [(w.term, -w.weight) for w in affinity.preferred_anti_affinity]
        for wish in wishes:
            counts = self.wishes.get(wish)
            if counts is None:
                counts = self.wishes[wish] = {}
                self.wish_index.add(wish, wish[0].selector)
            add(counts, self.topology, wish[0].topology_key, row, delta)

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        raw = self.raw_scores(task)
        return None if raw is None else min_max(raw, feasible)

    def raw_scores(self, task: TaskInfo) -> IntArray | None:
        pod = task.pod
        parts: list[IntArray] = []
        affinity = pod.affinity
        if affinity is not None:
            for preferred, sign in (
                (affinity.preferred_affinity, 1),
                (affinity.preferred_anti_affinity, -1),
            ):
                for weighted in preferred:
                    counts = self.selected((weighted.term,)).counts[0]
                    key = weighted.term.topology_key
                    parts.append(per_node(counts, self.topology, key) * (sign * weighted.weight))
        if self.wishes:
            namespace_labels = self.namespace_labels_of(pod.namespace)
            for wish in self.wish_index.candidates(pod.labels):
                term, weight = wish
                if term.matches(pod.namespace, pod.labels, namespace_labels):
                    counts = self.wishes[wish]
                    parts.append(per_node(counts, self.topology, term.topology_key) * weight)
        return sum(parts[1:], parts[0]) if parts else None


def min_max(raw: IntArray, feasible: BoolArray) -> IntArray | None:
    """(raw - min) / (max - min) over the nodes that fit, times MAX_NODE_SCORE, in the
    floating point kube-scheduler computes it in, truncated; None when all are equal."""
    low, high = raw[feasible].min(), raw[feasible].max()
    if high == low:
        return None
    normal: IntArray = (MAX_NODE_SCORE * ((raw - low) / (high - low))).astype(np.int64)
    return normal


def _needed(session: Session) -> bool:
    """Whether any pod, placed or pending, states a term that can weigh on a score."""

    def weighs(task: Task) -> bool:
        affinity = task.affinity
        return affinity is not None and bool(
            affinity.affinity or affinity.preferred_affinity or affinity.preferred_anti_affinity
        )

    snapshot = session.snapshot
    return any(weighs(t) for _, t in snapshot.placed_affine) or any(
        weighs(t.pod) for job in session.placing for t in job.pending
    )
