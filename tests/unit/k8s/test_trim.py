"""A trimmed object parses exactly like the whole one, and changes the core ignores
leave the trimmed form unchanged."""

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from batchsched.api.budgets import budget_from_object
from batchsched.api.groups import pod_group_from_object
from batchsched.api.namespaces import namespace_from_object
from batchsched.api.nodes import node_from_object
from batchsched.api.pods import task_from_pod
from batchsched.api.queues import priority_class_from_object, queue_from_object
from batchsched.api.volumes import (
    claim_from_object,
    csi_driver_from_object,
    csi_node_from_object,
    storage_capacity_from_object,
    storage_class_from_object,
    volume_from_object,
)
from batchsched.k8s.trim import (
    trim_budget,
    trim_claim,
    trim_csi_driver,
    trim_csi_node,
    trim_namespace,
    trim_node,
    trim_pod,
    trim_pod_group,
    trim_priority_class,
    trim_queue,
    trim_storage_capacity,
    trim_storage_class,
    trim_volume,
    without_managed_fields,
)

from tests.support.objects import Obj, node, pod, pod_group, priority_class, queue, stamp

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
            "scheduling.batchsched.io/queue-name": "research",
            "scheduling.volcano.sh/queue-name": "volcano-research",
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


def _with_spec(**fields: Any) -> Obj:
    changed = copy.deepcopy(FULL_POD)
    changed["spec"].update(fields)
    return changed


@pytest.mark.parametrize(
    "whole",
    [
        FULL_POD,
        _with_spec(hostNetwork=True),
        _with_spec(resources={"requests": {"cpu": "3"}}),
        _with_spec(schedulingGates=[{"name": "quota"}]),
        _with_spec(
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ]
        ),
        _with_spec(
            volumes=[
                {"name": "data", "emptyDir": {}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "d", "readOnly": True}},
                {
                    "name": "scratch",
                    "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["RWO"]}}},
                },
                {"name": "disk", "gcePersistentDisk": {"pdName": "x"}},
            ]
        ),
        _with_spec(
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "train"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
        ),
    ],
    ids=["full", "host-network", "pod-resources", "gated", "spread", "volumes", "anti-affinity"],
)
def test_a_trimmed_pod_parses_like_the_whole_pod(whole: Obj) -> None:
    assert task_from_pod(trim_pod(whole)) == task_from_pod(whole)


def test_a_bound_deleting_pod_keeps_its_node_phase_and_deletion() -> None:
    bound = pod("p", requests={"cpu": "1"}, node_name="n1", phase="Running", namespace="default")
    bound["metadata"]["deletionTimestamp"] = stamp(9)
    assert task_from_pod(trim_pod(bound)) == task_from_pod(bound)


def test_a_pending_pod_keeps_the_node_its_preemption_holds() -> None:
    nominated = copy.deepcopy(FULL_POD)
    nominated["status"]["nominatedNodeName"] = "n7"
    trimmed = trim_pod(nominated)
    assert trimmed["status"]["nominatedNodeName"] == "n7"
    assert task_from_pod(trimmed) == task_from_pod(nominated)
    assert task_from_pod(trimmed).nominated_node == "n7"
    assert "nominatedNodeName" not in trim_pod(FULL_POD)["status"]


def test_a_running_pod_keeps_how_long_it_may_run_and_since_when() -> None:
    running = copy.deepcopy(FULL_POD)
    running["spec"]["activeDeadlineSeconds"] = 3600
    running["status"]["startTime"] = "2024-01-01T00:00:00Z"
    task = task_from_pod(trim_pod(running))
    assert task == task_from_pod(running)
    assert (task.deadline_seconds, task.started) == (3600, 1704067200.0)


def test_a_pod_keeps_its_preemptable_annotation() -> None:
    protected = copy.deepcopy(FULL_POD)
    protected["metadata"].setdefault("annotations", {})["volcano.sh/preemptable"] = "false"
    assert task_from_pod(trim_pod(protected)).preemptable is False


def test_a_pod_keeps_its_task_role_annotation() -> None:
    member = copy.deepcopy(FULL_POD)
    member["metadata"].setdefault("annotations", {})["volcano.sh/task-spec"] = "master"
    assert task_from_pod(trim_pod(member)).role == "master"


