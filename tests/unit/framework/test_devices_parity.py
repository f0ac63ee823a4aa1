"""Allocation cases where the DRA conformance run (bench/dra_parity.py) found batchsched
answering otherwise than kube-scheduler v1.36.3 (docs/conformance.md), each with the
upstream code that decides it (k8s.io/dynamic-resource-allocation v0.36.3,
structured/internal/incubating, the allocator 1.36 runs with its beta features on)."""

from tests.support.objects import device
from tests.unit.framework.test_devices import (
    NO_SCHEDULE,
    _slice,
    allocate,
    claim0,
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
