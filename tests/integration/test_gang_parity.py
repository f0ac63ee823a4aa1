"""A few scenarios of the native-gang conformance run (bench/gang_parity.py) on the real
control plane: kube-scheduler v1.36.3 with GangScheduling and `batchsched run`, each on
nodes of its own, must leave every group with as many pods bound after every step, and
batchsched's simulator as many as its operator.

Each step waits for both schedulers' answer to a barrier pod, then for the namespace to
stay unchanged for a while (bounded); a difference is run again with a longer wait
before it counts, as in the bench. The explained causes of a difference
(docs/conformance.md: a group with a pod naming a scheduler nobody serves, the condition
of a gang started before its PodGroup) are allowed.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from .conftest import kube_scheduler, start_control_plane
from bench.cluster import REPO
from bench.gang_parity import EXPLAINED, Sides, cause, scenario_result, schedulers
from bench.gang_scenarios import GATES, RUNTIME_CONFIG, Finding, Scenario, disagreement
from tests.support.objects import load_manifests

pytestmark = pytest.mark.integration

SEED = 1
SCENARIOS = 5
# Longer than kube-scheduler's backoff (bench/gang_parity.py, SCHEDULER_CONFIG).
SETTLE = 1.5


@pytest.fixture(scope="module")
def sides() -> Iterator[Sides]:
    binary = kube_scheduler()
    crds = load_manifests(REPO / "crds")
    plane = start_control_plane(crds=crds, feature_gates=GATES, runtime_config=RUNTIME_CONFIG)
    with plane, schedulers(plane, binary, parallel=1) as found:
        yield found


def test_batchsched_places_a_native_gang(sides: Sides) -> None:
    assert sides.refused is None


@pytest.mark.parametrize("index", range(SCENARIOS))
def test_each_group_is_left_alike_after_each_step(sides: Sides, index: int) -> None:
    args = argparse.Namespace(seed=SEED, settle=SETTLE)
    found = scenario_result(sides, args, index)
    assert found.ours.refused is None
    explained(found.scenario, disagreement(found.scenario, found.kube, found.ours))
    # The operator and the simulator are one scheduler.
    explained(found.scenario, disagreement(found.scenario, found.ours, found.simulator))


def explained(scenario: Scenario, finding: Finding | None) -> None:
    """No difference, or one of an explained cause. A group of mixed scheduler names
    may also part the operator from the simulator, when two objects of one step reach
    the operator in one session (docs/conformance.md)."""
    assert finding is None or cause(scenario, finding) in EXPLAINED, str(finding)
