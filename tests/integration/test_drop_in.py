"""Drop-in for each scheduler users switch from: that project's CRDs (its released files,
tests.support.peers, or for kube-batch and Tencent stand-ins in tests/integration/crds;
installed with the control plane), its documented example workload as written, and
`batchsched run` on the configuration a switching cluster starts from. Gangs bind whole,
the peer's PodGroups get the status its own project writes, and Volcano's Queue is
honoured.

There is no controller here: workloads (StatefulSets, Deployments, TFJobs) become the
pods their controllers would create (batchsched.sim.workloads), and the PodGroup a
Kubeflow operator creates for a TFJob is created in the API its gang scheduler reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batchsched.sim.loader import load_files
from batchsched.sim.workloads import expand

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
from .peer_modules import scheduler_plugins_fixture  # noqa: F401 (fixture)
from tests.support import JSON, ClusterObjects, Kube, peer_source
from tests.support.objects import node

pytestmark = pytest.mark.integration

DROP_IN = REPO / "examples" / "config" / "drop-in.yaml"
SEEDS = REPO / "tests" / "sim" / "seeds"
KUBE_BATCH_API = "scheduling.incubator.k8s.io/v1alpha1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
IMPLIED_LABEL = "implied-by"


def kube_create(kube: Kube, cluster_objects: ClusterObjects, obj: JSON, namespace: str) -> JSON:
    """Create `obj` as `kubectl apply -n namespace` would: namespaced objects into the
    test's namespace, nodes made Ready, cluster-scoped ones removed after the test."""
    if obj["kind"] == "Node":
        return ready_node(cluster_objects, kube, obj)
    if obj["kind"] == "Queue":
        return cluster_objects.create(obj)
    obj["metadata"]["namespace"] = namespace
    return kube.create(obj)


def installed(kube: Kube, *crds: str) -> None:
    """The peer's CRDs are served (the control plane installs them, see conftest.py)."""
    for crd in crds:
        found = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        conditions = found.expect(200)["status"]["conditions"]
        assert {"type": "Established", "status": "True"} in [
            {k: c[k] for k in ("type", "status")} for c in conditions
        ], crd


def apply_all(
    kube: Kube, cluster_objects: ClusterObjects, objects: list[JSON], namespace: str
) -> None:
    for obj in objects:
        obj.setdefault("apiVersion", "v1")
        kube_create(kube, cluster_objects, obj, namespace)


def pod_group(kube: Kube, api_version: str, namespace: str, name: str) -> JSON:
    return kube.get(f"/apis/{api_version}/namespaces/{namespace}/podgroups/{name}").expect(200)


def status_of(kube: Kube, api_version: str, namespace: str, name: str) -> JSON:
    return pod_group(kube, api_version, namespace, name).get("status") or {}


def bound(kube: Kube, namespace: str) -> set[str]:
    return {name for name, where in placements(kube, namespace).items() if where}


def documents(text: str) -> list[JSON]:
    return [d for d in yaml.safe_load_all(text) if d]


def expand_all(workloads: list[JSON]) -> list[JSON]:
    """The pods of workload objects, as their controllers create them."""
    return [pod for workload in workloads for pod in expand(workload)]


