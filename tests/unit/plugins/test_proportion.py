"""proportion: queue capability, closed, missing and invalid queues, weighted shares."""

from collections import Counter

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.model.reasons import Reason
from batchsched.scheduler import run_session

from tests.support.objects import (
    SCHEDULER,
    Obj,
    decide,
    gang,
    node,
    placements,
    pod,
    pod_group,
    queue,
)


def one_pod_jobs(prefix: str, count: int, queue_name: str) -> list[Obj]:
    """`count` single-member PodGroups in `queue_name`, each with one 1-CPU pod."""
    objects: list[Obj] = []
    for i in range(count):
        objects += gang(f"{prefix}{i}", 1, requests={"cpu": "1"}, queue=queue_name)
    return objects


def test_capability_caps_a_queue() -> None:
    decisions = decide(
        [node("n1", cpu="8"), queue("q", capability={"cpu": "2"}), *one_pod_jobs("j", 3, "q")]
    )
    assert sorted(placements(decisions)) == ["default/j0-0", "default/j1-0"]
    assert decisions.pending == {
        "default/j2-0": "gang default/j2: room for 0 of 1; queue q: pod default/j2-0 would exceed "
        "its capability for cpu (2 of 2 in use)"
    }


def test_capability_counts_running_members() -> None:
    decisions = decide(
        [
            node("n1", cpu="8"),
            queue("q", capability={"cpu": "2"}),
            pod_group("busy", 1, queue="q"),
            pod("busy-0", requests={"cpu": "2"}, group="busy", node_name="n1", phase="Running"),
            *one_pod_jobs("j", 1, "q"),
        ]
    )
    assert placements(decisions) == {}
    assert (
        "would exceed its capability for cpu (2 of 2 in use)" in decisions.pending["default/j0-0"]
    )


def test_closed_queue_admits_nothing() -> None:
    decisions = decide([node("n1"), queue("q", state="Closed"), *one_pod_jobs("j", 1, "q")])
    assert placements(decisions) == {}
    assert decisions.pending == {"default/j0-0": "queue q is closed"}
    assert decisions.jobs["default/j0"].phase == "Pending"


def test_missing_queue() -> None:
    decisions = decide([node("n1"), *one_pod_jobs("j", 1, "nope")])
    assert decisions.pending == {"default/j0-0": "queue 'nope' does not exist"}


@pytest.mark.parametrize("name", ["q", "default"])
def test_an_invalid_queue_is_reported_as_invalid_not_missing(name: str) -> None:
    """Its groups' pods say why the Queue cannot be used; fixed, it admits them; deleted,
    it is missing (the implied default queue comes back only then)."""
    cache = ClusterCache()
    for obj in (node("n1"), *one_pod_jobs("j", 1, name)):
        cache.apply(obj)
    with pytest.raises(InvalidObject):
        cache.apply(queue(name, capability={"cpu": "-2"}))

    def pending() -> dict[str, Reason]:
        snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
        return run_session(snapshot, default_config()).pending

    assert pending() == {
        "default/j0-0": f"queue {name!r} is invalid: Queue {name}.spec.capability.cpu: "
        "'-2' is negative"
    }
    cache.apply(queue(name))
    assert pending() == {}
    cache.apply(queue(name), deleted=True)
    assert pending() == ({} if name == "default" else {"default/j0-0": "queue 'q' does not exist"})


def test_weights_share_the_cluster() -> None:
    """Four CPUs, queues weighted 1 and 3, both asking for more than all of it.

    Queue a comes first by name and its jobs are older, so without shares it would
    take everything.
    """
    decisions = decide(
        [
            node("n1", cpu="4"),
            queue("a", weight=1),
            queue("b", weight=3),
            *one_pod_jobs("a", 4, "a"),
            *one_pod_jobs("b", 4, "b"),
        ]
    )
    by_queue = Counter(key.split("/")[1][0] for key in placements(decisions))
    assert by_queue == {"a": 1, "b": 3}
    assert decisions.pending["default/a1-0"] == "queue a is at its fair share"


def test_weights_share_the_nodes_the_queues_compete_for() -> None:
    """Queues weighted 1:3 whose pods may only use an 8-CPU pool of a 72-CPU cluster
    split the pool 2:6: shares of the 64 CPUs no pod may use would be shares of nothing."""
    pool = {"pool": "train"}
    jobs = [
        pod(f"{q}-{i}", requests={"cpu": "1"}, group=f"{q}-{i}", spec={"nodeSelector": pool})
        for q in ("a", "b")
        for i in range(8)
    ]
    groups = [pod_group(f"{q}-{i}", 1, queue=q) for q in ("a", "b") for i in range(8)]
    decisions = decide(
        [
            node("pool-0", cpu="4", labels=pool),
            node("pool-1", cpu="4", labels=pool),
            node("serve", cpu="64"),
            queue("a", weight=1),
            queue("b", weight=3),
            *groups,
            *jobs,
        ]
    )
    by_queue = Counter(key.split("/")[1][0] for key in placements(decisions))
    assert by_queue == {"a": 2, "b": 6}
    assert (decisions.deserved["a"]["cpu"], decisions.deserved["b"]["cpu"]) == (2000, 6000)


def test_queues_on_separate_pools_share_each_pool_apart() -> None:
    """a and b (1:3) compete for pool x; c alone uses pool y. a and b split x 2:6, and c
    gets all of y, though its weight would give it a fifth of the cluster."""
    objects: list[Obj] = [
        node("x", cpu="8", labels={"pool": "x"}),
        node("y", cpu="8", labels={"pool": "y"}),
        queue("a", weight=1),
        queue("b", weight=3),
        queue("c", weight=1),
    ]
    for q, pool in (("a", "x"), ("b", "x"), ("c", "y")):
        for i in range(10):
            objects += [
                pod_group(f"{q}{i}", 1, queue=q),
                pod(
                    f"{q}{i}-0",
                    requests={"cpu": "1"},
                    group=f"{q}{i}",
                    spec={"nodeSelector": {"pool": pool}},
                ),
            ]
    decisions = decide(objects)
    by_queue = Counter(key.split("/")[1][0] for key in placements(decisions))
    assert by_queue == {"a": 2, "b": 6, "c": 8}
    assert {q: decisions.deserved[q]["cpu"] for q in "abc"} == {"a": 2000, "b": 6000, "c": 8000}


def test_lowest_share_is_served_first() -> None:
    """Queue a already holds its share, so b's newer job gets the last free CPU."""
    decisions = decide(
        [
            node("n1", cpu="3"),
            queue("a"),
            queue("b"),
            pod_group("old", 1, queue="a"),
            pod("old-0", requests={"cpu": "2"}, group="old", node_name="n1", phase="Running"),
            *one_pod_jobs("a", 1, "a"),
            *one_pod_jobs("b", 1, "b"),
        ]
    )
    assert placements(decisions) == {"default/b0-0": "n1"}
