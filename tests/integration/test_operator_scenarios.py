"""`batchsched run` on the real control plane: the seed scenarios end as the simulator
says, pods, groups and nodes may arrive in any order, and a leader that loses its Lease
exits saying so."""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.api.dra import POD_CLAIM_NAME_ANNOTATION
from batchsched.api.meta import CLUSTER_SCOPED
from batchsched.config.load import read_config
from batchsched.sim.loader import load_files
from batchsched.sim.report import to_json
from batchsched.sim.simulator import simulate

from .conftest import kube_controller_manager
from .operator_support import (  # noqa: F401 (fixtures)
    REPO,
    StartScheduler,
    add_nodes,
    create,
    events,
    events_about,
    eventually,
    get_pod_group,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

OUR_API = "scheduling.batchsched.io/v1alpha1"
CPU = {"cpu": "1", "memory": "1Gi"}


def relocated(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The scenario's namespaced objects moved into the test's namespace, and the
    claims volumes are bound to with them."""
    for obj in objects:
        obj.setdefault("apiVersion", "v1")
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        elif obj["kind"] == "PersistentVolume" and obj["spec"].get("claimRef"):
            obj["spec"]["claimRef"]["namespace"] = namespace
    return objects


def as_written(objects: list[JSON]) -> list[JSON]:
    """The objects without what the simulator's loader made of pods' templates (their
    claims, and the pods' statuses naming them): on the cluster, kube-controller-manager
    makes those."""
    kept = []
    for obj in objects:
        annotations = obj["metadata"].get("annotations") or {}
        if obj["kind"] == "ResourceClaim" and POD_CLAIM_NAME_ANNOTATION in annotations:
            continue
        if obj["kind"] == "Pod":
            (obj.get("status") or {}).pop("resourceClaimStatuses", None)
        kept.append(obj)
    return kept


def waves(objects: list[JSON]) -> list[list[JSON]]:
    """The objects by when they arrive (creationTimestamp; those without, first): the
    API server stamps objects as they are created, so a scenario's later arrivals are
    created once the scheduler has done what the simulator did before them."""
    arrivals: dict[str, list[JSON]] = {}
    for obj in objects:
        stamp = obj["metadata"].get("creationTimestamp")
        arrivals.setdefault("" if stamp is None else str(stamp), []).append(obj)
    return [arrivals[stamp] for stamp in sorted(arrivals)]


def as_stamped(wave: list[JSON], made: list[JSON | None]) -> list[JSON]:
    """The wave as the simulator is to read it: each object the API server made stamped,
    on the example's clock, as many seconds after the wave's first as the API server
    stamped it. Its stamps are whole seconds, so a wave created across a second's turn
    has its later objects created later, which orders preemption's victims (the most
    recently created go first): both runs must read the same."""
    seconds = {id(obj): _created(shown) for obj, shown in zip(wave, made, strict=True) if shown}
    if not seconds:
        return wave
    first = min(seconds.values())
    stamped = []
    for obj in wave:
        stamp = obj["metadata"].get("creationTimestamp")
        if stamp is None or id(obj) not in seconds:
            stamped.append(obj)
            continue
        late = datetime.timedelta(seconds=seconds[id(obj)] - first)
        moved = {**obj, "metadata": dict(obj["metadata"])}
        moved["metadata"]["creationTimestamp"] = _stamp(_parse(str(stamp)) + late)
        stamped.append(moved)
    return stamped


def _parse(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _stamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _created(obj: JSON) -> float:
    return _parse(str(obj["metadata"]["creationTimestamp"])).timestamp()


@dataclass(frozen=True)
class Outcome:
    """Of a scenario's pods: the nodes each gang's (or lone pod's) bound pods are on,
    how many of each were evicted (gone once the kubelet finished them), and why each
    waiting pod waits. Members of one gang count as equals: which takes which of its
    nodes, or which goes, is a tie broken by what the two runs do not share (uids,
    which the API server makes, and the order events arrive in)."""

    bound: dict[str, list[str]]
    evicted: dict[str, int]
    reasons: dict[str, str]


def outcome(
    gangs: dict[str, str], nodes: dict[str, str | None], reasons: dict[str, str], gone: set[str]
) -> Outcome:
    bound: dict[str, list[str]] = {}
    for name, where in nodes.items():
        if where:
            bound.setdefault(gangs[name], []).append(where)
    return Outcome(
        bound={gang: sorted(held) for gang, held in bound.items()},
        evicted=dict(Counter(gangs[name] for name in gone)),
        reasons=reasons,
    )


@dataclass(frozen=True)
class Simulated:
    outcome: Outcome
    # Each pod's gang ("ns/name"), or its own name for a lone pod.
    gangs: dict[str, str]


def simulated(objects: list[JSON], config: str | None, namespace: str, scratch: Path) -> Simulated:
    """What the simulator makes of `objects`, read as it reads a file: pods' claims made
    from their templates in the test's namespace, as the cluster's controller makes them."""
    scratch.write_text(yaml.safe_dump_all(objects))
    loaded = load_files([str(scratch)]).objects
    report = to_json(simulate(loaded, read_config(config)))["pods"]
    ours = [p for p in report if p["namespace"] == namespace]
    gangs = {p["name"]: p["group"] or p["name"] for p in ours}
    nodes = {p["name"]: p["node"] for p in ours if "evicted_at" not in p}
    reasons = {name: p["reason"] for p in ours if not nodes.get(name := p["name"], "gone")}
    gone = {p["name"] for p in ours if "evicted_at" in p}
    return Simulated(outcome(gangs, nodes, reasons, gone), gangs)


def observed(kube: Kube, namespace: str, gangs: dict[str, str]) -> Outcome:
    """The scenario's pods in the cluster (those created that the simulator reports,
    ours), as a kubelet would leave them: those the scheduler marked for deletion are
    finished (deleted at once), the bound ones run."""
    shown = {name: manifest for name, manifest in pods(kube, namespace).items() if name in gangs}
    for name, manifest in shown.items():
        if manifest["metadata"].get("deletionTimestamp"):
            kube.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", grace_period_seconds=0)
        elif manifest["spec"].get("nodeName") and manifest["status"].get("phase") != "Running":
            set_running(kube, namespace, [name])
    live = {n: p for n, p in shown.items() if not p["metadata"].get("deletionTimestamp")}
    nodes = {name: manifest["spec"].get("nodeName") for name, manifest in live.items()}
    reasons = {n: str(unschedulable_message(live[n])) for n, where in nodes.items() if not where}
    return outcome(gangs, nodes, reasons, set(gangs) - set(live))


def settles(kube: Kube, namespace: str, expected: Simulated, what: str) -> None:
    seen: list[Outcome] = []

    def check() -> bool:
        seen.append(observed(kube, namespace, expected.gangs))
        return seen[-1] == expected.outcome

    try:
        eventually(check, timeout=60, what=what)
    except AssertionError:
        assert seen[-1] == expected.outcome  # shown field by field
        raise


CONFIGS = {"binpack-tfjob.yaml": "examples/config/binpack-seed.yaml"}
EXAMPLES = sorted(path.name for path in (REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="session")
def claim_controller(control_plane: ControlPlane) -> None:
    """kube-controller-manager's resource-claim controller on the session's control
    plane, making pods' claims from their templates, as the simulator does (once, for
    the examples that need it)."""
    control_plane.start_controller_manager(
        kube_controller_manager(), controllers=["resourceclaim-controller"]
    )


@pytest.mark.parametrize("example", EXAMPLES)
def test_an_example_ends_as_the_simulator_says(
    example: str,
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Every example, arrivals in their order: after each wave of arrivals, the operator
    binds, evicts and leaves waiting (with the same reason) the pods the simulator does
    with what has arrived so far."""
    loaded = load_files([str(REPO / "examples" / example)]).objects
    objects = relocated(as_written(loaded), namespace)
    if any(obj["kind"] == "ResourceClaimTemplate" for obj in objects):
        request.getfixturevalue("claim_controller")
    config = str(REPO / CONFIGS[example]) if example in CONFIGS else None
    scheduler = start_scheduler(config=Path(config) if config else None)
    arrived: list[JSON] = []
    for wave in waves(objects):
        made: list[JSON | None] = []
        for obj in wave:
            if obj["kind"] == "Node":
                ready_node(cluster_objects, kube, obj)
            elif obj["kind"] in CLUSTER_SCOPED:
                cluster_objects.create(obj)
            else:
                made.append(kube.create(obj))
                continue
            made.append(None)
        arrived += as_stamped(wave, made)
        expected = simulated(arrived, config, namespace, tmp_path / "arrived.yaml")
        settles(kube, namespace, expected, f"{len(arrived)} objects: {expected.outcome}")
    ticks_pass(scheduler)  # more sessions: nothing else may be bound, evicted or told otherwise
    assert observed(kube, namespace, expected.gangs) == expected.outcome


def test_pods_created_before_and_after_the_scheduler_starts_are_bound(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    node_name = f"n-{namespace}"
    add_nodes(cluster_objects, kube, [node_name], {"cpu": "4", "memory": "8Gi"})
    create(kube, namespace, pod("early", CPU))
    start_scheduler()
    eventually(lambda: placements(kube, namespace)["early"] == node_name, what="early bound")
    create(kube, namespace, pod("late", CPU))
    eventually(lambda: placements(kube, namespace)["late"] == node_name, what="late bound")
    written = events_about(kube, namespace, "Scheduled", ("early", "late"))
    scheduled = {e["regarding"]["name"]: e["note"] for e in written}
    assert scheduled == {
        name: f"Successfully assigned {namespace}/{name} to {node_name}"
        for name in ("early", "late")
    }


def group_members(name: str, count: int, requests: dict[str, str] = CPU) -> list[JSON]:
    members = []
    for i in range(count):
        member = pod(f"{name}-{i}", requests)
        member["metadata"]["annotations"] = {"scheduling.batchsched.io/group-name": name}
        members.append(member)
    return members


def test_a_pod_group_created_after_its_pods_releases_them(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "8", "memory": "16Gi"})
    for member in group_members("g", 3):
        create(kube, namespace, member)
    start_scheduler()
    missing = f"PodGroup {namespace}/g does not exist"
    eventually(
        lambda: all(unschedulable_message(p) == missing for p in pods(kube, namespace).values()),
        what="pods waiting for their PodGroup",
    )
    assert not any(placements(kube, namespace).values())
    members = ("g-0", "g-1", "g-2")
    waiting = [
        e["regarding"]["name"] for e in events_about(kube, namespace, "FailedScheduling", members)
    ]
    assert sorted(waiting) == list(members)

    create(kube, namespace, pod_group("g", 3))
    eventually(lambda: all(placements(kube, namespace).values()), what="the gang bound")


def test_a_node_added_later_unblocks_a_gang(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    queue = f"q-{namespace}"
    cluster_objects.create({"apiVersion": OUR_API, "kind": "Queue", "metadata": {"name": queue}})
    first, second = f"a-{namespace}", f"b-{namespace}"
    ready_node(cluster_objects, kube, node(first, cpu="2", memory="8Gi"))
    create(kube, namespace, pod_group("g", 3, queue=queue))
    for member in group_members("g", 3):
        create(kube, namespace, member)
    scheduler = start_scheduler()

    def unschedulable() -> JSON | None:
        status = get_pod_group(kube, namespace, "g").get("status") or {}
        conditions = status.get("conditions") or [{}]
        return status if conditions[0].get("type") == "Unschedulable" else None

    status = eventually(unschedulable, what="PodGroup g Unschedulable")
    assert status["phase"] in ("Pending", "Inqueue")
    assert status["scheduled"] == 0
    assert "gang" in status["conditions"][0]["message"]

    def never_half_a_gang() -> None:
        assert not any(placements(kube, namespace).values())

    ticks_pass(scheduler, meanwhile=never_half_a_gang)
    group_events = [e for e in events(kube, namespace) if e["regarding"]["kind"] == "PodGroup"]
    assert [e["reason"] for e in group_events] == ["FailedScheduling"]

    ready_node(cluster_objects, kube, node(second, cpu="2", memory="8Gi"))
    eventually(lambda: all(placements(kube, namespace).values()), what="the gang bound")
    assert sorted(str(n) for n in placements(kube, namespace).values()) == [first, first, second]

    def running() -> JSON | None:
        status = get_pod_group(kube, namespace, "g").get("status") or {}
        return status if status.get("phase") == "Running" else None

    status = eventually(running, what="PodGroup g Running")
    assert status["scheduled"] == 3
    assert status["conditions"][0]["type"] == "Scheduled"
    path = f"/apis/{OUR_API}/queues/{queue}"
    queue_status = eventually(
        lambda: (
            (kube.get(path).expect(200).get("status") or {}).get("running") == 1
            and kube.get(path).expect(200)["status"]
        ),
        what="Queue status",
    )
    assert queue_status["allocated"]["cpu"] == "3"
    assert queue_status["pending"] == queue_status["inqueue"] == 0
    # Each pod was told once that it waits, whatever the number of sessions.
    members = ("g-0", "g-1", "g-2")
    failed = [
        e["regarding"]["name"] for e in events_about(kube, namespace, "FailedScheduling", members)
    ]
    assert sorted(n for n in failed if n.startswith("g-")) == list(members)

    metrics = scheduler.metrics()
    assert metrics['batchsched_bindings_total{result="bound"}'] == 3
    assert metrics["batchsched_pending_pods"] == 0
    assert metrics[f'batchsched_queue_allocated{{queue="{queue}",resource="cpu",unit="core"}}'] == 3
    assert metrics["batchsched_session_duration_seconds_count"] >= 2
    assert metrics['batchsched_schedule_attempts_total{result="scheduled"}'] == 3


def test_a_leader_whose_lease_is_taken_exits_with_one_line_saying_so(
    kube: Kube, namespace: str, start_scheduler: StartScheduler
) -> None:
    """Another holder takes the Lease: the leader stops renewing, and at its renew
    deadline exits with status 1 and one last line, no traceback."""
    timing = [
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ]
    scheduler = start_scheduler(leader_elect=True, lease_namespace=namespace, extra_args=timing)
    eventually(lambda: scheduler.metric("batchsched_leader") == 1, what="leading")
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/batch-scheduler"

    def take_over() -> bool:
        lease = kube.get(path).expect(200)
        renewed = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease["spec"].update(
            holderIdentity="another-replica", renewTime=renewed, leaseDurationSeconds=3600
        )
        # 409: the leader renewed in between, and the Lease is read again.
        return kube.put(path, lease).status == 200

    eventually(take_over, what="the Lease taken over")
    assert scheduler.process is not None
    assert scheduler.process.wait(timeout=60) == 1
    output = scheduler.output()
    assert output.splitlines()[-1] == (
        "batchsched: lost the leader lease, exiting to start over: "
        f"lease {namespace}/batch-scheduler not renewed for 3s"
    )
    assert "Traceback" not in output
