"""Allocation cases where the DRA conformance run (bench/dra_parity.py) found batchsched
answering otherwise than kube-scheduler v1.36.3 (docs/conformance.md), each with the
upstream code that decides it (k8s.io/dynamic-resource-allocation v0.36.3,
structured/internal/incubating, the allocator 1.36 runs with its beta features on)."""

from tests.support.objects import (
    decide,
    device,
    exactly,
    node,
    placements,
    resource_claim,
    resource_slice,
)
from tests.unit.framework.test_deviceclaims import GPU_CLASS, claimed, gpus
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


def test_an_error_on_one_node_keeps_the_pod_off_every_node() -> None:
    """kube-scheduler ends a pod's scheduling cycle when a Filter returns an Error on any
    node (findNodesThatPassFilters): an `All` request over n2's pool being updated keeps
    the pod off n1 too, where its pool is whole and free (seed 1, scenarios 46, 177,
    340, 475)."""
    objects = [
        node("n1"),
        gpus("n1", 2),
        node("n2"),
        gpus("n2", 2, slice_count=2),
        GPU_CLASS,
        resource_claim("all", exactly("gpu", "gpu", mode="All")),
        claimed("all", "all"),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {}
    assert decisions.pending["default/all"] == (
        "0/2 nodes are available: 2 claim default/all, request gpu: asks for all devices, but "
        "resource pool gpu.example.com/n2 is currently being updated."
    )
