"""Queues: Volcano's guarantee, deserved and parent fields; our kind's spec keys refused
by name; Volcano's kind read as its CRD defines it (every key honoured, accepted without
effect or refused for a value; state in status.state); the tree of parents checked
across all queues, topped by a `root` Queue where there is one."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.objects import Dequeue, Queue
from batchsched.api.queues import check_hierarchy, queue_from_object
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.scheduler import run_session

from tests.support.objects import SCHEDULER, gang, node, placements

VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def as_volcano(obj: dict[str, Any]) -> Queue:
    return queue_from_object(obj, volcano=True)


def test_guarantee_deserved_and_parent_are_read() -> None:
    parsed = as_volcano(
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
def test_our_queue_refuses_keys_it_does_not_read_by_name(key: str) -> None:
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


def test_volcanos_crd_defaults_are_honoured() -> None:
    """What the API server stores for a Queue created with Volcano's CRD and no spec."""
    parsed = as_volcano(volcano_queue("q", dequeueStrategy="traverse", weight=1))
    assert parsed == Queue(name="q", dequeue=Dequeue.TRAVERSE)


def test_volcanos_dequeue_strategy_and_priority_are_read() -> None:
    parsed = as_volcano(volcano_queue("q", dequeueStrategy="fifo", priority=7))
    assert (parsed.dequeue, parsed.priority) == (Dequeue.FIFO, 7)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"dequeueStrategy": "lifo"},
            "Queue q.spec.dequeueStrategy: 'lifo' is not one of traverse, fifo",
        ),
        ({"priority": -1}, "Queue q.spec.priority: -1 is below the minimum of 0"),
        (
            {"state": "Closed"},
            "Queue q.spec.state: 'Closed': Volcano's Queue has no spec.state; its state is "
            "status.state (vcctl queue operate sets it)",
        ),
        (
            {"capacity": {"cpu": "1"}},
            "Queue q.spec.capacity is not supported; the keys read are weight, capability, "
            "reclaimable, guarantee, deserved, parent, dequeueStrategy, priority, affinity, "
            "extendClusters, type",
        ),
        (
            {
                "affinity": {
                    "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g1"]}
                }
            },
            "Queue q.spec.affinity.nodeGroupAffinity.requiredDuringScheduling"
            "IgnoredDuringExecution: ['g1'] cannot be honoured: batchsched has no node "
            "groups (Volcano's nodegroup plugin); give the pods a nodeAffinity on the "
            "volcano.sh/nodegroup-name label instead",
        ),
    ],
)
def test_volcano_values_that_cannot_be_honoured_are_refused(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidObject) as refused:
        as_volcano(volcano_queue("q", **spec))
    assert str(refused.value) == message


def test_volcano_keys_without_effect_are_accepted_with_a_note_each() -> None:
    parsed = as_volcano(
        volcano_queue(
            "q",
            type="training",
            extendClusters=[{"name": "c1", "weight": 1}],
            affinity={
                "nodeGroupAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["g2"]}
            },
        )
    )
    assert parsed.inert == (
        "Queue q.spec.extendClusters has no effect here: it feeds Volcano's multi-cluster "
        "dispatch; batchsched schedules one cluster",
        "Queue q.spec.type has no effect here: Volcano's scheduler reads it in no decision either",
        "Queue q.spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuring"
        "Execution has no effect here: a preference for Volcano's node groups, which "
        "batchsched does not score",
    )


@pytest.mark.parametrize(
    ("status", "is_open"),
    [
        ({}, True),
        ({"state": "Open"}, True),
        ({"state": "Closed"}, False),
        ({"state": "Closing"}, False),
        ({"state": "Unknown"}, False),
    ],
)
def test_volcanos_state_is_its_status(status: dict[str, str], is_open: bool) -> None:
    """Volcano schedules only in an Open queue; one no controller has seen yet is Open,
    as Volcano's queue controller would make it."""
    assert as_volcano({**volcano_queue("q"), "status": status}).open is is_open


def test_a_volcano_state_out_of_its_enum_is_refused() -> None:
    with pytest.raises(InvalidObject, match=r"status.state: 'Shut' is not one of Open, Closed"):
        as_volcano({**volcano_queue("q"), "status": {"state": "Shut"}})


def test_our_queue_keeps_its_state_in_the_spec() -> None:
    closed = {**volcano_queue("q", state="Closed"), "status": {"state": "Open"}}
    assert queue_from_object(closed).open is False


def test_root_is_accepted_as_the_top_and_may_name_no_parent() -> None:
    assert as_volcano(volcano_queue("root", capability={"cpu": "4"})).parent is None
    with pytest.raises(InvalidObject, match="'root' is the top of the queue tree"):
        as_volcano(volcano_queue("root", parent="org"))


def test_one_line_per_key_without_effect_not_per_update(caplog: pytest.LogCaptureFixture) -> None:
    cache = ClusterCache()
    obj = volcano_queue("q", type="training")
    cache.apply(obj)
    cache.apply({**obj, "status": {"running": 1}})
    notes = [r.getMessage() for r in caplog.records if "has no effect here" in r.getMessage()]
    assert notes == [
        "Queue q.spec.type has no effect here: Volcano's scheduler reads it in no decision either"
    ]


def test_a_root_queue_tops_the_parentless_queues_and_its_capability_bounds_them() -> None:
    cache = ClusterCache()
    for obj in (
        node("n1", cpu="8"),
        volcano_queue("root", capability={"cpu": "3"}),
        volcano_queue("a"),
        volcano_queue("b", parent="root"),
        *gang("ja", 2, requests={"cpu": "1"}, queue="a"),
        *gang("jb", 2, requests={"cpu": "1"}, queue="b"),
    ):
        cache.apply(obj)
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert {name: q.parent for name, q in snapshot.queues.items()} == {
        "root": None,
        "a": "root",
        "b": "root",
        "default": "root",
    }
    decisions = run_session(snapshot, default_config())
    # Two gangs of two one-CPU pods; the root's capability of 3 CPUs lets one start.
    assert len(placements(decisions)) == 2


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


def test_volcanos_hierarchy_annotations_are_accepted_with_a_note() -> None:
    obj = volcano_queue("q")
    obj["metadata"]["annotations"] = {"volcano.sh/hierarchy": "root/eng/prod"}
    assert as_volcano(obj).inert == (
        "Queue q.metadata.annotations[volcano.sh/hierarchy] has no effect here: Volcano's drf "
        "reads it only with enableHierarchy, which batchsched does not implement; "
        "spec.parent makes a tree of queues here",
    )
