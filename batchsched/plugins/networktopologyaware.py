"""network-topology-aware: Volcano's HyperNode binpack for pods placed outside a domain.

A pod no domain holds (its gang asks none, or a soft ask spans domains) scores higher on
a node whose domains are fuller, so that whole domains stay empty for the gangs that ask
for one: a score term beside node binpack, not a tie-break, as Volcano's plugin of that
name scores pods without a network topology (v1.14-v1.15,
`batchNodeOrderFnForNormalPods`). Per tier, a node's domain scores the share of it the
pod's requests would fill, (requested there + request) / allocatable there, averaged
over the resources the pod asks that have a weight (`resources`; CPU and memory weigh 1
unless given), 0 when the domain would be overfull, 1 for a node in no domain of the
tier. Tier n weighs `fading`^(n-1), from the lowest tier to one above the highest (the
whole cluster, as Volcano adds a top HyperNode), a tier number with no domain scoring 1;
the node's score is the weighted mean times 100 times `weight`, rounded.

Where the core places a gang in a domain (framework/topology.py) this term is not
asked: the nodes there share the domain, and which domain is the planner's choice.
The domain sums are the planner's, kept current as pods are placed.
"""

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.errors import InvalidObject
from batchsched.api.resources import CPU, MEMORY
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.framework.topology import Weighing
from batchsched.model.arrays import BoolArray, FloatArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys, integer

DEFAULT_WEIGHT = 1
DEFAULT_FADING = 0.8
DEFAULT_RESOURCES = {CPU: 1, MEMORY: 1}
LARGEST_FLOAT = sys.float_info.max


class NetworkTopologyAware:
    name = "network-topology-aware"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight", "resources", "fading"})
        self.weight = integer(self.name, "weight", arguments.get("weight", DEFAULT_WEIGHT), low=0)
        self.fading = _fading(arguments.get("fading", DEFAULT_FADING))
        self.resources = _resources(arguments.get("resources", DEFAULT_RESOURCES))

    def open(self, session: Session) -> None:
        self.session = session
        # Volcano ranks HyperNodes for a job by these weights too (HyperNodeOrderFn).
        session.topology.weigh(self.resources, Weighing.DOMAIN_BINPACK)
        tiers = session.topology.tiers
        # Without tiers every node scores alike (Volcano's lone top HyperNode).
        if not self.weight or not tiers:
            return
        column = session.snapshot.column
        self.weights = np.zeros(len(session.snapshot.resources), dtype=np.float64)
        self.weighted = np.zeros(len(session.snapshot.resources), dtype=np.bool_)
        for name, weight in self.resources.items():
            if name in column:
                self.weights[column[name]] = weight
                self.weighted[column[name]] = True
        numbers = [tier.number for tier in tiers]
        top = max(numbers) + 1
        self.tier_weights = np.array([self.fading ** (n - 1) for n in numbers])
        # Tier numbers no domain has score 1 everywhere, as Volcano's loop over
        # minTier..maxTier finds no HyperNode there; the top tier is scored per pod.
        missing = set(range(min(numbers), top)) - set(numbers)
        self.constant = float(sum(self.fading ** (n - 1) for n in missing))
        self.top_weight = self.fading ** (top - 1)
        total = float(self.tier_weights.sum()) + self.constant + self.top_weight
        # A fading of 0 leaves tier 1 alone (0^0 = 1); the sum is never 0.
        self.scale = MAX_NODE_SCORE * self.weight / total
        # Nodes by the domain of every tier they are in: one score per combination,
        # then one gather over the nodes.
        bins = np.stack([session.topology.bins(tier) for tier in tiers])
        self.combos, self.combo_of = np.unique(bins, axis=1, return_inverse=True)
        self.combo_of = self.combo_of.reshape(-1)
        # Scores are already weighted (finer than 0..100 times an integer weight).
        session.normalized_scorers.append((self, 1))

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        if self.session.within is not None:
            # Inside the domain its gang asked for: the planner chose the domain.
            return None
        topology = self.session.topology
        asked = self.weighted & (task.vec > 0)
        columns = np.flatnonzero(asked)
        weights = self.weights[columns]
        request = task.vec[columns]
        per_combo = np.full(self.combos.shape[1], self.constant, dtype=np.float64)
        for at, tier in enumerate(topology.tiers):
            used, total = topology.domain_sums(tier)
            share = _fill(used[:, columns], total[:, columns], request, weights)
            share[-1] = 1.0  # the nodes in no domain of the tier
            per_combo += self.tier_weights[at] * share[self.combos[at]]
            if at == 0:
                cluster = _fill(
                    used[:, columns].sum(axis=0, keepdims=True),
                    total[:, columns].sum(axis=0, keepdims=True),
                    request,
                    weights,
                )
                per_combo += self.top_weight * cluster[0]
        points: IntArray = np.rint(per_combo * self.scale).astype(np.int64)
        if points.min() == points.max():
            return None
        scores: IntArray = points[self.combo_of]
        return scores


def _fill(used: IntArray, total: FloatArray, request: IntArray, weights: FloatArray) -> FloatArray:
    """Per row, the weighted mean over the columns of (used + request) / total; 0 where
    the request does not fit in sum, or no column has a weight (Volcano's ZeroScore)."""
    after = used + request
    ratio = after / np.maximum(total, 1)
    weight_sum = weights.sum()
    if weight_sum <= 0:
        return np.zeros(len(used))
    share: FloatArray = ratio @ weights / weight_sum
    share[(after > total).any(axis=1)] = 0.0
    return share


def _fading(value: object) -> float:
    # NaN or an infinity would make every score NaN: the term would silently be off.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= LARGEST_FLOAT
    ):
        raise InvalidObject(
            f"plugin network-topology-aware: fading must be a finite number >= 0, got {value!r}"
        )
    return float(value)


def _resources(raw: object) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise InvalidObject(
            "plugin network-topology-aware: resources must map resource names to weights"
        )
    return {
        str(name): integer("network-topology-aware", f"resources.{name}", weight, low=0)
        for name, weight in raw.items()
    }