@pytest.mark.parametrize("api_version", [KUBE_BATCH_API, "scheduling.sigs.dev/v1alpha2"])
def test_kube_batch_tfjobs(
    api_version: str,
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """Seed 001 as its document wrote it (schedulerName kube-batch, the kube-batch group
    annotation). tf-operator with gang scheduling creates each TFJob's PodGroup in
    kube-batch's API: its first, and scheduling.sigs.dev, its later one."""
    installed(kube, f"podgroups.{api_version.partition('/')[0]}")
    objects = load_files([str(SEEDS / "001-kube-batch-tfjobs.yaml")]).objects
    for obj in objects:
        if obj["kind"] == "PodGroup" and IMPLIED_LABEL in obj["metadata"].get("labels", {}):
            obj["apiVersion"] = api_version
    apply_all(kube, cluster_objects, objects, namespace)
    start_scheduler(config=DROP_IN)

    first = {n for n in placements(kube, namespace) if n.startswith("tfjob-gang-scheduling-")}
    assert len(first) == 4
    eventually(lambda: bound(kube, namespace) >= first, what=f"{sorted(first)} bound")
    running = eventually(
        lambda: (
            (s := status_of(kube, api_version, namespace, "tfjob-gang-scheduling")).get("phase")
            == "Running"
            and s
        ),
        what="the first TFJob's PodGroup Running",
    )
    # kube-batch's form: phase, conditions, and running/succeeded/failed (no `scheduled`).
    assert {k: running[k] for k in ("running", "succeeded", "failed")} == dict.fromkeys(
        ("running", "succeeded", "failed"), 0
    )
    assert "scheduled" not in running
    assert [c["type"] for c in running["conditions"]] == ["Scheduled"]

    waiting = eventually(
        lambda: status_of(kube, api_version, namespace, "tfjob-gang-scheduling2").get("conditions"),
        what="the second TFJob's PodGroup condition",
    )
    assert [c["type"] for c in waiting] == ["Unschedulable"]
    second = status_of(kube, api_version, namespace, "tfjob-gang-scheduling2")
    assert second["phase"] in ("Pending", "Inqueue")
    assert not any(n.startswith("tfjob-gang-scheduling2-") for n in bound(kube, namespace))


def test_tencent_race(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """Seed 002 as its document wrote it: its pods name no scheduler, so the
    configuration serves default-scheduler (kube-scheduler stopped, as the document's
    own scheduler replaced it)."""
    api_version = "batch.scheduler.tencent.com/v1"
    installed(kube, "podgroups.batch.scheduler.tencent.com")
    config = tmp_path / "config.yaml"
    config.write_text("schedulerNames: [batch-scheduler, default-scheduler]\n")
    objects = load_files([str(SEEDS / "002-tencent-race.yaml")]).objects
    apply_all(kube, cluster_objects, objects, namespace)
    start_scheduler(config=config)

    group1 = {f"web-group-race1-{i}" for i in range(5)}
    eventually(lambda: bound(kube, namespace) >= group1, what="group1 bound")
    # Tencent's form: minMember placed but not running yet is Scheduled; the counts
    # include `scheduled`, and scheduleStartTime is set.
    shown = eventually(
        lambda: (
            (s := status_of(kube, api_version, namespace, "group1")).get("phase") == "Scheduled"
            and s
        ),
        what="group1 Scheduled",
    )
    assert (shown["scheduled"], shown["running"], shown["succeeded"], shown["failed"]) == (
        5,
        0,
        0,
        0,
    )
    assert shown["scheduleStartTime"]
    assert "conditions" not in shown
    other = eventually(
        lambda: status_of(kube, api_version, namespace, "group2").get("phase"),
        what="group2's phase",
    )
    assert other in ("Pending", "PreScheduling")
    assert status_of(kube, api_version, namespace, "group2")["scheduled"] == 0
    assert not {n for n in bound(kube, namespace) if n.startswith("web-group-race2-")}


# Volcano's example/deployment (its queue.yaml and deployment.yaml), from its release.
VOLCANO_EXAMPLE = ("example", "deployment")


def volcano_gang(name: str, members: int, cpu: str) -> list[JSON]:
    """A PodGroup in queue `test` and its pods, joined by the annotation Volcano's pods
    carry (`scheduling.k8s.io/group-name`), as its controller makes them for a Job."""
    group = {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members, "queue": "test"},
    }
    return [
        group,
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
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
            for i in range(members)
        ),
    ]


