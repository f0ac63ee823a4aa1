"""The allocator, on cases translated from the upstream allocator's test table
(k8s.io/dynamic-resource-allocation v0.36.2,
structured/internal/allocatortesting/allocator_testing.go): each test names its case,
and its expectation is that case's assertion (expectResults, or expectError's text).

Selectors are evaluated by a stand-in for the CEL evaluator that knows the few
expressions these cases use (what the expressions mean is the CEL module's to test).
"""

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from batchsched.api.dra import (
    Device,
    SelectorError,
    class_from_object,
    resource_claim_from_object,
    slice_from_object,
)
from batchsched.api.nodes import node_from_object
from batchsched.framework.devices import (
    AllocationError,
    Allocator,
    Inventory,
    Pending,
    Usage,
    resolve_claim,
)

from tests.support.objects import (
    device,
    device_class,
    exactly,
    first_available,
    node,
    resource_claim,
    resource_slice,
)

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
GI = Decimal(2**30)


def _memory_at_least(gib: int) -> Callable[[Device], bool]:
    def check(found: Device) -> bool:
        return found.capacity.get("memory", Decimal(-1)) >= gib * GI

    return check


def _fails(found: Device) -> bool:
    raise SelectorError("no such key: missing")


EXPRESSIONS: dict[str, Callable[[Device], bool]] = {
    f'device.driver == "{DRIVER_A}"': lambda d: d.driver == DRIVER_A,
    f'device.driver == "{DRIVER_B}"': lambda d: d.driver == DRIVER_B,
    'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0': _memory_at_least(1),
    'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0': _memory_at_least(2),
    'device.capacity["driver-a"].memory.compareTo(quantity("4Gi")) >= 0': _memory_at_least(4),
    'device.capacity["driver-a"].memory.compareTo(quantity("6Gi")) >= 0': _memory_at_least(6),
    'device.capacity["driver-a"].memory.compareTo(quantity("8Gi")) >= 0': _memory_at_least(8),
    'device.attributes["driver-a"].missing': _fails,
}
CLASS_A = device_class("class-a", f'device.driver == "{DRIVER_A}"')
CLASS_B = device_class("class-b", f'device.driver == "{DRIVER_B}"')


class Expressions:
    """The CEL evaluator's part, for the expressions above."""

    def compile_error(self, expression: str) -> str | None:
        return None if expression in EXPRESSIONS else "undeclared reference to 'noSuchVar'"

    def matches(self, expression: str, found: Device) -> bool:
        return EXPRESSIONS[expression](found)


def allocate(
    claims: Iterable[dict[str, Any]],
    slices: Iterable[dict[str, Any]],
    *,
    nodes: Iterable[dict[str, Any]] = (node("node-1", labels={"region": "region-1"}),),
    on: str = "node-1",
    classes: Iterable[dict[str, Any]] = (CLASS_A, CLASS_B),
    allocated: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
) -> list[list[tuple[str, str]]] | str | None:
    """Per claim, its (request, device id) results on node `on`; None when the node
    cannot have them all; the message where the claims cannot be allocated."""
    parsed_nodes = [node_from_object(n) for n in nodes]
    inventory = Inventory([slice_from_object(s) for s in slices], parsed_nodes, Expressions())
    usage = Usage(np.zeros(len(inventory.devices), dtype=np.bool_))
    for taken in allocated:
        usage.take(inventory, inventory.index[taken], +1)
    found_classes = {c.name: c for c in (class_from_object(c) for c in classes)}
    pending: list[Pending] = []
    for raw in claims:
        resolved = resolve_claim(
            resource_claim_from_object(raw), found_classes, inventory, labels or {}
        )
        if isinstance(resolved, str):
            return resolved
        pending.append(resolved)
    row = [n.name for n in parsed_nodes].index(on)
    try:
        chosen = Allocator(inventory, usage).allocate(pending, row)
    except AllocationError as error:
        return str(error)
    if chosen is None:
        return None
    return [[(request, inventory.devices[d].id) for request, d in per] for per in chosen]


