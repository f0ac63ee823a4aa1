"""The native-gang conformance run's generator and comparison, without a control plane."""

import random
from collections import Counter

import pytest
import yaml

from bench import gang_scenarios
from bench.gang_parity import LATE_ROOM, MIXED, SIZES, STARTED_BEFORE, UNKNOWN, cause
from bench.gang_scenarios import (
    KUBE,
    LONE,
    OURS,
    OWN,
    SCHEDULED,
    SIDE_LABEL,
    UNSERVED,
    Group,
    GroupState,
    Run,
    Scenario,
    barrier,
    case_yaml,
    disagreement,
    generate,
    group_of,
    native_group,
    per_group,
    read_state,
    simulated,
    violations,
)
from bench.parity import scenario_rng
from tests.support.kube import JSON
from tests.support.objects import member, node, pod

SCENARIOS = 300


def scenarios() -> list[Scenario]:
    return [generate(random.Random(i), i) for i in range(SCENARIOS)]


def members(scenario: Scenario) -> list[JSON]:
    return [
        o for o in (*scenario.bound, *(o for s in scenario.steps for o in s)) if o["kind"] == "Pod"
    ]


def first_step(scenario: Scenario, kind: str, group: str) -> int | None:
    """The first step creating a PodGroup of that name, or a pod naming it."""
    for index, step in enumerate(scenario.steps):
        for obj in step:
            named = group_of(obj) if kind == "Pod" else obj["metadata"]["name"]
            if obj["kind"] == kind and named == group:
                return index
    return None


def test_a_seed_gives_the_same_scenario() -> None:
    assert generate(random.Random(7), 7) == generate(random.Random(7), 7)
    assert generate(random.Random(7), 7) != generate(random.Random(8), 7)


def test_every_case_the_run_is_for_occurs() -> None:
    """Gangs and basic groups; groups created after their first pods, never created,
    with fewer pods than minCount, with members already bound, with a pod of a
    scheduler nobody serves; lone pods and late nodes."""
    seen: Counter[str] = Counter()
    for scenario in scenarios():
        pods = members(scenario)
        for group in scenario.groups:
            name = group.name
            own = [p for p in pods if group_of(p) == group.name]
            seen["gang" if group.min_count else "basic"] += 1
            seen["never created"] += not group.created
            if group.min_count is not None and len(own) < group.min_count:
                seen["fewer than minCount"] += 1
            seen["bound member"] += any("nodeName" in p["spec"] for p in own)
            seen["unserved member"] += any(p["spec"]["schedulerName"] == UNSERVED for p in own)
            first_pod = first_step(scenario, "Pod", name)
            created = first_step(scenario, "PodGroup", name)
            if created is not None and first_pod is not None and created > first_pod:
                seen["created after its pods"] += 1
        seen["lone pods"] += any(group_of(p) == LONE for p in pods)
        seen["late node"] += any(o["kind"] == "Node" for s in scenario.steps for o in s)
    for case in (
        "gang",
        "basic",
        "never created",
        "fewer than minCount",
        "bound member",
        "unserved member",
        "created after its pods",
        "lone pods",
        "late node",
    ):
        assert seen[case] >= 5, (case, seen)


def test_each_side_has_its_own_namespace_nodes_and_scheduler() -> None:
    scenario = generate(random.Random(3), 3)
    for side in (KUBE, OURS):
        prefix = scenario.namespace(side)
        nodes = [scenario.for_side(n, side) for n in scenario.nodes]
        assert all(n["metadata"]["name"].startswith(prefix) for n in nodes)
        assert all(n["metadata"]["labels"][SIDE_LABEL] == prefix for n in nodes)
        names = {n["metadata"]["name"] for n in nodes}
        for template in members(scenario):
            found = scenario.for_side(template, side)
            assert found["metadata"]["namespace"] == prefix
            assert found["spec"]["nodeSelector"] == {SIDE_LABEL: prefix}
            assert found["spec"]["schedulerName"] in (side.scheduler, UNSERVED)
            assert found["spec"].get("nodeName", next(iter(names))) in names
    # The templates themselves are left as they were.
    assert all(p["spec"]["schedulerName"] in (OWN, UNSERVED) for p in members(scenario))


