"""Allocation cases where the DRA conformance run (bench/dra_parity.py) found batchsched
answering otherwise than kube-scheduler v1.36.3 (docs/conformance.md), each with the
upstream code that decides it (k8s.io/dynamic-resource-allocation v0.36.3,
structured/internal/incubating, the allocator 1.36 runs with its beta features on)."""

from tests.support.objects import device, node, resource_slice
from tests.unit.framework.test_devices import (
    DRIVER_A,
    NO_SCHEDULE,
    _slice,
    allocate,
    claim0,
    one_device,
    req0,
)


def test_all_devices_with_one_whose_taint_is_not_tolerated() -> None:
    """allocateOne gathers every device the selectors pick for `All`, and allocateDevice
    refuses the tainted one: the request fails (seed 1, scenarios 32, 34, 63, ...)."""
    slices = [_slice([device("device-1"), device("device-2", taints=[NO_SCHEDULE])])]
    assert allocate([claim0(req0(mode="All"))], slices) is None
    toleration = {"key": "example.com/taint", "operator": "Exists"}
    assert allocate([claim0(req0(mode="All", tolerations=[toleration]))], slices) == [
        [("req-0", "driver-a/pool-1/device-1"), ("req-0", "driver-a/pool-1/device-2")]
    ]


def test_all_devices_beside_an_incomplete_pool_of_shared_counters_elsewhere() -> None:
    """GatherPools counts a slice of shared counters in every node's pools, whatever its
    node: its pool, incomplete, fails `All` on every node (seed 1, scenarios 46, 129, ...),
    and gives no device to other requests."""
    nodes = (node("node-1"), node("node-2"))
    partitioned = resource_slice(
        "slice-2",
        driver=DRIVER_A,
        pool="pool-2",
        node_name="node-2",
        slice_count=3,
        devices=[device("gpu-0", consumes={"gpu-0": {"memory": "8Gi"}})],
    )
    counters = resource_slice(
        "slice-3",
        driver=DRIVER_A,
        pool="pool-2",
        slice_count=3,
        counters={"gpu-0": {"memory": "8Gi"}},
    )
    counters["spec"]["nodeName"] = "node-2"
    slices = [one_device("slice-1", "node-1", "pool-1"), partitioned, counters]
    assert allocate([claim0(req0(mode="All"))], slices, nodes=nodes) == (
        "claim default/claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-2 is currently being updated"
    )
    assert allocate([claim0(req0())], slices, nodes=nodes) == [
        [("req-0", "driver-a/pool-1/device-1")]
    ]
    assert allocate([claim0(req0())], slices, nodes=nodes, on="node-2") is None
