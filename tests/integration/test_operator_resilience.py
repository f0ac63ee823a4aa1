"""`batchsched run` when things go wrong: killed mid-run, two replicas, unusable objects."""

from __future__ import annotations

from collections import Counter

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    FAST_LEADER_ELECTION,
    Scheduler,
    SchedulerAccounts,
    StartScheduler,
    add_nodes,
    create,
    events_about,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import ClusterObjects, ControlPlane, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

CPU = {"cpu": "1", "memory": "256Mi"}
GROUP_KEY = "scheduling.batchsched.io/group-name"
BOUND = 'batchsched_bindings_total{result="bound"}'


def create_gangs(kube: Kube, namespace: str, gangs: int, size: int) -> None:
    for g in range(gangs):
        create(kube, namespace, pod_group(f"g{g}", size))
        for i in range(size):
            member = pod(f"g{g}-{i}", CPU)
            member["metadata"]["annotations"] = {GROUP_KEY: f"g{g}"}
            create(kube, namespace, member)


def bound_now(kube: Kube, namespace: str) -> dict[str, str]:
    return {name: str(where) for name, where in placements(kube, namespace).items() if where}


def test_killed_mid_run_then_restarted_ends_the_same_and_binds_nothing_twice(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    control_plane: ControlPlane,
    scheduler_accounts: SchedulerAccounts,
) -> None:
    gangs, size, per_node = 100, 8, 8
    nodes = [f"n{i:03d}-{namespace}" for i in range(gangs * size // per_node)]
    add_nodes(cluster_objects, kube, nodes, {"cpu": str(per_node), "memory": "8Gi"})
    create_gangs(kube, namespace, gangs, size)
    total = gangs * size

    # Each runs as an account of its own, so that the audit log tells which pods each
    # asked to bind, those whose binds were still on their way when the first died
    # included. A bind in flight at the kill may land without its reply saying so (the
    # server writes it, then finds the client gone), so the first is judged by what it
    # asked for and the second, which lives on, by what it was told.
    def binds(user: str, *, answered: bool) -> set[str]:
        username = scheduler_accounts.username(user)
        return {
            e["objectRef"]["name"]
            for e in control_plane.audit_events()
            if e["user"]["username"] == username
            and e["objectRef"].get("namespace") == namespace
            and e["objectRef"].get("subresource") == "binding"
            and (not answered or e["responseStatus"]["code"] == 201)
        }

    first = start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("first"))
    path = f"/api/v1/namespaces/{namespace}/pods"
    eventually(
        lambda: kube.get(path, query={"fieldSelector": "spec.nodeName!=", "limit": 1}).expect(200)[
            "items"
        ],
        what="a first pod bound",
    )
    first.kill()
    before = bound_now(kube, namespace)
    assert 0 < len(before) < total, "the kill should land while binding"

    second = start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("second"))
    eventually(lambda: len(bound_now(kube, namespace)) == total, what="every pod bound")
    after = bound_now(kube, namespace)
    assert {name: after[name] for name in before} == before
    per_node_use = Counter(after.values())
    assert max(per_node_use.values()) <= per_node

    # The pods are bound once the API server says so; the counter moves when the reply
    # reaches the operator, a moment later.
    def counted() -> tuple[dict[str, float], set[str]] | None:
        metrics = second.metrics()
        by_second = binds("second", answered=True)
        return (metrics, by_second) if metrics.get(BOUND) == len(by_second) else None

    metrics, by_second = eventually(counted, what="the second's binds counted")
    assert not by_second & set(before), "the second bound a pod the first had bound"
    assert set(after) == by_second | binds("first", answered=False)
    assert metrics.get('batchsched_bindings_total{result="conflict"}', 0) == 0


def test_two_replicas_one_leader_and_the_other_takes_over(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "64", "memory": "64Gi"})
    elect = {"leader_elect": True, "lease_namespace": namespace, "extra_args": FAST_LEADER_ELECTION}
    replicas = [start_scheduler(**elect) for _ in range(2)]

    def the_leader() -> Scheduler | None:
        leading = [r for r in replicas if r.metric("batchsched_leader") == 1]
        assert len(leading) <= 1, "two replicas lead at once"
        return leading[0] if leading else None

    leader = eventually(the_leader, what="a leader")
    standby = next(r for r in replicas if r is not leader)
    for i in range(10):
        create(kube, namespace, pod(f"a{i}", CPU))
    eventually(lambda: len(bound_now(kube, namespace)) == 10, what="first pods bound")
    eventually(lambda: leader.metric(BOUND) == 10, what="the leader's binds counted")
    assert standby.metric(BOUND) == 0
    assert standby.metric("batchsched_leader") == 0

    leader.kill()
    for i in range(10):
        create(kube, namespace, pod(f"b{i}", CPU))
    eventually(lambda: standby.metric("batchsched_leader") == 1, timeout=60, what="failover")
    eventually(lambda: len(bound_now(kube, namespace)) == 20, what="later pods bound")
    eventually(lambda: standby.metric(BOUND) == 10, what="the new leader's binds counted")


def test_unusable_objects_are_reported_and_do_not_block_the_rest(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    ready_node(cluster_objects, kube, node(f"n-{namespace}", cpu="8", memory="8Gi"))
    # kube-batch's first API: its CRD (a stand-in, tests/integration/conftest.py)
    # validates nothing, so a value no released CRD would store can still reach us.
    bad_group = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "bad"},
        "spec": {"minMember": "lots"},
    }
    kube.create(bad_group, namespace)
    for i in range(2):
        member = pod(f"bad-{i}", CPU, annotations={"scheduling.k8s.io/group-name": "bad"})
        create(kube, namespace, member)
    create(kube, namespace, pod("orphan", CPU, annotations={GROUP_KEY: "missing"}))
    mislabeled = pod("mislabeled", CPU, labels={"pod-group.scheduling.sigs.k8s.io/name": "x"})
    create(kube, namespace, mislabeled)
    create(kube, namespace, pod("fine", CPU))
    scheduler = start_scheduler()

    eventually(lambda: placements(kube, namespace)["fine"], what="the valid pod bound")

    def reasons() -> dict[str, str | None] | None:
        shown = {name: unschedulable_message(p) for name, p in pods(kube, namespace).items()}
        waiting = {name: message for name, message in shown.items() if name != "fine"}
        return waiting if all(waiting.values()) else None

    waiting = eventually(reasons, what="every unusable pod told why")
    assert "spec.minMember" in str(waiting["bad-0"]) and "'lots'" in str(waiting["bad-0"])
    assert waiting["bad-1"] == waiting["bad-0"]
    assert waiting["orphan"] == f"PodGroup {namespace}/missing does not exist"
    assert "pod-group.scheduling.sigs.k8s.io/min-available" in str(waiting["mislabeled"])
    written = events_about(kube, namespace, "FailedScheduling", [*waiting, "bad"])
    told = Counter(e["regarding"]["name"] for e in written if e["regarding"]["kind"] == "Pod")
    assert told == {name: 1 for name in waiting}
    # Volcano's malformed PodGroup is told too, as Volcano's own scheduler would tell it.
    [group_event] = [e for e in written if e["regarding"]["kind"] == "PodGroup"]
    assert "spec.minMember" in group_event["note"]
    assert scheduler.metric('batchsched_invalid_objects_total{kind="Pod"}') == 1
    assert not any(placements(kube, namespace)[name] for name in waiting)
