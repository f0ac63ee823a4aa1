"""Assumed binds: decided, not yet seen in the pod, and kept until the pod shows a node."""

from batchsched.cache.cluster import ClusterCache

from tests.support.objects import cache_of, node, pod


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
