"""tainttoleration: PreferNoSchedule taints, scored as kube-scheduler's TaintToleration
scores them.

A node's raw score is how many of its PreferNoSchedule taints the pod does not tolerate
(only tolerations with effect PreferNoSchedule or none count); scores are normalized
over the nodes that fit and reversed, 100 - raw * 100 / max, so the node with the fewest
such taints scores 100 (all the same when none has any). kube-scheduler's default
profile weighs this plugin 3. Nothing is scored in a session where no node has such a
taint.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.api.objects import PREFER_NO_SCHEDULE, Taint, Toleration
from batchsched.framework.plugin import MAX_NODE_SCORE
from batchsched.framework.session import Session
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.arguments import check_keys, integer


class TaintTolerationScore:
    name = "tainttoleration"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_keys(self.name, arguments, {"weight"})
        self.weight = integer(self.name, "weight", arguments.get("weight", 3), low=1, high=100)

    def open(self, session: Session) -> None:
        self.taints: list[tuple[Taint, ...]] = [node.soft_taints for node in session.snapshot.nodes]
        # Tolerations that count -> per node, the taints they leave untolerated.
        self._raw: dict[tuple[Toleration, ...], IntArray] = {}
        if any(self.taints):
            session.normalized_scorers.append((self, self.weight))

    def normalized_scores(self, task: TaskInfo, feasible: BoolArray) -> IntArray | None:
        tolerations = tuple(
            t for t in task.pod.constraints.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)
        )
        raw = self._raw.get(tolerations)
        if raw is None:
            raw = self._raw[tolerations] = np.array(
                [
                    sum(not any(t.tolerates(taint) for t in tolerations) for taint in taints)
                    for taints in self.taints
                ],
                dtype=np.int64,
            )
        highest = int(raw[feasible].max())
        if highest == 0:
            return None
        normal: IntArray = MAX_NODE_SCORE - MAX_NODE_SCORE * raw // highest
        return normal
