"""Split brain: a leader that can no longer prove its lease current sends no Binding.

The leader runs behind the test's fault proxy (faultproxy.py), which refuses its
Bindings with 500s so they sit in retry; then the leader is cut off from the Lease (its
lease requests hang) or paused outright (SIGSTOP), and the standby, which reaches the
API server directly, takes over. Meanwhile higher-priority pods wait for the room the
old leader's pods were given, so the new leader leaves those pods unbound: a retry the
old leader sends once the proxy lets Bindings through would be accepted, and would
over-commit the nodes. Each replica runs as its own ServiceAccount, so the API server's
audit log says whose writes (Bindings, statuses) were carried out, and when, against
when the standby took the lease.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import pytest

from .faultproxy import Fault, FaultProxy
from .operator_support import (  # noqa: F401 (fixtures)
    BINDING_PATHS,
    FAST_LEADER_ELECTION,
    LEASE_PATHS,
    Scheduler,
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    add_nodes,
    create,
    eventually,
    overcommitted,
    placements,
    priority_class,
    scheduler_kubeconfig_fixture,
    start_proxy_fixture,
    start_scheduler_fixture,
)
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import pod

pytestmark = pytest.mark.integration

LEASE_NAME = "batch-scheduler"
NODES, CPUS_PER_NODE = 2, 8
# The old leader's batch fills every node, and so do the pods waiting behind it.
BATCH = NODES * CPUS_PER_NODE
CPU = {"cpu": "1", "memory": "64Mi"}
# Failure guards only: a replica whose lease requests hang without a deadline of their
# own notices the lost lease only at its client's 30 s request timeout.
GUARD = 90.0


@dataclass
class SplitBrain:
    """Two replicas, `old` behind `proxy` and leading with its Bindings refused, and a
    batch of pods it is retrying, with as many higher-priority ones waiting behind."""

    control_plane: ControlPlane
    kube: Kube
    namespace: str
    accounts: SchedulerAccounts
    proxy: FaultProxy
    old: Scheduler
    standby: Scheduler
    refused: Fault

    def standby_takes_over(self) -> None:
        """Wait until the standby leads and has bound the waiting pods in the room."""
        eventually(
            lambda: self.standby.metric("batchsched_leader") == 1, timeout=GUARD, what="takeover"
        )
        eventually(
            lambda: sum(1 for at in placements(self.kube, self.namespace).values() if at) == BATCH,
            timeout=GUARD,
            what="the new leader binding the room full",
        )

    def old_leader_gone(self) -> None:
        """Wait until the old leader exits: after that it can send nothing, so whatever
        it sent is in the audit log."""
        process = self.old.process
        assert process is not None
        eventually(
            lambda: process.poll() is not None,
            timeout=GUARD,
            what="the old leader exiting",
        )

    def assert_no_write_after_takeover(self) -> None:
        """Nothing the old leader sent was carried out once the standby had asked for the
        lease, and no node holds more than it has room for."""
        events = self.control_plane.audit_events()
        taken = lease_acquired(events, self.namespace, self.accounts.username("standby"))
        old_user = self.accounts.username("old-leader")
        late = [
            f"{e['verb']} {written(e['objectRef'])} at {e['stageTimestamp']}"
            for e in _audited(events, self.namespace, old_user)
            if stamp(e["stageTimestamp"]) >= taken
        ]
        assert not late, (
            f"the deposed leader wrote {len(late)} times after the standby took the lease "
            f"at {taken.isoformat()}: {late}"
        )
        crowded = overcommitted(self.kube, self.namespace)
        assert not crowded, f"CPUs requested of allocatable: {crowded}"


@pytest.fixture(name="split_brain")
def split_brain_fixture(
    control_plane: ControlPlane,
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    scheduler_accounts: SchedulerAccounts,
    start_scheduler: StartScheduler,
    start_proxy: StartProxy,
) -> SplitBrain:
    add_nodes(
        cluster_objects,
        kube,
        [f"n{i}-{namespace}" for i in range(NODES)],
        {"cpu": str(CPUS_PER_NODE), "memory": "8Gi"},
    )
    high = priority_class(cluster_objects, kube, f"high-{namespace}", 1000)
    proxy = start_proxy()
    elect = {"leader_elect": True, "lease_namespace": namespace, "extra_args": FAST_LEADER_ELECTION}
    old = start_scheduler(
        kubeconfig=scheduler_accounts.kubeconfig("old-leader", server=proxy.url), **elect
    )
    eventually(lambda: old.metric("batchsched_leader") == 1, what="the first replica leading")
    standby = start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("standby"), **elect)
    refused = proxy.fail(BINDING_PATHS)
    for i in range(BATCH):
        create(kube, namespace, pod(f"low-{i}", CPU))
    eventually(lambda: len(refused.paths) == BATCH, timeout=GUARD, what="the whole batch in retry")
    for i in range(BATCH):
        waiting = pod(f"high-{i}", CPU)
        waiting["spec"]["priorityClassName"] = high
        create(kube, namespace, waiting)
    return SplitBrain(
        control_plane, kube, namespace, scheduler_accounts, proxy, old, standby, refused
    )


def test_a_leader_cut_off_from_its_lease_writes_nothing_once_it_may_have_lost_it(
    split_brain: SplitBrain,
) -> None:
    split_brain.proxy.hang(LEASE_PATHS)
    split_brain.standby_takes_over()
    # The old leader's retries would go through from now on, were they still sent.
    split_brain.refused.release()
    split_brain.old_leader_gone()
    split_brain.assert_no_write_after_takeover()


def test_a_leader_paused_while_retrying_writes_nothing_when_it_wakes(
    split_brain: SplitBrain,
) -> None:
    with paused(split_brain.old):
        split_brain.standby_takes_over()
        split_brain.refused.release()
    split_brain.old_leader_gone()
    split_brain.assert_no_write_after_takeover()


@contextmanager
def paused(scheduler: Scheduler) -> Iterator[None]:
    """SIGSTOP the process, and SIGCONT it on the way out, whatever happens."""
    assert scheduler.process is not None
    scheduler.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        scheduler.process.send_signal(signal.SIGCONT)


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _audited(events: list[JSON], namespace: str, user: str) -> list[JSON]:
    """`user`'s writes to objects in `namespace` that the API server carried out
    (controlplane.py audits only writes, of bindings, statuses and leases)."""
    return [
        e
        for e in events
        if e["stage"] == "ResponseComplete"
        and e["user"]["username"] == user
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300
    ]


def written(ref: JSON) -> str:
    """`pods/binding low-3`: what an audit event's objectRef names."""
    resource = "/".join(filter(None, [ref.get("resource"), ref.get("subresource")]))
    return f"{resource} {ref.get('name')}"


def lease_acquired(events: list[JSON], namespace: str, user: str) -> datetime:
    """When the API server received `user`'s first successful write of the lease."""
    writes = [
        e
        for e in _audited(events, namespace, user)
        if e["objectRef"].get("resource") == "leases"
        and e["objectRef"].get("name") in (LEASE_NAME, None)
        and e["verb"] in ("create", "update")
    ]
    assert writes, f"{user} never wrote the lease"
    return min(stamp(e["requestReceivedTimestamp"]) for e in writes)
