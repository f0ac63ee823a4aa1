"""Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2) through `batchsched simulate`:
kube-scheduler v1.36's gang semantics, and everything batchsched adds (queues,
priority, preemption) applying to them as to any gang."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.api.groups import VOLCANO_API
from batchsched.api.nativegroups import AWAITING_MEMBERS
from batchsched.api.pods import OUR_QUEUE_KEY

from .harness import Run, simulate
from tests.support.objects import (
    member,
    native_pod_group,
    node,
    pod,
    pod_group,
    priority_class,
    queue,
)

CPU = {"cpu": "1", "memory": "1Gi"}


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *objects: Any) -> Run:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = simulate(capsys, path)
    assert result.code == 0, result.stderr
    return result


def nodes(count: int, cpu: int = 4) -> list[Any]:
    return [node(f"n{i}", cpu=cpu, memory="16Gi") for i in range(count)]


def members(group: str, count: int, *, created: float | None = None, **options: Any) -> list[Any]:
    return [member(f"{group}-{i}", group, CPU, created=created, **options) for i in range(count)]


def test_a_pod_waits_for_its_podgroup_and_starts_once_it_arrives(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    early = run(capsys, tmp_path, *nodes(1), *members("g", 2, created=0))
    for shown in early.pods.values():
        assert shown["node"] is None
        assert shown["reason"].startswith(
            'waiting for pod\'s pod group "g" to appear in scheduling queue (PodGroup '
            "default/g, named by the pods' spec.schedulingGroup.podGroupName, does not exist)"
        )
    later = run(
        capsys,
        tmp_path,
        *nodes(1),
        *members("g", 2, created=0),
        native_pod_group("g", 2, created=60),
    )
    assert {p["bound_at"] for p in later.pods.values()} == {60.0}


def test_a_gang_waits_for_min_count_pods_then_all_start_in_one_decision(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    three = [native_pod_group("g", 4, created=0), *members("g", 3, created=0)]
    waiting = run(capsys, tmp_path, *nodes(2), *three)
    assert waiting.bound() == {}
    assert {p["reason"] for p in waiting.pods.values()} == {
        f"{AWAITING_MEMBERS} (PodGroup default/g: 3 pods exist, "
        "spec.schedulingPolicy.gang.minCount is 4)"
    }
    fourth = member("g-3", "g", CPU, created=30)
    started = run(capsys, tmp_path, *nodes(2), *three, fourth)
    assert {p["bound_at"] for p in started.pods.values()} == {30.0}
    assert started.podgroups["default/g"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("cpu", "min_count", "size", "bound"),
    [
        # minCount 4, six pods, room for five: five start together, one waits.
        (5, 4, 6, 5),
        # Room for three of a gang of four: nothing starts (PodGroupScheduled False).
        (3, 4, 4, 0),
        # basic: pod by pod, the first fits, the second waits.
        (1, None, 2, 1),
    ],
    ids=["room-for-more-than-min-count", "no-room-for-min-count", "basic"],
)
def test_one_decision_or_none(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cpu: int,
    min_count: int | None,
    size: int,
    bound: int,
) -> None:
    group = native_pod_group("g", min_count)
    result = run(capsys, tmp_path, node("n0", cpu=cpu, memory="16Gi"), group, *members("g", size))
    assert sorted(result.bound()) == [f"default/g-{i}" for i in range(bound)]
    shown = result.podgroups["default/g"]
    assert shown["scheduled"] == bound
    assert (shown["phase"] == "Running") == (bound > 0)


def test_assigned_members_count_toward_min_count_and_stay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Three members run; a fourth added later is placed alone, as the group's quorum
    counts the running ones, and none of theirs moves when it cannot be placed."""
    running = [member(f"g-{i}", "g", CPU, node_name="n0", phase="Running") for i in range(3)]
    fits = member("g-3", "g", CPU)
    result = run(capsys, tmp_path, *nodes(1), native_pod_group("g", 4), *running, fits)
    assert result.bound() == {f"default/g-{i}": "n0" for i in range(4)}
    too_big = member("g-3", "g", {"cpu": "8"})
    stuck = run(capsys, tmp_path, *nodes(1), native_pod_group("g", 4), *running, too_big)
    assert stuck.bound() == {f"default/g-{i}": "n0" for i in range(3)}
    assert stuck.report["evictions"] == []


