"""Volcano's Queue and PodGroup as Volcano's released CRDs (v1.15.1, installed unchanged
with the control plane) make them: the API server defaults every Queue's
`dequeueStrategy` to traverse, a Queue's state is its `status.state`, the `root` Queue
tops the tree, and a PodGroup has no status subresource. `batchsched run` on the
drop-in configuration schedules them as Volcano would, and writes status where each
CRD accepts it."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from batchsched.k8s.volcano_queues import QUEUES_PATH

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
    volcano_starting_queues,
)
from tests.support import JSON, ClusterObjects, ControlPlane, Kube, peer_source
from tests.support.objects import node

pytestmark = pytest.mark.integration

DROP_IN = REPO / "examples" / "config" / "drop-in.yaml"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(cluster_objects: ClusterObjects, name: str, **spec: object) -> JSON:
    """Created through the API server, so the CRD's defaults are what the object holds."""
    return cluster_objects.create(
        {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    )


def gang(kube: Kube, namespace: str, name: str, queue: str, members: int, cpu: str) -> None:
    """A Volcano PodGroup and its pods, as Volcano's job controller makes them."""
    kube.create(
        {
            "apiVersion": VOLCANO,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": members, "queue": queue},
        }
    )
    for i in range(members):
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": namespace,
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}},
                        }
                    ],
                },
            }
        )


def bound(kube: Kube, namespace: str) -> set[str]:
    return {name for name, where in placements(kube, namespace).items() if where}


def waiting_with(kube: Kube, namespace: str, prefix: str, words: str) -> bool:
    messages = [
        unschedulable_message(p) for n, p in pods(kube, namespace).items() if n.startswith(prefix)
    ]
    return bool(messages) and all(m and words in m for m in messages)


def test_queues_with_the_crds_defaults_schedule_in_their_dequeue_order(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Every Queue the real CRD stores has `dequeueStrategy` (traverse unless set): it
    is honoured, not refused. In a traverse queue a gang that cannot start lets the one
    behind it bind; in a fifo queue it holds it back, as Volcano's API defines."""
    traverse = volcano_queue(cluster_objects, f"tr-{namespace}")
    assert traverse["spec"] == {"dequeueStrategy": "traverse", "weight": 1}
    volcano_queue(cluster_objects, f"ff-{namespace}", dequeueStrategy="fifo")
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="4", memory="8Gi"))
    for queue in (f"tr-{namespace}", f"ff-{namespace}"):
        tag = queue.partition("-")[0]
        gang(kube, namespace, f"{tag}-huge", queue, 2, "3")
        gang(kube, namespace, f"{tag}-small", queue, 1, "500m")
    start_scheduler(config=DROP_IN)

    eventually(lambda: "tr-small-0" in bound(kube, namespace), what="tr-small bound")
    eventually(
        lambda: waiting_with(kube, namespace, "ff-small", "dequeueStrategy fifo"),
        what="ff-small held behind ff-huge",
    )
    assert not {"ff-small-0", "tr-huge-0", "ff-huge-0"} & bound(kube, namespace)


def test_a_queue_closed_in_its_status_stays_closed(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    control_plane: ControlPlane,
) -> None:
    """Volcano keeps a Queue's state in status.state (vcctl queue operate, its queue
    controller): a closed queue's jobs wait, and the scheduler's status writes never
    reopen it. Its open neighbour's PodGroup gets Volcano's status on the object itself
    (the CRD has no status subresource), which `kubectl get` shows."""
    closed = f"closed-{namespace}"
    volcano_queue(cluster_objects, closed)
    kube.patch(f"/apis/{VOLCANO}/queues/{closed}/status", {"status": {"state": "Closed"}}).expect(
        200
    )
    volcano_queue(cluster_objects, f"open-{namespace}")
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="4", memory="8Gi"))
    gang(kube, namespace, "shut", closed, 1, "500m")
    gang(kube, namespace, "runs", f"open-{namespace}", 2, "500m")
    start_scheduler(config=DROP_IN)

    eventually(lambda: {"runs-0", "runs-1"} <= bound(kube, namespace), what="runs bound")
    eventually(
        lambda: waiting_with(kube, namespace, "shut", f"queue {closed} is closed"),
        what="shut waiting on its closed queue",
    )
    status = eventually(
        lambda: (
            (s := kube.get(f"/apis/{VOLCANO}/queues/{closed}").expect(200)["status"]).get("pending")
            == 1
            and s
        ),
        what="the closed queue's counts written",
    )
    assert status["state"] == "Closed"
    group = eventually(
        lambda: (
            (
                g := kube.get(f"/apis/{VOLCANO}/namespaces/{namespace}/podgroups/runs")
                .expect(200)
                .get("status")
                or {}
            ).get("phase")
            == "Running"
            and g
        ),
        what="PodGroup runs Running",
    )
    assert [c["type"] for c in group["conditions"]] == ["Scheduled"]
    kubectl = ["kubectl", "--kubeconfig", str(control_plane.kubeconfig), "-n", namespace]
    shown = subprocess.run(
        [*kubectl, "get", "podgroups.scheduling.volcano.sh", "runs", "--no-headers"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # NAME, STATUS, minMember, RUNNINGS, AGE as Volcano's CRD prints them.
    assert shown[:4] == ["runs", "Running", "2", "0"], shown


def test_the_root_queue_tops_the_tree_with_its_capability(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Every Volcano cluster has a `root` Queue: it is accepted as the top of the tree,
    and its capability bounds the queues below it (those naming no parent)."""
    volcano_queue(cluster_objects, "root", capability={"cpu": "1500m"})
    volcano_queue(cluster_objects, f"team-{namespace}")
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="8", memory="8Gi"))
    gang(kube, namespace, "first", f"team-{namespace}", 2, "500m")
    start_scheduler(config=DROP_IN)

    eventually(lambda: {"first-0", "first-1"} <= bound(kube, namespace), what="first bound")
    gang(kube, namespace, "second", f"team-{namespace}", 2, "500m")
    eventually(
        lambda: waiting_with(kube, namespace, "second", "queue root"),
        what="second waiting on the root's capability",
    )
    assert not {"second-0", "second-1"} & bound(kube, namespace)


def test_volcanos_hierarchical_example_queues_schedule(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Volcano's example/hierarchical-jobs/queues.yaml, from its release: its Queues are
    accepted (their hierarchy annotations, read only by Volcano's drf in a mode batchsched
    does not implement, are logged once each as having no effect) and gangs in them bind."""
    example = peer_source("volcano") / "example" / "hierarchical-jobs" / "queues.yaml"
    queues = [doc for doc in yaml.safe_load_all(example.read_text()) if doc]
    assert [q["kind"] for q in queues] == ["Queue"] * 4
    for queue in queues:
        cluster_objects.create(queue)
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="8", memory="8Gi"))
    for queue in queues:
        name = queue["metadata"]["name"]
        gang(kube, namespace, name, name, 2, "500m")
    scheduler = start_scheduler(config=DROP_IN)

    wanted = {f"{q['metadata']['name']}-{i}" for q in queues for i in range(2)}
    eventually(lambda: wanted <= bound(kube, namespace), what="a gang in each queue bound")
    notes = [line for line in scheduler.output().splitlines() if "has no effect here" in line]
    assert len(notes) == 2 * len(queues), notes


def test_a_volcano_queue_shows_what_it_and_its_children_hold(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """status.allocated, as Volcano's scheduler writes it at each session's close: the
    resources of the queue's bound pods, a parent's with its children's."""
    parent, child = f"team-{namespace}", f"research-{namespace}"
    volcano_queue(cluster_objects, parent)
    volcano_queue(cluster_objects, child, parent=parent)
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="8", memory="8Gi"))
    gang(kube, namespace, "g", child, 3, "500m")
    start_scheduler(config=DROP_IN)

    def allocated(name: str) -> object:
        return (
            kube.get(f"/apis/{VOLCANO}/queues/{name}")
            .expect(200)
            .get("status", {})
            .get("allocated")
        )

    # Pods count as a resource in Volcano's form too.
    held = {"cpu": "1500m", "pods": "3"}
    eventually(
        lambda: allocated(child) == held and allocated(parent) == held,
        what="the child queue's allocation shown on it and on its parent",
    )