def test_the_barrier_fits_no_node_and_names_the_sides_scheduler() -> None:
    scenario = generate(random.Random(1), 1)
    fence = barrier(scenario, OURS, 2)
    assert fence["metadata"] == {"name": "barrier-2", "namespace": scenario.namespace(OURS)}
    assert fence["spec"]["schedulerName"] == OURS.scheduler
    resources = fence["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"]
    assert not any(
        set(resources["requests"]) & set(n["status"]["allocatable"]) for n in scenario.nodes
    )


def one(name: str, group: str | None, node: str | None = None) -> JSON:
    """A pod of the scenario's, in `group` (or none), bound to `node` if given."""
    if group is None:
        return pod(name, {"cpu": "1"}, node_name=node, scheduler=OWN)
    return member(name, group, {"cpu": "1"}, node_name=node, scheduler=OWN)


def test_the_state_counts_bound_pods_per_group_and_reads_the_condition() -> None:
    groups = [
        {
            **native_group(Group("a", 2)),
            "status": {"conditions": [{"type": SCHEDULED, "status": "True"}]},
        },
        native_group(Group("b", None)),
    ]
    pods = [
        one("a-0", "a", "n0"),
        one("a-1", "a", "n1"),
        one("a-2", "a"),
        one("b-0", "b"),
        one("c-0", "c"),
        one("lone", None, "n0"),
        one("barrier-0", None),
    ]
    assert read_state(pods, groups) == {
        LONE: GroupState(1, None),
        "a": GroupState(2, "True"),
        "b": GroupState(0, None),
        "c": GroupState(0, None),
    }


def test_sides_disagree_on_pods_bound_or_on_a_condition_both_wrote() -> None:
    scenario = Scenario(0, (), (), ((), ()), (Group("a", 2), Group("b", None)))
    kube = Run(
        ({"a": GroupState(0, None)}, {"a": GroupState(2, "True"), "b": GroupState(1, "True")})
    )
    same = Run(({"a": GroupState(0, None)}, {"a": GroupState(2, None), "b": GroupState(1, None)}))
    assert disagreement(scenario, kube, same) is None
    fewer = Run(({"a": GroupState(0, None)}, {"a": GroupState(2, None), "b": GroupState(0, None)}))
    assert str(disagreement(scenario, kube, fewer)) == (
        "after step 1, group b (basic): kube-scheduler bound 1, PodGroupScheduled=True, "
        "batchsched 0"
    )
    early = Run(({"a": GroupState(1, None)}, same.states[1]))
    assert "after step 0, group a (gang minCount 2)" in str(disagreement(scenario, kube, early))
    condition = Run((same.states[0], {"a": GroupState(2, "False"), "b": GroupState(1, None)}))
    assert "PodGroupScheduled=False" in str(disagreement(scenario, kube, condition))


def test_per_group_says_scheduled_from_the_pods_bound() -> None:
    scenario = Scenario(
        0, (), (), ((),), (Group("a", 3), Group("b", None), Group("c", 1, created=False))
    )
    run = Run(({"a": GroupState(2, None), "b": GroupState(1, None), "c": GroupState(1, None)},))
    assert per_group(scenario, run) == {
        "a": {"scheduled": False, "bound": 2},
        "b": {"scheduled": True, "bound": 1},
        "c": {"scheduled": False, "bound": 1},
    }


