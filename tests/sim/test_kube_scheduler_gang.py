"""kube-scheduler's GangScheduling plugin tests as a conformance suite: each case of
the tables in pkg/scheduler/framework/plugins/gangscheduling/gangscheduling_test.go
(TestPreEnqueue and TestPlacementFeasible), translated case by case into Kubernetes'
own PodGroups and member pods run through `batchsched simulate`, the expectation taken
from the case's own assertion.

TestPreEnqueue asserts the status PreEnqueue gives one pod: nil (the pod may be
scheduled) or UnschedulableAndUnresolvable with a message. Here the pod is bound when
room is plenty, or waits with that message. TestPlacementFeasible asserts the status of
the PodGroup scheduling cycle after each pod it evaluates: a pod the case says fits asks
1 CPU, one it says does not asks more than any node has, and a pod the case never gets
to fits (the strongest reading: the group still fails). The final status Success means
every fitting pod is bound in that one decision; Unschedulable means none is.

Cases about CompositePodGroups, a kind v1.36 does not have, are left out: those with
the CompositePodGroup gate on, and those that differ from the ones kept only by a
PodGroup's parentCompositePodGroupName (a field the v1alpha2 API lacks, refused here).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.api.nativegroups import AWAITING_MEMBERS

from .harness import Run, simulate
from tests.support.objects import member, native_pod_group, node, pod

FITS = {"cpu": "1"}
# More than any node below has.
NEVER_FITS = {"cpu": "64"}
NODES = [node("n1", cpu=4, memory="8Gi"), node("n2", cpu=4, memory="8Gi")]


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[Any]) -> Run:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump_all([*NODES, *objects]))
    result = simulate(capsys, path)
    assert result.code == 0, result.stderr
    return result


def awaiting_group(name: str) -> str:
    return f'waiting for pod\'s pod group "{name}" to appear in scheduling queue'


# TestPreEnqueue's objects (namespace ns1).
GANG_PG1 = native_pod_group("pg1", 3, namespace="ns1")
GANG_PG2 = native_pod_group("pg2", 4, namespace="ns1")
BASIC_PG3 = native_pod_group("pg3", None, namespace="ns1")


def gang_pod(name: str, group: str | None) -> dict[str, Any]:
    if group is None:
        return pod(name, FITS, namespace="ns1")
    return member(name, group, FITS, namespace="ns1")


P = {
    "p1": gang_pod("p1", "pg1"),
    "p2": gang_pod("p2", "pg1"),
    "p3": gang_pod("p3", "pg1"),
    "p4": gang_pod("p4", "pg2"),
    "p5": gang_pod("p5", "pg2"),
    "basic-pod": gang_pod("basic-pod", "pg3"),
    "non-gang": gang_pod("non-gang", None),
}


@dataclass(frozen=True)
class PreEnqueueCase:
    pod: str
    initial_pods: tuple[str, ...]
    groups: tuple[dict[str, Any], ...]
    # None: PreEnqueue lets it through (bound here, as room is plenty); else the
    # message it waits with.
    want: str | None


PRE_ENQUEUE = {
    "non-gang pod succeeds immediately": PreEnqueueCase(
        "non-gang", (), (GANG_PG1, GANG_PG2, BASIC_PG3), None
    ),
    "basic policy pod succeeds immediately": PreEnqueueCase(
        "basic-pod", (), (GANG_PG1, GANG_PG2, BASIC_PG3), None
    ),
    "gang pod fails PreEnqueue when pod group is not yet created": PreEnqueueCase(
        "p1", ("p2", "p3", "p4", "p5"), (), awaiting_group("pg1")
    ),
    "gang pod fails PreEnqueue when quorum is not met": PreEnqueueCase(
        "p1", ("p2", "p4", "p5"), (GANG_PG1, GANG_PG2), AWAITING_MEMBERS
    ),
    "gang pod passes PreEnqueue": PreEnqueueCase(
        "p1", ("p2", "p3", "p4", "p5"), (GANG_PG1, GANG_PG2), None
    ),
}


@pytest.mark.parametrize("case", PRE_ENQUEUE.values(), ids=PRE_ENQUEUE.keys())
def test_pre_enqueue(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: PreEnqueueCase
) -> None:
    pods = [P[name] for name in (*case.initial_pods, case.pod)]
    result = run(capsys, tmp_path, [*case.groups, *pods])
    shown = result.pods[f"ns1/{case.pod}"]
    if case.want is None:
        assert shown["node"] is not None, shown["reason"]
    else:
        assert shown["node"] is None
        # kube-scheduler's words first, then which object and field they are about.
        assert shown["reason"].startswith(f"{case.want} (PodGroup ns1/"), shown["reason"]


@dataclass(frozen=True)
class PlacementCase:
    min_count: int  # 0: a basic PodGroup, as the test builds one
    # The pods the cycle evaluates: True fits, False does not, None never evaluated.
    pods: tuple[bool | None, ...]
    initially_scheduled: int
    # The status after the last pod evaluated: Success or Unschedulable.
    success: bool
    bound: tuple[int, ...] = field(default=())


def placement(
    min_count: int, pods: tuple[bool | None, ...], scheduled: int, *, success: bool
) -> PlacementCase:
    """The pods bound follow from the final status: on Success every fitting pod (those
    evaluated and fitting, and those never evaluated, which fit here), else none."""
    fitting = tuple(i for i, fits in enumerate(pods) if fits is not False)
    return PlacementCase(min_count, pods, scheduled, success, fitting if success else ())


PLACEMENT_FEASIBLE = {
    "All pods succeed, minCount met at end": placement(2, (True, True), 0, success=True),
    "First pod fails, minCount not satisfiable": placement(
        3, (False, None, None), 0, success=False
    ),
    "Second pod fails, minCount not satisfiable": placement(2, (True, False), 0, success=False),
    "Non-gang pod group with 0 scheduled pods fails": placement(0, (False,), 0, success=False),
    "Non-gang pod group with succeeds once 1 pod is scheduled": placement(
        0, (True,), 0, success=True
    ),
    "Non-gang pod group with 1 initially scheduled pod succeeds": placement(
        0, (False,), 1, success=True
    ),
    "More than minCount pods, all succeed": placement(2, (True, True, True), 0, success=True),
    "More than minCount pods, first fails": placement(2, (False, True, True), 0, success=True),
    "More than minCount pods, minCount not satisfiable": placement(
        2, (False, False, None), 0, success=False
    ),
    "1 pod scheduled, 2 unscheduled pods succeed, minCount 3 met": placement(
        3, (True, True), 1, success=True
    ),
    "minCount already met by scheduled pods": placement(2, (False,), 2, success=True),
    "1 pod scheduled, minCount 3, first unscheduled fails, not enough remaining": placement(
        3, (False, None), 1, success=False
    ),
    "1 pod scheduled, minCount 4, first unscheduled succeeds, not enough remaining": placement(
        4, (True, None), 1, success=False
    ),
}


@pytest.mark.parametrize("case", PLACEMENT_FEASIBLE.values(), ids=PLACEMENT_FEASIBLE.keys())
def test_placement_feasible(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: PlacementCase
) -> None:
    group = native_pod_group("test-pg", case.min_count or None)
    running = [
        member(f"s{i}", "test-pg", FITS, node_name="n1", phase="Running")
        for i in range(case.initially_scheduled)
    ]
    pending = [
        member(f"p{i}", "test-pg", NEVER_FITS if fits is False else FITS)
        for i, fits in enumerate(case.pods)
    ]
    result = run(capsys, tmp_path, [group, *running, *pending])
    bound = {i for i in range(len(case.pods)) if result.pods[f"default/p{i}"]["node"]}
    assert bound == set(case.bound)
    # The already scheduled members stay where they are, whatever the cycle decides.
    assert all(result.pods[f"default/s{i}"]["node"] == "n1" for i in range(len(running)))
    shown = result.podgroups["default/test-pg"]
    assert shown["scheduled"] == case.initially_scheduled + len(case.bound)
    # kube-scheduler's PodGroupScheduled: True once the cycle succeeds, and never undone.
    assert (shown["phase"] == "Running") == case.success
