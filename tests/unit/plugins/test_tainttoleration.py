"""tainttoleration: PreferNoSchedule taints as kube-scheduler's TaintToleration scores them."""

import pytest

from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.plugins.tainttoleration import TaintTolerationScore

from tests.support.objects import decide, node, pending_task, placements, pod, snapshot_of

AVOID = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
OTHER = {"key": "old", "value": "", "effect": "PreferNoSchedule"}


def test_a_pod_keeps_off_a_node_it_would_rather_not_use() -> None:
    """binpack alone prefers the busier `spot` node; the taint's 3 x 100 outweighs it."""
    busy = pod("busy", requests={"cpu": "6"}, node_name="spot", scheduler="other")
    objects = [node("plain"), node("spot", taints=[AVOID]), busy, pod("p", requests={"cpu": "1"})]
    assert placements(decide(objects)) == {"default/p": "plain"}


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "spot", "operator": "Equal", "value": "true"},
        {"operator": "Exists"},
    ],
)
def test_a_tolerated_taint_is_not_held_against_the_node(toleration: dict[str, str]) -> None:
    busy = pod("busy", requests={"cpu": "6"}, node_name="spot", scheduler="other")
    tolerant = pod("p", requests={"cpu": "1"}, spec={"tolerations": [toleration]})
    objects = [node("plain"), node("spot", taints=[AVOID]), busy, tolerant]
    assert placements(decide(objects)) == {"default/p": "spot"}


def test_scores_are_reversed_over_the_most_untolerated_taints() -> None:
    """0, 1 and 2 untolerated taints score 100, 50 and 0; a NoSchedule toleration
    does not count."""
    snapshot = snapshot_of(
        [
            node("none"),
            node("one", taints=[AVOID]),
            node("two", taints=[AVOID, OTHER]),
            pod("p", spec={"tolerations": [{"key": "spot", "effect": "NoSchedule"}]}),
        ]
    )
    session = Session(snapshot, tiers=default_config().tiers)
    [scorer] = [s for s, _ in session.normalized_scorers if isinstance(s, TaintTolerationScore)]
    task = pending_task(snapshot, "default/p")
    feasible = session.all_nodes >= 0
    scores = scorer.normalized_scores(task, feasible)
    assert scores is not None
    assert dict(zip([n.name for n in snapshot.nodes], scores.tolist(), strict=True)) == {
        "none": 100,
        "one": 50,
        "two": 0,
    }
