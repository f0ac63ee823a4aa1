"""gang: all of a group's minMember start together or none does, and its status says why."""

import pytest

from batchsched.api.unsupported import GATED_MESSAGE
from batchsched.cache.keeper import SnapshotKeeper
from batchsched.k8s.usage import summarize
from batchsched.model.decisions import Condition
from batchsched.scheduler import run_session

from tests.support.objects import (
    SCHEDULER,
    Obj,
    at,
    cache_of,
    config_of,
    decide,
    gang,
    node,
    placements,
    pod,
    pod_group,
)

ONE_CPU = {"cpu": "1"}


def test_never_a_partial_gang_and_smaller_jobs_still_run() -> None:
    decisions = decide(
        [node("n1", cpu="2"), *gang("g", 3, requests=ONE_CPU), pod("small", requests=ONE_CPU)]
    )
    assert placements(decisions) == {"default/small": "n1"}
    message = "gang default/g: room for 2 of 3; 0/1 nodes are available: 1 Insufficient cpu."
    assert decisions.pending == {f"default/g-{i}": message for i in range(3)}
    status = decisions.jobs["default/g"]
    assert (status.phase, status.scheduled, status.min_member) == ("Inqueue", 0, 3)
    assert status.condition == Condition("Unschedulable", "NotEnoughResources", message)


def test_only_one_of_two_competing_gangs_runs() -> None:
    decisions = decide(
        [
            node("n1", cpu="4"),
            *gang("first", 3, requests=ONE_CPU),
            *gang("second", 3, requests=ONE_CPU),
        ]
    )
    assert sorted(placements(decisions)) == [f"default/first-{i}" for i in range(3)]
    assert decisions.jobs["default/second"].scheduled == 0


def test_gang_with_fewer_pods_than_min_member_waits() -> None:
    decisions = decide(
        [
            node("n1"),
            pod_group("g", 3),
            *(pod(f"g-{i}", requests=ONE_CPU, group="g") for i in range(2)),
        ]
    )
    message = "gang default/g: 2 pods exist, minMember is 3"
    assert placements(decisions) == {}
    assert decisions.pending == {"default/g-0": message, "default/g-1": message}
    status = decisions.jobs["default/g"]
    assert status.phase == "Pending"
    assert status.condition == Condition("Unschedulable", "NotEnoughResources", message)


def test_members_beyond_min_member_are_placed_when_they_fit() -> None:
    decisions = decide([node("n1", cpu="3"), *gang("g", 4, min_member=2, requests=ONE_CPU)])
    assert sorted(placements(decisions)) == ["default/g-0", "default/g-1", "default/g-2"]
    assert decisions.pending == {"default/g-3": "0/1 nodes are available: 1 Insufficient cpu."}
    status = decisions.jobs["default/g"]
    assert (status.phase, status.scheduled) == ("Running", 3)
    assert status.condition == Condition("Scheduled", "Scheduled", "3/2 members scheduled")


@pytest.mark.parametrize(("free_cpu", "bound"), [("3", 1), ("2", 0)])
def test_bound_members_count_toward_min_member(free_cpu: str, bound: int) -> None:
    """Two members run; the third completes the gang only if it fits."""
    running = [
        pod(f"g-{i}", requests=ONE_CPU, group="g", node_name="n1", phase="Running")
        for i in range(2)
    ]
    decisions = decide(
        [
            node("n1", cpu=free_cpu),
            pod_group("g", 3),
            *running,
            pod("g-2", requests=ONE_CPU, group="g"),
        ]
    )
    assert len(decisions.bindings) == bound
    status = decisions.jobs["default/g"]
    assert (status.phase, status.scheduled, status.running) == (
        ("Running", 3, 2) if bound else ("Inqueue", 2, 2)
    )


LIGHTWEIGHT = {"pod-group.scheduling.sigs.k8s.io/name": "lw"}


@pytest.mark.parametrize(
    ("min_available", "node_cpu", "bound"),
    [("3", "2", 0), ("3", "3", 3), ("2", "2", 2)],
)
def test_label_only_group(min_available: str, node_cpu: str, bound: int) -> None:
    labels = {**LIGHTWEIGHT, "pod-group.scheduling.sigs.k8s.io/min-available": min_available}
    decisions = decide(
        [
            node("n1", cpu=node_cpu),
            *(pod(f"lw-{i}", requests=ONE_CPU, labels=labels) for i in range(3)),
        ]
    )
    assert len(decisions.bindings) == bound
    status = decisions.jobs["default/lw"]
    assert (status.min_member, status.scheduled) == (int(min_available), bound)
    if not bound:
        assert decisions.pending["default/lw-0"].startswith(
            f"gang default/lw: room for 2 of {min_available}; "
        )


