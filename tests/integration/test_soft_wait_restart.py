"""A gang's softWait clock survives an operator restart and a failover to a standby:
`batchsched run` on a real API server, with Volcano's released PodGroup CRD and ours,
keeps the clock on the gang's PodGroup (docs/topology.md) and the next operator to lead
counts the wait from it, not from its own start. The unit side is
tests/unit/k8s/test_soft_wait_clock.py."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    FAST_LEADER_ELECTION,
    StartScheduler,
    create,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_scheduler_fixture,
    unschedulable_message,
)
from .test_topology import DROP_IN, OUR_API, RACK, VOLCANO_API, group, member
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import node, pod

pytestmark = pytest.mark.integration

# Spelled out rather than imported: the annotations are the interface users see.
SINCE = "batchsched.io/soft-wait-since"
OWNER = "batchsched.io/soft-wait-owner"
SOFT_WAIT = 50.0
WAITING = "more for one before spanning domains"
MEMBERS = [f"train-{i}" for i in range(2)]


def shown_annotations(kube: Kube, api: str, namespace: str, name: str) -> dict[str, str]:
    found = kube.get(f"/apis/{api}/namespaces/{namespace}/podgroups/{name}").expect(200)
    return dict(found["metadata"].get("annotations") or {})


def clock_kept(kube: Kube, api: str, namespace: str, *, until: float) -> dict[str, str]:
    """The gang's PodGroup's annotations once they show the clock (written after the
    pods' reasons), read until `until` at the latest."""
    while True:
        shown = shown_annotations(kube, api, namespace, "train")
        if SINCE in shown or time.time() >= until:
            return shown
        time.sleep(0.2)


def bound_at(pod_object: JSON) -> float:
    """When the pod was bound: its PodScheduled condition turned True (to the second)."""
    for condition in pod_object["status"].get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "True":
            return datetime.fromisoformat(condition["lastTransitionTime"]).timestamp()
    raise AssertionError(f"{pod_object['metadata']['name']} is not bound")


def soft_wait_config(tmp_path: Path, soft_wait: float) -> Path:
    """Our drop-in configuration with racks as the one tier and `soft_wait` seconds."""
    config = tmp_path / "topology.yaml"
    config.write_text(
        f"{DROP_IN.read_text()}\n"
        f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}], softWait: {soft_wait:g}s}}\n"
    )
    return config


def busy_racks(kube: Kube, namespace: str, cluster_objects: ClusterObjects) -> dict[str, list[str]]:
    """Racks r1 and r2 of two 4-CPU nodes, the first node of each running a pod; their
    nodes' names by rack."""
    racks = {rack: [f"{rack}-{i}-{namespace}" for i in range(2)] for rack in ("r1", "r2")}
    for rack, names in racks.items():
        for name in names:
            ready_node(
                cluster_objects, kube, node(name, cpu="4", labels={RACK: f"{rack}-{namespace}"})
            )
    busy = {}
    for rack, names in racks.items():
        manifest = pod(f"busy-{rack}", {"cpu": "4"})
        manifest["spec"]["nodeName"] = names[0]
        busy[create(kube, namespace, manifest)["metadata"]["name"]] = names[0]
    set_running(kube, namespace, busy)
    return racks


def soft_gang(kube: Kube, namespace: str, api: str) -> str:
    """Gang `train` of two 4-CPU pods asking softly for a rack, its PodGroup of `api`;
    returns the PodGroup's uid."""
    gang = [
        group(api, "train", 2, {"mode": "soft"}),
        *(member(n, "train", volcano=api == VOLCANO_API) for n in MEMBERS),
    ]
    for obj in gang:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    made = kube.get(f"/apis/{api}/namespaces/{namespace}/podgroups/train").expect(200)
    return str(made["metadata"]["uid"])


def waiting(kube: Kube, namespace: str) -> None:
    eventually(
        lambda: all(
            WAITING in (unschedulable_message(pods(kube, namespace)[n]) or "") for n in MEMBERS
        ),
        what="the gang waiting its softWait for a rack",
    )