def test_a_group_whose_pods_name_different_schedulers_is_refused_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mixed = [
        native_pod_group("g", 2),
        member("g-0", "g", CPU),
        member("g-1", "g", CPU, scheduler="default-scheduler"),
    ]
    result = run(capsys, tmp_path, *nodes(1), *mixed, pod("alone", CPU))
    assert result.bound() == {"default/alone": "n0"}
    assert result.pods["default/g-0"]["reason"] == (
        "PodGroup default/g: its pods name different schedulers in spec.schedulerName, "
        "'batch-scheduler' (pod default/g-0) and 'default-scheduler' (pod default/g-1); "
        "all pods of a PodGroup must name one"
    )


def test_members_placed_before_a_pod_of_another_scheduler_joins_stay_and_the_rest_wait(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Objects arrive at their creationTimestamp, as the operator receives them: a
    member joining the running gang is placed before the pod of another scheduler
    comes; once it has, the group is refused, and what was placed stays
    (tests/integration/test_native_gangs.py has the operator's side)."""
    arriving = [
        native_pod_group("g", 2, created=0),
        *members("g", 2, created=0),
        member("g-2", "g", CPU, created=5),
        member("theirs", "g", CPU, created=10, scheduler="default-scheduler"),
        member("g-3", "g", CPU, created=15),
    ]
    result = run(capsys, tmp_path, *nodes(1), *arriving)
    assert result.bound() == {f"default/g-{i}": "n0" for i in range(3)}
    assert "different schedulers" in result.pods["default/g-3"]["reason"]


def test_pods_created_at_one_time_arrive_in_input_order_and_the_mix_goes_by_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One session sees the three pods, as the operator's may: the member listed before
    the pod of another scheduler is decided as the group stood before that pod came,
    the member after it waits (tests/unit/cache/test_mixed_schedulers.py)."""
    arriving = [
        native_pod_group("g", None, created=0),
        member("g-0", "g", CPU, created=5),
        member("theirs", "g", CPU, created=5, scheduler="default-scheduler"),
        member("g-1", "g", CPU, created=5),
    ]
    result = run(capsys, tmp_path, *nodes(1), *arriving)
    assert result.bound() == {"default/g-0": "n0"}
    assert "different schedulers" in result.pods["default/g-1"]["reason"]


def test_bad_input_leaves_everything_else_scheduled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A pod naming a PodGroup that never appears, a policy that cannot be honoured, a
    pod naming a peer's PodGroup by spec.schedulingGroup, and a PodGroup deleted while
    its pods run (the running one stays, the pending one waits) each wait saying so."""
    two_keys = {"topology": [{"key": "rack"}, {"key": "zone"}]}
    refused = native_pod_group("topo", 2, schedulingConstraints=two_keys)
    volcano = pod_group("vc", 1, api_version=VOLCANO_API)
    result = run(
        capsys,
        tmp_path,
        *nodes(2),
        *members("ghost", 1),
        refused,
        *members("topo", 2),
        volcano,
        member("vc-0", "vc", CPU),
        member("gone-0", "gone", CPU, node_name="n1", phase="Running"),
        member("gone-1", "gone", CPU),
        native_pod_group("ok", 2),
        *members("ok", 2),
    )
    assert sorted(result.bound()) == ["default/gone-0", "default/ok-0", "default/ok-1"]
    assert result.bound()["default/gone-0"] == "n1"
    reasons = {key: p["reason"] for key, p in result.pods.items()}
    assert reasons["default/ghost-0"].startswith('waiting for pod\'s pod group "ghost"')
    assert reasons["default/gone-1"].startswith('waiting for pod\'s pod group "gone"')
    assert reasons["default/topo-0"] == (
        "PodGroup default/topo.spec.schedulingConstraints.topology: at most one entry is "
        "allowed, not 2"
    )
    assert reasons["default/vc-0"] == (
        "Pod default/vc-0 names PodGroup default/vc by spec.schedulingGroup.podGroupName, "
        f"which needs a PodGroup of scheduling.k8s.io/v1alpha2, but that PodGroup is of "
        f"{VOLCANO_API}"
    )


def namespaced(name: str, queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {OUR_QUEUE_KEY: queue_name}},
    }


def test_a_gang_takes_its_queue_from_its_pods_then_its_namespace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A queue's capability holds a native gang as it holds any: `small` has room for
    one pod, so a gang of two sent there by its pods' annotation, or by its namespace,
    waits; the same gang in the default queue starts."""
    small = queue("small", capability={"cpu": "1"})
    by_pods = [
        native_pod_group("a", 2),
        *members("a", 2, annotations={OUR_QUEUE_KEY: "small"}),
    ]
    by_namespace = [
        namespaced("team", "small"),
        native_pod_group("b", 2, namespace="team"),
        *(member(f"b-{i}", "b", CPU, namespace="team") for i in range(2)),
    ]
    free = [native_pod_group("c", 2), *members("c", 2)]
    result = run(capsys, tmp_path, *nodes(2), small, *by_pods, *by_namespace, *free)
    assert sorted(result.bound()) == ["default/c-0", "default/c-1"]
    assert "queue small: " in result.pods["default/a-0"]["reason"]
    assert "queue small: " in result.pods["team/b-0"]["reason"]


def test_members_naming_different_queues_wait(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    split = [
        native_pod_group("g", 2),
        member("g-0", "g", CPU, annotations={OUR_QUEUE_KEY: "q1"}),
        member("g-1", "g", CPU, annotations={OUR_QUEUE_KEY: "q2"}),
    ]
    result = run(capsys, tmp_path, *nodes(1), queue("q1"), queue("q2"), *split)
    assert result.bound() == {}
    assert "its pods name different queues" in result.pods["default/g-0"]["reason"]


def native_gang(name: str, size: int, *, priority: str, created: float) -> list[Any]:
    """A native gang of minCount 2 whose PodGroup and pods name PriorityClass `priority`."""
    group = native_pod_group(name, 2, priorityClassName=priority, created=created)
    return [group, *members(name, size, created=created, spec={"priorityClassName": priority})]


def preempting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, low: list[Any], high: list[Any]
) -> Run:
    """`low` (PriorityClass low) on a full 4-CPU node, then `high` (class high) at 60s."""
    classes = [priority_class("low", 10), priority_class("high", 1000)]
    return run(capsys, tmp_path, *classes, *nodes(1), *low, *high)


def test_a_high_priority_gang_preempts_for_its_min_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The PodGroup's priorityClassName makes the gang urgent, and preemption makes it
    room as for any gang: low-priority lone pods fill the node, the gang of two takes
    two of them."""
    low = [pod(f"low-{i}", CPU, created=0, spec={"priorityClassName": "low"}) for i in range(4)]
    result = preempting(capsys, tmp_path, low, native_gang("train", 2, priority="high", created=60))
    assert sorted(k for k in result.bound() if k.startswith("default/train")) == [
        "default/train-0",
        "default/train-1",
    ]
    evicted = [e for e in result.report["evictions"] if e["preemptor"] == "default/train"]
    assert len(evicted) == 2


def test_a_native_gang_preempted_keeps_its_min_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As a victim too a native gang is a gang: of four low-priority members with
    minCount 2, the two above its minimum go for a high-priority gang of two."""
    result = preempting(
        capsys,
        tmp_path,
        native_gang("low", 4, priority="low", created=0),
        native_gang("hi", 2, priority="high", created=60),
    )
    evicted = sorted(e["pod"] for e in result.report["evictions"])
    assert len(evicted) == 2
    assert all(key.startswith("default/low-") for key in evicted)
    assert sum(1 for key in result.bound() if key.startswith("default/low-")) == 2
    assert result.podgroups["default/low"]["phase"] == "Running"
