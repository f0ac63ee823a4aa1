"""The conformance run's generator and comparison, without a control plane."""

import random
from pathlib import Path
from typing import Any

import pytest

from batchsched.framework.config import default_config
from batchsched.sim.loader import load_files
from batchsched.sim.simulator import simulate
from batchsched.testing.parity import (
    KUBE_SCHEDULER,
    PREFERRED,
    REQUIRED,
    Ours,
    Scenario,
    Theirs,
    batchsched_verdict,
    case_yaml,
    disagreement,
    generate,
    kube_verdict,
    pin_resource,
)

SCENARIOS = 150


def scenarios() -> list[Scenario]:
    return [generate(random.Random(i), i) for i in range(SCENARIOS)]


def test_a_seed_gives_the_same_scenario() -> None:
    assert generate(random.Random(7), 7) == generate(random.Random(7), 7)
    assert generate(random.Random(7), 7) != generate(random.Random(8), 7)


def test_batchsched_takes_every_scenario_and_both_answers_occur() -> None:
    placed = [batchsched_verdict(s).node is not None for s in scenarios()]
    # Constraints bite often enough for both answers to be well represented.
    assert 0.25 < sum(placed) / len(placed) < 0.75


def selector_keys(selector: dict[str, Any] | None) -> set[str]:
    selector = selector or {}
    named = set(selector.get("matchLabels", {}))
    return named | {e["key"] for e in selector.get("matchExpressions", [])}


def test_spread_constraints_are_ones_the_api_server_accepts() -> None:
    for scenario in scenarios():
        for pod in [*scenario.existing, scenario.incoming]:
            constraints = pod["spec"].get("topologySpreadConstraints", [])
            pairs = [(c["topologyKey"], c["whenUnsatisfiable"]) for c in constraints]
            assert len(pairs) == len(set(pairs))
            for constraint in constraints:
                if "minDomains" in constraint:
                    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
                keys = set(constraint.get("matchLabelKeys", []))
                assert not keys or "labelSelector" in constraint
                assert not keys & selector_keys(constraint.get("labelSelector"))


def test_affinity_label_keys_are_ones_the_api_server_accepts() -> None:
    for scenario in scenarios():
        for pod in [*scenario.existing, scenario.incoming]:
            affinity = pod["spec"].get("affinity", {})
            for kind in ("podAffinity", "podAntiAffinity"):
                section = affinity.get(kind, {})
                terms = [
                    *section.get(REQUIRED, []),
                    *(e["podAffinityTerm"] for e in section.get(PREFERRED, [])),
                ]
                for term in terms:
                    match = set(term.get("matchLabelKeys", []))
                    mismatch = set(term.get("mismatchLabelKeys", []))
                    assert not match & mismatch
                    assert not (match | mismatch) & selector_keys(term.get("labelSelector"))
                    assert not (match or mismatch) or "labelSelector" in term


def test_a_pinned_pod_asks_for_the_resource_only_its_node_has() -> None:
    scenario = generate(random.Random(3), 3)
    node = scenario.nodes[0]["metadata"]["name"]
    pod = scenario.pod(KUBE_SCHEDULER, pin=node)
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"][pin_resource(node)] == resources["limits"][pin_resource(node)]
    assert pod["spec"]["schedulerName"] == KUBE_SCHEDULER
    assert pod["metadata"]["name"] == scenario.incoming["metadata"]["name"] + "-pinned"
    # The pinned copy leaves the scenario's own pod as it was.
    assert "limits" not in scenario.incoming["spec"]["containers"][0]["resources"]
    owners = [n for n in scenario.nodes if pin_resource(node) in n["status"]["allocatable"]]
    assert owners == [scenario.nodes[0]]


class Asked:
    """kube-scheduler's answers by pin (None: the free pod), recording the questions."""

    def __init__(self, answers: dict[str | None, str | None]) -> None:
        self.answers = answers
        self.pins: list[str | None] = []

    def __call__(self, pin: str | None) -> tuple[str | None, str]:
        self.pins.append(pin)
        node = self.answers[pin]
        return node, "" if node else f"refused ({pin})"


def test_a_pod_bound_to_our_node_settles_both_questions() -> None:
    ask = Asked({"n1": "n1"})
    theirs = kube_verdict(Ours("n1", None), ask)
    assert ask.pins == ["n1"]
    assert theirs == Theirs(feasible=True, accepts_ours=True, node="n1", message="")
    assert disagreement(Ours("n1", None), theirs) is None


def test_a_refused_node_is_followed_by_the_free_question() -> None:
    ask = Asked({"n1": None, None: "n2"})
    ours = Ours("n1", None)
    theirs = kube_verdict(ours, ask)
    assert ask.pins == ["n1", None]
    assert theirs.feasible and theirs.accepts_ours is False and theirs.node == "n2"
    finding = disagreement(ours, theirs)
    assert finding is not None
    assert "refuses (refused (n1))" in finding and "placed it on n2" in finding


def test_feasibility_disagreements_either_way() -> None:
    ours = Ours("n1", None)
    theirs = kube_verdict(ours, Asked({"n1": None, None: None}))
    assert not theirs.feasible
    assert "kube-scheduler found no node" in (disagreement(ours, theirs) or "")
    pending = Ours(None, "no node fits")
    theirs = kube_verdict(pending, Asked({None: "n2"}))
    assert theirs.accepts_ours is None
    assert disagreement(pending, theirs) == (
        "kube-scheduler placed the pod on n2; batchsched: no node fits"
    )


def test_both_refusing_is_agreement() -> None:
    pending = Ours(None, "no node fits")
    assert disagreement(pending, kube_verdict(pending, Asked({None: None}))) is None


@pytest.mark.parametrize("index", [1, 2, 5])
def test_a_case_file_reproduces_the_scenario(tmp_path: Path, index: int) -> None:
    scenario = generate(random.Random(index), index)
    path = tmp_path / "case.yaml"
    path.write_text(case_yaml(scenario, seed=1, finding="a finding"))
    loaded = load_files([str(path)])
    assert not loaded.warnings
    sim = simulate(loaded.objects, default_config())
    assert sim.cache.tasks[scenario.incoming_key].node_name == batchsched_verdict(scenario).node