@pytest.mark.parametrize(
    ("api", "how"),
    [(OUR_API, "restart"), (VOLCANO_API, "restart"), (OUR_API, "failover")],
    ids=["ours-restart", "volcano-restart", "ours-failover"],
)
def test_the_next_operator_spans_the_gang_when_its_first_soft_wait_ends(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
    api: str,
    how: str,
) -> None:
    """Racks r1 and r2 of two 4-CPU nodes, one node of each running a pod: a gang of two
    asking softly for a rack could start across both, so the operator starts its
    softWait (50s), keeps it on the PodGroup and waits. Restart: it is stopped, and
    another starts half a wait later. Failover: half a wait later the leader is killed
    and the standby beside it, which never led, takes over. The gang is bound across
    the racks once the first clock's wait ends: not before, and sooner than a clock
    started by the next operator could end (no sooner than the old one's end +
    softWait). Then the PodGroup's clock is taken off."""
    config = soft_wait_config(tmp_path, SOFT_WAIT)
    racks = busy_racks(kube, namespace, cluster_objects)
    uid = soft_gang(kube, namespace, api)

    if how == "restart":
        first = start_scheduler(config=config)
    else:
        elect = {"leader_elect": True, "lease_namespace": namespace}
        replicas = [
            start_scheduler(config=config, extra_args=FAST_LEADER_ELECTION, **elect)
            for _ in range(2)
        ]
        first = eventually(
            lambda: next((r for r in replicas if r.metric("batchsched_leader") == 1), None),
            what="a leader",
        )
    waiting(kube, namespace)
    seen = time.time()
    assert not any(placements(kube, namespace).get(n) for n in MEMBERS)
    kept = clock_kept(kube, api, namespace, until=seen + SOFT_WAIT / 2)
    if how == "restart":
        assert first.stop() == 0
    # A clock started by the next operator would end no sooner than `restarted` + softWait.
    time.sleep(max(0.0, seen + SOFT_WAIT / 2 - time.time()))
    restarted = time.time()
    if how == "restart":
        start_scheduler(config=config)
    else:
        first.kill()

    eventually(
        lambda: all(placements(kube, namespace).get(n) for n in MEMBERS),
        timeout=3 * SOFT_WAIT,
        what="the gang bound",
    )
    where = placements(kube, namespace)
    assert {where[n] for n in MEMBERS} == {racks["r1"][1], racks["r2"][1]}
    bound = max(bound_at(pods(kube, namespace)[n]) for n in MEMBERS)
    assert bound < restarted + SOFT_WAIT, "the softWait counted again from the restart"
    # The clock the first operator kept, and the wait counted from it.
    assert kept.get(OWNER) == uid, kept
    started = datetime.fromisoformat(kept[SINCE]).timestamp()
    assert started <= seen
    assert int(started + SOFT_WAIT) <= bound
    eventually(
        lambda: SINCE not in shown_annotations(kube, api, namespace, "train"),
        what="the clock taken off the placed gang's PodGroup",
    )


def test_an_edited_clock_is_replaced_by_the_leaders_own(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """The annotations are the scheduler's (docs/topology.md): the gang waits an hour,
    and its clock edited to long ago (which, read back, would end the wait) is replaced
    by the leader's own at its next session, its next visit of the waiting gang; the
    gang goes on waiting."""
    config = soft_wait_config(tmp_path, 3600)
    busy_racks(kube, namespace, cluster_objects)
    soft_gang(kube, namespace, OUR_API)
    start_scheduler(config=config)
    waiting(kube, namespace)
    kept = eventually(
        lambda: SINCE in (shown := shown_annotations(kube, OUR_API, namespace, "train")) and shown,
        what="the clock kept on the PodGroup",
    )
    path = f"/apis/{OUR_API}/namespaces/{namespace}/podgroups/train"
    kube.patch(path, {"metadata": {"annotations": {SINCE: "2000-01-01T00:00:00Z"}}}).expect(200)
    eventually(
        lambda: shown_annotations(kube, OUR_API, namespace, "train") == kept,
        what="the leader's clock written over the edit",
    )
    assert not any(placements(kube, namespace).get(n) for n in MEMBERS)
