"""What `batchsched run` reports on the real control plane is true: a gang waiting on its
volumes says so, the bind timeout survives a change of leader, events are aggregated
as kube-scheduler's recorder aggregates them, and `kubectl describe pg` finds them."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from batchsched.api.volumes import BINDING_SINCE_ANNOTATION, SELECTED_NODE_ANNOTATION
from batchsched.k8s.events import rfc3339

from .operator_support import (  # noqa: F401 (fixtures)
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    add_nodes,
    create,
    events,
    eventually,
    get_pod_group,
    placements,
    pods,
    scheduler_kubeconfig_fixture,
    start_proxy_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from .test_explain import plugin
from .test_volumes import PROVISIONER, bind_claim, claim, claims, storage_class, with_claim
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

GROUP_KEY = "scheduling.batchsched.io/group-name"
BIG = {"cpu": "4", "memory": "1Gi"}


def condition(pod: JSON, kind: str = "PodScheduled") -> JSON | None:
    found = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in found if c["type"] == kind), None)


def waiting_gang(kube: Kube, namespace: str, cluster_objects: ClusterObjects, node: str) -> None:
    """A gang of two on one node, each member with a claim its class provisions."""
    add_nodes(cluster_objects, kube, [node], {"cpu": "4", "memory": "8Gi"})
    storage_class(cluster_objects, f"wait-{namespace}")
    create(kube, namespace, pod_group("g", 2))
    for i in range(2):
        claim(kube, namespace, f"data-{i}", storage_class=f"wait-{namespace}")
        member = with_claim(f"g-{i}", f"data-{i}")
        member["metadata"]["annotations"] = {GROUP_KEY: "g"}
        create(kube, namespace, member)


def selected(kube: Kube, namespace: str) -> dict[str, JSON] | None:
    """The claims, once a node is selected on each."""
    found = claims(kube, namespace)
    notes = [c["metadata"].get("annotations") or {} for c in found.values()]
    return found if all(SELECTED_NODE_ANNOTATION in n for n in notes) else None


def test_a_gang_waiting_for_its_volumes_says_so_and_explain_names_what_each_claim_waits_on(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    control_plane: ControlPlane,
    start_scheduler: StartScheduler,
) -> None:
    node = f"n-{namespace}"
    waiting_gang(kube, namespace, cluster_objects, node)
    start_scheduler()
    eventually(lambda: selected(kube, namespace), what="a node selected on each claim")

    def group_waits() -> JSON | None:
        status = get_pod_group(kube, namespace, "g").get("status") or {}
        return status if status.get("phase") == "Inqueue" and status.get("conditions") else None

    status = eventually(group_waits, what="the group Inqueue with a condition")
    assert status["scheduled"] == 0
    [said] = status["conditions"]
    assert (said["type"], said["status"], said["reason"]) == (
        "Scheduled",
        "False",
        "WaitingForVolumeBinding",
    )
    for i in range(2):
        assert (
            f"claim {namespace}/data-{i} waits for provisioner {PROVISIONER} to provision "
            f"a volume on node {node}"
        ) in said["message"]

    def pods_wait() -> dict[str, JSON] | None:
        found = {name: condition(p) or {} for name, p in pods(kube, namespace).items()}
        return found if all(c.get("status") == "False" for c in found.values()) else None

    for name, told in eventually(pods_wait, what="PodScheduled=False on each member").items():
        assert told["reason"] == "WaitingForVolumeBinding"
        assert f"claim {namespace}/data-{name[-1]} waits for provisioner" in told["message"]
    assert not any(placements(kube, namespace).values())

    kubeconfig = str(control_plane.kubeconfig)
    done = plugin("explain", "pg/g", "-n", namespace, "--kubeconfig", kubeconfig)
    assert done.returncode == 0, done.stderr
    cause = done.stdout.splitlines()[1]
    assert cause.startswith("cause: waiting for volume binding: "), done.stdout
    assert f"claim {namespace}/data-0 waits for provisioner {PROVISIONER}" in cause
    assert f"on node {node}" in cause

    for bound in claims(kube, namespace).values():
        bind_claim(kube, cluster_objects, bound, node=node, storage_class=f"wait-{namespace}")

    def running() -> JSON | None:
        status = get_pod_group(kube, namespace, "g").get("status") or {}
        return status if status.get("phase") == "Running" else None

    assert eventually(running, what="the group Running")["scheduled"] == 2
    assert all(placements(kube, namespace).values())


def test_the_bind_timeout_runs_from_what_the_objects_say_across_a_change_of_leader(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """The first leader asks for the volumes and dies; by the claims' record it asked
    595 s ago, so the next leader times the wait out within seconds of the 600 s bind
    timeout (kube-scheduler's), rather than waiting 600 s afresh."""
    node = f"n-{namespace}"
    waiting_gang(kube, namespace, cluster_objects, node)
    first = start_scheduler()
    asked = eventually(lambda: selected(kube, namespace), what="a node selected on each claim")
    first.kill()
    for name in asked:
        path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
        earlier = {BINDING_SINCE_ANNOTATION: rfc3339(time.time() - 595, micro=True)}
        kube.patch(path, {"metadata": {"annotations": earlier}}).expect(200)
    restarted = rfc3339(time.time(), micro=True)
    start_scheduler()

    def timed_out() -> list[JSON]:
        return [e for e in events(kube, namespace, "FailedScheduling") if "deadline" in e["note"]]

    # Bounded far below the 600 s a wait timed afresh would take.
    found = eventually(timed_out, what="the bind timeout reported", timeout=120)
    assert all(
        e["note"].startswith('not bound: running PreBind plugin "VolumeBinding": binding volumes: ')
        for e in found
    )
    assert {e["regarding"]["name"] for e in found} <= {"g-0", "g-1"}

    def asked_again() -> bool:
        stamps = [
            (c["metadata"].get("annotations") or {}).get(BINDING_SINCE_ANNOTATION)
            for c in claims(kube, namespace).values()
        ]
        return all(s is not None and s >= restarted for s in stamps)

    # The next attempt is timed afresh, from a time written by the new leader.
    eventually(asked_again, what="the claims asked for again")


def test_adding_nodes_one_at_a_time_makes_one_event_per_waiting_pod(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Ten pods no node can hold; forty nodes added one by one, each seen by a session
    (the pods' message counts it): each pod's FailedScheduling events are one Event
    object whose series counts the repeats."""
    small = {"cpu": "1", "memory": "1Gi"}
    add_nodes(cluster_objects, kube, [f"n0-{namespace}"], small)
    names = [f"p{i}" for i in range(10)]
    for name in names:
        create(kube, namespace, pod(name, BIG))
    start_scheduler()

    def counted(total: int) -> bool:
        messages = [unschedulable_message(p) or "" for p in pods(kube, namespace).values()]
        return all(f"0/{total} nodes are available" in m for m in messages)

    for i in range(1, 41):
        add_nodes(cluster_objects, kube, [f"n{i}-{namespace}"], small)
        total = len(kube.get("/api/v1/nodes").expect(200)["items"])
        eventually(lambda: counted(total), what=f"the pods told of {total} nodes")  # noqa: B023

    def series_written() -> list[JSON] | None:
        found = events(kube, namespace, "FailedScheduling")
        counts = [(e.get("series") or {}).get("count", 1) for e in found]
        return found if found and all(c >= 2 for c in counts) else None

    found = eventually(series_written, what="a series on each pod's event")
    per_pod = [e["regarding"]["name"] for e in found]
    assert sorted(per_pod) == sorted(names), per_pod
    assert all(e["regarding"].get("uid") for e in found)


def test_kubectl_describe_finds_a_pod_groups_events(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    control_plane: ControlPlane,
    start_scheduler: StartScheduler,
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "2", "memory": "4Gi"})
    group = create(kube, namespace, pod_group("big", 2))
    for i in range(2):
        create(kube, namespace, pod(f"big-{i}", BIG, annotations={GROUP_KEY: "big"}))
    start_scheduler()
    uid = group["metadata"]["uid"]
    # kubectl describe's lookup (k8s.io/kubectl describe.searchEvents): core/v1 events
    # selected by the object's name, namespace, kind and uid.
    selector = ",".join(
        [
            "involvedObject.name=big",
            f"involvedObject.namespace={namespace}",
            "involvedObject.kind=PodGroup",
            f"involvedObject.uid={uid}",
        ]
    )
    path = f"/api/v1/namespaces/{namespace}/events"

    def found() -> list[JSON]:
        return list(kube.get(path, query={"fieldSelector": selector}).expect(200)["items"])

    [event] = eventually(found, what="the group's event found as kubectl looks it up")
    assert event["reason"] == "FailedScheduling"
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    described = subprocess.run(
        [
            kubectl,
            "describe",
            "podgroups.scheduling.batchsched.io",
            "big",
            "-n",
            namespace,
            "--kubeconfig",
            str(control_plane.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "FailedScheduling" in described, described


def test_a_pod_condition_whose_write_failed_is_written_later(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    scheduler_accounts: SchedulerAccounts,
    start_scheduler: StartScheduler,
    start_proxy: StartProxy,
) -> None:
    """A pod no node can hold is set aside: later sessions do not tell it its reason
    again. When the write of that reason was refused, the pod would show nothing (or an
    older reason) while `explain` gives the right one, for as long as nothing wakes it."""
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "1", "memory": "1Gi"})
    proxy = start_proxy()
    refused = proxy.fail("/api/v1/namespaces/*/pods/*/status", status=422)
    start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("scheduler", server=proxy.url))
    create(kube, namespace, pod("p", BIG))
    eventually(lambda: refused.paths, what="the pod's condition refused")
    proxy.remove(refused)
    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["p"]),
        what="the pod's reason written after all",
    )
    assert "Insufficient cpu" in message
