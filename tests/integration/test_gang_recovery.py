"""A gang whose scheduler dies in the middle of binding it ends whole, never partial.

The leader runs behind the test's fault proxy (faultproxy.py), which lets the first few
of a 16-pod gang's Bindings through and holds the rest; it is killed (SIGKILL) with the
gang partly bound, so the held Bindings never reach the API server. Pods of a higher
priority are waiting meanwhile, enough to take all the room the gang's unbound members
were given: a scheduler that decided again from scratch would place them first and
leave the gang partly bound for good. The next scheduler must instead finish the gang
where its recorded placement puts it, or elsewhere for members whose node is gone.
"""

from __future__ import annotations

import pytest

from batchsched.api.placement import PLACEMENT_ANNOTATION, Placement, parse_placement
from batchsched.k8s.client import JSON
from batchsched.k8s.status import DISRUPTION_TARGET, PREEMPTION_REASON

from .operator_support import (  # noqa: F401 (fixtures)
    BINDING_PATHS,
    FAST_LEADER_ELECTION,
    LEASE_PATHS,
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    add_nodes,
    create,
    eventually,
    overcommitted,
    placements,
    pods,
    priority_class,
    scheduler_kubeconfig_fixture,
    start_proxy_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import ClusterObjects, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

GROUP_KEY = "scheduling.batchsched.io/group-name"
GANG = 16
BOUND_BEFORE_KILL = 5
CPU = {"cpu": "1", "memory": "64Mi"}
# The gang fills all nodes but one; one node's worth of room is spare.
CPUS_PER_NODE = 2
NODES = GANG // CPUS_PER_NODE + 1
# As many as the gang's members still to bind: enough to take all the room they need.
WAITING = GANG - BOUND_BEFORE_KILL


@pytest.mark.parametrize("node_lost", [False, True], ids=["nodes-kept", "node-lost"])
@pytest.mark.parametrize("successor", ["restarted", "standby"])
def test_a_gang_cut_off_mid_bind_is_finished_before_higher_priority_pods(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    scheduler_accounts: SchedulerAccounts,
    start_scheduler: StartScheduler,
    start_proxy: StartProxy,
    successor: str,
    node_lost: bool,
) -> None:
    """The next leader is a scheduler started after the kill, or a standby that watched
    it all happen; it takes the lease once the test lets it (its own proxy holds its
    lease requests until then), so a node lost meanwhile is gone before it decides."""
    nodes = [f"n{i}-{namespace}" for i in range(NODES)]
    add_nodes(cluster_objects, kube, nodes, {"cpu": str(CPUS_PER_NODE), "memory": "8Gi"})
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)
    elect = {"leader_elect": True, "lease_namespace": namespace, "extra_args": FAST_LEADER_ELECTION}
    first_proxy, next_proxy = start_proxy(), start_proxy()
    next_kubeconfig = scheduler_accounts.kubeconfig("next", server=next_proxy.url)
    held = first_proxy.hang(BINDING_PATHS, after=BOUND_BEFORE_KILL)
    first = start_scheduler(
        kubeconfig=scheduler_accounts.kubeconfig("first", server=first_proxy.url), **elect
    )
    eventually(lambda: first.metric("batchsched_leader") == 1, what="the first leading")
    kept_off = next_proxy.hang(LEASE_PATHS)
    if successor == "standby":
        start_scheduler(kubeconfig=next_kubeconfig, **elect)
    create(kube, namespace, pod_group("gang", GANG))
    for i in range(GANG):
        create(kube, namespace, pod(f"gang-{i}", CPU, annotations={GROUP_KEY: "gang"}))
    eventually(lambda: held.held == GANG - BOUND_BEFORE_KILL, what="the bind burst held")
    eventually(lambda: len(gang_bound(kube, namespace)) == BOUND_BEFORE_KILL, what="binds")
    first.kill()
    # The held Bindings die with their client: they never reach the API server.
    eventually(lambda: held.held == 0, what="the held Bindings dropped")
    # Created once the first leader is gone: it would rightly preempt the gang for them,
    # which is not what this test is about.
    for i in range(WAITING):
        waiting = pod(f"high-{i}", CPU)
        waiting["spec"]["priorityClassName"] = high
        create(kube, namespace, waiting)
    before = gang_bound(kube, namespace)
    assert 0 < len(before) < GANG, f"the kill should leave the gang partly bound: {before}"

    # Read now: the next leader records its own placement of the members it binds.
    record = recorded_placement(kube, namespace)
    lost = None
    if node_lost:
        assert record, f"no member of the gang carries its placement ({PLACEMENT_ANNOTATION})"
        # A node meant only for members still unbound: they must go elsewhere.
        lost = min(set(record.values()) - set(before.values()))
        kube.delete(f"/api/v1/nodes/{lost}").expect(200)
    if successor == "restarted":
        start_scheduler(kubeconfig=next_kubeconfig, **elect)
    kept_off.release()

    def whole() -> dict[str, str] | None:
        bound = gang_bound(kube, namespace)
        return bound if len(bound) == GANG else None

    after = eventually(
        whole,
        timeout=60,
        what=f"the whole gang bound (it had {len(before)} of {GANG})",
    )
    assert {name: after[name] for name in before} == before
    assert record, f"no member of the gang carries its placement ({PLACEMENT_ANNOTATION})"
    assert set(record) == set(after)
    if lost is None:
        assert after == record
    else:
        # The members meant for the lost node are placed afresh, and the gang's other
        # pending members may give up their room to them: it is the gang's either way.
        assert lost not in after.values()
    crowded = overcommitted(kube, namespace)
    assert not crowded, f"CPUs requested of allocatable: {crowded}"
    # The waiting pods were decided on too, and found the gang's room taken.
    eventually(
        lambda: all(
            unschedulable_message(p) or p["spec"].get("nodeName")
            for name, p in pods(kube, namespace).items()
            if name.startswith("high-")
        ),
        what="every waiting pod placed or told why not",
    )


