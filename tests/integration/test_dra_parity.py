"""A few scenarios of the DRA conformance run (bench/dra_parity.py) on the real control
plane: kube-scheduler v1.36.3 (DynamicResources, GangScheduling) beside kube-controller-
manager's resource-claim controller, and batchsched's simulator on the same objects read
back from the API server. Each pod of the unit must be placed by both or by neither, on
the same node and devices, or on nodes each scheduler finds valid for the other's answer.

The scenarios are chosen to cover: a gang from a template, a pod joining a claim already
allocated, All, firstAvailable, a node-selector NIC beside GPUs with matchAttribute, one
scenario of each disagreement the full run found (docs/conformance.md), and one of each
kind beyond the plain one (bench/dra_scenarios.py, KINDS).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from .conftest import kube_controller_manager, kube_scheduler, start_control_plane
from bench.cluster import REPO
from bench.dra_parity import (
    DIFFERENT,
    DRA_GATES,
    DRA_RUNTIME_CONFIG,
    Sides,
    scenario_result,
    schedulers,
)
from tests.support import find_assets
from tests.support.objects import load_manifests

pytestmark = pytest.mark.integration

SEED = 1
# Seed 1's scenarios: 2 a gang of 2 from a template, 9 a pod joining a claim in use,
# 5 All, 1 firstAvailable by name, 44 GPU and NIC with matchAttribute (a gang of 3); All
# over a device with an untolerated taint (32), beside a pool being updated on another
# node (177), beside another node's pool of shared counters being updated (129); and the
# kinds: admin access (7), consumable capacity (36, a gang), binding conditions (20),
# per-device node selection (3), a DeviceTaintRule (25), a claim being deleted, joined
# (4) or the pod's own (93).
SCENARIOS = (2, 9, 5, 1, 44, 32, 177, 129, 7, 36, 20, 3, 25, 4, 93)
# Longer than kube-scheduler's backoff (bench/gang_parity.py, SCHEDULER_CONFIG).
SETTLE = 1.5


@pytest.fixture(scope="module")
def sides() -> Iterator[Sides]:
    kube_controller_manager()
    kube_scheduler()
    crds = load_manifests(REPO / "crds")
    plane = start_control_plane(
        crds=crds, feature_gates=DRA_GATES, runtime_config=DRA_RUNTIME_CONFIG
    )
    with plane, schedulers(plane, find_assets(), operator=False, parallel=1) as found:
        yield found


@pytest.mark.parametrize("index", SCENARIOS)
def test_each_pod_is_placed_alike(sides: Sides, index: int) -> None:
    found = scenario_result(sides, argparse.Namespace(seed=SEED, settle=SETTLE), index)
    assert found.verdict != DIFFERENT, found.finding
