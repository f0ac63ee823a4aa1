"""nodeorder: Volcano's scoring plugin, as batchsched's scorers with Volcano's weights."""

import logging

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config
from batchsched.framework.session import Session

from tests.support.objects import decide, node, placements, pod, snapshot_of


def nodeorder(arguments: str = "{}") -> str:
    return (
        f"tiers:\n- plugins: [{{name: predicates}}, {{name: nodeorder, arguments: {arguments}}}]\n"
    )


def scorers(config: str) -> list[tuple[str, int]]:
    snapshot = snapshot_of(
        [
            node("n1", taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
            pod(
                "p",
                spec={
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 1,
                                    "preference": {
                                        "matchExpressions": [{"key": "a", "operator": "Exists"}]
                                    },
                                }
                            ]
                        }
                    }
                },
            ),
        ]
    )
    session = Session(snapshot, tiers=load_config(config).tiers)
    found = [(type(s).__name__, w) for s, w in session.scorers]
    return found + [(type(s).__name__, w) for s, w in session.normalized_scorers]


def test_volcano_default_weights() -> None:
    assert scorers(nodeorder()) == [
        ("LeastAllocated", 1),
        ("BalancedAllocation", 1),
        ("NodeAffinityScore", 2),
        ("TaintTolerationScore", 3),
    ]


def test_weights_from_arguments_and_zero_leaves_a_part_out() -> None:
    config = nodeorder(
        "{leastrequested.weight: 0, mostrequested.weight: 2, balancedresource.weight: 0, "
        "nodeaffinity.weight: 5, tainttoleration.weight: 0}"
    )
    assert scorers(config) == [("Binpack", 2), ("NodeAffinityScore", 5)]


def test_least_requested_spreads() -> None:
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        pod("busy", requests={"cpu": "2"}, node_name="n1", scheduler="other"),
        pod("p", requests={"cpu": "1"}),
    ]
    assert placements(decide(objects, nodeorder())) == {"default/p": "n2"}
    packed = nodeorder(
        "{leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1}"
    )
    assert placements(decide(objects, packed)) == {"default/p": "n1"}


def test_image_locality_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        load_config(nodeorder())
    assert [r.getMessage() for r in caplog.records] == [
        "plugin nodeorder: imagelocality.weight has no effect here: batchsched does not read "
        "the images nodes hold"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_config(nodeorder("{imagelocality.weight: 0}"))
    assert caplog.records == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{leastrequested.weight: -1}", "leastrequested.weight must be from 0 to 100, got -1"),
        ("{cpu.weight: 1}", "unknown argument 'cpu.weight'"),
    ],
)
def test_bad_arguments(arguments: str, message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        load_config(nodeorder(arguments))


def test_listed_beside_one_of_its_parts_is_refused() -> None:
    with pytest.raises(InvalidObject, match="nodeorder already scores with nodeaffinity"):
        load_config(
            "tiers:\n- plugins: [{name: predicates}, {name: nodeorder}, {name: nodeaffinity}]\n"
        )


def test_enable_node_order_false_scores_nothing() -> None:
    config = "tiers:\n- plugins: [{name: predicates}, {name: nodeorder, enableNodeOrder: false}]\n"
    assert scorers(config) == []
    decisions = decide(
        [
            node("n1"),
            pod(
                "p",
                spec={
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 1,
                                    "preference": {
                                        "matchExpressions": [{"key": "a", "operator": "Exists"}]
                                    },
                                }
                            ]
                        }
                    }
                },
            ),
        ],
        config,
    )
    assert (
        "the configuration does not list the nodeaffinity plugin" in decisions.pending["default/p"]
    )
