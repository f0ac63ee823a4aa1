"""What plugins provide to a session.

Every score is a plain integer from 0 (worst) to 100 (best) per node, as in
kube-scheduler's framework; the session multiplies it by the plugin's weight.
Filters and scorers see whole arrays of node indices at once, and must depend only on
the task's shape and the session's state of those nodes: that is what lets the session
cache their results per shape and refresh only the nodes that changed.
"""

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np

from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.reasons import SESSION
from batchsched.model.snapshot import TaskInfo

# Why nodes fail a filter, counted per reason, and the nodes that pass it.
Explained = tuple[Counter[str], IntArray]

MAX_NODE_SCORE = 100
# A node's room for pods no filter limits the number of (NodeFilter.room_for).
UNBOUNDED = np.iinfo(np.int64).max
C = TypeVar("C")


class Opening:
    """The plugin a session is opening, which the callbacks registered meanwhile belong to."""

    __slots__ = ("plugin",)

    def __init__(self) -> None:
        self.plugin = SESSION


class Hook(Generic[C]):
    """The callbacks of one kind a session calls, in the order they were registered, each
    with the name of the configured plugin that registered it (itself or through the
    parts it opens): Volcano's enable flags drop a plugin's callbacks of one kind by it,
    and a reason names the plugin whose callback gave it."""

    __slots__ = ("_opening", "callbacks", "plugins")

    def __init__(self, opening: Opening) -> None:
        # Side by side, changed only by append and drop; the session's hot loops read
        # `callbacks` as it is.
        self.callbacks: list[C] = []
        self.plugins: list[str] = []
        self._opening = opening

    def append(self, callback: C) -> None:
        self.callbacks.append(callback)
        self.plugins.append(self._opening.plugin)

    def drop(self, plugin: str) -> None:
        """Take out every callback `plugin` registered."""
        kept = [i for i, name in enumerate(self.plugins) if name != plugin]
        self.callbacks = [self.callbacks[i] for i in kept]
        self.plugins = [self.plugins[i] for i in kept]

    def named(self) -> Iterator[tuple[str, C]]:
        """Each callback with the plugin that registered it."""
        return zip(self.plugins, self.callbacks, strict=True)

    def __iter__(self) -> Iterator[C]:
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)


class NodeFilter(Protocol):
    # The plugin it comes from (or the session's own check), as explain names it.
    name: str

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        """True where the task may be placed on the node."""

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        """For the given nodes, how many fail for each reason (a node may count twice),
        and those that pass (so the next filter explains only them)."""

    def room_for(self, tasks: Sequence[TaskInfo]) -> IntArray | None:
        """Per node (all of them), a count such that while it is one or more the filter
        lets every task of `tasks` onto the node, and placing one of them lowers it by
        at most one on that node and nowhere else: how many of them the node takes at
        least, whichever go first. None when placements change the filter's outcome
        otherwise (it reads what other pods there ask, as host ports do)."""


class NodeScorer(Protocol):
    # The plugin it comes from (or the session's own check), as explain names it.
    name: str

    def score(self, task: TaskInfo, nodes: IntArray) -> IntArray:
        """0..MAX_NODE_SCORE per node."""


def slots(room: IntArray, need: IntArray) -> IntArray:
    """Per row of `room` (node x resource), how many times it holds `need`: the fewest
    over the resources `need` asks, UNBOUNDED when it asks none."""
    asked = np.flatnonzero(need > 0)
    if not asked.size:
        return np.full(len(room), UNBOUNDED, dtype=np.int64)
    held: IntArray = np.maximum((room[:, asked] // need[asked]).min(axis=1), 0)
    return held


def widest(tasks: Sequence[TaskInfo]) -> IntArray:
    """The most any of `tasks` asks of each resource: room for that is room for each."""
    most: IntArray = np.max([task.vec for task in tasks], axis=0)
    return most


class CheckedFilter:
    """A filter asked afresh at each choice, made of checks that each rule out some
    nodes for one reason. A node is explained by the first check it fails, as
    kube-scheduler explains it by the first filter it fails."""

    def failures(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        """Each check in order, as its reason and, over all nodes, where it fails; none
        when nothing bears on where the task may go."""
        raise NotImplementedError

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """Where the task may go, over all nodes; None when it may go anywhere."""
        failures = self.failures(task)
        if not failures:
            return None
        failing = failures[0][1].copy()
        for _, more in failures[1:]:
            failing |= more
        return ~failing

    def filter(self, task: TaskInfo, nodes: IntArray) -> BoolArray:
        allowed = self.mask(task)
        return np.ones(len(nodes), dtype=np.bool_) if allowed is None else allowed[nodes]

    def explain(self, task: TaskInfo, nodes: IntArray) -> Explained:
        reasons: Counter[str] = Counter()
        left: BoolArray = np.ones(len(nodes), dtype=np.bool_)
        for reason, failing in self.failures(task):
            failed = failing[nodes] & left
            if failed.any():
                reasons[reason] += int(failed.sum())
                left &= ~failed
        return reasons, nodes[left]
