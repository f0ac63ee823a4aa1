"""nodeaffinity: preferred node affinity, scored as kube-scheduler's NodeAffinity scores it.

A node's raw score is the sum of the weights of the pod's preferred terms it matches;
scores are normalized over the nodes that fit as raw * 100 / max (all 0 when no node
that fits matches), and weighted by `weight` (kube-scheduler's default profile weighs
this plugin 2). Nothing is scored in a session where no pod states a preference.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.objects import PreferredTerm
from batchsched.api.selectors import term_matches
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys, integer


class NodeAffinityScore:
    name = "nodeaffinity"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 2), low=1, high=100)

    def open(self, session: Session) -> None:
        session.scored.add(self.name)
        self.nodes = session.snapshot.nodes
        # Preferences -> raw score per node; a node's labels do not change in a session.
        self._raw: dict[tuple[PreferredTerm, ...], IntArray] = {}
        if any(t.pod.node_preferences for j in session.placing for t in j.pending):
            session.normalized_scorers.append((self, self.weight))

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        preferences = task.pod.node_preferences
        if not preferences:
            return None
        raw = self._raw.get(preferences)
        if raw is None:
            raw = self._raw[preferences] = np.array(
                [sum(p.weight for p in preferences if term_matches(n, p.term)) for n in self.nodes],
                dtype=np.int64,
            )
        highest = int(raw[feasible].max())
        if highest == 0:
            return None
        normal: IntArray = MAX_NODE_SCORE * raw // highest
        return normal
