"""Reading ResourceSlices, DeviceClasses, ResourceClaims and pods' resource claims:
bad input named by object and field."""

from decimal import Decimal
from typing import Any

import pytest

from batchsched.api.dra import (
    Attribute,
    resource_claim_from_object,
    slice_from_object,
    taint_rule_from_object,
    with_taint_rules,
)
from batchsched.api.errors import InvalidObject
from batchsched.api.objects import PodResourceClaim
from batchsched.api.pods import task_from_pod

from tests.support.objects import (
    device,
    exactly,
    first_available,
    pod,
    resource_claim,
    resource_slice,
)


def test_a_slice_reads_attributes_by_type_capacity_and_counters() -> None:
    raw = resource_slice(
        "s",
        driver="gpu.example.com",
        pool="p",
        node_name="n1",
        devices=[
            device(
                "gpu-0",
                attributes={"model": {"string": "x"}, "cc": {"version": "9.0.0"}},
                capacity={"memory": "80Gi"},
                consumes={"set": {"memory": "40Gi"}},
            )
        ],
    )
    found = slice_from_object(raw)
    gpu = found.devices[0]
    assert gpu.id == "gpu.example.com/p/gpu-0"
    assert gpu.attribute("gpu.example.com/cc") == Attribute("version", "9.0.0")
    assert gpu.attribute("other.domain/cc") is None
    assert gpu.capacity["memory"] == 80 * 2**30
    assert gpu.consumes == (("set", (("memory", Decimal(40 * 2**30)),)),)
    assert found.scope is not None and found.scope.node_name == "n1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s["spec"]["devices"][0].update(attributes={"v": {"version": "1.0"}}),
            "ResourceSlice s.spec.devices[0].attributes[v].version: '1.0' is not a semantic",
        ),
        (
            lambda s: s["spec"]["devices"][0].update(attributes={"v": {"int": 1, "bool": True}}),
            "ResourceSlice s.spec.devices[0].attributes[v]: exactly one of",
        ),
        (
            lambda s: s["spec"].update(allNodes=True),
            "ResourceSlice s.spec: exactly one of nodeName, nodeSelector, allNodes must be set",
        ),
        (lambda s: s["spec"]["pool"].pop("name"), "ResourceSlice s.spec.pool.name"),
    ],
)
def test_a_bad_slice_is_named_by_field(change: Any, message: str) -> None:
    raw = resource_slice("s", driver="d", pool="p", node_name="n1", devices=[device("gpu-0")])
    change(raw)
    with pytest.raises(InvalidObject) as raised:
        slice_from_object(raw)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        (
            [exactly("gpu", "c"), exactly("gpu", "c")],
            "ResourceClaim default/c.spec.devices.requests[1].name: duplicate request 'gpu'",
        ),
        (
            [{"name": "gpu", "exactly": {"deviceClassName": "c"}, "firstAvailable": []}],
            "ResourceClaim default/c.spec.devices.requests[0]: exactly one of exactly, "
            "firstAvailable must be set",
        ),
        (
            [exactly("gpu", "c", mode="Some")],
            "ResourceClaim default/c.spec.devices.requests[0].exactly.allocationMode: 'Some' is "
            "not one of ExactCount, All",
        ),
        (
            [exactly("gpu", "c", mode="All", count=2)],
            "ResourceClaim default/c.spec.devices.requests[0].exactly.count: only for "
            "allocationMode ExactCount",
        ),
    ],
)
def test_a_bad_claim_is_named_by_field(requests: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InvalidObject) as raised:
        resource_claim_from_object(resource_claim("c", *requests))
    assert str(raised.value) == message


def test_first_available_subrequests_are_named_under_their_request() -> None:
    raw = resource_claim(
        "c",
        first_available("gpu", exactly("big", "c"), exactly("small", "c", count=2)),
        constraints=[{"requests": ["gpu/big"], "matchAttribute": "d/numa"}],
    )
    claim = resource_claim_from_object(raw)
    (request,) = claim.spec.requests
    assert [(a.name, a.count) for a in request.alternatives] == [("gpu/big", 1), ("gpu/small", 2)]
    (constraint,) = claim.spec.constraints
    assert constraint.applies("gpu/big") and not constraint.applies("gpu/small")


def test_an_unqualified_constraint_attribute_is_refused() -> None:
    raw = resource_claim("c", exactly("gpu", "c"), constraints=[{"matchAttribute": "numa"}])
    with pytest.raises(InvalidObject, match=r"constraints\[0\]: attribute 'numa' must be fully"):
        resource_claim_from_object(raw)


def test_pods_claims_resolve_by_name_and_through_their_status() -> None:
    spec = {
        "resourceClaims": [
            {"name": "shared", "resourceClaimName": "team-gpus"},
            {"name": "own", "resourceClaimTemplateName": "t"},
            {"name": "later", "resourceClaimTemplateName": "t"},
            {"name": "skipped", "resourceClaimTemplateName": "t"},
        ]
    }
    raw = pod("p", spec=spec)
    raw["status"] = {
        "resourceClaimStatuses": [
            {"name": "own", "resourceClaimName": "p-own-abcde"},
            {"name": "skipped"},
        ]
    }
    assert task_from_pod(raw).resource_claims == (
        PodResourceClaim("shared", "team-gpus"),
        PodResourceClaim("own", "p-own-abcde", template="t"),
        PodResourceClaim("later", "", template="t"),
        PodResourceClaim("skipped", None, template="t"),
    )


def _rule(selector: dict[str, Any] | None, **taint: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "k", "effect": "NoExecute", **taint}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("selector", "tainted"),
    [
        ({"driver": "a.example.com", "pool": "p", "device": "d1"}, ["d1"]),
        ({"pool": "p"}, ["d1", "d2"]),
        ({"driver": "b.example.com"}, []),
        ({"device": "d2"}, ["d2"]),
        # As kube-scheduler's ResourceSlice tracker applies it (its API comment says
        # otherwise): no selector picks every device.
        (None, ["d1", "d2"]),
    ],
)
def test_a_taint_rule_taints_the_devices_it_selects(
    selector: dict[str, Any] | None, tainted: list[str]
) -> None:
    found = slice_from_object(
        resource_slice(
            "s",
            driver="a.example.com",
            pool="p",
            node_name="n",
            devices=[device("d1"), device("d2", taints=[{"key": "own", "effect": "None"}])],
        )
    )
    rule = taint_rule_from_object(_rule(selector))
    patched = with_taint_rules(found, [rule])
    assert [d.name for d in patched.devices if rule.taint in d.taints] == tainted
    assert patched.devices[1].taints[0].key == "own"
    assert (patched is found) == (not tainted)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            _rule({"deviceClassName": "gpu"}),
            "DeviceTaintRule r.spec.deviceSelector.deviceClassName: removed from the API",
        ),
        (_rule({"driver": ""}), "DeviceTaintRule r.spec.deviceSelector.driver: must be"),
        (_rule({}, key=""), "DeviceTaintRule r.spec.taint.key: must be a non-empty string"),
    ],
)
def test_a_bad_taint_rule_is_named_by_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject, match=message):
        taint_rule_from_object(raw)
