"""proportion: queue capability, closed and missing queues, weighted shares."""

from collections import Counter

from ..builders import Obj, decide, gang, node, placements, pod, pod_group, queue


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
