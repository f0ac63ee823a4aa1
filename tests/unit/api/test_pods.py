"""Pods as tasks: the effective request, the group a pod names, and parse errors."""

import datetime
import re
from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.objects import GroupRef, QueueName, Toleration
from batchsched.api.pods import ShapeMemo, effective_request, group_of, task_from_pod
from batchsched.api.queues import priority_class_from_object
from batchsched.api.selectors import Requirement

from tests.support.objects import Obj, pod, priority_class

WHERE = "Pod default/p"
GI = 2**30


def container(name: str, *, kind: str = "requests", **resources: str) -> Obj:
    return {"name": name, "resources": {kind: resources}}


def sidecar(name: str, **requests: str) -> Obj:
    return {**container(name, **requests), "restartPolicy": "Always"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [{"name": "c"}]}, {"pods": 1}, id="no-requests"),
        pytest.param(
            {"containers": [container("a", cpu="1", memory="1Gi"), container("b", cpu="500m")]},
            {"cpu": 1500, "memory": GI, "pods": 1},
            id="sum-of-containers",
        ),
        pytest.param(
            {"containers": [container("a", kind="limits", cpu="2", **{"nvidia.com/gpu": "1"})]},
            {"cpu": 2000, "nvidia.com/gpu": 1, "pods": 1},
            id="limits-default-requests",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "a",
                        "resources": {
                            "limits": {"cpu": "4", "memory": "8Gi"},
                            "requests": {"cpu": "1"},
                        },
                    }
                ]
            },
            {"cpu": 1000, "memory": 8 * GI, "pods": 1},
            id="request-beats-limit-per-resource",
        ),
        pytest.param(
            {
                "initContainers": [container("i1", cpu="3"), container("i2", memory="4Gi")],
                "containers": [container("a", cpu="1", memory="1Gi")],
            },
            {"cpu": 3000, "memory": 4 * GI, "pods": 1},
            id="largest-init-container-per-resource",
        ),
        pytest.param(
            {
                "initContainers": [container("i", cpu="1")],
                "containers": [container("a", cpu="2"), container("b", cpu="2")],
            },
            {"cpu": 4000, "pods": 1},
            id="containers-beat-init",
        ),
        pytest.param(
            {
                "containers": [container("a", cpu="1")],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            },
            {"cpu": 1250, "memory": 120 * 2**20, "pods": 1},
            id="overhead-added",
        ),
        pytest.param(
            {
                "initContainers": [container("i", cpu="3")],
                "containers": [container("a", cpu="1")],
                "overhead": {"cpu": "100m"},
            },
            {"cpu": 3100, "pods": 1},
            id="overhead-on-top-of-init-peak",
        ),
        pytest.param(
            {
                "initContainers": [sidecar("proxy", cpu="1"), container("setup", cpu="2")],
                "containers": [container("a", cpu="1")],
            },
            # setup runs beside the already started proxy: 1 + 2 = 3 at the peak.
            {"cpu": 3000, "pods": 1},
            id="sidecar-adds-to-later-init",
        ),
        pytest.param(
            {
                "initContainers": [container("setup", cpu="2"), sidecar("proxy", cpu="1")],
                "containers": [container("a", cpu="2")],
            },
            # The sidecar keeps running beside the containers: 2 + 1; setup ran alone.
            {"cpu": 3000, "pods": 1},
            id="sidecar-adds-to-steady-request",
        ),
        pytest.param(
            {
                "initContainers": [sidecar("s1", memory="1Gi"), sidecar("s2", memory="2Gi")],
                "containers": [container("a", memory="1Gi")],
            },
            {"memory": 4 * GI, "pods": 1},
            id="sidecars-accumulate",
        ),
        pytest.param(
            {
                "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "6Gi"}},
                "containers": [container("a", cpu="1", memory="1Gi", **{"nvidia.com/gpu": "1"})],
                "overhead": {"cpu": "100m"},
            },
            # Pod-level cpu and memory replace the containers' sum; a GPU cannot be set
            # for the whole pod, so the container's stays.
            {"cpu": 3100, "memory": 6 * GI, "nvidia.com/gpu": 1, "pods": 1},
            id="pod-level-resources-replace-the-sum",
        ),
    ],
)
def test_effective_request(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert effective_request(spec, where=WHERE) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"containers": [container("a", cpu="-1")]},
            "Pod default/p.spec.containers[0].resources.requests.cpu: '-1' is negative",
        ),
        (
            {"containers": [{"name": "a"}, container("b", kind="limits", memory="1Gb")]},
            "Pod default/p.spec.containers[1].resources.limits.memory: '1Gb' is not a quantity",
        ),
        (
            {"initContainers": [container("i", cpu="x")], "containers": []},
            "Pod default/p.spec.initContainers[0].resources.requests.cpu: 'x' is not a quantity",
        ),
        (
            {"containers": [], "overhead": {"memory": "-5Mi"}},
            "Pod default/p.spec.overhead.memory: '-5Mi' is negative",
        ),
    ],
)
def test_bad_quantities_name_pod_and_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject) as error:
        task_from_pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert str(error.value) == message


