"""Queues: Volcano's guarantee, deserved and parent fields, the spec keys refused by name,
and the tree of parents checked across all queues."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.objects import Queue
from batchsched.api.queues import check_hierarchy, queue_from_object
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.framework.config import default_config, run_session

from ..builders import SCHEDULER, gang, node, placements

VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_guarantee_deserved_and_parent_are_read() -> None:
    parsed = queue_from_object(
        volcano_queue(
            "team",
            weight=2,
            capability={"cpu": "8"},
            guarantee={"resource": {"cpu": "2", "memory": "1Gi"}},
            deserved={"cpu": "4"},
            parent="org",
            reclaimable=False,
        )
    )
    assert parsed == Queue(
        name="team",
        weight=2,
        capability={"cpu": 8000},
        reclaimable=False,
        guarantee={"cpu": 2000, "memory": 2**30},
        deserved={"cpu": 4000},
        parent="org",
    )


@pytest.mark.parametrize("parent", [None, "", "root"])
def test_no_parent_or_volcanos_root_is_the_top(parent: str | None) -> None:
    assert queue_from_object(volcano_queue("q", parent=parent)).parent is None


@pytest.mark.parametrize(
    "key", ["affinity", "extendClusters", "priority", "type", "dequeueStrategy", "capacity"]
)
def test_spec_keys_we_do_not_honour_are_refused_by_name(key: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        queue_from_object(volcano_queue("q", **{key: 1}))
    assert str(refused.value) == (
        f"Queue q.spec.{key} is not supported; the keys read are weight, capability, "
        "reclaimable, state, guarantee, deserved, parent"
    )


def test_guarantee_keys_other_than_resource_are_refused() -> None:
    with pytest.raises(InvalidObject, match=r"^Queue q.spec.guarantee.percentage is not supp"):
        queue_from_object(volcano_queue("q", guarantee={"percentage": 50}))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"guarantee": {"resource": {"cpu": "8"}}, "capability": {"cpu": "4"}},
            "Queue q.spec.guarantee.resource.cpu: 8 exceeds spec.capability.cpu 4",
        ),
        (
            {"guarantee": {"resource": {"memory": "2Gi"}}, "deserved": {"memory": "1Gi"}},
            "Queue q.spec.guarantee.resource.memory: 2Gi exceeds spec.deserved.memory 1Gi",
        ),
        (
            {"deserved": {"cpu": "500m"}, "capability": {"cpu": "250m"}},
            "Queue q.spec.deserved.cpu: 0.5 exceeds spec.capability.cpu 0.25",
        ),
        (
            {"guarantee": {"resource": {"cpu": "-1"}}},
            "Queue q.spec.guarantee.resource.cpu: '-1' is negative",
        ),
    ],
)
def test_amounts_out_of_order_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        queue_from_object(volcano_queue("q", **spec))
    assert str(refused.value) == message


def test_a_queue_may_not_be_called_root() -> None:
    with pytest.raises(InvalidObject, match="'root' is the top of the queue tree"):
        queue_from_object(volcano_queue("root"))


def tree(**parents: str | None) -> dict[str, Queue]:
    return {name: Queue(name=name, parent=parent) for name, parent in parents.items()}


def test_a_tree_is_fine() -> None:
    assert check_hierarchy(tree(org=None, a="org", b="org", c="a"), rejected={}) == {}


def test_every_queue_on_a_cycle_and_below_it_is_invalid() -> None:
    why = check_hierarchy(tree(b="a", a="c", c="b", d="a", top=None), rejected={})
    cycle = "the parents form a cycle, a -> c -> b -> a"
    assert why == {
        "a": f"Queue a.spec.parent: {cycle}",
        "b": f"Queue b.spec.parent: {cycle}",
        "c": f"Queue c.spec.parent: {cycle}",
        "d": f"Queue d.spec.parent: queue 'a' is invalid: Queue a.spec.parent: {cycle}",
    }


def test_a_queue_that_is_its_own_parent_is_a_cycle() -> None:
    assert check_hierarchy(tree(a="a"), rejected={}) == {
        "a": "Queue a.spec.parent: the parents form a cycle, a -> a"
    }


def test_missing_and_refused_parents_make_their_descendants_invalid() -> None:
    why = check_hierarchy(
        tree(a="gone", b="a", c="bad"), rejected={"bad": "Queue bad.spec.weight: 0 is below 1"}
    )
    assert why == {
        "a": "Queue a.spec.parent: queue 'gone' does not exist",
        "b": "Queue b.spec.parent: queue 'a' is invalid: "
        "Queue a.spec.parent: queue 'gone' does not exist",
        "c": "Queue c.spec.parent: queue 'bad' is invalid: Queue bad.spec.weight: 0 is below 1",
    }


def test_the_snapshot_leaves_out_queues_off_the_tree_and_says_why() -> None:
    cache = ClusterCache()
    for obj in (volcano_queue("a", parent="b"), volcano_queue("b", parent="a")):
        cache.apply(obj)
    cache.apply(volcano_queue("child", parent="default"))
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert sorted(snapshot.queues) == ["child", "default"]
    assert snapshot.rejected_queues == {
        "a": "Queue a.spec.parent: the parents form a cycle, a -> b -> a",
        "b": "Queue b.spec.parent: the parents form a cycle, a -> b -> a",
    }
    # Deleting one breaks the cycle; the other now names a parent that is not there.
    cache.apply(volcano_queue("b"), deleted=True)
    later = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert later.rejected_queues == {"a": "Queue a.spec.parent: queue 'b' does not exist"}


def test_only_the_bad_queue_waits() -> None:
    cache = ClusterCache()
    for obj in (
        node("n1", cpu="4"),
        volcano_queue("ok"),
        *gang("fine", 1, requests={"cpu": "1"}, queue="ok"),
        *gang("stuck", 1, requests={"cpu": "1"}, queue="bad"),
    ):
        cache.apply(obj)
    with pytest.raises(InvalidObject):
        cache.apply(
            volcano_queue("bad", guarantee={"resource": {"cpu": "3"}}, capability={"cpu": "2"})
        )
    decisions = run_session(
        take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER}), default_config()
    )
    assert placements(decisions) == {"default/fine-0": "n1"}
    assert decisions.pending == {
        "default/stuck-0": "queue 'bad' is invalid: "
        "Queue bad.spec.guarantee.resource.cpu: 3 exceeds spec.capability.cpu 2"
    }