def _slice(devices: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """slice-1 of pool-1 on node-1."""
    return resource_slice(
        "slice-1", driver=DRIVER_A, pool="pool-1", node_name="node-1", devices=devices, **more
    )


def one_device(name: str, node_name: str, pool: str, driver: str = DRIVER_A) -> dict[str, Any]:
    return resource_slice(
        name, driver=driver, pool=pool, node_name=node_name, devices=[device("device-1")]
    )


def claim0(*requests: dict[str, Any], **more: Any) -> dict[str, Any]:
    return resource_claim("claim-0", *requests, **more)


def req0(**more: Any) -> dict[str, Any]:
    return exactly("req-0", "class-a", **more)


def test_simple() -> None:
    assert allocate([claim0(req0())], [one_device("slice-1", "node-1", "pool-1")]) == [
        [("req-0", "driver-a/pool-1/device-1")]
    ]


def test_other_node() -> None:
    slices = [
        one_device("slice-1", "node-1", "pool-1", DRIVER_B),
        one_device("slice-2", "node-2", "pool-2"),
    ]
    nodes = [node("node-1"), node("node-2")]
    assert allocate([claim0(req0())], slices, nodes=nodes, on="node-2") == [
        [("req-0", "driver-a/pool-2/device-1")]
    ]


def _memory_devices(*names_and_sizes: tuple[str, str]) -> dict[str, Any]:
    return _slice([device(name, capacity={"memory": size}) for name, size in names_and_sizes])


def _at_least(gib: int) -> str:
    return f'device.capacity["driver-a"].memory.compareTo(quantity("{gib}Gi")) >= 0'


def test_small_and_large() -> None:
    claim = claim0(
        exactly("req-0", "class-a", selectors=[_at_least(1)]),
        exactly("req-1", "class-a", selectors=[_at_least(2)]),
    )
    found = allocate([claim], [_memory_devices(("device-1", "1Gi"), ("device-2", "2Gi"))])
    assert found == [[("req-0", "driver-a/pool-1/device-1"), ("req-1", "driver-a/pool-1/device-2")]]


def test_small_and_large_backtrack_requests() -> None:
    claim = claim0(
        exactly("req-0", "class-a", selectors=[_at_least(1)]),
        exactly("req-1", "class-a", selectors=[_at_least(2)]),
    )
    found = allocate([claim], [_memory_devices(("device-2", "2Gi"), ("device-1", "1Gi"))])
    assert found == [[("req-0", "driver-a/pool-1/device-1"), ("req-1", "driver-a/pool-1/device-2")]]


def test_small_and_large_backtrack_claims() -> None:
    claims = [
        claim0(exactly("req-0", "class-a", selectors=[_at_least(1)])),
        resource_claim("claim-1", exactly("req-1", "class-a", selectors=[_at_least(2)])),
    ]
    found = allocate(claims, [_memory_devices(("device-2", "2Gi"), ("device-1", "1Gi"))])
    assert found == [
        [("req-0", "driver-a/pool-1/device-1")],
        [("req-1", "driver-a/pool-1/device-2")],
    ]


def test_devices_split_across_different_slices() -> None:
    slices = [one_device("slice-1", "node-1", "pool-1"), one_device("slice-2", "node-1", "pool-2")]
    assert allocate([claim0(req0(count=2))], slices) == [
        [("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-2/device-1")]
    ]


def test_obsolete_slice() -> None:
    """A newer generation makes the older slice obsolete; the pool, with one of its two
    slices of that generation, is incomplete: nothing is allocated."""
    old = resource_slice(
        "slice-1-obsolete",
        driver=DRIVER_A,
        pool="pool-1",
        node_name="node-1",
        devices=[device("device-1")],
        slice_count=2,
    )
    new = resource_slice(
        "slice-1-obsolete",
        driver=DRIVER_A,
        pool="pool-1",
        node_name="node-1",
        devices=[device("device-2")],
        slice_count=2,
        generation=2,
    )
    assert allocate([claim0(req0())], [old, new]) is None


def test_duplicate_slice_makes_the_pool_invalid() -> None:
    """upstream: expectError "invalid resource pools were encountered"; here the pool
    gives no device, and the node's reason names it (tests/unit/framework/
    test_deviceclaims.py)."""
    first = _slice([device("device-1")], slice_count=2)
    second = {**first, "metadata": {"name": "slice-1-2"}}
    inventory = Inventory(
        [slice_from_object(first), slice_from_object(second)],
        [node_from_object(node("node-1"))],
        Expressions(),
    )
    assert inventory.pools[0].invalid is not None
    assert "duplicate device 'device-1'" in inventory.pools[0].invalid
    assert allocate([claim0(req0())], [first, second]) is None


def test_no_slices() -> None:
    assert allocate([claim0(req0())], []) is None


def test_not_enough_suitable_devices() -> None:
    claims = [claim0(req0()), claim0(exactly("req-1", "class-a"))]
    assert allocate(claims, [one_device("slice-1", "node-1", "pool-1")]) is None


def test_unknown_class() -> None:
    found = allocate(
        [claim0(exactly("req-0", "unknown-class"))], [one_device("slice-1", "node-1", "pool-1")]
    )
    assert found == "request req-0: device class unknown-class does not exist"


def test_all_devices_single() -> None:
    assert allocate([claim0(req0(mode="All"))], [one_device("slice-1", "node-1", "pool-1")]) == [
        [("req-0", "driver-a/pool-1/device-1")]
    ]


def test_all_devices_many() -> None:
    slices = [one_device("slice-1", "node-1", "pool-1"), one_device("slice-1", "node-1", "pool-2")]
    assert allocate([claim0(req0(mode="All"))], slices) == [
        [("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-2/device-1")]
    ]


def test_all_devices_of_the_incomplete_pool() -> None:
    incomplete = _slice([device("device-1")], slice_count=2)
    assert allocate([claim0(req0(mode="All"))], [incomplete]) == (
        "claim default/claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated"
    )


def _two_devices() -> dict[str, Any]:
    return _slice([device("device-1"), device("device-2")])


def test_all_devices_some_allocated() -> None:
    found = allocate(
        [claim0(req0(mode="All"))], [_two_devices()], allocated=["driver-a/pool-1/device-1"]
    )
    assert found is None


def test_all_devices_some_allocated_admin_access() -> None:
    found = allocate(
        [claim0(req0(mode="All", admin=True))],
        [_two_devices()],
        allocated=["driver-a/pool-1/device-1"],
        labels={"resource.kubernetes.io/admin-access": "true"},
    )
    assert found == [[("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-1/device-2")]]


def test_admin_access_needs_the_namespace_label() -> None:
    found = allocate([claim0(req0(admin=True))], [_two_devices()])
    assert isinstance(found, str) and "resource.kubernetes.io/admin-access" in found


def test_network_attached_device() -> None:
    attached = resource_slice(
        "slice-1",
        driver=DRIVER_A,
        pool="pool-1",
        node_selector={"region": "region-1"},
        devices=[device("device-1")],
    )
    nodes = [
        node("node-1", labels={"region": "region-1"}),
        node("node-2", labels={"region": "region-2"}),
    ]
    assert allocate([claim0(req0())], [attached], nodes=nodes) == [
        [("req-0", "driver-a/pool-1/device-1")]
    ]
    # unsuccessful-allocation-network-attached-device: the wrong region.
    assert allocate([claim0(req0())], [attached], nodes=nodes, on="node-2") is None


def test_already_allocated_devices() -> None:
    found = allocate(
        [claim0(req0())],
        [one_device("slice-1", "node-1", "pool-1")],
        allocated=["driver-a/pool-1/device-1"],
    )
    assert found is None


def _attributed(name: str, **attributes: dict[str, Any]) -> dict[str, Any]:
    return device(name, attributes=attributes)


def test_with_constraint() -> None:
    same: dict[str, dict[str, Any]] = {
        "driverVersion": {"version": "1.0.0"},
        "numa": {"int": 1},
        "stringAttribute": {"string": "stringAttributeValue"},
        "boolAttribute": {"bool": True},
    }
    devices = [_attributed("device-1", **same), _attributed("device-2", **same)]
    constraints = [
        {"matchAttribute": f"{DRIVER_A}/{name}"}
        for name in ("numa", "driverVersion", "stringAttribute", "boolAttribute")
    ]
    claim = claim0(req0(), exactly("req-1", "class-a"), constraints=constraints)
    found = allocate(
        [claim],
        [_slice(devices)],
    )
    assert found == [[("req-0", "driver-a/pool-1/device-1"), ("req-1", "driver-a/pool-1/device-2")]]


def test_with_constraint_non_existent_attribute() -> None:
    claim = claim0(req0(), constraints=[{"matchAttribute": "driver-a/nonExistentAttribute"}])
    assert allocate([claim], [one_device("slice-1", "node-1", "pool-1")]) is None


def test_with_constraint_not_matching_int_attribute() -> None:
    devices = [_attributed("device-1", numa={"int": 1}), _attributed("device-2", numa={"int": 2})]
    claim = claim0(
        req0(), exactly("req-1", "class-a"), constraints=[{"matchAttribute": "driver-a/numa"}]
    )
    found = allocate(
        [claim],
        [_slice(devices)],
    )
    assert found is None


def test_with_constraint_not_matching_int_attribute_all_devices() -> None:
    """An `All` request whose devices break a constraint is an error, not a miss."""
    devices = [_attributed("device-1", numa={"int": 1}), _attributed("device-2", numa={"int": 2})]
    claim = claim0(req0(mode="All"), constraints=[{"matchAttribute": "driver-a/numa"}])
    found = allocate(
        [claim],
        [_slice(devices)],
    )
    assert found == (
        "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 "
        "because a claim constraint would not be satisfied"
    )


def test_with_constraint_for_request_retry() -> None:
    devices = [
        _attributed(
            "device-1", driverVersion={"version": "1.0.0"}, stringAttribute={"string": "a"}
        ),
        _attributed(
            "device-2", driverVersion={"version": "2.0.0"}, stringAttribute={"string": "b"}
        ),
        _attributed(
            "device-3", driverVersion={"version": "3.0.0"}, stringAttribute={"string": "b"}
        ),
    ]
    constraints = [
        {"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"},
        {"matchAttribute": "driver-a/stringAttribute"},
    ]
    claim = claim0(req0(), exactly("req-1", "class-a"), constraints=constraints)
    found = allocate(
        [claim],
        [_slice(devices)],
    )
    assert found == [[("req-0", "driver-a/pool-1/device-2"), ("req-1", "driver-a/pool-1/device-3")]]


def test_distinct_attribute() -> None:
    """distinctAttribute (DRAConsumableCapacity, on in 1.36): values pairwise unique."""
    devices = [
        _attributed("device-1", numa={"int": 1}),
        _attributed("device-2", numa={"int": 1}),
        _attributed("device-3", numa={"int": 2}),
    ]
    claim = claim0(req0(count=2), constraints=[{"distinctAttribute": "driver-a/numa"}])
    found = allocate(
        [claim],
        [_slice(devices)],
    )
    assert found == [[("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-1/device-3")]]


def test_invalid_cel_one_device() -> None:
    found = allocate(
        [claim0(req0(selectors=["noSuchVar"]))], [one_device("slice-1", "node-1", "pool-1")]
    )
    assert isinstance(found, str) and "undeclared reference" in found


def test_runtime_error_names_the_selector() -> None:
    found = allocate(
        [claim0(req0(selectors=['device.attributes["driver-a"].missing']))],
        [one_device("slice-1", "node-1", "pool-1")],
    )
    assert found == (
        "claim default/claim-0, request req-0: selector #0: CEL runtime error on device "
        "driver-a/pool-1/device-1: no such key: missing"
    )


def test_too_many_devices_total() -> None:
    claim = claim0(*[exactly(f"req-{i}", "class-a", count=1) for i in range(33)])
    assert allocate([claim], [one_device("slice-1", "node-1", "pool-1")]) == (
        "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32"
    )


def test_prioritized_list_first_unavailable() -> None:
    claim = claim0(
        first_available("req-0", exactly("subreq-0", "class-b"), exactly("subreq-1", "class-a"))
    )
    assert allocate([claim], [one_device("slice-1", "node-1", "pool-1")]) == [
        [("req-0/subreq-1", "driver-a/pool-1/device-1")]
    ]


def test_prioritized_list_with_backtracking() -> None:
    claim = claim0(
        first_available(
            "req-0",
            exactly("subreq-0", "class-a", selectors=[_at_least(8)]),
            exactly("subreq-1", "class-a", selectors=[_at_least(4)]),
        ),
        exactly("req-1", "class-a", selectors=[_at_least(8)]),
    )
    slices = [
        _slice([device("device-1", capacity={"memory": "8Gi"})]),
        resource_slice(
            "slice-2",
            driver=DRIVER_A,
            pool="pool-2",
            node_name="node-1",
            devices=[device("device-2", capacity={"memory": "4Gi"})],
        ),
    ]
    assert allocate([claim], slices) == [
        [("req-0/subreq-1", "driver-a/pool-2/device-2"), ("req-1", "driver-a/pool-1/device-1")]
    ]


def _partitioned(*devices_and_memory: tuple[str, str], total: str) -> list[dict[str, Any]]:
    return [
        _slice(
            slice_count=2,
            devices=[
                device(n, consumes={"counter-set-1": {"memory": m}}) for n, m in devices_and_memory
            ],
        ),
        resource_slice(
            "slice-2",
            driver=DRIVER_A,
            pool="pool-1",
            slice_count=2,
            counters={"counter-set-1": {"memory": total}},
        ),
    ]


def test_partitionable_devices_single_device() -> None:
    assert allocate([claim0(req0())], _partitioned(("device-1", "4Gi"), total="8Gi")) == [
        [("req-0", "driver-a/pool-1/device-1")]
    ]


def test_partitionable_devices_no_capacity_available() -> None:
    slices = _partitioned(("device-1", "4Gi"), ("device-2", "16Gi"), total="18Gi")
    assert allocate([claim0(req0())], slices, allocated=["driver-a/pool-1/device-2"]) is None


def test_partitionable_devices_multiple_devices_share_the_counters() -> None:
    """Two partitions fit the counters, three do not (a whole GPU and its slices)."""
    slices = _partitioned(
        ("device-1", "4Gi"), ("device-2", "4Gi"), ("device-3", "4Gi"), total="8Gi"
    )
    assert allocate([claim0(req0(count=2))], slices) == [
        [("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-1/device-2")]
    ]
    assert allocate([claim0(req0(count=3))], slices) is None


NO_SCHEDULE = {"key": "example.com/taint", "value": "tainted", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "example.com/taint", "value": "tainted", "effect": "NoExecute"}


def _tainted(*taints_per_device: list[dict[str, str]]) -> list[dict[str, Any]]:
    devices = [device(f"device-{i + 1}", taints=t) for i, t in enumerate(taints_per_device)]
    return [_slice(devices)]


def test_tainted_two_devices() -> None:
    assert allocate([claim0(req0())], _tainted([NO_SCHEDULE], [NO_EXECUTE])) is None


def test_tainted_two_devices_tolerated() -> None:
    toleration = {"key": "example.com/taint", "operator": "Exists", "effect": "NoExecute"}
    found = allocate(
        [claim0(req0(tolerations=[toleration]))], _tainted([NO_SCHEDULE], [NO_EXECUTE])
    )
    assert found == [[("req-0", "driver-a/pool-1/device-2")]]


def test_tainted_no_effect() -> None:
    none = {"key": "example.com/taint", "value": "tainted", "effect": "None"}
    assert allocate([claim0(req0())], _tainted([none])) == [[("req-0", "driver-a/pool-1/device-1")]]


@pytest.mark.parametrize("count", [1, 32])
def test_max_number_devices(count: int) -> None:
    devices = [device(f"device-{i}") for i in range(count)]
    slices = [_slice(devices)]
    found = allocate([claim0(req0(mode="All"))], slices)
    assert isinstance(found, list) and len(found[0]) == count


def test_partitionable_devices_per_device_node_selection_nodename() -> None:
    def partition(name: str, memory: str, node_name: str) -> dict[str, Any]:
        found = device(
            name, capacity={"memory": memory}, consumes={"counter-set-1": {"memory": memory}}
        )
        return {**found, "nodeName": node_name}

    per_device = resource_slice("slice-1", driver=DRIVER_A, pool="pool-1", slice_count=2)
    per_device["spec"].pop("allNodes")
    per_device["spec"]["perDeviceNodeSelection"] = True
    per_device["spec"]["devices"] = [
        partition("device-1", "4Gi", "node-1"),
        partition("device-2", "6Gi", "node-2"),
    ]
    counters = resource_slice(
        "slice-2",
        driver=DRIVER_A,
        pool="pool-1",
        slice_count=2,
        counters={"counter-set-1": {"memory": "18Gi"}},
    )
    claim = claim0(
        first_available(
            "req-0",
            exactly("subreq-0", "class-a", selectors=[_at_least(6)]),
            exactly("subreq-1", "class-a", selectors=[_at_least(4)]),
        )
    )
    nodes = [node("node-1"), node("node-2")]
    assert allocate([claim], [per_device, counters], nodes=nodes) == [
        [("req-0/subreq-1", "driver-a/pool-1/device-1")]
    ]
