"""What a watch event costs: a bind the cache already assumed is confirmed without a
session being woken; any other change is applied."""

import copy
from typing import Any

import pytest
from prometheus_client import REGISTRY

from batchsched.api.gpu import GPU_INDEX_ANNOTATION
from batchsched.api.groups import OUR_API
from batchsched.api.placement import PLACEMENT_ANNOTATION, format_placement
from batchsched.k8s.watch import (
    CLAIMS,
    PODS,
    RESOURCE_CLAIMS,
    WATCHED,
    Watch,
    Watched,
    version_key,
)

from .recording_api import RecordingApi, watch_over
from tests.support.objects import exactly, pod, pod_group, queue, resource_claim


def watching(manifest: dict[str, object]) -> Watch:
    watch = watch_over(RecordingApi())
    watch.apply(PODS, manifest)
    watch.cache.assume("default/p", "n1")
    watch.changes.take()
    return watch


def test_the_assumed_node_showing_up_confirms_the_bind_quietly() -> None:
    watch = watching(pod("p", requests={"cpu": "1"}, namespace="default"))
    watch.apply(PODS, pod("p", requests={"cpu": "1"}, node_name="n1", namespace="default"))
    assert "default/p" not in watch.cache.assumed
    assert watch.cache.tasks["default/p"].node_name == "n1"
    assert not watch.changes.take()


def test_a_bind_that_comes_with_another_change_is_applied() -> None:
    watch = watching(pod("p", requests={"cpu": "1"}, namespace="default"))
    # Resized in place as it was bound.
    watch.apply(PODS, pod("p", requests={"cpu": "2"}, node_name="n1", namespace="default"))
    assert watch.cache.tasks["default/p"].request["cpu"] == 2000
    assert watch.changes.take()


def test_another_node_than_the_assumed_one_is_applied() -> None:
    watch = watching(pod("p", requests={"cpu": "1"}, namespace="default"))
    watch.apply(PODS, pod("p", requests={"cpu": "1"}, node_name="n2", namespace="default"))
    assert watch.cache.tasks["default/p"].node_name == "n2"
    assert watch.changes.take()


def test_deleting_another_apis_group_of_the_same_name_keeps_ours() -> None:
    watch = watch_over(RecordingApi())
    ours, volcano = (
        next(w for w in WATCHED if w.kind == "PodGroup" and w.api_version == version)
        for version in (OUR_API, "scheduling.volcano.sh/v1beta1")
    )
    watch.apply(ours, pod_group("g", 3, namespace="default"))
    watch.apply(volcano, pod_group("g", 5, api_version=volcano.api_version, namespace="default"))
    watch.delete(volcano, "default/g")
    assert watch.cache.pod_groups["default/g"].min_member == 3


def test_a_bind_that_writes_the_gangs_record_and_cards_confirms_quietly() -> None:
    """The binder's own annotations come with the node; the record is kept in the cache."""
    watch = watching(pod("p", requests={"cpu": "1"}, namespace="default"))
    record = format_placement(1.0, [("p", "", "n1"), ("q", "", "n2")])
    assert record is not None
    notes = {PLACEMENT_ANNOTATION: record, GPU_INDEX_ANNOTATION: "0"}
    watch.apply(
        PODS,
        pod("p", requests={"cpu": "1"}, node_name="n1", annotations=notes, namespace="default"),
    )
    assert not watch.changes.take()
    placement = watch.cache.tasks["default/p"].placement
    assert placement is not None
    assert placement.node_for("q", "") == "n2"
    # Annotations written later by anyone else are a change like any other.
    notes = {**notes, PLACEMENT_ANNOTATION: "{}"}
    watch.apply(
        PODS,
        pod("p", requests={"cpu": "1"}, node_name="n1", annotations=notes, namespace="default"),
    )
    assert watch.changes.take()


def test_a_claims_status_churn_wakes_no_session_but_its_version_is_kept() -> None:
    """The binder judges its writes by the version the cache shows; sessions only care
    about what the core reads."""
    watch = watch_over(RecordingApi())
    claim: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": "default", "uid": "u", "resourceVersion": "7"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "v"},
        "status": {"phase": "Bound"},
    }
    watch.apply(CLAIMS, claim)
    assert watch.cache.claims["default/c"].volume_name == "v"
    assert watch.changes.take()
    resized = copy.deepcopy(claim)
    resized["metadata"]["resourceVersion"] = "8"
    resized["status"]["capacity"] = {"storage": "2Gi"}
    watch.apply(CLAIMS, resized)
    assert not watch.changes.take()
    assert watch.versions[version_key(CLAIMS, "default/c")] == 8
    watch.delete(CLAIMS, "default/c")
    assert "default/c" not in watch.cache.claims
    assert watch.versions == {}


