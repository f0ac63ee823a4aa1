"""drf: jobs with the smaller dominant share first, and preemption that keeps shares fair."""

import pytest

from tests.support.objects import Obj, decide, node, placements, pod, pod_group

ONE_CPU = {"cpu": "1"}


def member(name: str, group: str, *, running: bool, priority: int = 0, created: float = 0) -> Obj:
    return pod(
        name,
        requests=ONE_CPU,
        group=group,
        node_name="n1" if running else None,
        phase="Running" if running else None,
        created=created,
        spec={"priority": priority},
    )


@pytest.mark.parametrize(("drf", "winner"), [(True, "default/b-0"), (False, "default/a-1")])
def test_the_job_with_the_smaller_share_goes_first(drf: bool, winner: str) -> None:
    """a is older but already holds 3 of the 4 CPUs; b holds none."""
    plugins = "[{name: predicates}, {name: drf}]" if drf else "[{name: predicates}]"
    decisions = decide(
        [
            node("n1", cpu="4"),
            pod_group("a", 1, created=0),
            pod("a-0", requests={"cpu": "3"}, group="a", node_name="n1", phase="Running"),
            member("a-1", "a", running=False, created=1),
            pod_group("b", 1, created=5),
            member("b-0", "b", running=False, created=5),
        ],
        f"tiers:\n- plugins: [{{name: gang}}]\n- plugins: {plugins}\n",
    )
    assert placements(decisions) == {winner: "n1"}


def fair_cluster() -> list[Obj]:
    """high holds 3 of 4 CPUs and needs a fourth to reach minMember; low holds the last."""
    return [
        node("n1", cpu="4"),
        pod_group("high", 4, created=0),
        *(member(f"high-{i}", "high", running=True, priority=1000) for i in range(3)),
        member("high-3", "high", running=False, priority=1000, created=10),
        pod_group("low", 1, created=0),
        member("low-0", "low", running=True),
    ]


@pytest.mark.parametrize(
    ("plugins", "evicted"),
    [
        # high's share with its fourth pod (1.0) exceeds low's without its pod (0).
        ("[{name: predicates}, {name: drf}]", []),
        # Volcano's chart turns drf's vote off: priority alone decides.
        ("[{name: predicates}, {name: drf, enablePreemptable: false}]", ["default/low-0"]),
        ("[{name: predicates}]", ["default/low-0"]),
    ],
    ids=["drf-vote", "vote-off", "without-drf"],
)
def test_preemption_never_makes_shares_less_fair(plugins: str, evicted: list[str]) -> None:
    config = (
        'actions: "enqueue, allocate, preempt"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        f"- plugins: {plugins}\n"
    )
    decisions = decide(fair_cluster(), config)
    assert [e.key for e in decisions.evictions] == evicted


def test_a_lower_share_preemptor_may_take_from_a_larger_share() -> None:
    """low2 holds nothing and preempts a pod of big, which keeps 2 of 4 CPUs after."""
    decisions = decide(
        [
            node("n1", cpu="4"),
            pod_group("big", 1, created=0),
            *(member(f"big-{i}", "big", running=True) for i in range(4)),
            pod_group("low2", 1, created=5),
            member("low2-0", "low2", running=False, priority=1000, created=5),
        ],
        'actions: "enqueue, allocate, preempt"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: drf}]\n",
    )
    assert len(decisions.evictions) == 1
