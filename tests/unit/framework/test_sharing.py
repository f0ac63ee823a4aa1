"""Consumable capacity in the allocator, on the cases of the upstream allocator's test
table that exercise it (k8s.io/dynamic-resource-allocation v0.36.3,
structured/internal/allocatortesting/allocator_testing.go, the cases named
`consumable-capacity-*`, `allow-multiple-allocations-*` and the three partitionable
ones that share devices): each test names its case, and its expectation is that
case's `expectResults` (an empty list there is None here). Selectors are evaluated by
the real CEL evaluator. Upstream's helpers: `withCapacityRequestPolicyRange` is
default 2, validRange min 2 step 2 max 4; `withCapacityRequestPolicyValidValues(d, ...)`
is default d and validValues [d, extra...]; a capacity request is of `capacity-0`.
"""

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from batchsched.api.dra import class_from_object, resource_claim_from_object, slice_from_object
from batchsched.api.errors import InvalidObject
from batchsched.api.nodes import node_from_object
from batchsched.framework.devices import (
    Allocator,
    CelSelectors,
    Inventory,
    Pending,
    Usage,
    resolve_claim,
    results,
)
from batchsched.framework.sharing import consumed, fits

from tests.support.objects import (
    device,
    device_class,
    exactly,
    first_available,
    node,
    resource_claim,
    resource_slice,
)

DRIVER = "driver-a"
CAP = "capacity-0"
PLAIN = device_class("class-a", f'device.driver == "{DRIVER}"')
MULTI = device_class(
    "class-a", f'device.driver == "{DRIVER}" && device.allowMultipleAllocations == true'
)
DEDICATED = device_class(
    "class-a", f'device.driver == "{DRIVER}" && device.allowMultipleAllocations == false'
)
RANGE = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}

# Per claim, its results: (request, device, consumed capacity; None where not shared).
Found = list[list[tuple[str, str, dict[str, str] | None]]]


def valid_values(default: str, *more: str) -> dict[str, Any]:
    return {"default": default, "validValues": [default, *more]}


