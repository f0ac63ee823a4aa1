"""The DRA fields allocation honours, as kube-apiserver v1.36.3 serves them: consumable
capacity and extended resources backed by a DeviceClass with its default gates (the
API server keeps them, and what it stores reads as the allocator expects), and
DeviceTaintRules only in resource.k8s.io/v1beta2 with their gate and that version
switched on."""

import secrets
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from batchsched.api.dra import (
    class_from_object,
    resource_claim_from_object,
    slice_from_object,
    taint_rule_from_object,
    with_taint_rules,
)
from batchsched.framework.sharing import consumed

from .conftest import start_control_plane
from tests.support.controlplane import ControlPlane
from tests.support.kube import ClusterObjects, Kube
from tests.support.objects import device, device_class, exactly, resource_claim, resource_slice

pytestmark = pytest.mark.integration

DRIVER = "gpu.example.com"
POLICY = {"default": "8Gi", "validRange": {"min": "8Gi", "step": "8Gi", "max": "40Gi"}}


def _slice(name: str) -> dict[str, object]:
    gpu = device("gpu-0", multiple=True, capacity={"memory": "40Gi"}, policies={"memory": POLICY})
    return resource_slice(name, driver=DRIVER, pool=name, node_name="n1", devices=[gpu])


def test_consumable_capacity_and_extended_resources_are_served_by_default(
    kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> None:
    suffix = secrets.token_hex(3)
    stored_slice = cluster_objects.create(_slice(f"shared-{suffix}"))
    gpu = slice_from_object(stored_slice).devices[0]
    assert gpu.multiple and gpu.policies["memory"].step == 8 * 2**30
    backing = device_class(f"gpu-{suffix}", f"device.driver == '{DRIVER}'")
    backing["spec"]["extendedResourceName"] = f"example.com/gpu-{suffix}"
    stored_class = class_from_object(cluster_objects.create(backing))
    assert stored_class.extended_resource == f"example.com/gpu-{suffix}"
    assert stored_class.created > 0
    claim = resource_claim(
        "half", exactly("gpu", stored_class.name, capacity={"memory": "12Gi"}), namespace=namespace
    )
    stored_claim = resource_claim_from_object(kube.create(claim))
    (request,) = stored_claim.spec.requests[0].alternatives
    assert consumed(gpu, request) == {"memory": Decimal(16 * 2**30)}


@pytest.fixture(scope="module")
def rules_plane() -> Iterator[ControlPlane]:
    with start_control_plane(
        feature_gates={"DRADeviceTaintRules": True},
        runtime_config={"resource.k8s.io/v1beta2": True},
    ) as plane:
        yield plane


def test_device_taint_rules_are_not_served_by_default(kube: Kube) -> None:
    for version in ("v1beta2", "v1alpha3"):
        assert kube.get(f"/apis/resource.k8s.io/{version}/devicetaintrules").status == 404


def test_a_device_taint_rule_as_served_taints_the_devices_it_selects(
    rules_plane: ControlPlane,
) -> None:
    kube = rules_plane.kube()
    assert kube.get("/apis/resource.k8s.io/v1alpha3/devicetaintrules").status == 404
    rule: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-0-down"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "device": "gpu-0"},
            "taint": {"key": "maintenance", "effect": "NoSchedule"},
        },
    }
    stored = kube.post("/apis/resource.k8s.io/v1beta2/devicetaintrules", rule).expect(201)
    found = taint_rule_from_object(stored)
    tainted = with_taint_rules(slice_from_object(kube.create(_slice("pool-a"))), [found])
    assert [(t.key, t.effect) for t in tainted.devices[0].taints] == [("maintenance", "NoSchedule")]
    # A selector field removed in 1.35 is dropped by the API server, leaving an empty
    # selector, which picks every device (kube-scheduler's tracker applies it so);
    # read from a file, such a rule is refused instead (api/dra.py).
    old: dict[str, Any] = {**rule, "metadata": {"name": "by-class"}}
    old["spec"] = {**rule["spec"], "deviceSelector": {"deviceClassName": "gpu"}}
    kept = kube.post("/apis/resource.k8s.io/v1beta2/devicetaintrules", old).expect(201)
    assert kept["spec"]["deviceSelector"] == {}
    everywhere = with_taint_rules(
        slice_from_object(_slice("pool-b")), [taint_rule_from_object(kept)]
    )
    assert [t.key for t in everywhere.devices[0].taints] == ["maintenance"]