def test_a_case_file_replays_the_steps_in_order() -> None:
    scenario = generate(random.Random(11), 11)
    run = Run(tuple({} for _ in scenario.steps))
    text = case_yaml(scenario, seed=1, finding="a finding", kube=run, ours=Run(refused="no"))
    assert "# a finding" in text
    objects = list(yaml.safe_load_all(text))
    stamps = [o["metadata"].get("creationTimestamp") for o in objects[1:]]
    assert stamps == sorted(stamps)
    # The nodes and bound pods at once, then each object of a step after the one before.
    assert len({*stamps}) == sum(len(step) for step in scenario.steps) + 1
    assert all(
        o["spec"]["schedulerName"] in (OURS.scheduler, UNSERVED)
        for o in objects
        if o["kind"] == "Pod"
    )


def test_violations_are_what_no_gang_scheduler_leaves() -> None:
    scenario = Scenario(
        0,
        (),
        (one("a-bound-0", "a", "n0"),),
        ((), (), ()),
        (Group("a", 3), Group("b", None), Group("c", 2, created=False)),
    )
    fine = Run(
        (
            {"a": GroupState(1, None), "b": GroupState(0, None)},
            {"a": GroupState(3, None), "b": GroupState(1, None), "c": GroupState(0, None)},
            {"a": GroupState(4, None), "b": GroupState(2, None)},
        )
    )
    assert violations(scenario, fine) == []
    wrong = Run(
        (
            {"a": GroupState(2, None), "c": GroupState(1, None)},
            {"a": GroupState(3, None), "b": GroupState(1, None)},
            {"a": GroupState(3, None), "b": GroupState(0, None)},
        )
    )
    assert violations(scenario, wrong) == [
        "after step 0, group a (gang minCount 3): 2 bound, 1 before",
        "after step 0, group c (gang minCount 2, never created): 1 bound, 0 before",
        "after step 1, group c (gang minCount 2, never created): 0 bound, 1 before",
        "after step 2, group b (basic): 0 bound, 1 before",
    ]


def test_the_simulator_gives_the_state_after_each_step() -> None:
    gang, basic = Group("a", 2), Group("b", None)
    members = tuple(one(f"a-{i}", "a") for i in range(2))
    late = one("b-0", "b")
    scenario = Scenario(
        0,
        (node("n0", cpu="4"),),
        (),
        (members, (native_group(gang),), (late,), (native_group(basic),)),
        (gang, basic),
    )
    assert [{k: s.bound for k, s in state.items()} for state in simulated(scenario).states] == [
        {"a": 0},
        {"a": 2},
        {"a": 2, "b": 0},
        {"a": 2, "b": 1},
    ]


def test_the_simulator_is_given_a_steps_objects_one_after_the_other() -> None:
    """As the run creates them, and as the operator may decide between two of them: a
    gang already placed takes two new members before a pod of another scheduler comes
    in the same step, and only then is the group refused."""
    gang = Group("a", 2, mixed=True)
    placed = (one("a-bound-0", "a", "n0"), one("a-bound-1", "a", "n0"))
    odd = member("a-2", "a", {"cpu": "1"}, scheduler=UNSERVED)
    joining = (one("a-0", "a"), one("a-1", "a"), odd, one("a-3", "a"))
    scenario = Scenario(
        0, (node("n0", cpu="4"),), placed, ((native_group(gang),), joining), (gang,)
    )
    assert [state["a"].bound for state in simulated(scenario).states] == [2, 4]


