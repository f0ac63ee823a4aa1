"""podtopologyspread: ScheduleAnyway constraints scored as kube-scheduler scores them, and
cluster-level default constraints."""

import math
from typing import Any

import numpy as np
import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config
from batchsched.framework.session import Session

from .test_podtopologyspreadfilter import spread
from tests.support.objects import Obj, decide, node, pending_task, placements, pod, snapshot_of

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
# No binpack: only this plugin's score separates the nodes.
SCORED = "tiers:\n- plugins: [{name: predicates}, {name: podtopologyspread}]\n"
UNSCORED = "tiers:\n- plugins: [{name: predicates}]\n"


def soft(key: str = "zone", skew: int = 1) -> dict[str, Any]:
    return spread(key, skew, whenUnsatisfiable="ScheduleAnyway")


def nodes(count: int) -> list[Obj]:
    """h0.. each in a zone of its own, z0.."""
    return [node(f"h{i}", labels={HOST: f"h{i}", "zone": f"z{i}"}) for i in range(count)]


def running(name: str, on: str, labels: dict[str, str] = WEB) -> Obj:
    return pod(name, labels=labels, node_name=on, scheduler="other")


def scores(objects: list[Obj], config: str = SCORED) -> list[int]:
    snapshot = snapshot_of(objects)
    session = Session(snapshot, tiers=load_config(config).tiers)
    ((scorer, weight),) = session.normalized_scorers
    assert weight == 2
    feasible = np.ones(session.node_count, dtype=np.bool_)
    found = scorer.normalized_scores(pending_task(snapshot, "default/p"), feasible)
    assert found is not None
    return list(found.tolist())


def test_scores_follow_kube_schedulers_formula() -> None:
    """Counts 2, 1, 0 over three zones weigh log(5) each: raw round(2 log 5) = 3,
    round(log 5) = 2 and 0; then 100 * (3 + 0 - raw) // 3."""
    existing = [running("a", "h0"), running("b", "h0"), running("c", "h1")]
    assert round(2 * math.log(5)) == 3 and round(math.log(5)) == 2
    assert scores([*nodes(3), *existing, pod("p", labels=WEB, spec=soft())]) == [0, 33, 100]


def test_max_skew_adds_to_every_node_and_hostname_counts_per_node() -> None:
    """Raw: count * log(3 + 2) + (maxSkew - 1) = 3 log 5 + 2 -> 7, and 2 on the others."""
    existing = [running(f"r{i}", "h0") for i in range(3)]
    spec = soft(key=HOST, skew=3)
    assert scores([*nodes(3), *existing, pod("p", labels=WEB, spec=spec)]) == [
        100 * (7 + 2 - 7) // 7,
        100,
        100,
    ]


def test_constraints_add_up_before_rounding() -> None:
    """Zone (maxSkew 1) and hostname (maxSkew 2) on h0: 3 log 5 + 3 log 5 + 1 = 10.66,
    rounded once to 11 (rounded apart, 5 + 6 would give the same only by chance); the
    other nodes 0 + 0 + 1 = 1."""
    existing = [running(f"r{i}", "h0") for i in range(3)]
    both = soft()
    both["topologySpreadConstraints"] += soft(key=HOST, skew=2)["topologySpreadConstraints"]
    assert scores([*nodes(3), *existing, pod("p", labels=WEB, spec=both)]) == [
        100 * (11 + 1 - 11) // 11,
        100 * (11 + 1 - 1) // 11,
        100 * (11 + 1 - 1) // 11,
    ]


def test_feasible_nodes_without_the_key_score_zero() -> None:
    bare = node("bare", labels={HOST: "bare"})
    existing = [running("a", "h0")]
    # Rows by name: bare, h0, h1.
    assert scores([*nodes(2), bare, *existing, pod("p", labels=WEB, spec=soft())]) == [0, 0, 100]


def test_the_pod_goes_where_its_peers_are_fewest() -> None:
    existing = [running("a", "h0"), running("b", "h1")]
    decisions = decide([*nodes(3), *existing, pod("p", labels=WEB, spec=soft())], SCORED)
    assert placements(decisions) == {"default/p": "h2"}


def test_without_the_plugin_a_pod_with_schedule_anyway_waits_saying_so() -> None:
    decisions = decide([*nodes(1), pod("p", labels=WEB, spec=soft())], UNSCORED)
    assert decisions.pending["default/p"] == (
        "spec.topologySpreadConstraints with whenUnsatisfiable ScheduleAnyway is not scored: "
        "the configuration does not list the podtopologyspread plugin"
    )


def defaults(*constraints: dict[str, Any]) -> str:
    arguments = {"defaultConstraints": list(constraints)}
    return (
        "tiers:\n- plugins: [{name: predicates}, "
        f"{{name: podtopologyspread, arguments: {arguments}}}]\n"
    )


ZONE_DEFAULT = {
    "maxSkew": 1,
    "topologyKey": "zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "matchLabelKeys": ["app"],
}


def test_default_constraints_hold_pods_that_state_none() -> None:
    """Two web pods in z0: a third may not join them with maxSkew 1; a pod without an
    `app` label, or with constraints of its own, is not held to the default."""
    existing = [running("a", "h0"), running("b", "h0")]
    pending = [
        pod("p", labels=WEB),
        pod("unlabelled"),
        pod("own", labels=WEB, spec=soft()),
    ]
    cluster = [node("h0", labels={"zone": "z0"}), node("h1", labels={"zone": "z1"})]
    only_h0 = [{**n, "spec": {"unschedulable": n["metadata"]["name"] == "h1"}} for n in cluster]
    decisions = decide([*only_h0, *existing, *pending], defaults(ZONE_DEFAULT))
    assert placements(decisions) == {"default/unlabelled": "h0", "default/own": "h0"}
    assert "pod topology spread constraints" in decisions.pending["default/p"]
    assert "default/p" in placements(decide([*only_h0, *existing, *pending], SCORED))


def test_schedule_anyway_defaults_are_scored() -> None:
    soft_default = {**ZONE_DEFAULT, "whenUnsatisfiable": "ScheduleAnyway"}
    existing = [running("a", "h0"), running("b", "h1")]
    assert scores([*nodes(3), *existing, pod("p", labels=WEB)], defaults(soft_default)) == [
        0,
        0,
        100,
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{defaultingType: System}", "defaultingType System is not supported"),
        ("{defaultingType: Other}", "defaultingType must be List"),
        (
            "{defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
            "whenUnsatisfiable: DoNotSchedule}]}",
            "defaultConstraints[0].matchLabelKeys: needed",
        ),
        (
            "{defaultConstraints: [{maxSkew: 0, topologyKey: zone, "
            "whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}]}",
            "defaultConstraints[0].maxSkew: 0 must be greater than zero",
        ),
        (
            "{defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "
            "DoNotSchedule, matchLabelKeys: [app], labelSelector: {}}]}",
            "defaultConstraints[0].labelSelector: may not be set",
        ),
        ("{weight: 0}", "weight must be from 1 to 100"),
    ],
)
def test_bad_arguments_are_refused_by_name(arguments: str, message: str) -> None:
    config = f"tiers:\n- plugins: [{{name: podtopologyspread, arguments: {arguments}}}]\n"
    with pytest.raises(InvalidObject, match="podtopologyspread") as caught:
        load_config(config)
    assert message in str(caught.value)


def test_nothing_is_scored_when_no_pod_is_held_to_a_constraint() -> None:
    snapshot = snapshot_of([*nodes(2), pod("p", labels=WEB)])
    assert not Session(snapshot, tiers=load_config(SCORED).tiers).normalized_scorers
