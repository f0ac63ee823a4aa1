"""What device allocation keeps between sessions is the caller's (DeviceMemo): sessions
given one memo share its inventory while slices and nodes are unchanged; a session given
none builds its own."""

from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.framework.devices import DeviceMemo, Inventory
from batchsched.scheduler import open_session

from tests.support.objects import (
    SCHEDULER,
    cache_of,
    device,
    device_class,
    exactly,
    node,
    pod,
    resource_claim,
    resource_slice,
)

DRIVER = "gpu.example.com"


def _inventory(cache: ClusterCache, devices: DeviceMemo | None) -> Inventory:
    snapshot = take_snapshot(cache, now=1.0, scheduler_names={SCHEDULER})
    claims = open_session(snapshot, default_config(), devices=devices).device_claims
    assert claims is not None
    return claims.inventory


def test_sessions_given_one_memo_share_its_inventory_and_others_build_their_own() -> None:
    gpus = [device("gpu-0")]
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}
    cache = cache_of(
        [
            node("n1"),
            resource_slice("s", driver=DRIVER, pool="n1", node_name="n1", devices=gpus),
            device_class("gpu", f"device.driver == '{DRIVER}'"),
            resource_claim("c", exactly("gpu", "gpu")),
            pod("p", spec=spec),
        ]
    )
    memo = DeviceMemo()
    first = _inventory(cache, memo)
    assert _inventory(cache, memo) is first
    assert _inventory(cache, DeviceMemo()) is not first
    assert _inventory(cache, None) is not first
    cache.apply(resource_slice("s", driver=DRIVER, pool="n1", node_name="n1", devices=gpus))
    assert _inventory(cache, memo) is not first