FULL_BUDGET: Obj = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {
        "name": "trainers",
        "namespace": "team",
        "uid": "b-1",
        "resourceVersion": "41",
        "generation": 2,
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "train"}}},
    "status": {
        "disruptionsAllowed": 1,
        "currentHealthy": 4,
        "desiredHealthy": 3,
        "expectedPods": 4,
        "observedGeneration": 2,
        "conditions": [{"type": "DisruptionAllowed", "status": "True"}],
    },
}


def test_a_trimmed_budget_parses_like_the_whole_budget() -> None:
    assert budget_from_object(trim_budget(FULL_BUDGET)) == budget_from_object(FULL_BUDGET)
    unprocessed = {**FULL_BUDGET, "status": {}}
    assert budget_from_object(trim_budget(unprocessed)) == budget_from_object(unprocessed)


def test_a_budget_changes_its_trimmed_form_only_with_its_selector_or_allowance() -> None:
    healthier = copy.deepcopy(FULL_BUDGET)
    healthier["metadata"]["resourceVersion"] = "42"
    healthier["status"]["currentHealthy"] = 5
    assert trim_budget(healthier) == trim_budget(FULL_BUDGET)
    healthier["status"]["disruptionsAllowed"] = 2
    assert trim_budget(healthier) != trim_budget(FULL_BUDGET)


def test_status_and_bookkeeping_changes_do_not_change_the_trimmed_pod() -> None:
    changed = copy.deepcopy(FULL_POD)
    changed["metadata"]["resourceVersion"] = "99"
    changed["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
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
    group = pod_group(
        "g", 3, created=1, queue="research", minResources={"cpu": "4"}, namespace="default"
    )
    group["status"] = {"phase": "Inqueue", "scheduled": 1}
    assert pod_group_from_object(trim_pod_group(group)) == pod_group_from_object(group)
    q = queue("research", weight=2, capability={"cpu": "10"})
    assert queue_from_object(trim_queue(q)) == queue_from_object(q)
    pc = priority_class("high", 1000, global_default=True)
    assert priority_class_from_object(trim_priority_class(pc)) == priority_class_from_object(pc)


MANAGED = [
    {
        "manager": "kubectl",
        "operation": "Update",
        "time": stamp(5),
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}}}}},
    },
    {"manager": "kube-scheduler", "subresource": "status", "fieldsV1": {"f:status": {}}},
]


def as_sent(value: Any) -> bytes:
    """JSON as the API server writes it: compact, keys in the Go types' order."""
    return json.dumps(value, separators=(",", ":")).encode()


def without(obj: Obj) -> Obj:
    cut = copy.deepcopy(obj)
    del cut["metadata"]["managedFields"]
    return cut


def a_pod(name: str) -> Obj:
    full = copy.deepcopy(FULL_POD)
    full["metadata"]["name"] = name
    full["metadata"]["managedFields"] = MANAGED
    return full


def test_managed_fields_are_cut_from_a_page_and_from_an_event() -> None:
    pods = [a_pod("a"), a_pod("b")]
    page = as_sent({"kind": "PodList", "metadata": {}, "items": pods})
    cut = without_managed_fields(page)
    assert len(cut) < len(page) - 2 * len(as_sent(MANAGED))
    assert json.loads(cut)["items"] == [without(p) for p in pods]
    event = as_sent({"type": "MODIFIED", "object": pods[0]})
    assert json.loads(without_managed_fields(event))["object"] == without(pods[0])
    empty = a_pod("c")
    empty["metadata"]["managedFields"] = []
    assert json.loads(without_managed_fields(as_sent(empty))) == without(empty)


