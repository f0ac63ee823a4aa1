"""Nodes grouped by the value of a topology label, for constraints between pods.

Per key, each node row gets the id of its domain (the nodes sharing its value of the
label); nodes without the label share one extra id, `size(key)`, which is no domain.
"""

from collections.abc import Sequence

import numpy as np

from batchsched.api.objects import Node
from batchsched.model.arrays import IntArray


class Topology:
    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self._ids: dict[str, IntArray] = {}
        self._sizes: dict[str, int] = {}

    def ids(self, key: str) -> IntArray:
        """The domain id of every node row (`size(key)` where the label is missing)."""
        ids = self._ids.get(key)
        if ids is None:
            values: dict[str, int] = {}
            raw = [
                -1
                if (value := node.labels.get(key)) is None
                else values.setdefault(value, len(values))
                for node in self.nodes
            ]
            ids = np.array(raw, dtype=np.int64)
            ids[ids < 0] = len(values)
            self._ids[key], self._sizes[key] = ids, len(values)
        return ids

    def size(self, key: str) -> int:
        """How many domains the key has; also the id of the nodes without the label."""
        self.ids(key)
        return self._sizes[key]
