"""What plugins provide to a session.

Every score is a plain integer from 0 (worst) to 100 (best) per node, as in
kube-scheduler's framework; the session multiplies it by the plugin's weight.
Filters and scorers see whole arrays of node indices at once, and must depend only on
the task's shape and the session's state of those nodes: that is what lets the session
cache their results per shape and refresh only the nodes that changed.
"""

from collections import Counter
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from batchsched.cache.snapshot import IntArray, TaskInfo

if TYPE_CHECKING:
    from batchsched.framework.session import Session

BoolArray = npt.NDArray[np.bool_]

MAX_NODE_SCORE = 100


class Plugin(Protocol):
    name: str

    def open(self, session: "Session") -> None:
        """Register callbacks on a new session and reset any per-session state."""


class NodeFilter(Protocol):
    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        """True where the task may be placed on the node."""

    def explain(self, task: TaskInfo, nodes: IntArray) -> Counter[str]:
        """For the given nodes, how many fail for each reason (a node may count twice)."""


class NodeScorer(Protocol):
    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        """0..MAX_NODE_SCORE per node."""
