"""Assumed binds: decided, not yet seen in the pod, and kept until the pod shows a node."""

from batchsched.api.dra import AllocatedDevice, Allocation
from batchsched.cache.cluster import ClusterCache
from batchsched.model.decisions import DeviceAllocation

from tests.support.objects import Obj, cache_of, exactly, node, pod, resource_claim


def cache_with_pending_pod() -> ClusterCache:
    return cache_of([node("n1"), node("n2"), pod("p", requests={"cpu": "1"})])


def test_an_update_without_a_node_keeps_the_assumed_bind() -> None:
    cache = cache_with_pending_pod()
    cache.assume("default/p", "n1", gpu_index=(2,))
    cache.apply(pod("p", requests={"cpu": "1"}, labels={"touched": "yes"}))
    task = cache.tasks["default/p"]
    assert (task.node_name, task.gpu_index) == ("n1", (2,))


def test_the_node_the_pod_shows_ends_the_assumption() -> None:
    cache = cache_with_pending_pod()
    cache.assume("default/p", "n1")
    cache.apply(pod("p", requests={"cpu": "1"}, node_name="n2"))
    assert cache.tasks["default/p"].node_name == "n2"
    assert cache.assumed == {}
    cache.forget("default/p")
    assert cache.tasks["default/p"].node_name == "n2"


def test_forget_undoes_the_assumption_only() -> None:
    cache = cache_with_pending_pod()
    cache.assume("default/p", "n1", gpu_index=(0,))
    cache.forget("default/p")
    task = cache.tasks["default/p"]
    assert (task.node_name, task.gpu_index) == (None, ())
    cache.apply(pod("p", requests={"cpu": "1"}))
    assert cache.tasks["default/p"].node_name is None


def test_deleting_the_pod_drops_its_assumption() -> None:
    cache = cache_with_pending_pod()
    cache.assume("default/p", "n1")
    cache.apply(pod("p"), deleted=True)
    assert cache.assumed == {}
    cache.forget("default/p")


def test_confirm_ends_the_assumption_and_keeps_the_node() -> None:
    cache = cache_with_pending_pod()
    cache.assume("default/p", "n1")
    cache.confirm("default/p")
    assert cache.assumed == {}
    assert cache.tasks["default/p"].node_name == "n1"


def _claimed(name: str, *, uid: str) -> Obj:
    manifest = pod(name, requests={"cpu": "1"})
    manifest["metadata"]["uid"] = uid
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    return manifest


def test_an_assumed_allocation_shows_until_the_binder_settles_it() -> None:
    """Sessions see the claim as the binds make it (allocated, reserved for their pods),
    whatever the watch shows meanwhile; once settled, as the watch shows it."""
    claim = resource_claim("c", exactly("gpu", "gpu"))
    cache = cache_of([node("n1"), _claimed("a", uid="a"), _claimed("b", uid="b"), claim])
    made = DeviceAllocation("default", "c", (AllocatedDevice("gpu", "d", "n1", "gpu-0"),))
    cache.assume("default/a", "n1", devices=(made,))
    cache.assume("default/b", "n1")
    cache.apply(resource_claim("c", exactly("gpu", "gpu")))  # an event from before the write
    shown = cache.resource_claims["default/c"]
    assert shown.allocation == Allocation(made.devices) and shown.reserved_for == ("a", "b")
    cache.settle_claims("a")
    shown = cache.resource_claims["default/c"]
    assert shown.allocation is None and shown.reserved_for == ("b",)
    cache.settle_claims("b")
    assert cache.resource_claims["default/c"] == cache.seen_claim("default/c")
    assert cache.assumed_claims == {}


def test_a_claim_replaced_under_an_assumed_bind_shows_as_the_watch_shows_it() -> None:
    """A claim deleted and made again by name is another claim: the devices and pods the
    binds assumed for the old one are not shown on it."""
    claim = resource_claim("c", exactly("gpu", "gpu"))
    claim["metadata"]["uid"] = "old"
    cache = cache_of([node("n1"), _claimed("a", uid="a"), claim])
    made = DeviceAllocation("default", "c", (AllocatedDevice("gpu", "d", "n1", "gpu-0"),))
    cache.assume("default/a", "n1", devices=(made,))
    again = resource_claim("c", exactly("gpu", "gpu"))
    again["metadata"]["uid"] = "new"
    cache.apply(again)
    shown = cache.resource_claims["default/c"]
    assert shown.uid == "new" and shown.allocation is None and shown.reserved_for == ()


def test_settling_a_pod_leaves_the_claims_only_other_binds_hold() -> None:
    """Each pod's claims are settled by its uid: another pod's claims keep what their
    binds assumed."""
    objects: list[Obj] = [node("n1")]
    for name in ("a", "b"):
        manifest = _claimed(name, uid=name)
        manifest["spec"]["resourceClaims"].append({"name": "own", "resourceClaimName": name})
        objects += [manifest, resource_claim(name, exactly("gpu", "gpu"))]
    objects.append(resource_claim("c", exactly("gpu", "gpu")))
    cache = cache_of(objects)
    cache.assume("default/a", "n1")
    cache.assume("default/b", "n1")
    cache.settle_claims("a")
    assert sorted(cache.assumed_claims) == ["default/b", "default/c"]
    assert cache.resource_claims["default/c"].reserved_for == ("b",)
    assert cache.resource_claims["default/b"].reserved_for == ("b",)
    cache.settle_claims("b")
    assert cache.assumed_claims == {}
