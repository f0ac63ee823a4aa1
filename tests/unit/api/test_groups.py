"""PodGroups of our API and of the schedulers users migrate from."""

from typing import Any

import pytest

from batchsched.api.groups import POD_GROUP_APIS, parse_duration, pod_group_from_object

from tests.support.objects import decide, pod, pod_group

KUBE_BATCH = "scheduling.incubator.k8s.io/v1alpha1"
# kube-batch's later API group and version (Volcano's too, before scheduling.volcano.sh).
KUBE_BATCH_V1ALPHA2 = "scheduling.sigs.dev/v1alpha2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_OLD = "scheduling.sigs.k8s.io/v1alpha1"
TENCENT = "batch.scheduler.tencent.com/v1"
OURS = "scheduling.batchsched.io/v1alpha1"
NATIVE = "scheduling.k8s.io/v1alpha2"
# The APIs whose PodGroups state spec.minMember (Kubernetes' own states a policy).
MIN_MEMBER_APIS = [
    OURS,
    KUBE_BATCH,
    KUBE_BATCH_V1ALPHA2,
    VOLCANO,
    COSCHEDULING,
    COSCHEDULING_OLD,
    TENCENT,
]
ALL_APIS = [*MIN_MEMBER_APIS, NATIVE]


def test_every_peer_api_is_listed() -> None:
    """The simulator and the operator's watches both read POD_GROUP_APIS."""
    assert sorted(POD_GROUP_APIS) == sorted(ALL_APIS)


@pytest.mark.parametrize(
    ("api_version", "timeout_spec", "timeout"),
    [
        (OURS, {"scheduleTimeoutSeconds": 60}, 60.0),
        (KUBE_BATCH, {}, None),
        (KUBE_BATCH_V1ALPHA2, {}, None),
        (VOLCANO, {}, None),
        (COSCHEDULING, {"scheduleTimeoutSeconds": 30}, 30.0),
        (COSCHEDULING_OLD, {"scheduleTimeoutSeconds": "45"}, 45.0),
        (TENCENT, {"maxScheduleTime": "1m30s"}, 90.0),
        # Keys another API spells differently are not read.
        (TENCENT, {"scheduleTimeoutSeconds": 30}, None),
        (VOLCANO, {"scheduleTimeoutSeconds": 30}, None),
    ],
)
def test_every_api_version_is_read(
    api_version: str, timeout_spec: dict[str, Any], timeout: float | None
) -> None:
    obj = pod_group(
        "g",
        3,
        namespace="ml",
        api_version=api_version,
        queue="research",
        minResources={"cpu": "3", "nvidia.com/gpu": "2"},
        priorityClassName="high",
        **timeout_spec,
    )
    obj["status"] = {"phase": "Inqueue"}
    group = pod_group_from_object(obj)
    assert group.error is None
    assert (group.key, group.min_member, group.queue, group.priority_class_name) == (
        "ml/g",
        3,
        "research",
        "high",
    )
    assert group.queue_explicit
    assert group.min_resources == {"cpu": 3000, "nvidia.com/gpu": 2}
    assert group.schedule_timeout_seconds == timeout
    assert (group.api_version, group.phase) == (api_version, "Inqueue")


def test_defaults() -> None:
    group = pod_group_from_object(pod_group("g", 1), default_creation=4.0)
    assert (group.queue, group.phase, group.creation, group.min_resources) == (
        "default",
        "Pending",
        4.0,
        {},
    )
    # Unset rather than named: the namespace's queue may still apply.
    assert not group.queue_explicit


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        (
            pod_group("g", 2, api_version="scheduling.volcano.sh/v1alpha9"),
            "PodGroup default/g: apiVersion 'scheduling.volcano.sh/v1alpha9' is not one of "
            f"{', '.join(sorted(ALL_APIS))}",
        ),
        (
            {"apiVersion": OURS, "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {}},
            "PodGroup default/g: spec.minMember is required",
        ),
        (pod_group("g", 0), "PodGroup default/g.spec.minMember: 0 is below the minimum of 1"),
        (pod_group("g", -3), "PodGroup default/g.spec.minMember: -3 is below the minimum of 1"),
        (
            {**pod_group("g", 1), "spec": {"minMember": "many"}},
            "PodGroup default/g.spec.minMember: 'many' is not a whole number",
        ),
        (
            pod_group("g", 2, minResources={"cpu": "-1"}),
            "PodGroup default/g.spec.minResources.cpu: '-1' is negative",
        ),
        (
            pod_group("g", 2, api_version=TENCENT, maxScheduleTime="soon"),
            "PodGroup default/g.spec.maxScheduleTime: 'soon' is not a duration like 30s, 5m "
            "or 1h30m",
        ),
        (
            pod_group("g", 2, scheduleTimeoutSeconds=0),
            "PodGroup default/g.spec.scheduleTimeoutSeconds: 0 is below the minimum of 1",
        ),
    ],
)
def test_malformed_groups_keep_the_reason(obj: dict[str, Any], error: str) -> None:
    assert pod_group_from_object(obj).error == error