ROOM_FOR_ONE = "gang default/g: room for 1 of 2; 0/1 nodes are available: 1 Insufficient cpu."
FAIL = """
tiers:
- plugins: [{name: gang, arguments: {scheduleTimeoutAction: Fail}}, {name: predicates}]
"""


def timed_gang(
    *, cpu: str = "1", group_status: Obj | None = None, pods_created: float = 0, bound: bool = False
) -> list[Obj]:
    """A gang of two, created at 0 with a 30s schedule timeout, on one node."""
    group = pod_group("g", 2, created=0, scheduleTimeoutSeconds=30)
    if group_status is not None:
        group["status"] = group_status
    members = [
        pod(
            f"g-{i}",
            requests=ONE_CPU,
            group="g",
            created=pods_created,
            node_name="n1" if bound else None,
            phase="Running" if bound else None,
        )
        for i in range(2)
    ]
    return [node("n1", cpu=cpu), group, *members]


@pytest.mark.parametrize(
    ("waited", "reason", "message"),
    [
        (10, "NotEnoughResources", ROOM_FOR_ONE),
        (60, "ScheduleTimeout", f"still short of minMember after 30s: {ROOM_FOR_ONE}"),
    ],
)
def test_schedule_timeout_waits_by_default(waited: float, reason: str, message: str) -> None:
    decisions = decide(timed_gang(), "starvationThreshold: 0", now=at(waited))
    status = decisions.jobs["default/g"]
    assert (status.phase, status.condition) == (
        "Inqueue",
        Condition("Unschedulable", reason, message),
    )
    assert decisions.pending == {"default/g-0": message, "default/g-1": message}


def test_waiting_past_the_timeout_still_places_the_gang_when_it_fits() -> None:
    decisions = decide(timed_gang(cpu="2"), now=at(60))
    assert sorted(placements(decisions)) == ["default/g-0", "default/g-1"]
    assert decisions.jobs["default/g"].phase == "Running"


FAILED = (
    "gang default/g: did not reach minMember 2 within its schedule timeout "
    "(waited over 30s, 0 bound); its pending pods are no longer tried"
)


@pytest.mark.parametrize("cpu", ["1", "2"])
def test_fail_marks_the_group_failed_and_stops_trying_it(cpu: str) -> None:
    """Room that appears after the timeout does not revive the gang."""
    decisions = decide(timed_gang(cpu=cpu), FAIL, now=at(60))
    assert placements(decisions) == {}
    status = decisions.jobs["default/g"]
    assert status.phase == "Failed"
    assert status.condition == Condition("Unschedulable", "ScheduleTimeout", FAILED)
    assert decisions.pending == {"default/g-0": FAILED, "default/g-1": FAILED}


def test_fail_waits_out_the_timeout() -> None:
    decisions = decide(timed_gang(), FAIL, now=at(10))
    status = decisions.jobs["default/g"]
    assert status.phase == "Inqueue"
    assert status.condition == Condition("Unschedulable", "NotEnoughResources", ROOM_FOR_ONE)


def test_fail_leaves_bound_members_alone() -> None:
    """A replacement member that waits past the timeout fails the group; the members
    that run are not touched."""
    objects: list[Obj] = [
        node("n1", cpu="2"),
        pod_group("g", 3, created=0, scheduleTimeoutSeconds=30),
        *(
            pod(f"g-{i}", requests=ONE_CPU, group="g", node_name="n1", phase="Running", created=0)
            for i in range(2)
        ),
        pod("g-2", requests=ONE_CPU, group="g", created=0),
    ]
    decisions = decide(objects, FAIL, now=at(60))
    assert placements(decisions) == {}
    status = decisions.jobs["default/g"]
    assert (status.phase, status.scheduled, status.running) == ("Failed", 2, 2)
    message = (
        "gang default/g: did not reach minMember 3 within its schedule timeout "
        "(waited over 30s, 2 bound); its pending pods are no longer tried"
    )
    assert decisions.pending == {"default/g-2": message}


def test_a_running_group_is_not_failed() -> None:
    decisions = decide(timed_gang(cpu="2", bound=True), FAIL, now=at(60))
    assert decisions.jobs["default/g"].phase == "Running"


