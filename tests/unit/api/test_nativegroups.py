"""Kubernetes' own PodGroups and Workloads (scheduling.k8s.io/v1alpha2) and the pods'
spec.schedulingGroup, read as kube-scheduler v1.36 reads them."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.groups import pod_group_from_object
from batchsched.api.nativegroups import NATIVE_API, workload_from_object
from batchsched.api.pods import OUR_GROUP_KEY, task_from_pod

from tests.support.objects import member, native_pod_group, pod

# The PodGroup the Job controller of kube-controller-manager v1.36.3 writes for an
# Indexed Job `train` of parallelism 4 (tests/integration/test_workload_api.py).
JOB_CONTROLLER_GROUP: dict[str, Any] = {
    "apiVersion": NATIVE_API,
    "kind": "PodGroup",
    "metadata": {
        "name": "train-x7k2p-train-pgt-0-q9z4m",
        "namespace": "ml",
        "uid": "5f3c",
        "finalizers": ["scheduling.k8s.io/podgroup-protection"],
    },
    "spec": {
        "podGroupTemplateRef": {
            "workload": {"workloadName": "train-x7k2p", "podGroupTemplateName": "train-pgt-0"}
        },
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "disruptionMode": "Pod",
    },
}


def test_the_job_controllers_podgroup_is_a_gang_of_its_min_count() -> None:
    group = pod_group_from_object(JOB_CONTROLLER_GROUP)
    assert group.error is None
    assert (group.key, group.api_version, group.min_member, group.basic) == (
        "ml/train-x7k2p-train-pgt-0-q9z4m",
        NATIVE_API,
        4,
        False,
    )
    assert group.template == "train-x7k2p/train-pgt-0"
    # No queue of its own: the namespace's or its pods' decide (cache/jobs.py).
    assert not group.queue_explicit


def test_a_basic_podgroup_is_a_group_of_no_minimum() -> None:
    group = pod_group_from_object(native_pod_group("solo", None))
    assert (group.error, group.basic, group.min_member) == (None, True, 0)


def test_priority_and_its_class_are_read() -> None:
    group = pod_group_from_object(native_pod_group("g", 2, priorityClassName="high", priority=1000))
    assert (group.priority_class_name, group.priority) == ("high", 1000)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"schedulingPolicy": {}},
            "PodGroup default/g.spec.schedulingPolicy: exactly one of basic, gang must be "
            "set, got none",
        ),
        (
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            "PodGroup default/g.spec.schedulingPolicy: exactly one of basic, gang must be "
            "set, got basic, gang",
        ),
        (
            {"schedulingPolicy": {"gang": {}}},
            "PodGroup default/g.spec.schedulingPolicy.gang.minCount is required",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 0}}},
            "PodGroup default/g.spec.schedulingPolicy.gang.minCount: 0 is below the minimum of 1",
        ),
        (
            {"schedulingPolicy": {"workload": {"minCount": 2}}},
            "PodGroup default/g.spec.schedulingPolicy.workload: {'minCount': 2} is not a "
            "policy batchsched knows (basic, gang)",
        ),
        (
            {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "rack"}]},
            },
            "PodGroup default/g.spec.schedulingConstraints: {'topology': [{'key': 'rack'}]} "
            "is not supported: batchsched keeps no topology domain for this PodGroup yet",
        ),
        (
            {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "resourceClaims": [{"name": "c", "resourceClaimName": "c"}],
            },
            "PodGroup default/g.spec.resourceClaims: [{'name': 'c', 'resourceClaimName': "
            "'c'}] is not supported: batchsched allocates no ResourceClaims for a PodGroup yet",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"},
            "PodGroup default/g.spec.disruptionMode: 'PodGroup' is not supported: preemption "
            "here may evict members of a group one by one",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "Node"},
            "PodGroup default/g.spec.disruptionMode: 'Node' is not one of Pod, PodGroup",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 2}}, "parentCompositePodGroupName": "c"},
            "PodGroup default/g.spec.parentCompositePodGroupName: 'c' is not known",
        ),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_key_and_value(
    spec: dict[str, Any], error: str
) -> None:
    obj = {"apiVersion": NATIVE_API, "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}
    group = pod_group_from_object(obj)
    assert group.error == error


def test_empty_constraints_as_the_api_server_writes_them_are_no_constraint() -> None:
    """The Job controller writes a Workload template's schedulingConstraints as null."""
    group = pod_group_from_object(native_pod_group("g", 2, schedulingConstraints=None))
    assert group.error is None


def test_a_pod_names_its_group_by_scheduling_group() -> None:
    task = task_from_pod(member("w-0", "workers", namespace="ml"))
    assert task.group is not None
    assert (task.group.key, task.group.native, task.blocked) == ("ml/workers", True, None)


@pytest.mark.parametrize(
    ("group", "error"),
    [
        (
            {"podGroupName": ""},
            "Pod default/p.spec.schedulingGroup.podGroupName: '' must name a PodGroup",
        ),
        (
            {"podGroupName": "g", "compositePodGroupName": "c"},
            "Pod default/p.spec.schedulingGroup.compositePodGroupName: 'c' is not known: a "
            "pod joins a group by podGroupName only",
        ),
    ],
)
def test_a_malformed_scheduling_group_is_refused(group: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidObject) as raised:
        task_from_pod(pod("p", spec={"schedulingGroup": group}))
    assert str(raised.value) == error


def test_a_pod_naming_its_group_twice_is_refused() -> None:
    """kube-scheduler reads only spec.schedulingGroup and each peer only its own key: a
    pod carrying both would be a member of two gangs."""
    both = member("p", "native", annotations={OUR_GROUP_KEY: "ours"})
    with pytest.raises(InvalidObject) as raised:
        task_from_pod(both)
    assert str(raised.value) == (
        "Pod default/p: names its group both by spec.schedulingGroup.podGroupName "
        "('native') and by a PodGroup key ('ours'); remove one"
    )


def test_a_workload_is_read_for_display() -> None:
    workload = workload_from_object(
        {
            "apiVersion": NATIVE_API,
            "kind": "Workload",
            "metadata": {"name": "train-x7k2p", "namespace": "ml"},
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                "podGroupTemplates": [
                    {
                        "name": "train-pgt-0",
                        "schedulingPolicy": {"gang": {"minCount": 4}},
                        "schedulingConstraints": None,
                    },
                    {"name": "driver", "schedulingPolicy": {"basic": {}}},
                ],
            },
        }
    )
    assert (workload.key, workload.controller) == ("ml/train-x7k2p", "Job train")