@pytest.mark.parametrize("index", [143, 217, 467])
def test_a_steps_objects_in_one_session_leave_the_groups_as_a_session_apart(
    index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three of seed 1's five scenarios where batchsched run parted from its simulator
    (a basic group, a gang completed, a gang of minCount 1), each a member and the pod
    of another scheduler seen in one session. Given each step's objects at one
    time, in the order the run creates them, the simulator sees them in one session, as
    the operator's may, and leaves every group as when it is given them apart."""
    scenario = generate(scenario_rng(1, index), index)
    apart = simulated(scenario)
    monkeypatch.setattr(gang_scenarios, "OBJECT_SECONDS", 0)
    assert simulated(scenario) == apart


def test_the_simulator_is_given_a_late_node_when_it_comes() -> None:
    """As the operator sees it: a gang that fits only with the late node waits, a basic
    group takes the room there is, and the node that comes after is too small for the
    gang. Given the node from the start, the simulator placed the gang first and left
    the basic group one pod, fewer than it had bound after the step before."""
    gang, basic = Group("a", 3), Group("b", None)
    waiting = (native_group(gang), *(one(f"a-{i}", "a") for i in range(3)))
    taking = (native_group(basic), one("b-0", "b"), one("b-1", "b"))
    late = node("n1", cpu="2")
    scenario = Scenario(0, (node("n0", cpu="2"),), (), (waiting, taking, (late,)), (gang, basic))
    run = simulated(scenario)
    assert [{k: s.bound for k, s in state.items()} for state in run.states] == [
        {"a": 0},
        {"a": 0, "b": 2},
        {"a": 0, "b": 2},
    ]
    assert violations(scenario, run) == []


def test_most_scenarios_ask_the_same_cpu_of_every_pod() -> None:
    for scenario in scenarios():
        sizes = {
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in members(scenario)
        }
        assert len(sizes) == 1 or not scenario.uniform
    assert 0.6 < sum(s.uniform for s in scenarios()) / SCENARIOS < 0.9


def test_a_disagreement_is_put_down_to_its_known_cause() -> None:
    started, mixed, fresh = Group("a", 2), Group("b", 1, mixed=True), Group("c", 1)
    placed = (one("a-bound-0", "a", "n0"), one("a-bound-1", "a", "n0"))
    scenario = Scenario(0, (node("n0", cpu="2"),), placed, ((),), (started, mixed, fresh))

    def apart(group: str, kube: GroupState, ours: GroupState) -> str:
        found = disagreement(scenario, Run(({group: kube},)), Run(({group: ours},)))
        assert found is not None
        return cause(scenario, found)

    # minCount bound before the PodGroup: kube-scheduler's first cycle for the group,
    # for a member that does not fit, says False; batchsched said True on seeing them.
    assert apart("a", GroupState(2, "False"), GroupState(2, "True")) == STARTED_BEFORE
    assert apart("a", GroupState(3, "True"), GroupState(2, "True")) == UNKNOWN
    assert apart("b", GroupState(1, "True"), GroupState(0, "False")) == MIXED
    assert apart("c", GroupState(1, "True"), GroupState(0, "False")) == UNKNOWN
    mixed_sizes = Scenario(0, scenario.nodes, placed, ((),), scenario.groups, uniform=False)
    found = disagreement(mixed_sizes, Run(({"c": GroupState(1, None)},)), Run(({},)))
    assert found is not None and cause(mixed_sizes, found) == SIZES


def test_room_that_comes_to_another_waiting_group_is_a_known_cause() -> None:
    """A node comes while two groups wait; each side binds one pod, of another group."""
    first, second = Group("a", None), Group("b", None)
    waiting = ((one("a-0", "a"), one("b-0", "b")), (node("n1", cpu="1"),))
    scenario = Scenario(0, (node("n0", cpu="1"),), (), waiting, (first, second))
    before = {"a": GroupState(0, "False"), "b": GroupState(0, "False")}
    kube = Run((before, {"a": GroupState(0, "False"), "b": GroupState(1, "True")}))
    ours = Run((before, {"a": GroupState(1, "True"), "b": GroupState(0, "False")}))
    found = disagreement(scenario, kube, ours)
    assert found is not None and cause(scenario, found) == LATE_ROOM
    # Fewer bound on one side is not the queue's order: it stays unexplained.
    fewer = Run((before, before))
    found = disagreement(scenario, kube, fewer)
    assert found is not None and cause(scenario, found) == UNKNOWN
    # Nor is a difference after a step that brought pods.
    brought = Scenario(0, scenario.nodes, (), (waiting[1], waiting[0]), scenario.groups)
    found = disagreement(brought, kube, ours)
    assert found is not None and cause(brought, found) == UNKNOWN