# Every association key of README's "How a pod finds its group" and where its scheduler
# reads it: ours, kube-batch's (both of its annotations), Volcano's, scheduler-plugins'
# current label and its older one, Tencent's.
GROUP_KEYS = [
    ("annotations", "scheduling.batchsched.io/group-name"),
    ("labels", "scheduling.batchsched.io/group-name"),
    ("annotations", "scheduling.k8s.io/group-name"),
    ("annotations", "scheduling.x-k8s.io/group-name"),
    ("annotations", "scheduling.volcano.sh/group-name"),
    ("labels", "scheduling.x-k8s.io/pod-group"),
    ("labels", "pod-group.scheduling.sigs.k8s.io"),
    ("labels", "group.batch.scheduler.tencent.com"),
]
LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"


def carrying(values: dict[tuple[str, str], str]) -> Obj:
    """A pod with each (where, key) set to its value."""
    meta: dict[str, dict[str, str]] = {"labels": {}, "annotations": {}}
    for (where, key), value in values.items():
        meta[where][key] = value
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml", **meta}}


@pytest.mark.parametrize(("where", "key"), GROUP_KEYS)
def test_each_key_names_a_podgroup(where: str, key: str) -> None:
    ref = group_of(carrying({(where, key): "g"}), namespace="ml", where=WHERE)
    assert ref == GroupRef("ml", "g")


def test_lightweight_labels_name_a_group_without_an_object() -> None:
    pod = carrying({("labels", LIGHTWEIGHT_NAME): "g", ("labels", LIGHTWEIGHT_MIN): "3"})
    assert group_of(pod, namespace="ml", where=WHERE) == GroupRef("ml", "g", 3)


def test_keys_that_agree_name_one_group() -> None:
    pod = carrying({key: "g" for key in GROUP_KEYS})
    assert group_of(pod, namespace="ml", where=WHERE) == GroupRef("ml", "g")


def test_a_podgroup_key_beside_the_lightweight_labels_names_the_object() -> None:
    """The object, not the label, then says how many members the gang needs."""
    pod = carrying(
        {
            ("labels", "scheduling.x-k8s.io/pod-group"): "g",
            ("labels", LIGHTWEIGHT_NAME): "g",
            ("labels", LIGHTWEIGHT_MIN): "2",
        }
    )
    assert group_of(pod, namespace="ml", where=WHERE) == GroupRef("ml", "g")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(GROUP_KEYS[i], GROUP_KEYS[j], id=f"{GROUP_KEYS[i][1]}+{GROUP_KEYS[j][1]}")
        for i, j in [(0, 1), (0, 2), (2, 4), (2, 3), (5, 6), (4, 7), (0, 7)]
    ],
)
def test_keys_naming_different_groups_are_refused(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    with pytest.raises(InvalidObject) as error:
        group_of(carrying({first: "a", second: "b"}), namespace="ml", where=WHERE)
    assert str(error.value) == (
        f"{WHERE}: names two groups, 'a' by {first[0][:-1]} {first[1]} and 'b' by "
        f"{second[0][:-1]} {second[1]}; remove one key or make them agree"
    )


def test_lightweight_name_disagreeing_with_a_key_is_refused() -> None:
    pod = carrying(
        {
            ("annotations", "scheduling.volcano.sh/group-name"): "a",
            ("labels", LIGHTWEIGHT_NAME): "b",
            ("labels", LIGHTWEIGHT_MIN): "2",
        }
    )
    with pytest.raises(InvalidObject, match=f"'b' by label {LIGHTWEIGHT_NAME};"):
        group_of(pod, namespace="ml", where=WHERE)


def test_empty_values_name_nothing() -> None:
    pod = carrying({GROUP_KEYS[0]: "", GROUP_KEYS[2]: "g"})
    assert group_of(pod, namespace="ml", where=WHERE) == GroupRef("ml", "g")


@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("labels", "scheduling.k8s.io/group-name"),
        ("labels", "scheduling.x-k8s.io/group-name"),
        ("labels", "scheduling.volcano.sh/group-name"),
        ("annotations", "scheduling.x-k8s.io/pod-group"),
        ("annotations", "pod-group.scheduling.sigs.k8s.io"),
        ("annotations", "group.batch.scheduler.tencent.com"),
    ],
)
def test_keys_count_only_where_their_scheduler_puts_them(where: str, key: str) -> None:
    stray = {"kind": "Pod", "metadata": {"name": "p", where: {key: "g"}}}
    assert group_of(stray, namespace="default", where=WHERE) is None


