"""kube-scheduler's DynamicResources PostFilter beside `batchsched run` on one API server
(v1.36.3, with kube-controller-manager): a pod whose claim is allocated for a node it no
longer fits has the claim deallocated, then allocated and bound where it fits, by
either scheduler alike."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batchsched.k8s.allocations import FINALIZER

from .conftest import PROJECT_CRDS, kube_controller_manager, kube_scheduler, start_control_plane
from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
)
from .test_dra_operator import Dra, on_node, pinned_to_full_node, results
from tests.support import ClusterObjects, ControlPlane, Kube
from tests.support.objects import load_manifests

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    controllers = ("resourceclaim-controller", "garbage-collector-controller")
    manager, scheduler = kube_controller_manager(), kube_scheduler()
    with start_control_plane(crds=load_manifests(PROJECT_CRDS)) as plane:
        plane.start_controller_manager(manager, controllers=controllers)
        plane.start_scheduler(scheduler, {})
        yield plane


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:
    return control_plane.kube()


@pytest.fixture
def dra(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> Dra:
    return Dra(kube, namespace, cluster_objects, start_scheduler)


def test_a_claim_pinned_to_a_full_node_is_deallocated_and_moved_as_kube_scheduler_does(
    dra: Dra,
) -> None:
    """Each scheduler's pod on two nodes of its own, its claim allocated on the one
    filled since and reserved for nobody (kube-scheduler runs from the start: a
    reservation written after its pod is created would race it): both claims end
    allocated on the other node, reserved for their pod, protected, and both pods
    bound there."""
    ours = pinned_to_full_node(dra, "ours", reserved=False)
    theirs = pinned_to_full_node(dra, "theirs", reserved=False, scheduler="default-scheduler")
    dra.start_scheduler()
    assert dra.bound("ours", "theirs") == {"ours": ours[1], "theirs": theirs[1]}
    for name, (_, free, waiting) in (("ours", ours), ("theirs", theirs)):
        claim = dra.read_claim(name)
        assert [(r["pool"], r["device"]) for r in results(claim)] == [(free, "gpu-0")]
        assert claim["status"]["allocation"]["nodeSelector"] == on_node(free)
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [waiting["metadata"]["uid"]]
        assert FINALIZER in claim["metadata"]["finalizers"]
