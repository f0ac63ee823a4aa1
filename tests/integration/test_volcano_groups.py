"""Volcano's PodGroup keys through `batchsched run` on a real API server with Volcano's
PodGroup CRD: minTaskMember counted by the pods' `volcano.sh/task-spec` annotation (which
the operator's trimmed pods must keep), minMember 0, and groups with no pods admitted or
left Pending. The same cases run in the simulator in tests/sim/test_volcano_groups.py."""

from __future__ import annotations

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    REPO,
    StartScheduler,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import node

pytestmark = pytest.mark.integration

DROP_IN = REPO / "examples" / "config" / "drop-in.yaml"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"


def group(name: str, min_member: int, **spec: object) -> JSON:
    return {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, **spec},
    }


def member(name: str, group_name: str, role: str, cpu: str = "1") -> JSON:
    """A pod as Volcano's job controller writes it: group and task role annotated, and
    placed by the node label of its role."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {
                "scheduling.k8s.io/group-name": group_name,
                "volcano.sh/task-spec": role,
            },
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": {"role": role},
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def test_task_minimums_min_member_zero_and_groups_without_pods(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Job `train` needs both its masters (minTaskMember, as in Volcano's allocate_test.go
    case "master's min member can not be allocated, break from allocating") but its
    master node takes one: nothing of it is bound, though its workers would bring it to
    minMember 2. Job `elastic` (minMember 0) starts. Of the groups without pods, which
    Volcano's job controller makes before their pods, `empty` is admitted (Inqueue: the
    controller then creates its pods) and `too-big`, whose minResources the cluster
    cannot hold, stays Pending."""
    for name, role, cpu in ((f"m-{namespace}", "master", "1"), (f"w-{namespace}", "worker", "4")):
        obj = node(name, cpu=cpu, memory="8Gi")
        obj["metadata"].setdefault("labels", {})["role"] = role
        ready_node(cluster_objects, kube, obj)
    objects = [
        group("train", 2, minTaskMember={"master": 2, "worker": 0}),
        member("train-master-0", "train", "master"),
        member("train-master-1", "train", "master"),
        member("train-worker-0", "train", "worker"),
        member("train-worker-1", "train", "worker"),
        group("elastic", 0),
        member("elastic-worker-0", "elastic", "worker"),
        group("empty", 3),
        group("too-big", 1, minResources={"cpu": "100"}),
    ]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    eventually(
        lambda: placements(kube, namespace).get("elastic-worker-0"),
        what="the minMember 0 group's pod bound",
    )
    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["train-worker-0"]),
        what="train's pods told why they wait",
    )
    assert "room for 1 of the 2 pods of task 'master'" in message, message
    assert not {n for n, where in placements(kube, namespace).items() if where} & {
        "train-master-0",
        "train-master-1",
        "train-worker-0",
        "train-worker-1",
    }
    phases = eventually(
        lambda: (
            all(phase_of(kube, namespace, g) for g in ("empty", "too-big"))
            and {g: phase_of(kube, namespace, g) for g in ("empty", "too-big")}
        ),
        what="the status of the groups without pods",
    )
    assert phases == {"empty": "Inqueue", "too-big": "Pending"}


def phase_of(kube: Kube, namespace: str, name: str) -> str | None:
    found = kube.get(f"/apis/{VOLCANO_API}/namespaces/{namespace}/podgroups/{name}")
    return (found.expect(200).get("status") or {}).get("phase")