def test_pod_without_keys_is_alone() -> None:
    assert task_from_pod(pod("p")).group is None


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (
            {"pod-group.scheduling.sigs.k8s.io/name": "g"},
            f"{WHERE}: label pod-group.scheduling.sigs.k8s.io/name needs {LIGHTWEIGHT_MIN} "
            "beside it",
        ),
        (
            {"pod-group.scheduling.sigs.k8s.io/name": "g", LIGHTWEIGHT_MIN: "0"},
            f"{WHERE}: label {LIGHTWEIGHT_MIN}='0' must be a whole number >= 1",
        ),
        (
            {"pod-group.scheduling.sigs.k8s.io/name": "g", LIGHTWEIGHT_MIN: "two"},
            f"{WHERE}: label {LIGHTWEIGHT_MIN}='two' must be a whole number >= 1",
        ),
    ],
)
def test_label_only_group_needs_a_valid_min_available(labels: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidObject) as error:
        task_from_pod(pod("p", labels=labels))
    assert str(error.value) == message


def test_constraints_and_ports_are_parsed() -> None:
    task = task_from_pod(
        pod(
            "p",
            spec={
                "nodeSelector": {"zone": "a", "disk": "ssd"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "gpu", "operator": "In", "values": ["a100"]}
                                    ],
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "NotIn",
                                            "values": ["n1"],
                                        }
                                    ],
                                }
                            ]
                        }
                    }
                },
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "containers": [
                    {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                    {"name": "b", "ports": [{"containerPort": 53, "protocol": "UDP"}]},
                ],
            },
        )
    )
    constraints = task.constraints
    assert constraints.node_selector == (("disk", "ssd"), ("zone", "a"))
    assert constraints.affinity == (
        (
            Requirement("gpu", "In", ("a100",)),
            Requirement("metadata.name", "NotIn", ("n1",), field=True),
        ),
    )
    assert constraints.tolerations == (Toleration("dedicated", "Exists", "", ""),)
    assert task.host_ports == frozenset({("TCP", 8080)})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "k", "operator": "Is"}]}
                            ]
                        }
                    }
                }
            },
            "operator: 'Is' is not one of DoesNotExist, Exists, Gt, In, Lt, NotIn",
        ),
        (
            {"tolerations": [{"key": "k", "operator": "Equals"}]},
            "Pod default/p.spec.tolerations[0].operator: 'Equals' is not one of Equal, Exists",
        ),
        ({"nodeSelector": ["zone=a"]}, "Pod default/p.spec.nodeSelector: expected a map"),
    ],
)
def test_bad_constraints_are_named(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject, match=re.escape(message)):
        task_from_pod(pod("p", spec=spec))


