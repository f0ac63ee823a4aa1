"""Preemption carried out on the real API server.

The evictor (batchsched/k8s/evictor.py) is driven with hand-made decisions, as the
scheduler's least-privilege account: victims evicted or, past a budget, deleted, with
their DisruptionTarget condition and Preempted event; a PodDisruptionBudget refusing
an eviction (no disruption controller runs here, so the test writes the budget's status
as that controller would); preemptors' nominated nodes written and cleared; and a
replica that can no longer prove its lease evicting nothing. Then `batchsched run`
preempts a running gang, whole, for a higher-priority one, and reclaims for a queue
below its share from one above it.

There is no kubelet: a bound pod deleted with a grace period stays Terminating, so the
tests look for its deletionTimestamp, and delete it with grace 0 where the kubelet
would have finished it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from batchsched.api.groups import OUR_API
from batchsched.api.pods import OUR_GROUP_KEY as GROUP_ANNOTATION
from batchsched.api.volumes import SELECTED_NODE_ANNOTATION
from batchsched.cache.cluster import ClusterCache
from batchsched.k8s.client import Api
from batchsched.k8s.credentials import load_credentials
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.watch import PODS, Watch
from batchsched.model.decisions import Eviction, Nomination

from .faultproxy import FaultProxy
from .operator_support import (  # noqa: F401 (fixtures)
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    add_nodes,
    create,
    events,
    events_about,
    eventually,
    placements,
    pods,
    priority_class,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_proxy_fixture,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)
from .test_volumes import bind_claim, claim, claims, storage_class, with_claim
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

SCHEDULER = "batch-scheduler"
DISRUPTION_MESSAGE = f"{SCHEDULER}: preempting to accommodate a higher priority pod"
MESSAGE = "preempted for {ns}/high, which has priority 1000 (this pod 0)"
CPU = {"cpu": "1", "memory": "64Mi"}
LABELS = {"app": "trainer"}
EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"
VICTIMS = "batchsched_preemption_victims_total"
FAILURES = "batchsched_preemption_failures_total"


@dataclass
class Evicting:
    """An evictor and the status writer its events go through, over one account."""

    evictor: Evictor
    watch: Watch
    kube: Kube
    namespace: str

    def see(self, names: Iterable[str]) -> None:
        """Show the cache the pods as the API server has them, as the watch would."""
        for name in names:
            self.watch.apply(PODS, self.kube.get(self._path(name)).expect(200))

    async def carry_out(
        self, evictions: Sequence[Eviction], nominations: Sequence[Nomination] = ()
    ) -> None:
        self.evictor.submit(evictions, nominations)
        async with asyncio.timeout(60):
            await self.evictor.idle.wait()

    async def events_about(self, reason: str, names: Sequence[str]) -> list[JSON]:
        """Wait (off the event loop, so the writer runs) for `reason` events about `names`."""
        return await asyncio.to_thread(events_about, self.kube, self.namespace, reason, names)

    def pod(self, name: str) -> JSON:
        return self.kube.get(self._path(name)).expect(200)

    def _path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    def victim(self, name: str, *, budget: str = "") -> Eviction:
        uid = self.pod(name)["metadata"]["uid"]
        message = MESSAGE.format(ns=self.namespace)
        preemptor = f"{self.namespace}/high"
        return Eviction(self.namespace, name, uid, "n1", "preempt", preemptor, message, budget)

    def nomination(self, name: str, node: str) -> Nomination:
        uid = self.pod(name)["metadata"]["uid"]
        return Nomination(self.namespace, name, uid, node, f"{self.namespace}/high")


@asynccontextmanager
async def evicting(
    kube: Kube,
    namespace: str,
    kubeconfig: Path,
    *,
    valid_for: Callable[[], float] = unbounded,
) -> AsyncIterator[Evicting]:
    """An evictor and status writer running as the account of `kubeconfig`."""
    api = Api(load_credentials(str(kubeconfig)))
    idle = asyncio.Event()
    idle.set()
    status = StatusWriter(
        api, scheduler_name=SCHEDULER, instance="test", binds_idle=idle, valid_for=valid_for
    )
    watch = Watch(ClusterCache(), status)
    evictor = Evictor(api, watch, scheduler_name=SCHEDULER, valid_for=valid_for)
    tasks = [asyncio.create_task(evictor.run()), asyncio.create_task(status.run())]
    try:
        yield Evicting(evictor, watch, kube, namespace)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()


async def answered(proxy: FaultProxy) -> None:
    """Wait until the proxy has answered or dropped every request it took: a request
    sent on reaches the API server before that, one dropped never does."""
    async with asyncio.timeout(30):
        while proxy.in_progress:
            await asyncio.sleep(0.01)


def running_pods(kube: Kube, namespace: str, names: Iterable[str]) -> None:
    """Pods bound to n1 and Running and Ready, as a kubelet would report them: the
    Eviction API checks budgets only for running pods."""
    for name in names:
        created = create(kube, namespace, pod(name, CPU, labels=LABELS))
        kube.bind(namespace, name, created["metadata"]["uid"], "n1").expect(201)
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        kube.patch(path, {"status": status}, merge=False).expect(200)


def budget(kube: Kube, namespace: str, *, min_available: int, allowed: int) -> JSON:
    """A PodDisruptionBudget over the trainers, with the status the disruption
    controller (not running here) would give it: `allowed` disruptions, for two
    healthy pods."""
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    manifest = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": LABELS}},
    }
    created = kube.post(path, manifest).expect(201)
    created["status"] = {
        "observedGeneration": created["metadata"]["generation"],
        "disruptionsAllowed": allowed,
        "currentHealthy": 2,
        "desiredHealthy": min_available,
        "expectedPods": 2,
    }
    return kube.put(f"{path}/keep/status", created).expect(200)


def disruption_target(obj: JSON) -> JSON | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "DisruptionTarget"), None)


def preempted(obj: JSON) -> bool:
    """Terminating, and marked as kube-scheduler marks the pods it preempts."""
    condition = disruption_target(obj) or {}
    return bool(obj["metadata"].get("deletionTimestamp")) and (
        condition.get("status"),
        condition.get("reason"),
        condition.get("message"),
    ) == ("True", "PreemptionByScheduler", DISRUPTION_MESSAGE)


def sample(metric: str, **labels: str) -> float:
    """A metric of this process (the evictor runs in the test's)."""
    return REGISTRY.get_sample_value(metric, labels) or 0.0


async def test_a_victim_is_evicted_marked_and_told_why(
    kube: Kube, namespace: str, scheduler_kubeconfig: Path
) -> None:
    running_pods(kube, namespace, ["v0", "v1"])
    before = sample(VICTIMS, action="preempt")
    async with evicting(kube, namespace, scheduler_kubeconfig) as run:
        run.see(["v0", "v1"])
        await run.carry_out([run.victim("v0")])
        [event] = await run.events_about("Preempted", ["v0"])
    assert preempted(run.pod("v0"))
    assert disruption_target(run.pod("v1")) is None and not run.pod("v1")["metadata"].get(
        "deletionTimestamp"
    )
    # The pod's own grace period applied: no kubelet finishes it here.
    assert run.pod("v0")["metadata"]["deletionGracePeriodSeconds"] == 30
    assert (event["type"], event["note"]) == ("Normal", MESSAGE.format(ns=namespace))
    assert event["reportingController"] == SCHEDULER
    assert sample(VICTIMS, action="preempt") == before + 1


async def test_a_victim_past_its_budget_is_deleted_rather_than_evicted(
    kube: Kube, namespace: str, scheduler_kubeconfig: Path
) -> None:
    running_pods(kube, namespace, ["v0", "v1"])
    budget(kube, namespace, min_available=2, allowed=0)
    async with evicting(kube, namespace, scheduler_kubeconfig) as run:
        run.see(["v0", "v1"])
        await run.carry_out([run.victim("v0", budget=f"{namespace}/keep")])
        [event] = await run.events_about("Preempted", ["v0"])
    assert preempted(run.pod("v0"))
    assert "deleted rather than evicted" in event["note"]
    assert f"PodDisruptionBudget {namespace}/keep" in event["note"]


async def test_a_budget_refusing_the_eviction_leaves_the_pod_with_a_warning(
    kube: Kube, namespace: str, scheduler_kubeconfig: Path
) -> None:
    """minAvailable 1 of 2 healthy pods allows one disruption: the Eviction API takes
    it (and counts it in the budget's status), then refuses the next, as it would when
    the session read the budget before another eviction used it up."""
    running_pods(kube, namespace, ["v0", "v1"])
    budget(kube, namespace, min_available=1, allowed=1)
    refused = sample(FAILURES, reason="refused")
    async with evicting(kube, namespace, scheduler_kubeconfig) as run:
        run.see(["v0", "v1"])
        await run.carry_out([run.victim("v0")])
        shown = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/keep")
        assert shown.expect(200)["status"]["disruptionsAllowed"] == 0
        await run.carry_out([run.victim("v1")])
        [warning] = await run.events_about("EvictionRefused", ["v1"])
    assert preempted(run.pod("v0"))
    kept = run.pod("v1")
    assert not kept["metadata"].get("deletionTimestamp")
    assert disruption_target(kept) is None
    assert warning["type"] == "Warning"
    assert "The disruption budget keep does not allow evicting pods currently" in warning["note"]
    assert f"not evicted for {namespace}/high" in warning["note"]
    assert sample(FAILURES, reason="refused") == refused + 1
    assert [e["regarding"]["name"] for e in events(kube, namespace, "Preempted")] == ["v0"]


async def test_a_preemptor_is_nominated_and_the_nomination_cleared(
    kube: Kube, namespace: str, scheduler_kubeconfig: Path
) -> None:
    create(kube, namespace, pod("high-0", CPU))
    async with evicting(kube, namespace, scheduler_kubeconfig) as run:
        run.see(["high-0"])
        await run.carry_out([], [run.nomination("high-0", "n1")])
        assert run.pod("high-0")["status"].get("nominatedNodeName") == "n1"
        run.see(["high-0"])
        await run.carry_out([], [run.nomination("high-0", "")])
    assert "nominatedNodeName" not in run.pod("high-0")["status"]


async def test_a_replica_that_cannot_prove_its_lease_evicts_and_nominates_nothing(
    kube: Kube,
    namespace: str,
    scheduler_accounts: SchedulerAccounts,
    start_proxy: StartProxy,
) -> None:
    running_pods(kube, namespace, ["v0", "v1"])
    create(kube, namespace, pod("high-0", CPU))
    fenced = sample(FAILURES, reason="fenced")
    # Through a proxy, so that whatever it sent anyway is known to have been answered.
    proxy = start_proxy()
    kubeconfig = scheduler_accounts.kubeconfig("fenced", server=proxy.url)
    async with evicting(kube, namespace, kubeconfig, valid_for=lambda: 0.0) as run:
        run.see(["v0", "v1", "high-0"])
        victims = [run.victim("v0"), run.victim("v1", budget=f"{namespace}/keep")]
        await run.carry_out(victims, [run.nomination("high-0", "n1")])
        await answered(proxy)
    for name in ("v0", "v1"):
        untouched = run.pod(name)
        assert not untouched["metadata"].get("deletionTimestamp")
        assert disruption_target(untouched) is None
    assert "nominatedNodeName" not in run.pod("high-0")["status"]
    assert events(kube, namespace) == []
    assert sample(FAILURES, reason="fenced") == fenced + 2


async def test_an_eviction_on_the_wire_when_the_lease_deadline_passes_is_abandoned(
    kube: Kube,
    namespace: str,
    scheduler_accounts: SchedulerAccounts,
    start_proxy: StartProxy,
) -> None:
    """The API server holds the eviction (a proxy in front of it does) until after the
    renew deadline: the evictor gives it up at the deadline, sends no retry, and the
    eviction, released later, never arrives."""
    running_pods(kube, namespace, ["v0"])
    proxy = start_proxy()
    held = proxy.hang(EVICTIONS)
    kubeconfig = scheduler_accounts.kubeconfig("deposed", server=proxy.url)
    fenced = sample(FAILURES, reason="fenced")

    def valid_for() -> float:
        # The lease is good for 2 s when the eviction is sent, and lost once it is on the
        # wire: however long a busy machine takes to send it, it is held past the deadline.
        return 0.0 if held.paths else 2.0

    async with evicting(kube, namespace, kubeconfig, valid_for=valid_for) as run:
        run.see(["v0"])
        await run.carry_out([run.victim("v0")])
        assert len(held.paths) == 1
        held.release()
        await answered(proxy)
    untouched = run.pod("v0")
    assert not untouched["metadata"].get("deletionTimestamp")
    assert disruption_target(untouched) is None
    assert sample(FAILURES, reason="fenced") == fenced + 1


def gang(kube: Kube, namespace: str, name: str, size: int, priority: str) -> list[str]:
    """A PodGroup of `size` and its pods, one CPU each, of PriorityClass `priority`."""
    create(kube, namespace, pod_group(name, size, priorityClassName=priority))
    members = [f"{name}-{i}" for i in range(size)]
    for member in members:
        manifest = pod(member, CPU, annotations={GROUP_ANNOTATION: name})
        manifest["spec"]["priorityClassName"] = priority
        create(kube, namespace, manifest)
    return members


def test_the_operator_preempts_a_running_gang_whole_for_a_higher_priority_one(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """Two nodes of 2 CPUs run a 4-pod gang of priority 0 (minMember 4). A 2-pod gang of
    priority 1000 arrives: room for it means two victims, but the running gang would be
    left short of its minMember, so all four go. Each victim is marked and told why,
    the preemptors are nominated to the nodes freed for them, and once the victims are
    gone (deleted here as the kubelet would finish them) they are bound there."""
    nodes = [f"n{i}-{namespace}" for i in range(2)]
    add_nodes(cluster_objects, kube, nodes, {"cpu": "2", "memory": "4Gi"})
    low = priority_class(cluster_objects, kube, f"low-{namespace}", 0)
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)
    scheduler = start_scheduler()
    victims = gang(kube, namespace, "low", 4, low)
    eventually(
        lambda: all(placements(kube, namespace).get(v) for v in victims), what="low gang bound"
    )
    set_running(kube, namespace, victims)
    preemptors = gang(kube, namespace, "high", 2, high)

    eventually(
        lambda: all(preempted(p) for n, p in pods(kube, namespace).items() if n in victims),
        timeout=60,
        what="the whole low gang preempted",
    )
    written = events_about(kube, namespace, "Preempted", victims)
    assert sorted(e["regarding"]["name"] for e in written) == sorted(victims)
    assert all(e["type"] == "Normal" and f"{namespace}/high" in e["note"] for e in written)

    def nominated() -> dict[str, str] | None:
        shown = {n: p["status"].get("nominatedNodeName") for n, p in pods(kube, namespace).items()}
        held = {n: shown[n] for n in preemptors}
        return held if all(held.values()) else None

    held = eventually(nominated, what="the high gang nominated")
    assert set(held.values()) <= set(nodes)

    def unbound() -> None:
        assert not any(placements(kube, namespace)[p] for p in preemptors)

    # Held, not bound, while the victims terminate, however many sessions run.
    ticks_pass(scheduler, meanwhile=unbound)

    for victim in victims:
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/{victim}", grace_period_seconds=0)
    eventually(
        lambda: all(placements(kube, namespace).get(p) for p in preemptors),
        what="the high gang bound",
    )
    assert {p: placements(kube, namespace)[p] for p in preemptors} == held
    assert scheduler.metric(f'{VICTIMS}{{action="preempt"}}') == len(victims)


def queued_pod(name: str, *, group: str, pool: str) -> JSON:
    manifest = pod(name, CPU, annotations={GROUP_ANNOTATION: group})
    manifest["spec"]["nodeSelector"] = {"pool": pool}
    return manifest


def test_the_operator_reclaims_for_a_queue_below_its_share(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """Queues a and b, weight 1:1, share a pool of two 2-CPU nodes. Queue a, alone,
    fills it with four 1-CPU jobs: twice its share. A 2-pod gang of b arrives: reclaim
    evicts two of a's pods, never more, whatever their priority, and b's gang is bound
    to the room once they are gone."""
    pool = namespace
    nodes = [f"n{i}-{namespace}" for i in range(2)]
    for name in nodes:
        ready_node(cluster_objects, kube, node(name, cpu="2", memory="4Gi", labels={"pool": pool}))
    lender, borrower = f"a-{namespace}", f"b-{namespace}"
    for name in (lender, borrower):
        cluster_objects.create(
            {
                "apiVersion": OUR_API,
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            }
        )
    scheduler = start_scheduler()
    lent = [f"a{i}" for i in range(4)]
    for name in lent:
        create(kube, namespace, pod_group(name, 1, queue=lender))
        create(kube, namespace, queued_pod(name, group=name, pool=pool))
    eventually(lambda: all(placements(kube, namespace).get(n) for n in lent), what="a bound")
    set_running(kube, namespace, lent)
    create(kube, namespace, pod_group("b", 2, queue=borrower))
    wanting = ["b-0", "b-1"]
    for name in wanting:
        create(kube, namespace, queued_pod(name, group="b", pool=pool))

    def reclaimed() -> list[str] | None:
        shown = pods(kube, namespace)
        gone = [n for n in lent if preempted(shown[n])]
        return gone if len(gone) == 2 else None

    victims = eventually(reclaimed, timeout=60, what="two of a's pods reclaimed")
    written = events_about(kube, namespace, "Preempted", victims)
    assert all(f"reclaimed for queue {borrower}" in e["note"] for e in written), written
    for victim in victims:
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/{victim}", grace_period_seconds=0)
    eventually(lambda: all(placements(kube, namespace).get(n) for n in wanting), what="b bound")
    shown = pods(kube, namespace)
    kept = [n for n in lent if n in shown]
    assert len(kept) == 2 and not any(preempted(shown[n]) for n in kept)
    assert scheduler.metric(f'{VICTIMS}{{action="reclaim"}}') == 2


def test_the_operator_never_preempts_a_pod_waiting_for_its_claims(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """A pod placed on the only node waits for its WaitForFirstConsumer claim to be
    provisioned: decided, its Binding not sent, so it holds nothing on the API server. A
    higher-priority pod that wants the node finds no victim there: it is told why it
    waits, and the first pod, untouched, is bound once its claim is."""
    where = f"n0-{namespace}"
    add_nodes(cluster_objects, kube, [where], {"cpu": "1", "memory": "4Gi"})
    low = priority_class(cluster_objects, kube, f"low-{namespace}", 0)
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)
    storage_class(cluster_objects, f"wait-{namespace}")
    claim(kube, namespace, "data", storage_class=f"wait-{namespace}")
    waiting = with_claim("waiting", "data")
    waiting["spec"]["priorityClassName"] = low
    create(kube, namespace, waiting)
    start_scheduler()

    def selected() -> str | None:
        notes = claims(kube, namespace)["data"]["metadata"].get("annotations") or {}
        return notes.get(SELECTED_NODE_ANNOTATION)

    assert eventually(selected, what="the claim's node selected") == where
    urgent = pod("urgent", CPU)
    urgent["spec"]["priorityClassName"] = high
    create(kube, namespace, urgent)
    eventually(
        lambda: unschedulable_message(pods(kube, namespace)["urgent"]),
        what="the urgent pod told why it waits",
    )
    listed = pods(kube, namespace)
    assert not listed["waiting"]["metadata"].get("deletionTimestamp")
    assert disruption_target(listed["waiting"]) is None
    assert not listed["urgent"]["status"].get("nominatedNodeName")
    assert events(kube, namespace, "Preempted") == []

    bind_claim(
        kube,
        cluster_objects,
        claims(kube, namespace)["data"],
        node=where,
        storage_class=f"wait-{namespace}",
    )
    eventually(lambda: placements(kube, namespace).get("waiting") == where, what="bound")


def test_the_operator_takes_the_cheapest_victim_set_over_the_cluster(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
) -> None:
    """Four nodes of 4 CPUs: a gang of six (minMember 6) fills two, four lone pods fill
    each of the others, all of priority 0. A gang of 2 x 4 CPUs of priority 1000 needs
    two empty nodes: the gang's six pods, not the eight lone pods that node-by-node
    choices (four victims per node against six) would take."""
    nodes = [f"n{i}-{namespace}" for i in range(4)]
    add_nodes(cluster_objects, kube, nodes, {"cpu": "4", "memory": "8Gi"})
    low = priority_class(cluster_objects, kube, f"low-{namespace}", 0)
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)

    def running(name: str, cpu: str, where: str, group: str | None = None) -> str:
        notes = {GROUP_ANNOTATION: group} if group else None
        manifest = pod(name, {"cpu": cpu, "memory": "64Mi"}, annotations=notes)
        manifest["spec"]["priorityClassName"] = low
        manifest["spec"]["nodeName"] = where
        create(kube, namespace, manifest)
        return name

    create(kube, namespace, pod_group("wide", 6, priorityClassName=low))
    wide = [
        running(f"wide-{n}-{i}", cpu, nodes[n], "wide")
        for n in (0, 1)
        for i, cpu in enumerate(("1", "1", "2"))
    ]
    lone = [running(f"lone-{n}-{i}", "1", nodes[n]) for n in (2, 3) for i in range(4)]
    set_running(kube, namespace, wide + lone)
    scheduler = start_scheduler()
    create(kube, namespace, pod_group("big", 2, priorityClassName=high))
    for i in range(2):
        manifest = pod(
            f"big-{i}", {"cpu": "4", "memory": "64Mi"}, annotations={GROUP_ANNOTATION: "big"}
        )
        manifest["spec"]["priorityClassName"] = high
        create(kube, namespace, manifest)

    eventually(
        lambda: all(preempted(p) for n, p in pods(kube, namespace).items() if n in wide),
        what="the wide gang preempted",
    )
    shown = pods(kube, namespace)
    assert not any(shown[n]["metadata"].get("deletionTimestamp") for n in lone)
    eventually(
        lambda: scheduler.metric(f'{VICTIMS}{{action="preempt"}}') == len(wide),
        what="six victims counted",
    )
    assert not any(pods(kube, namespace)[n]["metadata"].get("deletionTimestamp") for n in lone)