def bound(pod: JSON) -> bool:
    return bool(pod["spec"].get("nodeName"))


def preempted(pod: JSON) -> bool:
    """Being deleted, with the condition the scheduler marks its victims with."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    marked = any(
        (c["type"], c["status"], c.get("reason")) == (DISRUPTION_TARGET, "True", PREEMPTION_REASON)
        for c in conditions
    )
    return marked and bool(pod["metadata"].get("deletionTimestamp"))


def gang_bound(kube: Kube, namespace: str) -> dict[str, str]:
    """The gang's members that are bound, and where."""
    return {
        name: node
        for name, node in placements(kube, namespace).items()
        if name.startswith("gang-") and node
    }


def recorded_placement(kube: Kube, namespace: str) -> dict[str, str]:
    """Member name -> node, from the placement the gang's bound members carry (one
    record, as long as one scheduler has bound it); empty when none does."""
    records: list[Placement] = []
    for name, member in pods(kube, namespace).items():
        text = (member["metadata"].get("annotations") or {}).get(PLACEMENT_ANNOTATION)
        placement = parse_placement(text) if text and name.startswith("gang-") else None
        if placement is not None:
            records.append(placement)
    assert len(records) <= 1, records
    return {name: node for record in records for name, (node, _) in record.members.items()}


def test_a_gang_finished_after_a_kill_is_not_left_short_by_preemption(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    scheduler_accounts: SchedulerAccounts,
    start_scheduler: StartScheduler,
    start_proxy: StartProxy,
) -> None:
    """Killed with only the gang's first member bound (the one carrying the placement
    record), then higher-priority pods arrive, one more than the room left once the gang
    is whole. The next leader finishes the gang; the pod left over may not take the one
    member bound before the kill "with its whole gang": the members it binds in that
    pass would be left below minMember. The only room for it is the gang's, so a later
    pass evicts the gang whole for it (it outranks the gang, and no member may go alone):
    the test waits for that decision as the API server shows it, the preemptor nominated
    and told why it waits, every member bound and marked preempted, none left running."""
    nodes = [f"n{i}-{namespace}" for i in range(NODES)]
    add_nodes(cluster_objects, kube, nodes, {"cpu": str(CPUS_PER_NODE), "memory": "8Gi"})
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)
    proxy = start_proxy()
    kubeconfig = scheduler_accounts.kubeconfig("first", server=proxy.url)
    held = proxy.hang(BINDING_PATHS, after=1)
    first = start_scheduler(kubeconfig=kubeconfig)
    create(kube, namespace, pod_group("gang", GANG))
    for i in range(GANG):
        create(kube, namespace, pod(f"gang-{i}", CPU, annotations={GROUP_KEY: "gang"}))
    eventually(lambda: held.held == GANG - 1, what="the bind burst held")
    eventually(lambda: len(gang_bound(kube, namespace)) == 1, what="the first member bound")
    first.kill()
    eventually(lambda: held.held == 0, what="the held Bindings dropped")
    spare = NODES * CPUS_PER_NODE - GANG
    for i in range(spare + 1):
        waiting = pod(f"high-{i}", CPU)
        waiting["spec"]["priorityClassName"] = high
        create(kube, namespace, waiting)
    start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("next"))

    def preempted_whole() -> dict[str, JSON] | None:
        """The pods, once the pod left over is nominated and says why it waits, and every
        member of the gang is bound and being evicted for it."""
        listed = pods(kube, namespace)
        left_over = [p for name, p in listed.items() if name.startswith("high-") and not bound(p)]
        members = [p for name, p in listed.items() if name.startswith("gang-")]
        decided = len(left_over) == 1 and all(
            p["status"].get("nominatedNodeName") and unschedulable_message(p) for p in left_over
        )
        evicted = len(members) == GANG and all(bound(p) and preempted(p) for p in members)
        return listed if decided and evicted else None

    listed = eventually(
        preempted_whole,
        timeout=60,
        what="the pod left over nominated and waiting, the gang evicted whole for it",
    )
    (preemptor,) = (p for name, p in listed.items() if name.startswith("high-") and not bound(p))
    gang_nodes = {p["spec"]["nodeName"] for name, p in listed.items() if name.startswith("gang-")}
    assert preemptor["status"]["nominatedNodeName"] in gang_nodes, preemptor["status"]
    # Its first PodScheduled=False, however many reasons it had before one was sent.
    (scheduled,) = (c for c in preemptor["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["lastTransitionTime"], scheduled
    crowded = overcommitted(kube, namespace)
    assert not crowded, f"CPUs requested of allocatable: {crowded}"
