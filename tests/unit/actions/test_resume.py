"""A gang whose placement was recorded but only partly bound is finished first, on the
nodes it was given, even when higher-priority work is waiting for the same room."""

import json

from batchsched.api.placement import PLACEMENT_ANNOTATION, format_placement

from tests.support.objects import (
    Obj,
    decide,
    node,
    placements,
    pod,
    pod_group,
    priority_class,
    snapshot_of,
)

ONE_CPU = {"cpu": "1"}


def record(at: float, nodes: dict[str, str], *, uid: str = "") -> str:
    text = format_placement(at, [(name, uid, where) for name, where in nodes.items()])
    assert text is not None
    return text


def cut_off_gang(plan: dict[str, str], *, bound: int = 1, uid: str = "") -> list[Obj]:
    """Gang `g` of len(plan) 1-CPU pods, recorded to go where `plan` says; the first
    `bound` members are bound there, the first carrying the record."""
    members = []
    for i, (name, where) in enumerate(plan.items()):
        members.append(
            pod(
                name,
                requests=ONE_CPU,
                group="g",
                created=0,
                node_name=where if i < bound else None,
                phase="Running" if i < bound else None,
                annotations={PLACEMENT_ANNOTATION: record(5.0, plan, uid=uid)} if i == 0 else None,
            )
        )
    return [pod_group("g", len(plan), created=0), *members]


PLAN = {"g-0": "n1", "g-1": "n1", "g-2": "n2", "g-3": "n2"}


def contested() -> list[Obj]:
    """Two 2-CPU nodes, gang g cut off after one member on n1, and a 2-CPU pod of higher
    priority that would take n2 if the gang were decided afresh after it."""
    return [
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        priority_class("urgent", 1000),
        *cut_off_gang(PLAN),
        pod("urgent", requests={"cpu": "2"}, created=10, spec={"priorityClassName": "urgent"}),
    ]


def test_a_cut_off_gang_is_finished_on_its_recorded_nodes_before_higher_priority_work() -> None:
    decisions = decide(contested())
    assert placements(decisions) == {
        "default/g-1": "n1",
        "default/g-2": "n2",
        "default/g-3": "n2",
    }
    assert "default/urgent" in decisions.pending


def test_without_a_record_the_higher_priority_pod_takes_the_room() -> None:
    objects = contested()
    first = objects[4]
    assert first["metadata"]["name"] == "g-0"
    del first["metadata"]["annotations"][PLACEMENT_ANNOTATION]
    assert placements(decide(objects)) == {"default/urgent": "n2"}


def test_members_whose_recorded_node_is_gone_are_placed_afresh() -> None:
    plan = {"g-0": "n1", "g-1": "n1", "g-2": "gone", "g-3": "gone"}
    snapshot = snapshot_of([node("n1", cpu="2"), node("n2", cpu="2"), *cut_off_gang(plan)])
    rows = [n.name for n in snapshot.nodes]
    reserved = {t.pod.name: t.reserved for t in snapshot.jobs["default/g"].pending}
    assert reserved == {"g-1": rows.index("n1"), "g-2": None, "g-3": None}
    decisions = decide([node("n1", cpu="2"), node("n2", cpu="2"), *cut_off_gang(plan)])
    assert placements(decisions) == {
        "default/g-1": "n1",
        "default/g-2": "n2",
        "default/g-3": "n2",
    }


def test_a_recorded_node_that_no_longer_fits_is_not_forced() -> None:
    """Another scheduler filled n2 meanwhile: the gang is placed by the usual rules,
    here not at all, since its three members no longer fit in the room left."""
    objects = [
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        pod("other", requests={"cpu": "2"}, node_name="n2", scheduler="default-scheduler"),
        *cut_off_gang(PLAN),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {}
    assert decisions.pending["default/g-2"].startswith("gang default/g: room for")


def test_a_record_for_an_earlier_pod_of_the_same_name_is_not_followed() -> None:
    objects = [node("n1", cpu="2"), node("n2", cpu="2"), *cut_off_gang(PLAN, uid="aaaaaaaa-1")]
    for obj in objects[3:]:
        obj["metadata"]["uid"] = "bbbbbbbb-2"
    snapshot = snapshot_of(objects)
    assert all(t.reserved is None for t in snapshot.jobs["default/g"].pending)


def test_the_newest_record_wins() -> None:
    """Binpacking and the older record would both put g-2 and g-3 on n1."""
    on_n1 = dict.fromkeys(PLAN, "n1")
    objects = [node("n1", cpu="4"), node("n2", cpu="4"), *cut_off_gang(on_n1, bound=2)]
    second = objects[4]
    assert second["metadata"]["name"] == "g-1"
    newer = {**on_n1, "g-2": "n2", "g-3": "n2"}
    second["metadata"]["annotations"][PLACEMENT_ANNOTATION] = record(9.0, newer)
    assert placements(decide(objects)) == {"default/g-2": "n2", "default/g-3": "n2"}


def test_a_damaged_record_reserves_nothing() -> None:
    objects = [node("n1", cpu="2"), node("n2", cpu="2"), *cut_off_gang(PLAN)]
    objects[3]["metadata"]["annotations"][PLACEMENT_ANNOTATION] = json.dumps({"at": "x"})
    snapshot = snapshot_of(objects)
    assert all(t.reserved is None for t in snapshot.jobs["default/g"].pending)


def test_a_gang_whose_recorded_nodes_are_all_gone_still_goes_first() -> None:
    """Its bound member holds room for nothing unless the rest follow, so the gang is
    placed afresh ahead of the higher-priority pod, not left partly bound."""
    plan = {"g-0": "n1", "g-1": "gone", "g-2": "gone", "g-3": "gone"}
    objects = contested()
    objects[3:8] = cut_off_gang(plan)
    decisions = decide(objects)
    assert sorted(placements(decisions)) == ["default/g-1", "default/g-2", "default/g-3"]
    assert "default/urgent" in decisions.pending


def test_members_that_lost_their_node_do_not_take_the_room_held_for_others() -> None:
    """g-1's node is gone; binpacking alone would fill n1 with it, where g-2 was headed."""
    plan = {"g-0": "n1", "g-1": "gone", "g-2": "n1", "g-3": "n2"}
    objects = [node("n1", cpu="2"), node("n2", cpu="1"), node("n3", cpu="8")]
    objects += cut_off_gang(plan)
    objects.append(pod("filler", requests={"cpu": "6"}, node_name="n3", scheduler="other"))
    decisions = decide(objects)
    assert placements(decisions) == {
        "default/g-1": "n3",
        "default/g-2": "n1",
        "default/g-3": "n2",
    }
