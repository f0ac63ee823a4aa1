"""kube-scheduler's DynamicResources PostFilter beside `batchsched run` on one API server
(v1.36.3, with kube-controller-manager): a pod whose claim is allocated for a node it no
longer fits has the claim deallocated, then allocated and bound where it fits, by
either scheduler alike."""

from __future__ import annotations

import pytest

from batchsched.k8s.allocations import FINALIZER

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
)
from .test_dra_extended import control_plane  # noqa: F401 (fixture)
from .test_dra_operator import (  # noqa: F401 (fixtures)
    Dra,
    dra_fixture,
    kube_fixture,
    on_node,
    pinned_to_full_node,
    results,
)

pytestmark = pytest.mark.integration


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
