"""`batchsched run` when the API server refuses binds: a namespace being deleted forbids
every Binding and event in it, and the scheduler must back off rather than decide the
same pods again every session."""

from __future__ import annotations

import math
import time

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    add_nodes,
    create,
    eventually,
    get_pod_group,
    placements,
    pods,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)
from tests.support import ClusterObjects, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

CPU = {"cpu": "1", "memory": "1Gi"}
GROUP_KEY = "scheduling.batchsched.io/group-name"
# Session-loop ticks watched: a scheduler without backoff tries again at each of them.
WATCHED_TICKS = 15


def test_a_namespace_being_deleted_is_backed_off_not_retried_every_session(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "8", "memory": "16Gi"})
    create(kube, namespace, pod_group("g", 2))
    for i in range(2):
        member = pod(f"g-{i}", CPU)
        member["metadata"]["annotations"] = {GROUP_KEY: "g"}
        create(kube, namespace, member)
    # This control plane runs no namespace controller: the namespace stays Terminating
    # with its pods in it, and the API server refuses every create there.
    kube.delete(f"/api/v1/namespaces/{namespace}").expect(200, 202)

    began = time.monotonic()
    scheduler = start_scheduler()
    refused = 'batchsched_bindings_total{result="refused"}'
    eventually(lambda: scheduler.metric(refused) >= 1, what="a refused bind")
    eventually(
        lambda: any(
            "being terminated" in (unschedulable_message(p) or "")
            for p in pods(kube, namespace).values()
        ),
        what="the refusal as the pod's pending reason",
    )
    ticks_pass(scheduler, WATCHED_TICKS)
    count = scheduler.metric(refused)
    elapsed = time.monotonic() - began

    assert not any(placements(kube, namespace).values())
    # Once at start, then after each backoff (1 s, 2 s, 4 s, ...): the n-th try comes
    # 2^(n-1) - 1 s after the first at the earliest. The bound follows from the time the
    # scheduler has had, so a busy machine, which stretches that time, only loosens it;
    # a scheduler trying at every tick would exceed it many times over.
    assert count <= 1 + math.log2(elapsed + 1), (count, elapsed)
    metrics = scheduler.metrics()
    refused_events = [
        name
        for name in metrics
        if name.startswith("batchsched_api_writes_total")
        and 'kind="event"' in name
        and 'result="403"' in name
    ]
    assert refused_events == []
    status = get_pod_group(kube, namespace, "g").get("status") or {}
    assert status.get("scheduled", 0) == 0
