"""Devices with bindingConditions: kube-scheduler allocates them and waits in PreBind
for the driver to set the conditions; batchsched binds without such a wait, so it never
allocates them, and says so once per slice."""

import logging

import pytest

from batchsched.cache.cluster import ClusterCache

from tests.support.objects import device
from tests.unit.framework.test_devices import _slice, allocate, claim0, req0


def _waiting(name: str) -> dict[str, object]:
    found = device(name)
    found["bindingConditions"] = ["Attached"]
    found["bindingFailureConditions"] = ["AttachFailed"]
    return found


def test_a_device_waiting_for_binding_conditions_is_never_allocated() -> None:
    assert allocate([claim0(req0())], [_slice([_waiting("device-1")])]) is None
    assert allocate([claim0(req0())], [_slice([_waiting("device-1"), device("device-2")])]) == [
        [("req-0", "driver-a/pool-1/device-2")]
    ]
    assert allocate([claim0(req0(mode="All"))], [_slice([_waiting("device-1")])]) is None


def test_the_cache_says_once_which_devices_of_a_slice_it_never_allocates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = ClusterCache()
    waiting = _slice([_waiting("device-1"), device("device-2")])
    with caplog.at_level(logging.WARNING, logger="batchsched.cache.cluster"):
        cache.apply(waiting)
        cache.apply(waiting)
        cache.apply(_slice([device("device-1")]))
        cache.apply(_slice([_waiting("device-1"), _waiting("device-2")]))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "ResourceSlice slice-1: devices device-1 set bindingConditions; batchsched does not "
        "wait for a driver's binding conditions before binding, so it never allocates them",
        "ResourceSlice slice-1: devices device-1, device-2 set bindingConditions; batchsched "
        "does not wait for a driver's binding conditions before binding, so it never "
        "allocates them",
    ]