def shared(
    name: str, value: str | None = None, policy: Mapping[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    """A device allowing multiple allocations, with `capacity-0` of `value`."""
    return device(
        name,
        multiple=True,
        capacity=None if value is None else {CAP: value},
        policies=None if policy is None else {CAP: policy},
        **more,
    )


def request(name: str = "req-0", amount: str | None = None, **more: Any) -> dict[str, Any]:
    return exactly(name, "class-a", capacity=None if amount is None else {CAP: amount}, **more)


def allocate(
    claims: Iterable[Iterable[dict[str, Any]] | dict[str, Any]],
    devices: Iterable[dict[str, Any]],
    *,
    device_class: dict[str, Any] = MULTI,
    in_use: Mapping[str, Mapping[str, str]] | None = None,
    dedicated: Iterable[str] = (),
    counters: Mapping[str, Mapping[str, str]] | None = None,
) -> Found | None:
    """Allocate on node-1 claims of the given requests (or whole claims), over slice-1
    of pool-1 holding `devices`, with shares already allocated (`in_use`: capacity
    consumed per device name) and devices allocated whole (`dedicated`)."""
    slices = [
        resource_slice(
            "slice-1",
            driver=DRIVER,
            pool="pool-1",
            node_name="node-1",
            devices=list(devices),
            slice_count=2 if counters else 1,
        )
    ]
    if counters:
        slices.append(
            resource_slice(
                "slice-2",
                driver=DRIVER,
                pool="pool-1",
                node_name="node-1",
                counters=counters,
                slice_count=2,
            )
        )
    nodes = [node_from_object(node("node-1"))]
    inventory = Inventory([slice_from_object(s) for s in slices], nodes, CelSelectors())
    usage = Usage(np.zeros(len(inventory.devices), dtype=np.bool_))
    for name, amounts in (in_use or {}).items():
        index = inventory.index[f"{DRIVER}/pool-1/{name}"]
        usage.share(inventory, index, {k: Decimal(v) for k, v in amounts.items()}, +1)
    for name in dedicated:
        usage.take(inventory, inventory.index[f"{DRIVER}/pool-1/{name}"], +1)
    found_class = class_from_object(device_class)
    pending: list[Pending] = []
    for i, given in enumerate(claims):
        raw = given if isinstance(given, dict) else resource_claim(f"claim-{i}", *given)
        resolved = resolve_claim(
            resource_claim_from_object(raw), {found_class.name: found_class}, inventory, {}
        )
        assert not isinstance(resolved, str), resolved
        pending.append(resolved)
    chosen = Allocator(inventory, usage).allocate(pending, 0)
    assert not usage.capacity or in_use, "the search gives back what it took"
    if chosen is None:
        return None
    answer: Found = []
    for claim, devices_of in zip(pending, chosen, strict=True):
        by_name = {a.name: a for r in claim.requests for a, _, _ in r.alternatives}
        answer.append(
            [
                (
                    r.request,
                    r.device,
                    {k: str(v) for k, v in r.consumed} if r.share_id else None,
                )
                for r in results(inventory, claim.claim, devices_of, by_name)
            ]
        )
    return answer


def test_missing_capacity_request() -> None:
    """consumable-capacity-multi-allocatable-device-with-missing-capacity-request"""
    found = allocate(
        [[request(amount="1")]],
        [device("device-1", multiple=True, capacity={"capacity-1": "1"})],
        device_class=PLAIN,
    )
    assert found is None


def test_allocation_mode_all_with_missing_capacity_request() -> None:
    """consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request"""
    found = allocate(
        [[request(amount="1", mode="All")]],
        [device("device-1", multiple=True, capacity={"capacity-1": "1"})],
    )
    assert found is None


def test_without_capacity_without_capacity_request() -> None:
    """...-multi-allocatable-device-without-capacity-without-capacity-request"""
    found = allocate([[request()], [request()]], [shared("device-1")])
    assert found == [[("req-0", "device-1", {})], [("req-0", "device-1", {})]]


def test_without_policy_without_capacity_request() -> None:
    """...-multi-allocatable-device-without-policy-without-capacity-request"""
    found = allocate([[request()], [request()]], [shared("device-1", "1"), shared("device-2", "1")])
    assert found == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-2", {CAP: "1"})]]


def test_without_policy_without_capacity_request_block() -> None:
    """...-multi-allocatable-device-without-policy-without-capacity-request-block"""
    assert allocate([[request()], [request()]], [shared("device-1", "2")]) is None


def test_without_policy_with_capacity_request() -> None:
    """...-multi-allocatable-device-without-policy-with-capacity-request"""
    found = allocate([[request(amount="1")], [request(amount="1")]], [shared("device-1", "2")])
    assert found == [[("req-0", "device-1", {CAP: "1"})], [("req-0", "device-1", {CAP: "1"})]]


def test_with_policy_without_capacity_request() -> None:
    """...-multi-allocatable-device-with-policy-without-capacity-request"""
    found = allocate([[request()], [request()]], [shared("device-1", "4", RANGE)])
    assert found == [[("req-0", "device-1", {CAP: "2"})], [("req-0", "device-1", {CAP: "2"})]]


def test_with_zero_request_policy() -> None:
    """...-multi-allocatable-device-with-zero-request-policy"""
    found = allocate([[request()], [request()]], [shared("device-1", "1", valid_values("0"))])
    assert found == [[("req-0", "device-1", {CAP: "0"})], [("req-0", "device-1", {CAP: "0"})]]


def test_violates_zero_request_policy() -> None:
    """...-multi-allocatable-device-violates-zero-request-policy"""
    assert allocate([[request(amount="1")]], [shared("device-1", "1", valid_values("0"))]) is None


def test_range_policy_with_capacity_request() -> None:
    """...-multi-allocatable-device-with-range-policy-with-capacity-request: rounded up
    to the minimum"""
    found = allocate(
        [[request(amount="1")], [request(amount="1")]], [shared("device-1", "4", RANGE)]
    )
    assert found == [[("req-0", "device-1", {CAP: "2"})], [("req-0", "device-1", {CAP: "2"})]]


def test_range_policy_step() -> None:
    """...-multi-allocatable-device-with-range-policy-step: 3 rounds up to 2 + 2"""
    found = allocate([[request(amount="3")]], [shared("device-1", "4", RANGE)])
    assert found == [[("req-0", "device-1", {CAP: "4"})]]


def test_valid_values_policy() -> None:
    """...-multi-allocatable-device-with-valid-values-policy"""
    found = allocate([[request(amount="2")]], [shared("device-1", "4", valid_values("1", "2"))])
    assert found == [[("req-0", "device-1", {CAP: "2"})]]


def test_valid_values_policy_round_up() -> None:
    """...-multi-allocatable-device-with-valid-values-policy-round-up"""
    found = allocate([[request(amount="2")]], [shared("device-1", "3", valid_values("1", "3"))])
    assert found == [[("req-0", "device-1", {CAP: "3"})]]


def test_exceeded_consumable_capacity_request() -> None:
    """...-multi-allocatable-device-with-exceeded-consumable-capacity-request"""
    found = allocate(
        [[request(amount="1")], [request(amount="2")]], [shared("device-1", "2", RANGE)]
    )
    assert found is None


def test_request_over_max_sharing_policy() -> None:
    """...-multi-allocatable-device-with-request-over-max-sharing-policy: 6 < 10, but
    the policy's maximum is 4"""
    assert allocate([[request(amount="6")]], [shared("device-1", "10", RANGE)]) is None


def test_allocated_capacity_use_remaining() -> None:
    """...-multi-allocatable-device-with-allocated-capacity-use-remaining"""
    found = allocate(
        [[request(amount="2")]], [shared("device-1", "4", RANGE)], in_use={"device-1": {CAP: "2"}}
    )
    assert found == [[("req-0", "device-1", {CAP: "2"})]]


def test_allocated_capacity_next_device() -> None:
    """...-multi-allocatable-device-with-allocated-capacity-next-device"""
    found = allocate(
        [[request(amount="2")]],
        [shared("device-1", "2", RANGE), shared("device-2", "2", RANGE)],
        in_use={"device-1": {CAP: "2"}},
    )
    assert found == [[("req-0", "device-2", {CAP: "2"})]]


def test_backtrack() -> None:
    """consumable-capacity-with-multi-allocatable-device-backtrack"""
    attribute = f"{DRIVER}/stringAttribute"
    first = resource_claim(
        "claim-0",
        request("req-0", "2"),
        request("req-1", "2"),
        constraints=[{"matchAttribute": attribute}],
    )
    found = allocate(
        [first, [request(amount="2")]],
        [
            shared("device-2", "2", RANGE, attributes={"stringAttribute": {"string": "v1"}}),
            shared("device-1", "4", RANGE, attributes={"stringAttribute": {"string": "v2"}}),
        ],
        device_class=PLAIN,
    )
    assert found == [
        [("req-0", "device-1", {CAP: "2"}), ("req-1", "device-1", {CAP: "2"})],
        [("req-0", "device-2", {CAP: "2"})],
    ]


def test_with_subrequest() -> None:
    """consumable-capacity-multi-allocatable-device-with-subrequest"""
    alternatives = first_available(
        "req-0", request("subreq-0", "4"), request("subreq-1", "2"), request("subreq-2")
    )
    found = allocate([[alternatives]], [shared("device-1", "2", RANGE)])
    assert found == [[("req-0/subreq-1", "device-1", {CAP: "2"})]]


def test_no_available_consumable_capacity() -> None:
    """...-multi-allocatable-device-with-no-available-consumable-capacity"""
    found = allocate(
        [[request(amount="2")]], [shared("device-1", "2", RANGE)], in_use={"device-1": {CAP: "2"}}
    )
    assert found is None


def test_all_filter_out_no_capacity() -> None:
    """...-allocation-mode-all-filter-out-no-capacity"""
    found = allocate(
        [[request(amount="2", mode="All")]], [shared("device-1", "2"), shared("device-2")]
    )
    assert found == [[("req-0", "device-1", {CAP: "2"})]]


def test_all_filter_out_insufficient_capacity() -> None:
    """...-allocation-mode-all-filter-out-insufficient-capacity"""
    found = allocate(
        [[request(amount="2", mode="All")]], [shared("device-1", "2"), shared("device-2", "1")]
    )
    assert found == [[("req-0", "device-1", {CAP: "2"})]]


def test_all_allocating_sufficient() -> None:
    """...-allocation-mode-all-allocating-sufficient"""
    found = allocate(
        [[request("req-0", "1"), request("req-1", "1", mode="All")]],
        [shared("device-1", "2"), shared("device-2", "1")],
        device_class=PLAIN,
    )
    assert found == [
        [
            ("req-0", "device-1", {CAP: "1"}),
            ("req-1", "device-1", {CAP: "1"}),
            ("req-1", "device-2", {CAP: "1"}),
        ]
    ]


def test_all_in_use_sufficient() -> None:
    """...-allocation-mode-all-in-use-sufficient"""
    found = allocate(
        [[request(amount="1", mode="All")]],
        [shared("device-1", "2"), shared("device-2", "1")],
        device_class=PLAIN,
        in_use={"device-1": {CAP: "1"}},
    )
    assert found == [[("req-0", "device-1", {CAP: "1"}), ("req-0", "device-2", {CAP: "1"})]]


def test_all_allocating_insufficient() -> None:
    """...-allocation-mode-all-allocating-insufficient: "all" is settled before the
    claim's first request takes device-1's capacity"""
    found = allocate(
        [[request("req-0", "1"), request("req-1", "1", mode="All")]],
        [shared("device-1", "1"), shared("device-2", "1")],
        device_class=PLAIN,
    )
    assert found is None


def test_all_in_use_insufficient() -> None:
    """...-allocation-mode-all-in-use-insufficient"""
    found = allocate(
        [[request(amount="1", mode="All")]],
        [shared("device-1", "1"), shared("device-2", "1")],
        device_class=PLAIN,
        in_use={"device-1": {CAP: "1"}},
    )
    assert found == [[("req-0", "device-2", {CAP: "1"})]]


def test_dedicated_device_with_consumable_capacity_request() -> None:
    """consumable-capacity-dedicated-device-with-consumable-capacity-request"""
    found = allocate(
        [[request(amount="1")]], [device("device-1", capacity={CAP: "1"})], device_class=DEDICATED
    )
    assert found == [[("req-0", "device-1", None)]]


def test_dedicated_device_with_multiple_consumable_capacity_request() -> None:
    """consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request"""
    found = allocate(
        [[request(amount="1")], [request(amount="1")]],
        [device("device-1", capacity={CAP: "2"}, policies={CAP: RANGE})],
        device_class=DEDICATED,
    )
    assert found is None


def test_exclude_multi_allocatable_device_by_class_selector() -> None:
    """allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector"""
    found = allocate([[request(amount="1")]], [shared("device-1", "1")], device_class=DEDICATED)
    assert found is None


def test_not_allocate_multi_allocatable_device_which_already_dedicated() -> None:
    """allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated"""
    found = allocate(
        [[request(amount="1")]], [shared("device-1", "2", RANGE)], dedicated=["device-1"]
    )
    assert found is None


def test_with_partitionable_device() -> None:
    """allow-multiple-allocations-with-partitionable-device: the counters of a shared
    device are consumed once"""
    memory = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{{}}")) >= 0'
    devices = [
        device(
            f"device-{i}",
            multiple=True,
            capacity={"memory": size},
            consumes={"counter-set-1": {"memory": size}},
        )
        for i, size in ((1, "4Gi"), (2, "6Gi"), (3, "4Gi"))
    ]
    alternatives = first_available(
        "req-1",
        exactly("subreq-0", "class-a", selectors=[memory.format("6Gi")]),
        exactly("subreq-1", "class-a", selectors=[memory.format("4Gi")]),
    )
    found = allocate(
        [[request(), alternatives]], devices, counters={"counter-set-1": {"memory": "8Gi"}}
    )
    assert found == [
        [
            ("req-0", "device-1", {"memory": str(4 * 2**30)}),
            ("req-1/subreq-1", "device-3", {"memory": str(4 * 2**30)}),
        ]
    ]


def test_shared_device_counter_cross_cycle() -> None:
    """allow-multiple-allocations-with-shared-device-counter-cross-cycle: a share
    allocated earlier holds the device's counters"""
    devices = [
        shared(
            f"device-{i}",
            attributes={"mode": {"string": mode}},
            consumes={"counter-set-1": {CAP: "1"}},
        )
        for i, mode in ((1, "a"), (2, "b"))
    ]
    found = allocate(
        [[request(amount="1", selectors=[f'device.attributes["{DRIVER}"].mode == "b"'])]],
        devices,
        in_use={"device-1": {CAP: "1"}},
        counters={"counter-set-1": {CAP: "1"}},
    )
    assert found is None


def _kind(kind: str) -> str:
    return f'device.attributes["{DRIVER}"].kind == "{kind}"'


def test_partitionable_backtrack_releases_counter() -> None:
    """partitionable-consumable-capacity-backtrack-releases-counter"""
    devices = [
        shared(
            "device-1",
            attributes={"kind": {"string": "shared"}},
            consumes={"counter-set-1": {"c": "1"}},
        ),
        device("device-2", attributes={"kind": {"string": "shared"}}),
        device(
            "device-3",
            attributes={"kind": {"string": "counteronly"}},
            consumes={"counter-set-1": {"c": "1"}},
        ),
    ]
    claim = [
        request("req-0", selectors=[_kind("shared")]),
        request("req-1", selectors=[_kind("counteronly")]),
    ]
    found = allocate([claim], devices, device_class=PLAIN, counters={"counter-set-1": {"c": "1"}})
    assert found == [[("req-0", "device-2", None), ("req-1", "device-3", None)]]


def test_rejection_rolls_back_constraints() -> None:
    """consumable-capacity-rejection-rolls-back-constraints"""
    is_cap = f'device.attributes["{DRIVER}"].stringAttribute == "cap"'
    devices = [
        shared("device-1", "2", attributes={"stringAttribute": {"string": "cap"}}),
        device("device-2", attributes={"stringAttribute": {"string": "fb"}}),
    ]
    second = resource_claim(
        "claim-1",
        first_available(
            "req-0",
            request("subreq-0", "2", mode="All", selectors=[is_cap]),
            request(
                "subreq-1", selectors=[f'device.attributes["{DRIVER}"].stringAttribute == "fb"']
            ),
        ),
        constraints=[{"matchAttribute": f"{DRIVER}/stringAttribute"}],
    )
    found = allocate(
        [[request(amount="2", selectors=[is_cap])], second], devices, device_class=PLAIN
    )
    assert found == [[("req-0", "device-1", {CAP: "2"})], [("req-0/subreq-1", "device-2", None)]]


def test_empty_capacity_multiple_share_backtrack_keeps_counter_ownership() -> None:
    """partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership"""
    devices = [
        shared(
            "device-1",
            attributes={"kind": {"string": "shared"}, "stringAttribute": {"string": "red"}},
            consumes={"counter-set-1": {"c": "1"}},
        ),
        device(
            "device-2",
            attributes={"kind": {"string": "fallback"}, "stringAttribute": {"string": "blue"}},
        ),
        device(
            "device-3",
            attributes={"kind": {"string": "gate"}, "stringAttribute": {"string": "blue"}},
        ),
    ]
    second = resource_claim(
        "claim-1",
        request("req-1", selectors=[f"{_kind('shared')} || {_kind('fallback')}"]),
        request("req-2", selectors=[_kind("gate")]),
        request("req-3", selectors=[_kind("shared")]),
        constraints=[
            {"matchAttribute": f"{DRIVER}/stringAttribute", "requests": ["req-1", "req-2"]}
        ],
    )
    found = allocate(
        [[request(selectors=[_kind("shared")])], second],
        devices,
        device_class=PLAIN,
        counters={"counter-set-1": {"c": "1"}},
    )
    assert found == [
        [("req-0", "device-1", {})],
        [("req-1", "device-2", None), ("req-2", "device-3", None), ("req-3", "device-1", {})],
    ]


# consumable_capacity_test.go's own cases (TestCmpRequestOverCapacity and
# TestCalculateConsumedCapacity) are the functions' answers above; the policy
# arithmetic alone, on quantities with units:


@pytest.mark.parametrize(
    ("requested", "expected"),
    [("1Gi", "2Gi"), ("2Gi", "2Gi"), ("3Gi", "4Gi"), ("5Gi", "6Gi"), ("9Gi", None)],
)
def test_range_rounds_up_by_step_within_max(requested: str, expected: str | None) -> None:
    raw = shared(
        "gpu", "40Gi", {"default": "1Gi", "validRange": {"min": "2Gi", "step": "2Gi", "max": "8Gi"}}
    )
    parsed = slice_from_object(
        resource_slice("s", driver=DRIVER, pool="p", node_name="n", devices=[raw])
    ).devices[0]
    ask = resource_claim_from_object(resource_claim("c", request(amount=requested)))
    amounts = consumed(parsed, ask.spec.requests[0].alternatives[0])
    gib = Decimal(2**30)
    assert amounts == (None if expected is None else {CAP: Decimal(expected[:-2]) * gib})
    assert fits(parsed, ask.spec.requests[0].alternatives[0], {CAP: 39 * gib}) is None


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"validValues": ["1"], "validRange": {"min": "1"}}, "at most one of validValues"),
        ({"validRange": {"max": "1"}}, "validRange.min: required"),
        ({"validRange": {"min": "1", "step": "0"}}, "validRange.step: must be positive"),
        ({"default": "lots"}, "requestPolicy.default"),
    ],
)
def test_a_bad_request_policy_is_named(policy: dict[str, Any], message: str) -> None:
    raw = resource_slice(
        "s", driver=DRIVER, pool="p", node_name="n", devices=[shared("gpu", "4", policy)]
    )
    with pytest.raises(InvalidObject, match=message):
        slice_from_object(raw)


def test_a_bad_capacity_request_is_named() -> None:
    with pytest.raises(InvalidObject, match=r"exactly\.capacity\.requests\[capacity-0\]"):
        resource_claim_from_object(resource_claim("c", request(amount="a lot")))
