"""priority: higher-priority jobs, and tasks within a job, go first."""

import pytest

from tests.support.objects import (
    Obj,
    decide,
    gang,
    node,
    placements,
    pod,
    pod_group,
    priority_class,
)

CLASSES = [priority_class("high", 1000), priority_class("low", 10)]
ONE_CPU = {"cpu": "1"}


def contender(name: str, priority_class_name: str | None) -> Obj:
    spec = {"priorityClassName": priority_class_name} if priority_class_name else {}
    return pod(name, requests=ONE_CPU, spec=spec)


@pytest.mark.parametrize(
    ("extra", "first_class", "second_class", "winner"),
    [
        ([], None, None, "first"),
        ([], "low", "high", "second"),
        ([], "high", "low", "first"),
        # The global default (100) lifts the classless first pod over the low second one.
        ([priority_class("normal", 100, global_default=True)], None, "low", "first"),
        ([priority_class("normal", 5, global_default=True)], None, "low", "second"),
    ],
)
def test_higher_priority_lone_pod_takes_the_last_cpu(
    extra: list[Obj], first_class: str | None, second_class: str | None, winner: str
) -> None:
    """`first` is older, so it wins ties."""
    decisions = decide(
        [
            *CLASSES,
            *extra,
            node("n1", cpu="1"),
            contender("first", first_class),
            contender("second", second_class),
        ]
    )
    assert placements(decisions) == {f"default/{winner}": "n1"}


def test_group_priority_orders_gangs() -> None:
    decisions = decide(
        [
            *CLASSES,
            node("n1", cpu="2"),
            *gang("older", 2, requests=ONE_CPU),
            *gang("urgent", 2, requests=ONE_CPU, priorityClassName="high"),
        ]
    )
    assert sorted(placements(decisions)) == ["default/urgent-0", "default/urgent-1"]


def test_higher_priority_members_are_placed_first() -> None:
    decisions = decide(
        [
            *CLASSES,
            node("n1", cpu="1"),
            pod_group("g", 1),
            pod("g-a", requests=ONE_CPU, group="g", spec={"priorityClassName": "low"}),
            pod("g-b", requests=ONE_CPU, group="g", spec={"priorityClassName": "high"}),
        ]
    )
    assert placements(decisions) == {"default/g-b": "n1"}


def test_pod_naming_a_missing_class_waits() -> None:
    decisions = decide([node("n1"), contender("p", "ghost")])
    assert decisions.pending == {"default/p": "PriorityClass 'ghost' does not exist"}