def test_an_unusable_storage_class_is_reported_for_an_event() -> None:
    watch = watch_over(RecordingApi())
    storage_classes = next(w for w in WATCHED if w.kind == "StorageClass")
    bad = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast"},
        "provisioner": "example.com/csi",
        "volumeBindingMode": "Later",
    }
    watch.apply(storage_classes, bad)
    [(ref, message)] = watch.invalid.values()
    assert ref == {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "name": "fast"}
    assert "volumeBindingMode" in message


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("Node", {"status": {"allocatable": {"cpu": "lots"}}}),
        ("Queue", {"apiVersion": OUR_API, "spec": {"state": "Shut"}}),
        ("PriorityClass", {"value": "high"}),
        ("StorageClass", {"volumeBindingMode": "Later"}),
        ("PersistentVolume", {"spec": {"capacity": {"storage": "big"}}}),
        ("PersistentVolumeClaim", {"spec": {"resources": {"requests": {"storage": "big"}}}}),
        ("PodDisruptionBudget", {"status": {"disruptionsAllowed": "some"}}),
        ("Workload", {"spec": {"controllerRef": "Job train"}}),
    ],
)
def test_an_unusable_object_of_any_kind_is_reported_with_its_uid(
    kind: str, bad: dict[str, Any]
) -> None:
    """The event the leader posts about it names it by uid, as kubectl matches events."""
    watch = watch_over(RecordingApi())
    watched = next(w for w in WATCHED if w.kind == kind)
    meta = {"name": "x", "uid": "uid-x", "namespace": "team"}
    watch.apply(watched, {"kind": kind, "metadata": meta, **bad})
    [(ref, _)] = watch.invalid.values()
    assert ref["uid"] == "uid-x"


VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(name: str, *, weight: int = 1) -> dict[str, Any]:
    """Volcano's form: the state is status.state, which its CRD keeps apart from the spec."""
    return {
        "apiVersion": VOLCANO,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


def queues_of(api_version: str) -> Watched:
    return next(w for w in WATCHED if w.kind == "Queue" and w.api_version == api_version)


def test_volcano_queues_are_watched_and_ours_win_a_name_in_both() -> None:
    watch = watch_over(RecordingApi())
    watch.apply(queues_of(VOLCANO), volcano_queue("research", weight=3))
    assert watch.cache.queues["research"].weight == 3
    assert watch.cache.queue_apis["research"] == VOLCANO
    watch.apply(queues_of(OUR_API), queue("research", weight=5))
    assert watch.cache.queues["research"].weight == 5
    assert watch.cache.queue_apis["research"] == OUR_API
    # Deleting ours hands the name back to Volcano's; deleting that too ends the queue.
    watch.delete(queues_of(OUR_API), "research")
    assert watch.cache.queues["research"].weight == 3
    watch.delete(queues_of(VOLCANO), "research")
    assert "research" not in watch.cache.queues
    assert "research" not in watch.cache.queue_apis


def test_an_invalid_queue_of_ours_is_not_replaced_by_volcanos() -> None:
    """A typo in ours must not hand its jobs to the other Queue's limits."""
    watch = watch_over(RecordingApi())
    watch.apply(queues_of(VOLCANO), volcano_queue("research"))
    watch.apply(queues_of(OUR_API), queue("research", state="Shut"))
    assert "research" not in watch.cache.queues
    assert "Shut" in watch.cache.rejected_queues["research"]
    watch.apply(queues_of(OUR_API), queue("research"))
    assert "research" in watch.cache.queues
    assert "research" not in watch.cache.rejected_queues


def test_each_api_s_status_is_observed_apart() -> None:
    """What a Queue of one name shows in either API is what the writer compares with."""
    watch = watch_over(RecordingApi())
    ours = {**queue("q"), "status": {"running": 1}}
    theirs = {**volcano_queue("q"), "status": {"state": "Open", "running": 2}}
    watch.apply(queues_of(OUR_API), ours)
    watch.apply(queues_of(VOLCANO), theirs)
    assert watch.status._shown("Queue", "q") == {"running": 1}
    assert watch.status._shown(f"Queue {VOLCANO}", "q") == {"state": "Open", "running": 2}


WATCHED_GROUPS = next(w for w in WATCHED if w.kind == "PodGroup")


def sli_count(name: str) -> float:
    return (
        REGISTRY.get_sample_value(f"batchsched_{name}_scheduling_sli_duration_seconds_count") or 0.0
    )


def synced_watch() -> Watch:
    watch = watch_over(RecordingApi())
    for watched in WATCHED:
        watch.listed(watched)
    return watch


def test_a_pod_is_timed_from_when_it_was_seen_to_when_it_was_seen_bound() -> None:
    watch = synced_watch()
    pods = sli_count("pod")
    watch.apply(PODS, pod("p", namespace="default"))
    watch.cache.assume("default/p", "n1")
    watch.apply(PODS, pod("p", node_name="n1", namespace="default"))
    assert sli_count("pod") == pods + 1
    watch.apply(PODS, pod("p", node_name="n1", phase="Running", namespace="default"))
    assert sli_count("pod") == pods + 1, "once"


def test_neither_a_gated_pod_nor_another_schedulers_is_timed() -> None:
    watch = synced_watch()
    pods = sli_count("pod")
    watch.apply(PODS, pod("p", spec={"schedulingGates": [{"name": "wait"}]}, namespace="default"))
    watch.apply(PODS, pod("theirs", scheduler="default-scheduler", namespace="default"))
    watch.apply(PODS, pod("p", node_name="n1", namespace="default"))
    watch.apply(
        PODS, pod("theirs", scheduler="default-scheduler", node_name="n1", namespace="default")
    )
    assert sli_count("pod") == pods


def test_a_gang_is_timed_once_its_last_waiting_member_is_bound() -> None:
    watch = synced_watch()
    gangs = sli_count("podgroup")
    watch.apply(WATCHED_GROUPS, pod_group("g", 2, namespace="default"))
    for i in range(3):
        watch.apply(PODS, pod(f"g-{i}", group="g", namespace="default"))
    watch.delete(PODS, "default/g-2")
    watch.apply(PODS, pod("g-0", group="g", node_name="n1", namespace="default"))
    assert sli_count("podgroup") == gangs
    watch.apply(PODS, pod("g-1", group="g", node_name="n1", namespace="default"))
    assert sli_count("podgroup") == gangs + 1


def _claim(version: int, *, allocated: bool = False) -> dict[str, Any]:
    claim = resource_claim("c", exactly("gpu", "gpu"), namespace="default")
    claim["metadata"] |= {"uid": "claim-uid", "resourceVersion": str(version)}
    if allocated:
        result = {"request": "gpu", "driver": "d", "pool": "n1", "device": "gpu-0"}
        claim["status"] = {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
        }
    return claim


def test_a_claims_events_from_before_our_write_do_not_free_its_devices_again() -> None:
    """The reply to our allocation is applied at once; an event the watch sends late,
    from before it, would show the claim unallocated, and is not applied."""
    watch = watch_over(RecordingApi())
    watch.apply(RESOURCE_CLAIMS, _claim(5))
    watch.written(RESOURCE_CLAIMS, _claim(7, allocated=True))
    watch.apply(RESOURCE_CLAIMS, _claim(6))
    assert watch.cache.resource_claims["default/c"].allocation is not None
    watch.apply(RESOURCE_CLAIMS, _claim(7, allocated=True))
    watch.apply(RESOURCE_CLAIMS, _claim(8))  # deallocated by the controller
    assert watch.cache.resource_claims["default/c"].allocation is None


def test_a_write_replying_after_the_claim_was_deleted_does_not_bring_it_back() -> None:
    watch = watch_over(RecordingApi())
    watch.apply(RESOURCE_CLAIMS, _claim(5))
    watch.delete(RESOURCE_CLAIMS, "default/c")
    watch.written(RESOURCE_CLAIMS, _claim(7, allocated=True))
    assert "default/c" not in watch.cache.resource_claims


def test_a_claim_deallocated_by_the_controller_wakes_the_loop() -> None:
    watch = watch_over(RecordingApi())
    watch.apply(RESOURCE_CLAIMS, _claim(5, allocated=True))
    watch.changes.take()
    watch.apply(RESOURCE_CLAIMS, _claim(6))
    assert watch.changes.urgent.is_set()
