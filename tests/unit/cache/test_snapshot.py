"""The cache and its snapshots: jobs, priorities, existing usage."""

import numpy as np
import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot

from tests.support.objects import (
    SCHEDULER,
    Obj,
    at,
    cache_of,
    node,
    pending_task,
    pod,
    pod_group,
    priority_class,
    snapshot_of,
)

CLASSES = [priority_class("high", 1000), priority_class("low", 10)]


@pytest.mark.parametrize(
    ("objects", "priority"),
    [
        ([pod("p", spec={"priorityClassName": "high"})], 1000),
        ([pod("p", spec={"priorityClassName": "low", "priority": 7})], 7),
        ([pod("p")], 0),
        ([priority_class("base", 50, global_default=True), pod("p")], 50),
        ([priority_class("base", 50), pod("p")], 0),
        ([priority_class("base", 50, global_default=True), pod("p", spec={"priority": 3})], 3),
    ],
)
def test_pod_priority(objects: list[Obj], priority: int) -> None:
    snapshot = snapshot_of([*CLASSES, *objects])
    job = snapshot.jobs["pod:default/p"]
    assert job.priority == priority
    assert pending_task(snapshot, "default/p").priority == priority


@pytest.mark.parametrize(
    ("group_class", "priority"),
    [({"priorityClassName": "high"}, 1000), ({}, 10)],
)
def test_group_priority_comes_from_the_podgroup(group_class: Obj, priority: int) -> None:
    """The PodGroup's class when it names one, else its pods' (as coscheduling users
    set it), never the global default over what the pods say."""
    snapshot = snapshot_of(
        [
            *CLASSES,
            priority_class("base", 50, global_default=True),
            pod_group("g", 1, **group_class),
            pod("p", group="g", spec={"priorityClassName": "low"}),
        ]
    )
    assert snapshot.jobs["default/g"].priority == priority


def test_missing_priority_class_is_the_pods_error() -> None:
    snapshot = snapshot_of([pod("p", spec={"priorityClassName": "ghost"})])
    assert pending_task(snapshot, "default/p").error == "PriorityClass 'ghost' does not exist"


@pytest.mark.parametrize(
    ("phase", "used_cpu"),
    [("Running", 3000), ("Pending", 3000), (None, 3000), ("Succeeded", 0), ("Failed", 0)],
)
def test_pods_of_any_scheduler_hold_their_node_until_terminal(
    phase: str | None, used_cpu: int
) -> None:
    snapshot = snapshot_of(
        [
            node("n1"),
            pod("other", requests={"cpu": "3"}, node_name="n1", phase=phase, scheduler="x"),
            pod("lost", requests={"cpu": "1"}, node_name="gone", phase="Running"),
        ]
    )
    assert snapshot.used[0, snapshot.column["cpu"]] == used_cpu
    assert snapshot.jobs.keys() == {"pod:default/lost"}


def test_jobs_of_every_kind() -> None:
    lightweight = {
        "pod-group.scheduling.sigs.k8s.io/name": "lw",
        "pod-group.scheduling.sigs.k8s.io/min-available": "2",
    }
    snapshot = snapshot_of(
        [
            node("n1"),
            pod_group("g", 2, queue="q"),
            pod("g-0", group="g", node_name="n1", phase="Running", requests={"cpu": "1"}),
            pod("g-1", group="g"),
            pod("g-2", group="g", phase="Succeeded", node_name="n1"),
            pod("lw-0", labels=lightweight),
            pod("lw-1", labels=lightweight),
            pod("orphan", group="nowhere"),
            pod("alone"),
            pod("foreign", scheduler="default-scheduler"),
            {**pod("leaving"), "metadata": {"name": "leaving", "deletionTimestamp": "x"}},
        ]
    )
    jobs = snapshot.jobs
    assert sorted(jobs) == [
        "default/g",
        "default/lw",
        "default/nowhere",
        "pod:default/alone",
        "pod:default/leaving",
    ]
    group = jobs["default/g"]
    assert (group.queue, group.min_member, group.bound, group.running, group.succeeded) == (
        "q",
        2,
        1,
        1,
        1,
    )
    assert [t.key for t in group.pending] == ["default/g-1"]
    assert group.allocated[snapshot.column["cpu"]] == 1000
    label_only = jobs["default/lw"]
    assert (label_only.min_member, label_only.label_only, label_only.group) == (2, True, None)
    assert label_only.is_gang and label_only.error is None
    assert jobs["default/nowhere"].error == "PodGroup default/nowhere does not exist"
    assert not jobs["pod:default/alone"].is_gang
    assert jobs["pod:default/leaving"].pending == []


def test_resources_are_columns_in_a_fixed_order() -> None:
    snapshot = snapshot_of(
        [
            node("b", extra={"nvidia.com/gpu": 4}),
            node("a", extra={"example.com/fpga": 1}),
            pod("p", requests={"hugepages-2Mi": "4Mi"}),
        ]
    )
    assert snapshot.resources == (
        "cpu",
        "memory",
        "pods",
        "ephemeral-storage",
        "example.com/fpga",
        "hugepages-2Mi",
        "nvidia.com/gpu",
    )
    assert [n.name for n in snapshot.nodes] == ["a", "b"]
    np.testing.assert_array_equal(snapshot.allocatable[:, 2], [110, 110])
    assert snapshot.allocatable[1, 6] == 4


