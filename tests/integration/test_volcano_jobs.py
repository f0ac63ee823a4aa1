"""Volcano Jobs end to end, as a cluster switching from Volcano runs them: Volcano's
released CRDs (v1.15.1), Volcano's own job controller (vc-controller-manager, built by
hack/vc-controller-manager.sh), Volcano's documented example Jobs, and `batchsched run` on
examples/config/drop-in.yaml in place of vc-scheduler.

The job controller turns a Job into a PodGroup (minMember, minTaskMember per task,
minResources, queue) at once, but into pods only once that PodGroup's status.phase is
Inqueue, which Volcano's scheduler sets in its enqueue action: here batchsched has to.
Volcano's scheduler also creates the `root` and `default` Queues at start; a cluster
switching from it has them, so this module creates them as it does.

This module runs its own control plane, with our CRDs and Volcano's released ones
(`peer_crds`), since the suite's shared one carries other kinds of the same names.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import PROJECT_CRDS, start_control_plane
from .operator_support import (  # noqa: F401 (fixtures)
    REPO,
    StartScheduler,
    eventually,
    placements,
    pods,
    priority_class,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import JSON, ClusterObjects, ControlPlane, Kube, peer_crds, peer_source
from tests.support.objects import load_manifests, node

pytestmark = pytest.mark.integration

DROP_IN = REPO / "examples" / "config" / "drop-in.yaml"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
# The task a pod of a Volcano Job belongs to, as its job controller writes it.
TASK_SPEC = "volcano.sh/task-spec"
# What Volcano's scheduler creates at start (newDefaultAndRootQueue in its cache).
VOLCANO_QUEUES: list[JSON] = [
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"reclaimable": reclaimable, "weight": 1},
    }
    for name, reclaimable in (("root", False), ("default", True))
]


def volcano_example(relative: str) -> JSON:
    """One of the example Jobs Volcano documents (its module's example/ directory)."""
    (job,) = load_manifests(peer_source("volcano") / "example" / relative)
    return job


# What each of the three controllers logs once it runs (job, PodGroup and Queue).
VOLCANO_CONTROLLERS_RUNNING = (
    "JobController is running",
    "PodgroupController is running",
    "Starting queue controller.",
)


def vc_controller_manager() -> Path:
    """Volcano's controller manager, built on first use (instant once cached)."""
    script = REPO / "hack" / "vc-controller-manager.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"hack/vc-controller-manager.sh failed:\n{done.stderr}", pytrace=False)
    return Path(done.stdout.strip().splitlines()[-1]) / "vc-controller-manager"


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    with start_control_plane(crds=load_manifests(PROJECT_CRDS) + peer_crds("volcano")) as plane:
        yield plane


@pytest.fixture(name="kube", scope="module")
def kube_fixture(control_plane: ControlPlane) -> Kube:
    return control_plane.kube()


@pytest.fixture(scope="module", autouse=True)
def volcano(control_plane: ControlPlane, kube: Kube) -> None:
    """Volcano's Queues and its job, PodGroup and Queue controllers, as a cluster
    switching from Volcano keeps them."""
    for queue in VOLCANO_QUEUES:
        kube.create(queue)
    control_plane.run(
        "vc-controller-manager",
        [
            str(vc_controller_manager()),
            f"--kubeconfig={control_plane.kubeconfig}",
            "--leader-elect=false",
            "--scheduler-name=volcano",
            "--controllers=job-controller,pg-controller,queue-controller",
            "-v=3",
        ],
        started=lambda log: all(line in log for line in VOLCANO_CONTROLLERS_RUNNING),
    )


@pytest.fixture(name="namespace")
def namespace_fixture(namespace: str, kube: Kube, control_plane: ControlPlane) -> Iterator[str]:
    """The test's namespace. Its Volcano Jobs go before it is wiped: their controller
    would otherwise create their pods again while the wipe deletes them. The
    controllers' log is shown after a failure."""
    yield namespace
    jobs = JOBS.format(namespace=namespace)
    kube.delete(jobs).expect(200)
    eventually(lambda: not kube.get(jobs).expect(200)["items"], what="the Jobs deleted")
    log = control_plane.workdir / "vc-controller-manager.log"
    # pytest shows what teardown writes only for a test that failed.
    sys.stderr.write(f"--- vc-controller-manager.log\n{log.read_text(errors='replace')[-6000:]}\n")


def submit(kube: Kube, namespace: str, job: JSON) -> str:
    """Create a Volcano Job as `kubectl apply -n namespace` would; its name."""
    job["metadata"]["namespace"] = namespace
    created = kube.post(JOBS.format(namespace=namespace), job).expect(201)
    return str(created["metadata"]["name"])


def pod_group_of(kube: Kube, namespace: str, job: str) -> JSON | None:
    """The PodGroup the job controller made for `job` (named after it and its uid)."""
    items = kube.get(PODGROUPS.format(namespace=namespace)).expect(200)["items"]
    for group in items:
        owners = group["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            return dict(group)
    return None


def phase_of(kube: Kube, namespace: str, job: str) -> str | None:
    group = pod_group_of(kube, namespace, job)
    return None if group is None else (group.get("status") or {}).get("phase")


def add_nodes(
    kube: Kube, cluster_objects: ClusterObjects, allocatable: dict[str, str], *names: str
) -> None:
    for name in names:
        ready_node(cluster_objects, kube, node(name, extra=allocatable))


def bound(kube: Kube, namespace: str) -> dict[str, str]:
    return {name: where for name, where in placements(kube, namespace).items() if where}


def bound_at_least(kube: Kube, namespace: str, count: int) -> dict[str, str] | None:
    placed = bound(kube, namespace)
    return placed if len(placed) >= count else None


def all_bound(kube: Kube, namespace: str, count: int) -> dict[str, JSON] | None:
    """The job's `count` pods, once all exist and are bound."""
    found = pods(kube, namespace)
    if len(found) == count and all(p["spec"].get("nodeName") for p in found.values()):
        return found
    return None


def all_unschedulable(kube: Kube, namespace: str, count: int) -> dict[str, JSON] | None:
    """The job's `count` pods, once all exist and batchsched told each why it waits."""
    found = pods(kube, namespace)
    if len(found) == count and all(unschedulable_message(p) for p in found.values()):
        return found
    return None


def test_example_job_starts_whole(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """example/job.yaml: six 1-CPU pods of one task, minAvailable 3, with Volcano's ssh,
    env and svc plugins. The controller's PodGroup is moved to Inqueue, the controller
    then creates the pods, and all six are bound; the PodGroup shows Running."""
    add_nodes(kube, cluster_objects, {"cpu": "4"}, "vj-a", "vj-b")
    start_scheduler(config=DROP_IN)
    job = submit(kube, namespace, volcano_example("job.yaml"))

    group = eventually(lambda: pod_group_of(kube, namespace, job), what="the job's PodGroup")
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minTaskMember"] == {"default-nginx": 6}
    assert group["spec"]["queue"] == "default"

    placed = eventually(
        lambda: all_bound(kube, namespace, 6), timeout=60, what="six pods created and bound"
    )
    assert {p["metadata"]["annotations"][TASK_SPEC] for p in placed.values()} == {"default-nginx"}
    assert {p["spec"]["nodeName"] for p in placed.values()} <= {"vj-a", "vj-b"}
    eventually(lambda: phase_of(kube, namespace, job) == "Running", what="PodGroup Running")


def test_master_worker_job_waits_for_room_then_binds_whole(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """example/integrations/mpi/mpi-example.yaml: one mpimaster and two mpiworkers,
    minAvailable 3, asking nothing but their pod slots (and naming no queue: the CRD's
    default). On a node with room for two pods the PodGroup is not admitted, so the
    controller creates no pod; once a second node joins, all three pods are created and
    bound."""
    add_nodes(kube, cluster_objects, {"cpu": "4", "pods": "2"}, "vj-a")
    start_scheduler(config=DROP_IN)
    job = submit(kube, namespace, volcano_example("integrations/mpi/mpi-example.yaml"))

    def refused() -> str | None:
        status = (pod_group_of(kube, namespace, job) or {}).get("status") or {}
        conditions = status.get("conditions") or [{}]
        message = conditions[0].get("message") or ""
        return message if status.get("phase") == "Pending" and "pods 3" in message else None

    assert "minResources" in eventually(refused, what="the PodGroup held back for room")
    assert not pods(kube, namespace)

    add_nodes(kube, cluster_objects, {"cpu": "4", "pods": "2"}, "vj-b")
    placed = eventually(
        lambda: all_bound(kube, namespace, 3), timeout=60, what="three pods created and bound"
    )
    roles = sorted(p["metadata"]["annotations"][TASK_SPEC] for p in placed.values())
    assert roles == ["mpimaster", "mpiworker", "mpiworker"]
    eventually(lambda: phase_of(kube, namespace, job) == "Running", what="PodGroup Running")


def test_gang_that_cannot_fit_gets_no_pod_bound(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """example/job.yaml on two nodes of 1.5 CPU: its minResources (three 1-CPU pods) fit
    the idle total, so it is admitted and its six pods are created, but only two fit, one
    a node, and minAvailable is 3: none is bound. A third node makes room for three,
    and three are bound together (minTaskMember's six is not required: Volcano checks it
    only when minAvailable covers every task's minimum, which 3 of 6 does not)."""
    add_nodes(kube, cluster_objects, {"cpu": "1500m"}, "vj-a", "vj-b")
    start_scheduler(config=DROP_IN)
    job = submit(kube, namespace, volcano_example("job.yaml"))

    waiting = eventually(
        lambda: all_unschedulable(kube, namespace, 6),
        timeout=60,
        what="six pods created, each told why it waits",
    )
    assert not bound(kube, namespace), waiting
    assert phase_of(kube, namespace, job) == "Inqueue"

    add_nodes(kube, cluster_objects, {"cpu": "1500m"}, "vj-c")
    placed = eventually(lambda: bound_at_least(kube, namespace, 3), what="three pods bound")
    assert sorted(placed.values()) == ["vj-a", "vj-b", "vj-c"]
    eventually(lambda: phase_of(kube, namespace, job) == "Running", what="PodGroup Running")


def test_job_priority_decides_which_job_is_admitted(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Two copies of example/job.yaml, each needing 3 of a 4-CPU node's CPUs before it may
    start (minAvailable 3), the second submitted naming a higher PriorityClass: the
    controller writes it into its PodGroup, and that job is admitted and started; the
    other stays Pending, and its pods are never created."""
    classes = {"low": 10, "high": 1000}
    add_nodes(kube, cluster_objects, {"cpu": "4"}, "vj-a")
    for job, value in classes.items():
        manifest = volcano_example("job.yaml")
        manifest["metadata"]["name"] = job
        manifest["spec"]["priorityClassName"] = priority_class(
            cluster_objects, kube, f"{namespace}-{job}", value
        )
        submit(kube, namespace, manifest)
    for job in classes:
        group = eventually(
            functools.partial(pod_group_of, kube, namespace, job), what=f"{job}'s PodGroup"
        )
        assert group["spec"]["priorityClassName"] == f"{namespace}-{job}"
    # Both PodGroups exist before the scheduler starts: its first session sees both.
    start_scheduler(config=DROP_IN)

    placed = eventually(lambda: bound_at_least(kube, namespace, 4), what="four pods bound")
    assert all(name.startswith("high-") for name in pods(kube, namespace)), placed
    eventually(lambda: phase_of(kube, namespace, "high") == "Running", what="high Running")
    eventually(lambda: phase_of(kube, namespace, "low") == "Pending", what="low Pending")


def test_min_task_member_from_the_controller(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """A master/worker Job whose tasks state their own minAvailable, as Volcano's e2e jobs
    do (test/e2e/util: TaskSpec.MinAvailable): the controller writes them to the PodGroup's
    minTaskMember. minAvailable 3 is two masters and one worker, and only one 3-CPU
    master fits: though a master and two workers would make three, nothing is bound
    (Volcano's gang plugin checks each task's minimum). With room for the second master,
    all four are bound."""
    add_nodes(kube, cluster_objects, {"cpu": "4"}, "vj-a")
    add_nodes(kube, cluster_objects, {"cpu": "1500m"}, "vj-b", "vj-c")
    start_scheduler(config=DROP_IN)
    job = submit(
        kube,
        namespace,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "master-worker"},
            "spec": {
                "minAvailable": 3,
                "schedulerName": "volcano",
                "queue": "default",
                "tasks": [
                    volcano_task("master", replicas=2, min_available=2, cpu="3"),
                    volcano_task("worker", replicas=2, min_available=1, cpu="1"),
                ],
            },
        },
    )
    group = eventually(lambda: pod_group_of(kube, namespace, job), what="the job's PodGroup")
    assert group["spec"]["minTaskMember"] == {"master": 2, "worker": 1}

    waiting = eventually(
        lambda: all_unschedulable(kube, namespace, 4),
        timeout=60,
        what="four pods created, each told why it waits",
    )
    assert not bound(kube, namespace), waiting

    add_nodes(kube, cluster_objects, {"cpu": "4"}, "vj-d")
    placed = eventually(
        lambda: all_bound(kube, namespace, 4), timeout=60, what="all four pods bound"
    )
    masters = [p for p in placed.values() if p["metadata"]["annotations"][TASK_SPEC] == "master"]
    assert sorted(p["spec"]["nodeName"] for p in masters) == ["vj-a", "vj-d"]


def volcano_task(name: str, *, replicas: int, min_available: int, cpu: str) -> JSON:
    """A task of a Volcano Job: `replicas` nginx pods asking `cpu` each, `min_available`
    of them required."""
    container = {"name": name, "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
    return {
        "name": name,
        "replicas": replicas,
        "minAvailable": min_available,
        "template": {"spec": {"containers": [container], "restartPolicy": "OnFailure"}},
    }