def test_volcanos_root_and_default_queues_are_created_as_its_scheduler_creates_them(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Serving Volcano's scheduler name where Volcano's Queue kind is served, batchsched
    creates the Queues vc-scheduler creates at start-up (v1.15.1, pkg/scheduler/cache):
    `root`, not reclaimable, and `default`, reclaimable, both of weight 1, as the real CRD
    stores them; a gang in `default`, where Volcano's job controller puts a Job naming
    no queue, binds in it."""
    assert volcano_starting_queues(kube) == set()
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="4", memory="8Gi"))
    gang(kube, namespace, "g", "default", 2, "500m")
    start_scheduler(config=DROP_IN)

    eventually(
        lambda: volcano_starting_queues(kube) == {"root", "default"},
        what="Volcano's root and default Queues created",
    )
    specs = {
        name: kube.get(f"{QUEUES_PATH}/{name}").expect(200)["spec"] for name in ("root", "default")
    }
    assert specs == {
        "root": {"reclaimable": False, "weight": 1, "dequeueStrategy": "traverse"},
        "default": {"reclaimable": True, "weight": 1, "dequeueStrategy": "traverse"},
    }
    eventually(lambda: {"g-0", "g-1"} <= bound(kube, namespace), what="the gang in default bound")


def test_a_default_queue_that_exists_is_left_as_it_is(
    kube: Kube, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    volcano_queue(cluster_objects, "default", weight=3, reclaimable=False)
    scheduler = start_scheduler(config=DROP_IN)

    eventually(
        lambda: "Volcano's 'default' Queue exists: left as it is" in scheduler.output(),
        what="the scheduler finding the default Queue there",
    )
    assert "root" in volcano_starting_queues(kube)
    shown = kube.get(f"{QUEUES_PATH}/default").expect(200)["spec"]
    assert shown == {"reclaimable": False, "weight": 3, "dequeueStrategy": "traverse"}


def test_short_names_beside_the_peers_crds(control_plane: ControlPlane) -> None:
    """Our short names stay the contract's (`pg`, `q`): beside Volcano's and
    scheduler-plugins' CRDs kubectl resolves them to ours and warns of the peers' kinds,
    which are named in full; the `batchsched` category is unambiguous
    (docs/drop-in.md, "Short names")."""
    kubectl = ["kubectl", "--kubeconfig", str(control_plane.kubeconfig)]

    def get(what: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*kubectl, "get", what, "-A"], capture_output=True, text=True)

    for short, theirs in (
        ("pg", "podgroups.scheduling.volcano.sh"),
        ("q", "queues.scheduling.volcano.sh"),
    ):
        shown = get(short)
        assert shown.returncode == 0, shown.stderr
        assert f"could also match lower priority resource {theirs}" in shown.stderr
    resources = subprocess.run(
        [*kubectl, "api-resources", "--categories=batchsched", "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(resources) == [
        "podgroups.scheduling.batchsched.io",
        "queues.scheduling.batchsched.io",
    ]
    shown = get("batchsched")
    assert shown.returncode == 0 and "could also match" not in shown.stderr, shown.stderr