def test_volcano_queue_and_gangs(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """The documented deployment runs in Volcano's queue `test` (which must exist); a
    gang within the queue's capability of 2 CPUs binds whole, one beyond it waits; each
    PodGroup and the Queue get the status Volcano writes."""
    installed(kube, "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")
    example = peer_source("volcano").joinpath(*VOLCANO_EXAMPLE)
    queue_file, deployment_file = example / "queue.yaml", example / "deployment.yaml"
    workload = documents(queue_file.read_text())
    workload += expand_all(documents(deployment_file.read_text()))
    workload += volcano_gang("fits", 2, "500m") + volcano_gang("too-big", 2, "1")
    room = node(f"n-{namespace}", cpu="8", memory="16Gi")
    apply_all(kube, cluster_objects, [room, *workload], namespace)
    start_scheduler(config=DROP_IN)

    eventually(
        lambda: (
            {"fits-0", "fits-1"} <= bound(kube, namespace)
            and any(n.startswith("deploy-with-volcano-") for n in bound(kube, namespace))
        ),
        what="the deployment's pod and gang `fits` bound",
    )
    fits = eventually(
        lambda: (
            (s := status_of(kube, VOLCANO_API, namespace, "fits")).get("phase") == "Running" and s
        ),
        what="PodGroup fits Running",
    )
    assert (fits["running"], fits["succeeded"], fits["failed"]) == (0, 0, 0)
    assert [c["type"] for c in fits["conditions"]] == ["Scheduled"]
    waiting = eventually(
        lambda: status_of(kube, VOLCANO_API, namespace, "too-big").get("conditions"),
        what="PodGroup too-big's condition",
    )
    assert [c["type"] for c in waiting] == ["Unschedulable"]
    messages = {
        name: unschedulable_message(p)
        for name, p in pods(kube, namespace).items()
        if name.startswith("too-big-")
    }
    assert all(m and "capability" in m for m in messages.values()), messages
    assert not {"too-big-0", "too-big-1"} & bound(kube, namespace)
    queue = eventually(
        lambda: kube.get(f"/apis/{VOLCANO_API}/queues/test").expect(200).get("status"),
        what="the Queue's status",
    )
    # Volcano's state is its controller's to write (status.state), never ours.
    assert "state" not in queue
    assert queue["running"] >= 1


COSCHEDULING_PAGE = Path("site/content/en/docs/plugins/coscheduling.md")
FENCE = "```"


def code_blocks(markdown: str) -> dict[str, list[str]]:
    """A Markdown page's fenced code blocks, by the heading they are under."""
    blocks: dict[str, list[str]] = {}
    heading = ""
    block: list[str] | None = None
    for line in markdown.splitlines():
        if block is not None:
            if line.startswith(FENCE):
                blocks.setdefault(heading, []).append("\n".join(block))
                block = None
            else:
                block.append(line)
        elif line.startswith(FENCE):
            block = []
        elif line.startswith("#"):
            heading = line.lstrip("#").strip()
    return blocks


# scheduler-plugins' doc/install.md: its PodGroup and Deployment, with the schedulerName
# its note asks for when it runs as a second scheduler. First as the current release
# writes them (scheduling.x-k8s.io), then as its first CRD-based release did
# (scheduling.sigs.k8s.io, with the pod-group.scheduling.sigs.k8s.io label).
COSCHEDULING_DOC = """
apiVersion: {api}
kind: PodGroup
metadata:
  name: pg1
spec:
  scheduleTimeoutSeconds: 10
  minMember: 3
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: pause
spec:
  replicas: 2
  selector:
    matchLabels:
      app: pause
  template:
    metadata:
      labels:
        app: pause
        {label}: pg1
    spec:
      schedulerName: scheduler-plugins-scheduler
      containers:
      - name: pause
        image: registry.k8s.io/pause:3.6
"""


@pytest.mark.usefixtures("scheduler_plugins")
@pytest.mark.parametrize(
    ("api_version", "label", "placed_phase", "counts"),
    [
        (
            "scheduling.x-k8s.io/v1alpha1",
            "scheduling.x-k8s.io/pod-group",
            "Scheduling",
            ("running", "succeeded", "failed"),
        ),
        (
            "scheduling.sigs.k8s.io/v1alpha1",
            "pod-group.scheduling.sigs.k8s.io",
            "Scheduled",
            ("scheduled", "running", "succeeded", "failed"),
        ),
    ],
)
def test_coscheduling_install_walkthrough(
    api_version: str,
    label: str,
    placed_phase: str,
    counts: tuple[str, ...],
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """Two pods of a group of minMember 3 wait; the third lets all three bind. The
    PodGroup's phase is the project's for minMember placed but not yet running."""
    installed(kube, f"podgroups.{api_version.partition('/')[0]}")
    group, deployment = documents(COSCHEDULING_DOC.format(api=api_version, label=label))
    room = node(f"n-{namespace}", cpu="4", memory="8Gi")
    apply_all(kube, cluster_objects, [room, group, *expand(deployment)], namespace)
    start_scheduler(config=DROP_IN)

    waiting = eventually(
        lambda: (s := status_of(kube, api_version, namespace, "pg1")).get("phase") and s,
        what="pg1's first status",
    )
    assert waiting["phase"] == "Pending"
    assert waiting["scheduleStartTime"]
    assert "conditions" not in waiting
    assert all(unschedulable_message(p) for p in pods(kube, namespace).values())
    assert bound(kube, namespace) == set()

    # `kubectl scale deploy pause --replicas=3`: the controller adds the third pod.
    deployment["spec"]["replicas"] = 3
    third = [p for p in expand(deployment) if p["metadata"]["name"] not in pods(kube, namespace)]
    apply_all(kube, cluster_objects, third, namespace)
    eventually(lambda: len(bound(kube, namespace)) == 3, what="all three pods bound")
    placed = eventually(
        lambda: (
            (s := status_of(kube, api_version, namespace, "pg1")).get("phase") == placed_phase and s
        ),
        what=f"pg1 {placed_phase}",
    )
    assert {k: placed[k] for k in counts} == {k: 3 if k == "scheduled" else 0 for k in counts}
    assert placed["scheduleStartTime"] == waiting["scheduleStartTime"]


@pytest.mark.parametrize(
    ("config_heading", "min_member", "placed", "phase"),
    [("Config", 3, 3, "Scheduling"), ("Advanced Configuration", 4, 0, "Pending")],
)
def test_coscheduling_page_demo(
    config_heading: str,
    min_member: int,
    placed: int,
    phase: str,
    scheduler_plugins: Path,
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """The Demo of scheduler-plugins' Coscheduling page, read from its released module: a
    PodGroup and a ReplicaSet of six pods of 3 CPUs on a cluster that "can only afford 3
    nginx pods". With minMember 3, three run and three wait; "if minMember is set to 4",
    all six wait. batchsched runs on one of the page's configurations, as written."""
    blocks = code_blocks((scheduler_plugins / COSCHEDULING_PAGE).read_text())
    group, replicaset = documents(blocks["Demo"][0])
    assert (group["spec"]["minMember"], replicaset["spec"]["replicas"]) == (3, 6)
    group["spec"]["minMember"] = min_member
    config = tmp_path / "config.yaml"
    (written,) = blocks[config_heading]
    config.write_text(written)
    room = node(f"n-{namespace}", cpu="10", memory="8Gi")
    apply_all(kube, cluster_objects, [room, group, *expand(replicaset)], namespace)
    start_scheduler(config=config)

    eventually(lambda: len(bound(kube, namespace)) >= placed, what=f"{placed} pods bound")
    eventually(
        lambda: all(
            p["spec"].get("nodeName") or unschedulable_message(p)
            for p in pods(kube, namespace).values()
        ),
        what="every other pod told why it waits",
    )
    assert len(bound(kube, namespace)) == placed
    api_version = group["apiVersion"]
    eventually(
        lambda: status_of(kube, api_version, namespace, "nginx").get("phase") == phase,
        what=f"PodGroup nginx {phase}",
    )


def test_binpack_seed_under_its_own_configuration(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """Seed 000: its KubeSchedulerConfiguration read unchanged (it serves
    default-scheduler: the seed's pods name no scheduler) and its TFJob, a label-only
    gang of a CPU parameter server and four one-GPU workers, on two 4-GPU nodes. The
    gang binds whole, on one node, leaving the other free."""
    example = (REPO / "examples" / "binpack-tfjob.yaml").read_text()
    workload = tmp_path / "binpack-tfjob.yaml"
    workload.write_text(example.replace("          schedulerName: batch-scheduler\n", ""))
    objects = load_files([str(workload)]).objects
    apply_all(kube, cluster_objects, objects, namespace)
    start_scheduler(config=REPO / "examples" / "config" / "kube-scheduler-binpack.yaml")

    gang = {
        p["metadata"]["name"]
        for p in objects
        if p["kind"] == "Pod" and "agent" not in p["metadata"]["name"]
    }
    assert len(gang) == 5
    eventually(lambda: bound(kube, namespace) >= gang, what="the TFJob's gang bound")
    nodes = {placements(kube, namespace)[name] for name in gang}
    assert len(nodes) == 1, nodes