def test_task_fields() -> None:
    task = task_from_pod(
        {
            "kind": "Pod",
            "metadata": {"name": "p", "uid": "u-1", "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "priority": 7, "containers": []},
            "status": {"phase": "Running"},
        },
        default_creation=3.0,
    )
    assert (task.key, task.uid, task.scheduler_name, task.node_name) == (
        "default/p",
        "u-1",
        "default-scheduler",
        "n1",
    )
    assert (task.priority, task.phase, task.deleting, task.creation) == (7, "Running", True, 3.0)


def test_pods_of_one_template_share_a_parsed_shape() -> None:
    shapes = ShapeMemo()
    spec = {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    first, second = (
        task_from_pod(pod(name, requests={"cpu": "1"}, spec=spec), shapes=shapes)
        for name in ("a", "b")
    )
    other = task_from_pod(pod("c", requests={"cpu": "2"}, spec=spec), shapes=shapes)
    assert first.request is second.request
    assert first.constraints is second.constraints
    assert first.shape_key is second.shape_key
    assert other.request == {"cpu": 2000, "pods": 1}
    assert other.shape_key != first.shape_key
    assert first == task_from_pod(pod("a", requests={"cpu": "1"}, spec=spec))


def test_a_remembered_shape_still_names_each_bad_pod() -> None:
    shapes = ShapeMemo()
    for name in ("a", "b"):
        with pytest.raises(InvalidObject, match=f"Pod default/{name}.spec.containers"):
            task_from_pod(pod(name, requests={"cpu": "lots"}), shapes=shapes)


def test_shape_memo_starts_over_past_its_limit() -> None:
    shapes = ShapeMemo(limit=2)
    kept = task_from_pod(pod("a", requests={"cpu": "1"}), shapes=shapes)
    task_from_pod(pod("b", requests={"cpu": "2"}), shapes=shapes)
    task_from_pod(pod("c", requests={"cpu": "3"}), shapes=shapes)
    again = task_from_pod(pod("d", requests={"cpu": "1"}), shapes=shapes)
    assert again.request == kept.request
    assert again.request is not kept.request


def test_shapes_holding_yaml_dates_are_remembered_too() -> None:
    shapes = ShapeMemo()
    spec = {"nodeSelector": {"since": datetime.date(2024, 1, 1)}}
    first, second = (task_from_pod(pod(name, spec=spec), shapes=shapes) for name in ("a", "b"))
    assert first.constraints.node_selector == (("since", "2024-01-01"),)
    assert first.constraints is second.constraints


def test_host_network_makes_every_container_port_a_host_port() -> None:
    ports = [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 80, "hostPort": 80}]
    spec = {"hostNetwork": True, "containers": [{"name": "dns", "ports": ports}]}
    assert task_from_pod(pod("p", spec=spec)).host_ports == frozenset({("UDP", 53), ("TCP", 80)})
    spec["hostNetwork"] = False
    assert task_from_pod(pod("p", spec=spec)).host_ports == frozenset({("TCP", 80)})


def test_preemption_policy_is_read_and_checked() -> None:
    assert task_from_pod(pod("p")).preemption_policy == ""
    never = task_from_pod(pod("p", spec={"preemptionPolicy": "Never"}))
    assert never.preemption_policy == "Never"
    with pytest.raises(InvalidObject) as error:
        task_from_pod(pod("p", spec={"preemptionPolicy": "Sometimes"}))
    assert str(error.value) == (
        "Pod default/p.spec.preemptionPolicy: 'Sometimes' is not one of Never, PreemptLowerPriority"
    )
    assert priority_class_from_object(priority_class("high", 10)).preemption_policy == (
        "PreemptLowerPriority"
    )


OUR_QUEUE = "scheduling.batchsched.io/queue-name"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"


@pytest.mark.parametrize(
    ("annotations", "queue"),
    [
        ({OUR_QUEUE: "a", VOLCANO_QUEUE: "b"}, QueueName("a", f"{WHERE}'s annotation {OUR_QUEUE}")),
        ({VOLCANO_QUEUE: "b"}, QueueName("b", f"{WHERE}'s annotation {VOLCANO_QUEUE}")),
        ({}, None),
    ],
    ids=["ours-wins", "volcano", "none"],
)
def test_a_pod_names_its_queue_by_annotation(
    annotations: dict[str, str], queue: QueueName | None
) -> None:
    assert task_from_pod(pod("p", annotations=annotations)).queue == queue


@pytest.mark.parametrize("value", ["", "  ", 3, None])
def test_a_queue_annotation_naming_no_queue_refuses_the_pod(value: object) -> None:
    obj = pod("p")
    obj["metadata"]["annotations"] = {VOLCANO_QUEUE: value}
    message = f"{WHERE}: annotation {VOLCANO_QUEUE}={value!r} must name a queue"
    with pytest.raises(InvalidObject, match=re.escape(message)):
        task_from_pod(obj)


def test_active_deadline_and_start_time() -> None:
    """How long a pod may run, and since when: for room held for starving gangs."""
    obj = pod("p", spec={"activeDeadlineSeconds": 600})
    obj["status"] = {"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}
    task = task_from_pod(obj)
    assert task.deadline_seconds == 600
    assert task.started == datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC).timestamp()
    assert task.shape_key != task_from_pod(pod("p")).shape_key


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "spec",
            {"activeDeadlineSeconds": 0},
            "spec.activeDeadlineSeconds: 0 is below the minimum of 1",
        ),
        ("status", {"startTime": "soon"}, "status.startTime 'soon' is not a timestamp"),
    ],
)
def test_bad_deadline_or_start_time_names_the_field(
    field: str, value: dict[str, Any], message: str
) -> None:
    obj = pod("p")
    obj[field] = value
    with pytest.raises(InvalidObject) as error:
        task_from_pod(obj)
    assert str(error.value) == f"{WHERE}.{message}"


@pytest.mark.parametrize(
    ("labels", "annotations", "role"),
    [
        ({}, {}, ""),
        ({"volcano.sh/task-spec": "worker"}, {}, "worker"),
        ({}, {"volcano.sh/task-spec": "ps"}, "ps"),
        # Volcano's scheduler reads the annotation first.
        ({"volcano.sh/task-spec": "worker"}, {"volcano.sh/task-spec": "ps"}, "ps"),
        ({"volcano.sh/task-spec": "worker"}, {"volcano.sh/task-spec": ""}, "worker"),
    ],
)
def test_task_role(labels: dict[str, str], annotations: dict[str, str], role: str) -> None:
    assert task_from_pod(pod("p", labels=labels, annotations=annotations)).role == role