def test_volcano_reads_min_member_zero_and_task_minimums() -> None:
    group = pod_group_from_object(
        pod_group("g", 0, api_version=VOLCANO, minTaskMember={"ps": 1, "worker": "2", "x": 0})
    )
    assert group.error is None
    # A role needing none is as good as unlisted.
    assert (group.min_member, group.min_task_member) == (0, {"ps": 1, "worker": 2})


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"minTaskMember": {"ps": -1}},
            "PodGroup default/g.spec.minTaskMember.ps: -1 is below the minimum of 0",
        ),
        (
            {"minTaskMember": ["ps"]},
            "PodGroup default/g.spec.minTaskMember: expected a map, got ['ps']",
        ),
        (
            {"minMember": -1},
            "PodGroup default/g.spec.minMember: -1 is below the minimum of 0",
        ),
    ],
)
def test_bad_volcano_task_minimums_are_refused(spec: dict[str, Any], error: str) -> None:
    obj = pod_group("g", 1, api_version=VOLCANO)
    obj["spec"].update(spec)
    assert pod_group_from_object(obj).error == error


@pytest.mark.parametrize("api_version", MIN_MEMBER_APIS)
@pytest.mark.parametrize(("node_cpu", "bound"), [("2", 0), ("3", 3)])
def test_every_api_version_gangs_its_pods(api_version: str, node_cpu: str, bound: int) -> None:
    decisions = decide(
        [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": node_cpu, "memory": "8Gi"}},
            },
            pod_group("g", 3, api_version=api_version),
            *(pod(f"p{i}", requests={"cpu": "1"}, group="g") for i in range(3)),
        ]
    )
    assert len(decisions.bindings) == bound
    assert decisions.jobs["default/g"].phase == ("Running" if bound else "Inqueue")


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        (90, 90.0),
        (1.5, 1.5),
        # Go's every unit, as in Volcano's sla-waiting-time example.
        ("1h2m3s4ms5µs6ns", 3723.004005006),
        ("7us", 7e-6),
    ],
)
def test_durations(raw: object, seconds: float) -> None:
    assert parse_duration(raw, where="x") == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "x: '' is not a duration like 30s, 5m or 1h30m"),
        ("5 m", "x: '5 m' is not a duration like 30s, 5m or 1h30m"),
        ("1d", "x: '1d' is not a duration like 30s, 5m or 1h30m"),
        ("0s", "x: '0s' must be positive"),
        (-1, "x: -1 must be positive"),
    ],
)
def test_bad_durations(raw: object, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_duration(raw, where="x")
    assert str(error.value) == message


def test_volcano_min_resources_keep_what_volcanos_scheduler_counts() -> None:
    """Volcano's job controller writes a PodGroup's minResources as quota usage; its
    scheduler reads the resources and the scalar ones, not counts or quota names."""
    written = {
        "count/pods": "2",
        "pods": "2",
        "cpu": "2",
        "requests.cpu": "2",
        "limits.cpu": "4",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "nvidia.com/gpu": "2",
        "requests.nvidia.com/gpu": "2",
        "hugepages-2Mi": "4Mi",
        "example.com/foo": "1",
    }
    volcano = pod_group_from_object(pod_group("g", 2, api_version=VOLCANO, minResources=written))
    assert volcano.error is None
    assert volcano.min_resources == {
        "pods": 2,
        "cpu": 2000,
        "memory": 2**30,
        "nvidia.com/gpu": 2,
        "hugepages-2Mi": 4 * 2**20,
        "example.com/foo": 1,
    }
    # Our own PodGroup asks for what it names: a name no node has keeps it waiting, and
    # its message says which.
    ours = pod_group_from_object(pod_group("g", 2, minResources=written))
    assert set(ours.min_resources) == set(written)


@pytest.mark.parametrize("api_version", [a for a in MIN_MEMBER_APIS if a != OURS])
def test_peer_group_without_min_member_is_a_quorum_of_zero(api_version: str) -> None:
    """The peers' CRDs do not require minMember, and their schedulers read a group
    without one as Go's zero value: each member starts as it fits."""
    obj = {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {}}
    group = pod_group_from_object(obj)
    assert (group.error, group.min_member) == (None, 0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("networkTopology", {"mode": "hard", "highestTierAllowed": 1}),
        ("subGroupPolicy", [{"name": "workers", "minSubGroups": 2}]),
    ],
)
def test_volcano_constraints_that_cannot_be_kept_are_refused(key: str, value: object) -> None:
    obj = pod_group("g", 2, api_version=VOLCANO)
    group = pod_group_from_object({**obj, "spec": {**obj["spec"], key: value}})
    assert group.error is not None
    assert group.error.startswith(f"PodGroup default/g.spec.{key}: {value!r} is not supported")
