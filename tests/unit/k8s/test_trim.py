"""A trimmed object parses exactly like the whole one, and changes the core ignores
leave the trimmed form unchanged."""

import copy

from batchsched.api.groups import pod_group_from_object
from batchsched.api.nodes import node_from_object
from batchsched.api.pods import task_from_pod
from batchsched.api.queues import priority_class_from_object, queue_from_object
from batchsched.k8s.trim import (
    trim_node,
    trim_pod,
    trim_pod_group,
    trim_priority_class,
    trim_queue,
)

from ..builders import Obj, node, pod, pod_group, priority_class, queue, stamp

FULL_POD: Obj = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "worker-0",
        "namespace": "team",
        "uid": "1234",
        "creationTimestamp": stamp(5),
        "labels": {
            "app": "train",
            "pod-group.scheduling.sigs.k8s.io/name": "job",
            "pod-group.scheduling.sigs.k8s.io/min-available": "2",
        },
        "annotations": {
            "scheduling.k8s.io/group-name": "job",
            "scheduling.batchsched.io/gpu-index": "1",
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        },
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "schedulerName": "batch-scheduler",
        "priorityClassName": "high",
        "priority": 100,
        "overhead": {"cpu": "100m"},
        "nodeSelector": {"gpu": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [],
            },
            "podAntiAffinity": {},
        },
        "initContainers": [
            {
                "name": "sidecar",
                "image": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "200m"}},
            },
            {"name": "init", "image": "setup", "resources": {"limits": {"memory": "2Gi"}}},
        ],
        "containers": [
            {
                "name": "main",
                "image": "trainer",
                "env": [{"name": "A", "value": "b"}],
                "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}],
                "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}},
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    },
}


def test_a_trimmed_pod_parses_like_the_whole_pod() -> None:
    assert task_from_pod(trim_pod(FULL_POD)) == task_from_pod(FULL_POD)


def test_a_bound_deleting_pod_keeps_its_node_phase_and_deletion() -> None:
    bound = pod("p", requests={"cpu": "1"}, node_name="n1", phase="Running")
    bound["metadata"]["deletionTimestamp"] = stamp(9)
    assert task_from_pod(trim_pod(bound)) == task_from_pod(bound)


def test_status_and_bookkeeping_changes_do_not_change_the_trimmed_pod() -> None:
    changed = copy.deepcopy(FULL_POD)
    changed["metadata"]["resourceVersion"] = "99"
    changed["metadata"]["labels"]["app"] = "other"
    changed["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    changed["spec"]["containers"][0]["image"] = "trainer:v2"
    assert trim_pod(changed) == trim_pod(FULL_POD)


def test_a_trimmed_node_parses_like_the_whole_node() -> None:
    full = node(
        "n1",
        extra={"nvidia.com/gpu": "8"},
        labels={"zone": "a"},
        taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
        ready=False,
    )
    full["status"]["conditions"].append({"type": "MemoryPressure", "status": "False"})
    full["status"]["images"] = [{"names": ["x"]}]
    assert node_from_object(trim_node(full)) == node_from_object(full)


def test_a_heartbeat_does_not_change_the_trimmed_node() -> None:
    full = node("n1", ready=True)
    later = copy.deepcopy(full)
    later["status"]["conditions"][0]["lastHeartbeatTime"] = stamp(60)
    assert trim_node(later) == trim_node(full)


def test_node_capacity_stands_in_for_missing_allocatable() -> None:
    full = {"kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}}
    assert node_from_object(trim_node(full)) == node_from_object(full)


def test_groups_queues_and_priority_classes_parse_like_the_whole_object() -> None:
    group = pod_group("g", 3, created=1, queue="research", minResources={"cpu": "4"})
    group["status"] = {"phase": "Inqueue", "scheduled": 1}
    assert pod_group_from_object(trim_pod_group(group)) == pod_group_from_object(group)
    q = queue("research", weight=2, capability={"cpu": "10"})
    assert queue_from_object(trim_queue(q)) == queue_from_object(q)
    pc = priority_class("high", 1000, global_default=True)
    assert priority_class_from_object(trim_priority_class(pc)) == priority_class_from_object(pc)
