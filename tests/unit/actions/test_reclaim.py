"""reclaim: a queue below its share takes back, from queues above theirs, what they borrowed."""

from typing import Any

import pytest

from .test_preempt import DAY, evicted, nominated, running_gang
from tests.support.objects import Obj, decide, node, pod, pod_group, queue

EIGHT_NODES = [node(f"n{i}", cpu="4") for i in range(4)]


def running(name: str, node_name: str, queue_name: str, *, priority: int = 0) -> list[Obj]:
    return [
        pod_group(name, 1, created=0, queue=queue_name),
        pod(
            f"{name}-0",
            requests={"cpu": "4"},
            group=name,
            node_name=node_name,
            phase="Running",
            created=0,
            spec={"priority": priority},
        ),
    ]


def waiting(name: str, queue_name: str, **spec: Any) -> list[Obj]:
    return [
        pod_group(name, 1, created=100, queue=queue_name),
        pod(f"{name}-0", requests={"cpu": "4"}, group=name, created=100, spec=spec),
    ]


def borrowed(*, reclaimable: bool = True) -> list[Obj]:
    """Queue a (weight 1) runs on all four nodes; queue b (weight 1) is idle until now."""
    lender = queue("a")
    lender["spec"]["reclaimable"] = reclaimable
    return [
        lender,
        queue("b"),
        *EIGHT_NODES,
        *(item for i in range(4) for item in running(f"a{i}", f"n{i}", "a", priority=100)),
    ]


def test_a_queue_below_its_share_reclaims_from_one_above_it_whatever_the_priority() -> None:
    decisions = decide([*borrowed(), *waiting("b0", "b"), *waiting("b1", "b"), *waiting("b2", "b")])
    # Half the cluster is b's share: two of a's pods go, not three.
    assert len(evicted(decisions)) == 2
    assert {e.action for e in decisions.evictions} == {"reclaim"}
    assert len(nominated(decisions)) == 2


def test_a_queue_not_reclaimable_keeps_what_it_borrowed() -> None:
    decisions = decide([*borrowed(reclaimable=False), *waiting("b0", "b")])
    assert decisions.evictions == []


def test_a_guarantee_is_never_reclaimed() -> None:
    objects = borrowed()
    objects[0]["spec"]["guarantee"] = {"resource": {"cpu": "16"}}
    decisions = decide([*objects, *waiting("b0", "b")])
    assert decisions.evictions == []


def test_reclaim_alone_does_not_preempt_within_a_queue() -> None:
    """A job of queue a, the lender, gets nothing by reclaim: its queue is above its share."""
    decisions = decide(
        [*borrowed(), *waiting("a9", "a", priority=1000)],
        "actions: enqueue, allocate, reclaim",
    )
    assert decisions.evictions == []


def test_several_victims_for_one_pod_never_take_a_queue_below_its_guarantee() -> None:
    """Queue a is guaranteed 6 of 8 CPUs and runs eight 1-CPU pods; b's 4-CPU pod needs
    four of them from one node, which would leave a with 4: nothing is evicted."""
    lender = queue("a")
    lender["spec"]["guarantee"] = {"resource": {"cpu": "6"}}
    small = [
        item
        for i in range(8)
        for item in (
            pod_group(f"a{i}", 1, created=0, queue="a"),
            pod(
                f"a{i}-0",
                requests={"cpu": "1"},
                group=f"a{i}",
                node_name=f"n{i % 2}",
                phase="Running",
                created=0,
            ),
        )
    ]
    objects = [lender, queue("b"), node("n0", cpu="4"), node("n1", cpu="4"), *small]
    assert decide([*objects, *waiting("b0", "b")]).evictions == []
    # Two 1-CPU pods of b need only what a holds above its guarantee.
    pods = [
        pod_group("b1", 2, created=100, queue="b"),
        *(pod(f"b1-{i}", requests={"cpu": "1"}, group="b1", created=100) for i in range(2)),
    ]
    assert len(decide([*objects, *pods]).evictions) == 2


@pytest.mark.parametrize(
    "created",
    [120, None, 120 - 3 * DAY],
    ids=["just-created", "no-creationTimestamp", "waited-three-days"],
)
def test_a_starving_gang_reclaims_into_the_room_held_for_it(created: float | None) -> None:
    """Queue a runs six 1-CPU members of a gang of minMember 4 over two 4-CPU nodes,
    four on n1; b's gang of four asks for its share. Past the starvation threshold its
    room is held on n2, the freest node: that room is b's gang's own to reclaim into,
    not held against it, which left n1 alone, and a kept what it borrowed."""
    decisions = decide(
        [
            queue("a"),
            queue("b"),
            node("n1", cpu="4"),
            node("n2", cpu="4"),
            *running_gang(
                "nightly", 6, min_member=4, nodes=["n1"] * 4 + ["n2"] * 2, cpu="1", queue="a"
            ),
            pod_group("train", 4, created=created, queue="b"),
            *(
                pod(f"train-{i}", requests={"cpu": "1"}, group="train", created=120)
                for i in range(4)
            ),
        ]
    )
    assert evicted(decisions) == {"default/nightly-4", "default/nightly-5"}
    assert {e.action for e in decisions.evictions} == {"reclaim"}
    assert nominated(decisions) == {f"default/train-{i}": "n2" for i in range(4)}