def test_cache_updates_deletes_and_rejects() -> None:
    cache = cache_of([node("n1"), pod("p", requests={"cpu": "1"})])
    cache.apply(pod("p", requests={"cpu": "2"}))
    assert cache.tasks["default/p"].request["cpu"] == 2000
    with pytest.raises(InvalidObject, match="'-2' is negative"):
        cache.apply(pod("p", requests={"cpu": "-2"}))
    assert "default/p" not in cache.tasks
    assert cache.rejected_pods["default/p"][1].endswith("'-2' is negative")
    cache.apply(pod("p"), deleted=True)
    assert "default/p" not in cache.rejected_pods
    cache.apply(node("n1"), deleted=True)
    assert cache.nodes == {}


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(InvalidObject) as error:
        ClusterCache().apply({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}})
    assert str(error.value) == (
        "ConfigMap x/c: kind 'ConfigMap' is not one of "
        "Node, Pod, PodGroup, Queue, PriorityClass, Namespace, PodDisruptionBudget, Workload, "
        "HyperNode, PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, CSIDriver, "
        "CSIStorageCapacity, ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate, "
        "DeviceTaintRule"
    )


def test_namespaces_and_placed_pods_are_indexed_for_pod_affinity() -> None:
    namespace = {"kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "a"}}}
    snapshot = snapshot_of(
        [
            node("n1"),
            namespace,
            pod("bound", node_name="n1", labels={"app": "web"}),
            pod("done", node_name="n1", phase="Succeeded"),
            pod("waiting"),
        ]
    )
    assert snapshot.namespace_labels == {
        "shop": {"team": "a", "kubernetes.io/metadata.name": "shop"}
    }
    assert [(row, task.name, task.labels) for row, task in snapshot.placed] == [
        (0, "bound", {"app": "web"})
    ]


def test_assumed_binds_count_at_once_and_can_be_forgotten() -> None:
    cache = cache_of([node("n1"), pod("p", requests={"cpu": "1"})])
    cache.assume("default/p", "n1")
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert snapshot.used[0, snapshot.column["cpu"]] == 1000
    assert snapshot.jobs["pod:default/p"].pending == []
    cache.forget("default/p")
    cache.forget("default/unknown")
    assert cache.tasks["default/p"].node_name is None


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_label_only_group_is_as_old_as_its_oldest_pod(order: tuple[int, int, int]) -> None:
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "lw",
        "pod-group.scheduling.sigs.k8s.io/min-available": "3",
    }
    pods = [pod(f"lw-{i}", labels=labels, created=10 * (i + 1)) for i in range(3)]
    snapshot = snapshot_of([pods[i] for i in order])
    assert snapshot.jobs["default/lw"].creation == at(10)


def test_same_named_pod_groups_of_other_apis_do_not_replace_or_remove_ours() -> None:
    volcano = "scheduling.volcano.sh/v1beta1"
    cache = ClusterCache()
    cache.apply(pod_group("g", 3))
    cache.apply(pod_group("g", 5, api_version=volcano))
    assert cache.pod_groups["default/g"].min_member == 3, "ours wins, whatever the order"
    cache.apply(pod_group("g", 5, api_version=volcano), deleted=True)
    assert cache.pod_groups["default/g"].min_member == 3
    cache.apply(pod_group("g", 5, api_version=volcano))
    cache.apply(pod_group("g", 3), deleted=True)
    assert cache.pod_groups["default/g"].api_version == volcano, "theirs, once ours is gone"
    cache.apply(pod_group("g", 5, api_version=volcano), deleted=True)
    assert "default/g" not in cache.pod_groups


def test_a_pod_whose_bind_was_refused_waits_with_the_reason_until_its_backoff_ends() -> None:
    cache = cache_of([node("n1"), pod("p", requests={"cpu": "1"})])
    cache.refuse("default/p", "the API server refused to bind it: forbidden", now=100.0)
    during = take_snapshot(cache, now=100.5, scheduler_names={SCHEDULER})
    assert pending_task(during, "default/p").error == (
        "the API server refused to bind it: forbidden"
    )
    after = take_snapshot(cache, now=101.5, scheduler_names={SCHEDULER})
    assert pending_task(after, "default/p").error is None
    cache.refuse("default/p", "the API server refused to bind it: forbidden", now=101.5)
    assert pending_task(
        take_snapshot(cache, now=103.0, scheduler_names={SCHEDULER}), "default/p"
    ).error
    cache.apply(pod("p"), deleted=True)
    assert cache.refusals == {}


@pytest.mark.parametrize(
    ("api_version", "error"),
    [
        ("scheduling.volcano.sh/v1beta1", None),
        ("scheduling.incubator.k8s.io/v1alpha1", None),
        ("scheduling.batchsched.io/v1alpha1", "PriorityClass 'ghost' does not exist"),
    ],
)
def test_a_peer_group_naming_a_missing_class_has_the_default_priority(
    api_version: str, error: str | None
) -> None:
    """Volcano's and kube-batch's caches give such a group the default priority; our own
    PodGroup waits to have its class named right."""
    snapshot = snapshot_of(
        [
            priority_class("base", 50, global_default=True),
            pod_group("g", 1, api_version=api_version, priorityClassName="ghost"),
            pod("p", group="g"),
        ]
    )
    job = snapshot.jobs["default/g"]
    assert (job.priority, job.error) == (50, error)
