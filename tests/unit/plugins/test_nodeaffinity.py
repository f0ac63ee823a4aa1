"""nodeaffinity: preferred node affinity weighs where pods go, as kube-scheduler scores it."""

from typing import Any

import numpy as np
import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.pods import task_from_pod
from batchsched.framework.session import Session

from tests.support.objects import (
    Obj,
    config_of,
    decide,
    node,
    pending_task,
    placements,
    pod,
    snapshot_of,
)

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# No binpack: without a score every node ties and the first one wins.
SCORED = "tiers:\n- plugins: [{name: predicates}, {name: nodeaffinity}]\n"
UNSCORED = "tiers:\n- plugins: [{name: predicates}]\n"


def prefers(*weighted: tuple[int, str, str]) -> dict[str, Any]:
    terms = [
        {
            "weight": w,
            "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]},
        }
        for w, k, v in weighted
    ]
    return {"affinity": {"nodeAffinity": {PREFERRED: terms}}}


NODES: list[Obj] = [
    node("a-plain"),
    node("b-ssd", labels={"disk": "ssd"}),
    node("c-fast", labels={"disk": "ssd", "cpu": "fast"}),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(None, "a-plain", id="no-preference"),
        pytest.param(prefers((1, "disk", "ssd")), "b-ssd", id="one-term"),
        pytest.param(prefers((1, "disk", "ssd"), (5, "cpu", "fast")), "c-fast", id="weights-add"),
        pytest.param(prefers((1, "disk", "hdd")), "a-plain", id="no-node-matches"),
    ],
)
def test_the_preferred_node_wins(spec: dict[str, Any] | None, expected: str) -> None:
    decisions = decide([*NODES, pod("p", spec=spec)], SCORED)
    assert placements(decisions) == {"default/p": expected}


def test_scores_are_divided_by_the_highest_among_the_nodes_that_fit() -> None:
    spec = prefers((30, "disk", "ssd"), (70, "cpu", "fast"))
    snapshot = snapshot_of([*NODES, pod("p", spec=spec)])
    session = Session(snapshot, tiers=config_of(SCORED).tiers)
    ((scorer, weight),) = session.normalized_scorers
    task = pending_task(snapshot, "default/p")
    everywhere = scorer.normalized_scores(task, np.array([True, True, True]))
    assert everywhere is not None
    assert (everywhere * weight).tolist() == [0, 60, 200]
    # Without the best node, the second is the best of those that fit.
    without_best = scorer.normalized_scores(task, np.array([True, True, False]))
    assert without_best is not None
    assert without_best[:2].tolist() == [0, 100]


def test_preferences_wait_when_no_plugin_scores_them() -> None:
    decisions = decide([*NODES, pod("p", spec=prefers((1, "disk", "ssd")))], UNSCORED)
    assert decisions.pending["default/p"] == (
        f"spec.affinity.nodeAffinity.{PREFERRED} is not scored: "
        "the configuration does not list the nodeaffinity plugin"
    )


def test_an_empty_preference_matches_no_node_and_is_left_out() -> None:
    spec = {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 3, "preference": {}}]}}}
    assert task_from_pod(pod("p", spec=spec)).node_preferences == ()


def test_a_weight_out_of_range_names_its_field() -> None:
    spec = {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 101, "preference": {}}]}}}
    with pytest.raises(InvalidObject) as error:
        task_from_pod(pod("p", spec=spec))
    assert str(error.value) == (
        f"Pod default/p.spec.affinity.nodeAffinity.{PREFERRED}[0].weight: 101 is not a whole "
        "number from 1 to 100"
    )
