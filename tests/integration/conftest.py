"""Fixtures for tests against a real etcd + kube-apiserver (see tests.support).

One control plane serves the whole session; each test gets its own namespace, and
the cluster-scoped objects it creates through `cluster_objects` are deleted after it.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from .operator_support import SchedulerAccounts
from tests.support import (
    JSON,
    PEERS,
    ClusterObjects,
    ControlPlane,
    ControlPlaneError,
    Kube,
    PeersUnavailable,
    component_binary,
    find_assets,
    peer_crds,
)
from tests.support.objects import load_manifests

REPO = Path(__file__).resolve().parents[2]
PROJECT_CRDS = REPO / "crds"
# kube-batch's and Tencent's PodGroup CRDs are stand-ins written from those projects' API
# types: the Go module proxy refuses kube-batch (github.com/kubernetes-sigs/kube-batch,
# sigs.k8s.io/kube-batch), whose released CRDs are apiextensions.k8s.io/v1beta1 anyway
# (API servers stopped serving it in 1.22), and no Go module is known to ship Tencent's.
# Every other peer's CRDs are its released files, unchanged (tests.support.peers).
STAND_IN_CRDS = Path(__file__).resolve().parent / "crds"


def _skip_requested() -> bool:
    # CI must never skip: there the variable is ignored.
    return os.environ.get("BATCHSCHED_SKIP_INTEGRATION") == "1" and os.environ.get("CI") != "true"


def start_control_plane(
    *,
    crds: Iterable[JSON] = (),
    feature_gates: Mapping[str, bool] | None = None,
    runtime_config: Mapping[str, bool] | None = None,
) -> ControlPlane:
    """`ControlPlane.start`, skipping or failing the test as the suite must when the
    control plane cannot run."""
    if _skip_requested():
        pytest.skip("BATCHSCHED_SKIP_INTEGRATION=1")
    try:
        return ControlPlane.start(
            find_assets(), crds=crds, feature_gates=feature_gates, runtime_config=runtime_config
        )
    except ControlPlaneError as err:
        problem = str(err)
    pytest.fail(f"cannot run the integration tests: {problem}", pytrace=False)


def kube_controller_manager() -> Path:
    """The kube-controller-manager binary beside the API server's (see
    hack/kube-controller-manager.sh), or the test fails saying how to build it."""
    return _component("kube-controller-manager", "the controller tests")


def kube_scheduler() -> Path:
    """The kube-scheduler binary beside the API server's (see hack/kube-scheduler.sh),
    or the test fails saying how to build it."""
    return _component("kube-scheduler", "the tests against kube-scheduler")


def _component(name: str, tests: str) -> Path:
    try:
        return component_binary(find_assets(), name)
    except ControlPlaneError as err:
        problem = str(err)
    pytest.fail(f"cannot run {tests}: {problem}", pytrace=False)


def session_crds() -> list[JSON]:
    """Ours, every peer's released CRDs, and the two stand-ins."""
    if _skip_requested():
        pytest.skip("BATCHSCHED_SKIP_INTEGRATION=1")
    try:
        released = [crd for peer in PEERS for crd in peer_crds(peer)]
    except PeersUnavailable as err:
        problem = str(err)
    else:
        return [*load_manifests(PROJECT_CRDS, STAND_IN_CRDS), *released]
    pytest.fail(f"cannot run the integration tests: {problem}", pytrace=False)


# Kubernetes' own gang API served, as on a cluster that turned it on: the examples
# (tests/integration/test_operator_scenarios.py) hold its Workloads and PodGroups.
NATIVE_GATES = {"GenericWorkload": True}
NATIVE_RUNTIME = {"scheduling.k8s.io/v1alpha2": True}


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with start_control_plane(
        crds=session_crds(), feature_gates=NATIVE_GATES, runtime_config=NATIVE_RUNTIME
    ) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Kube:
    """Raw REST client with cluster-admin rights."""
    return control_plane.kube()


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[Any]:
    """The generated `kubernetes` client, configured from the control plane's kubeconfig."""
    # Typed through a variable: some client releases annotate this function, some don't.
    new_client: Callable[..., Any] = k8s_config.new_client_from_config
    api = new_client(config_file=str(control_plane.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def core_v1(api_client: Any) -> Any:
    return k8s_client.CoreV1Api(api_client)


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test, wiped with all its contents afterwards."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{stem}-{secrets.token_hex(3)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.wipe_namespace(name)


@pytest.fixture
def cluster_objects(kube: Kube) -> Iterator[ClusterObjects]:
    objects = ClusterObjects(kube)
    yield objects
    objects.delete_all()


@pytest.fixture(scope="module")
def scheduler_accounts(
    control_plane: ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerAccounts]:
    """Identities with the scheduler's rights from manifests/rbac.yaml (see the class)."""
    accounts = SchedulerAccounts(control_plane, kube, tmp_path_factory.mktemp("scheduler"))
    yield accounts
    accounts.delete()
