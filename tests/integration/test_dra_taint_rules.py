"""`batchsched run` honouring DeviceTaintRules on a kube-apiserver v1.36.3 serving them
(the DRADeviceTaintRules gate and resource.k8s.io/v1beta2 on): the taint a rule adds
keeps a claim without a matching toleration off the device, as kube-scheduler's
DynamicResources does, and one that tolerates it may have it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batchsched.api.dra import TAINT_RULE_API

from .conftest import PROJECT_CRDS, start_control_plane
from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
)
from .test_dra_operator import (  # noqa: F401 (fixtures)
    DRIVER,
    Dra,
    devices_of,
    dra_fixture,
    gpus,
    kube_fixture,
)
from tests.support import ControlPlane
from tests.support.objects import exactly, load_manifests

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    with start_control_plane(
        crds=load_manifests(PROJECT_CRDS),
        feature_gates={"DRADeviceTaintRules": True},
        runtime_config={TAINT_RULE_API: True},
    ) as plane:
        yield plane


def test_a_device_tainted_by_a_rule_is_kept_from_pods_not_tolerating_it(dra: Dra) -> None:
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(2))
    taint = {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}
    dra.objects.create(
        {
            "apiVersion": TAINT_RULE_API,
            "kind": "DeviceTaintRule",
            "metadata": {"name": dra.name("gpu-0-down")},
            "spec": {"deviceSelector": {"driver": DRIVER, "device": "gpu-0"}, "taint": taint},
        }
    )
    gpu = dra.device_class()
    tolerating = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    dra.claim("first", exactly("gpu", gpu))
    dra.claim("second", exactly("gpu", gpu))
    dra.claim("tolerant", exactly("gpu", gpu, tolerations=[tolerating]))
    dra.start_scheduler()
    dra.pod("first", claim="first")
    assert dra.bound("first") == {"first": node_name}
    assert devices_of(dra.read_claim("first")) == ["gpu-1"]
    dra.pod("second", claim="second")
    dra.waiting("second", "cannot allocate all claims")
    dra.pod("tolerant", claim="tolerant")
    assert dra.bound("tolerant") == {"tolerant": node_name}
    assert devices_of(dra.read_claim("tolerant")) == ["gpu-0"]
    assert not (dra.read_claim("second").get("status") or {}).get("allocation")