def test_recreated_pods_start_the_timeout_afresh() -> None:
    """A Failed group whose pending pods are replaced is tried again, with a new timeout."""
    objects = timed_gang(cpu="2", group_status={"phase": "Failed"}, pods_created=100)
    decisions = decide(objects, FAIL, now=at(110))
    assert sorted(placements(decisions)) == ["default/g-0", "default/g-1"]
    assert decisions.jobs["default/g"].phase == "Running"


def test_gated_members_keep_their_reason_past_the_timeout() -> None:
    objects = timed_gang()
    objects[-1]["spec"]["schedulingGates"] = [{"name": "wait"}]
    decisions = decide(objects, now=at(60))
    assert decisions.pending["default/g-1"] == GATED_MESSAGE
    assert decisions.pending["default/g-0"].startswith("still short of minMember after 30s: ")


@pytest.mark.parametrize(
    ("phases", "phase"),
    [
        (["Failed", "Running", None], "Failed"),
        (["Succeeded", "Succeeded", "Succeeded"], "Completed"),
        (["Succeeded", "Running", "Running"], "Running"),
    ],
)
def test_phase_from_member_phases(phases: list[str | None], phase: str) -> None:
    members = [
        pod(f"g-{i}", group="g", phase=p, node_name=None if p is None else "n1")
        for i, p in enumerate(phases)
    ]
    decisions = decide([node("n1"), pod_group("g", 3), *members])
    assert decisions.jobs["default/g"].phase == phase


def test_a_kept_snapshot_leaves_out_running_groups_nothing_changed_and_counts_them() -> None:
    def running(name: str) -> list[Obj]:
        members = [pod(f"{name}-{i}", requests=ONE_CPU, group=name, node_name="n1") for i in (0, 1)]
        return [pod_group(name, 2), *members]

    cache = cache_of(
        [node("n1"), *running("a"), *running("b"), *gang("c", 2, requests={"cpu": "5"})]
    )
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    config = config_of(None)
    whole = run_session(keeper.take(now=1.0), config)
    assert {key: s.phase for key, s in whole.jobs.items()} == {
        "default/a": "Running",
        "default/b": "Running",
        "default/c": "Inqueue",
    }
    cache.apply(pod("b-0", requests=ONE_CPU, group="b", node_name="n1", phase="Succeeded"))
    snapshot = keeper.take(now=2.0)
    kept = run_session(snapshot, config)
    # a is as the last session reported it; b changed; c has pods to place.
    assert set(kept.jobs) == {"default/b", "default/c"}
    assert kept.running_unchanged == {"default": 1}
    assert summarize(snapshot, kept).queues["default"].running == 2
    assert summarize(snapshot, kept).queues["default"].inqueue == 1


def test_lone_pods_have_no_group_status() -> None:
    decisions = decide([node("n1"), pod("alone", requests=ONE_CPU)])
    assert decisions.jobs == {}
    assert placements(decisions) == {"default/alone": "n1"}


def test_missing_podgroup_waits_instead_of_running_alone() -> None:
    decisions = decide([node("n1"), pod("p", requests=ONE_CPU, group="x")])
    assert placements(decisions) == {}
    assert decisions.pending == {"default/p": "PodGroup default/x does not exist"}
    # There is no PodGroup object to write a status to.
    assert decisions.jobs == {}


def test_malformed_podgroup_holds_its_pods_with_the_reason() -> None:
    decisions = decide([node("n1"), pod_group("g", 0), pod("g-0", requests=ONE_CPU, group="g")])
    message = "PodGroup default/g.spec.minMember: 0 is below the minimum of 1"
    assert decisions.pending == {"default/g-0": message}
    assert decisions.jobs["default/g"].condition == Condition("Unschedulable", "Invalid", message)


def test_a_peers_group_whose_pods_another_scheduler_serves_gets_no_status() -> None:
    """Volcano still runs beside us: its PodGroup and pods are its to report on; ours,
    even without pods yet, and a peer's group whose pods name us get a status."""
    volcano = "scheduling.volcano.sh/v1beta1"
    decisions = decide(
        [
            node("n1"),
            pod_group("theirs", 1, api_version=volcano),
            pod("theirs-0", requests={"cpu": "1"}, group="theirs", scheduler="volcano"),
            pod_group("moved", 1, api_version=volcano),
            pod("moved-0", requests={"cpu": "1"}, group="moved"),
            pod_group("empty", 1),
        ]
    )
    assert set(decisions.jobs) == {"default/moved", "default/empty"}