def test_managed_fields_stay_where_the_cut_could_be_wrong() -> None:
    # A `]` inside a field name: the first `]` is not the end of the list.
    bracket = a_pod("bracket")
    bracket["metadata"]["managedFields"] = [{"fieldsV1": {"f:data": {"k:[0]": {}}}}]
    # Keys in sorted order, as custom resources come: the list is not last in metadata.
    custom = {"metadata": {"managedFields": MANAGED, "name": "g"}, "spec": {"minMember": 2}}
    # Metadata followed by something else than a spec.
    priority_class = {"metadata": {"name": "high", "managedFields": MANAGED}, "value": 10}
    # The key's text inside a string.
    text = a_pod("text")
    text["metadata"]["annotations"]["note"] = ',"managedFields":[]},"spec":{'
    for obj in (bracket, custom, priority_class):
        assert without_managed_fields(as_sent(obj)) == as_sent(obj)
    assert json.loads(without_managed_fields(as_sent(text))) == without(text)
    # Next to objects that cannot be cut, the ones that can still are, and nothing else.
    mixed = [priority_class, a_pod("after"), bracket, custom, a_pod("last")]
    items = json.loads(without_managed_fields(as_sent({"items": mixed})))["items"]
    assert items == [priority_class, without(mixed[1]), bracket, custom, without(mixed[4])]


def test_data_without_managed_fields_is_returned_as_it_is() -> None:
    data = as_sent(without(a_pod("a")))
    assert without_managed_fields(data) is data


def test_a_trimmed_namespace_parses_like_the_whole_namespace() -> None:
    full = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team",
            "uid": "9",
            "labels": {
                "kubernetes.io/metadata.name": "team",
                "tier": "gold",
                "scheduling.batchsched.io/queue-name": "from-label",
            },
            "annotations": {
                "scheduling.batchsched.io/queue-name": "team-a",
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            },
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    trimmed = trim_namespace(full)
    assert namespace_from_object(trimmed) == namespace_from_object(full)
    assert (
        "kubectl.kubernetes.io/last-applied-configuration" not in trimmed["metadata"]["annotations"]
    )


FULL_CLAIM: Obj = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {
        "name": "worker-0-scratch",
        "namespace": "team",
        "uid": "c1",
        "resourceVersion": "41",
        "creationTimestamp": stamp(5),
        "deletionTimestamp": stamp(9),
        "labels": {"app": "train"},
        "annotations": {
            "volume.kubernetes.io/selected-node": "n1",
            "pv.kubernetes.io/bind-completed": "yes",
            "volume.beta.kubernetes.io/storage-class": "fast",
            "volume.kubernetes.io/storage-provisioner": "example.com/csi",
        },
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "p9"},
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "worker-0",
                "uid": "p1",
                "controller": True,
            },
        ],
        "finalizers": ["kubernetes.io/pvc-protection"],
        "managedFields": [{"manager": "kube-controller-manager"}],
    },
    "spec": {
        "storageClassName": "slow",
        "volumeName": "pv-1",
        "accessModes": ["ReadWriteOnce", "ReadWriteOncePod"],
        "volumeMode": "Block",
        "volumeAttributesClassName": "gold",
        "resources": {"requests": {"storage": "10Gi"}, "limits": {"storage": "20Gi"}},
        "selector": {"matchLabels": {"tier": "ssd"}},
        "dataSource": {"kind": "VolumeSnapshot", "name": "snap"},
    },
    "status": {
        "phase": "Lost",
        "capacity": {"storage": "10Gi"},
        "conditions": [{"type": "Resizing", "status": "True"}],
    },
}

FULL_VOLUME: Obj = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {
        "name": "pv-1",
        "uid": "v1",
        "resourceVersion": "42",
        "deletionTimestamp": stamp(9),
        "labels": {"topology.kubernetes.io/zone": "a", "tier": "ssd"},
        "annotations": {
            "volume.beta.kubernetes.io/storage-class": "fast",
            "pv.kubernetes.io/provisioned-by": "example.com/csi",
        },
        "managedFields": [{"manager": "csi-provisioner"}],
    },
    "spec": {
        "storageClassName": "slow",
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "volumeAttributesClassName": "gold",
        "persistentVolumeReclaimPolicy": "Delete",
        "claimRef": {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": "team",
            "name": "worker-0-scratch",
            "uid": "c1",
            "resourceVersion": "40",
        },
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        },
        "csi": {
            "driver": "example.com/csi",
            "volumeHandle": "vol-1",
            "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "x"},
        },
    },
    "status": {"phase": "Available", "lastPhaseTransitionTime": stamp(6)},
}

STORAGE_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "fast", "annotations": {"a": "b"}},
    "provisioner": "example.com/csi",
    "volumeBindingMode": "WaitForFirstConsumer",
    "reclaimPolicy": "Delete",
    "parameters": {"type": "ssd"},
    "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
}

