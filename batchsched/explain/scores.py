"""Why a bound pod went where it did: its shape scored again over every node, as if
it were not there yet (its own request taken off its node), plugin by plugin."""

from dataclasses import dataclass

import numpy as np

from batchsched.explain.session import Ran
from batchsched.model.arrays import BoolArray, IntArray
from batchsched.model.snapshot import TaskInfo

# Nodes shown besides the pod's own.
TOP = 3


@dataclass(frozen=True, kw_only=True)
class NodeScore:
    node: str
    total: int
    # Plugin -> its score times its weight.
    plugins: dict[str, int]


def scores_of(ran: Ran, key: str) -> list[NodeScore]:
    """The pod's node and the best others that pass every filter, best first; empty
    when the pod holds no node or nothing scores."""
    session = ran.session
    if not (session.scorers or session.normalized_scorers):
        return []
    # Scored as if it were not there yet: taken off its node as a victim would be, so
    # every plugin forgets it, then put back. A pod already terminating is not scored.
    victims = session.victims
    index = next((i for i, pod in enumerate(victims.tasks) if pod.key == key), None)
    if index is None:
        return []
    row, info = int(victims.rows[index]), victims.info(index)
    session.evict(index)
    try:
        feasible, parts = _score(ran, info)
    finally:
        session.restore(index)
    feasible[row] = True  # it runs there, whatever the filters say of a second copy
    total = sum(parts.values(), np.zeros(session.node_count, dtype=np.int64))
    ranked = np.flatnonzero(feasible)
    ranked = ranked[np.lexsort((ranked, -total[ranked]))]
    shown = [int(r) for r in ranked[:TOP]]
    if row not in shown:
        shown.append(row)
    nodes = ran.snapshot.nodes
    return [
        NodeScore(
            node=nodes[r].name,
            total=int(total[r]),
            plugins={name: int(score[r]) for name, score in parts.items()},
        )
        for r in shown
    ]


def _score(ran: Ran, info: TaskInfo) -> tuple[BoolArray, dict[str, IntArray]]:
    session = ran.session
    nodes = session.all_nodes
    feasible: BoolArray = np.ones(len(nodes), dtype=np.bool_)
    for node_filter in session.filters:
        feasible &= node_filter.filter(info, nodes)
    for fresh in session.fresh_filters:
        allowed = fresh.mask(info)
        if allowed is not None:
            feasible &= allowed
    parts: dict[str, IntArray] = {}
    for scorer, weight in session.scorers:
        name = scorer.name
        parts[name] = parts.get(name, 0) + scorer.score(info, nodes) * weight
    for normalized, weight in session.normalized_scorers:
        normal = normalized.normalized_scores(info, feasible)
        if normal is not None:
            name = normalized.name
            parts[name] = parts.get(name, 0) + np.where(feasible, normal * weight, 0)
    return feasible, parts