CSI_NODE: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSINode",
    "metadata": {"name": "n1", "ownerReferences": [{"kind": "Node", "uid": "n"}]},
    "spec": {
        "drivers": [
            {
                "name": "example.com/csi",
                "nodeID": "n1",
                "topologyKeys": ["zone"],
                "allocatable": {"count": 16},
            },
            {"name": "other.com/csi", "nodeID": "n1"},
        ]
    },
}

CSI_DRIVER: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": "csi.example.com"},
    "spec": {"attachRequired": True, "storageCapacity": True, "podInfoOnMount": False},
}

STORAGE_CAPACITY: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIStorageCapacity",
    "metadata": {"name": "csisc-1", "namespace": "kube-system", "resourceVersion": "3"},
    "storageClassName": "fast",
    "nodeTopology": {"matchLabels": {"zone": "a"}},
    "capacity": "100Gi",
}

PLAIN_CLAIM: Obj = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data", "namespace": "team", "uid": "c2"},
    "spec": {"accessModes": ["ReadWriteOnce"]},
}


@pytest.mark.parametrize(
    ("whole", "trim", "parse"),
    [
        (FULL_CLAIM, trim_claim, claim_from_object),
        (PLAIN_CLAIM, trim_claim, claim_from_object),
        (FULL_VOLUME, trim_volume, volume_from_object),
        (STORAGE_CLASS, trim_storage_class, storage_class_from_object),
        (CSI_NODE, trim_csi_node, csi_node_from_object),
        (CSI_DRIVER, trim_csi_driver, csi_driver_from_object),
        (STORAGE_CAPACITY, trim_storage_capacity, storage_capacity_from_object),
        (
            {**STORAGE_CAPACITY, "maximumVolumeSize": "10Gi"},
            trim_storage_capacity,
            storage_capacity_from_object,
        ),
    ],
    ids=[
        "claim",
        "plain-claim",
        "volume",
        "storage-class",
        "csi-node",
        "csi-driver",
        "capacity",
        "largest-volume",
    ],
)
def test_trimmed_storage_objects_parse_like_the_whole_ones(
    whole: Obj, trim: Callable[[Obj], Obj], parse: Callable[[Obj], object]
) -> None:
    assert parse(trim(whole)) == parse(whole)


def test_status_and_bookkeeping_changes_do_not_change_a_trimmed_claim_or_volume() -> None:
    claim = copy.deepcopy(FULL_CLAIM)
    claim["metadata"]["resourceVersion"] = "99"
    claim["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    claim["status"]["capacity"] = {"storage": "20Gi"}
    claim["status"]["conditions"] = []
    assert trim_claim(claim) == trim_claim(FULL_CLAIM)
    volume = copy.deepcopy(FULL_VOLUME)
    volume["metadata"]["resourceVersion"] = "99"
    volume["spec"]["claimRef"]["resourceVersion"] = "77"
    volume["status"]["lastPhaseTransitionTime"] = stamp(60)
    assert trim_volume(volume) == trim_volume(FULL_VOLUME)


def test_trimming_only_removes() -> None:
    """What is kept stays as it was: absent where absent, null where null, and a
    malformed value as it came, so that the parser refuses it with the same message."""
    malformed = {"metadata": {"name": "p", "labels": None}, "spec": ["not", "a", "map"]}
    assert trim_pod(malformed) == {**malformed, "kind": "Pod"}
    containers = {"metadata": {"name": "p"}, "spec": {"containers": "main"}}
    assert trim_pod(containers)["spec"] == {"containers": "main"}
    bare = {"metadata": {"name": "n"}}
    assert trim_node(bare) == {"metadata": {"name": "n"}, "kind": "Node"}


def test_a_group_s_sla_waiting_time_survives_trimming() -> None:
    """The operator reads the sla plugin's waiting time as the simulator does."""
    group = pod_group("g", 1, api_version="scheduling.volcano.sh/v1beta1", namespace="default")
    group["metadata"]["annotations"] = {"volcano.sh/sla-waiting-time": "5m", "other": "x"}
    trimmed = pod_group_from_object(trim_pod_group(group))
    assert trimmed == pod_group_from_object(group)
    assert trimmed.waiting_seconds == 300.0
