"""`batchsched run` on the real control plane honours every peer's pod keys for PodGroups
of kube-batch's later API group (scheduling.sigs.dev/v1alpha2, its CRD from
tests/integration/crds/): each gang binds whole or not at all, and a pod whose keys name
two groups waits, saying which."""

from __future__ import annotations

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    add_nodes,
    create,
    eventually,
    placements,
    pods,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

KUBE_BATCH_V1ALPHA2 = "scheduling.sigs.dev/v1alpha2"
CPU = {"cpu": "1", "memory": "1Gi"}
# Each peer's key, where that peer reads it.
PEER_KEYS = {
    "kb": ("annotations", "scheduling.k8s.io/group-name"),
    "kb2": ("annotations", "scheduling.x-k8s.io/group-name"),
    "vc": ("annotations", "scheduling.volcano.sh/group-name"),
    "cos": ("labels", "scheduling.x-k8s.io/pod-group"),
    "cos-old": ("labels", "pod-group.scheduling.sigs.k8s.io"),
    "tc": ("labels", "group.batch.scheduler.tencent.com"),
}


def members(group: str, where: str, key: str, count: int = 3) -> list[JSON]:
    found = []
    for i in range(count):
        member = pod(f"{group}-{i}", CPU)
        member["metadata"][where] = {key: group}
        found.append(member)
    return found


def test_every_peer_key_gangs_pods_of_a_scheduling_sigs_dev_podgroup(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """For each key, a gang of three that needs three binds whole; one that needs four
    binds nothing, where pods scheduled one by one would all have bound."""
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "32", "memory": "64Gi"})
    for short, (where, key) in PEER_KEYS.items():
        create(kube, namespace, pod_group(short, 3, api_version=KUBE_BATCH_V1ALPHA2))
        create(kube, namespace, pod_group(f"{short}-4", 4, api_version=KUBE_BATCH_V1ALPHA2))
        for member in members(short, where, key) + members(f"{short}-4", where, key):
            create(kube, namespace, member)
    start_scheduler()

    def whole() -> dict[str, str | None] | None:
        placed = placements(kube, namespace)
        done = all(placed[f"{short}-{i}"] for short in PEER_KEYS for i in range(3))
        return placed if done else None

    placed = eventually(whole, what="every three-member gang bound")
    assert {name for name, node in placed.items() if node is None} == {
        f"{short}-4-{i}" for short in PEER_KEYS for i in range(3)
    }

    def all_waiting() -> dict[str, str] | None:
        shown = {name: unschedulable_message(p) for name, p in pods(kube, namespace).items()}
        waiting = {n: m for n, m in shown.items() if n.endswith(("-4-0", "-4-1", "-4-2")) and m}
        return waiting if len(waiting) == 3 * len(PEER_KEYS) else None

    eventually(all_waiting, what="the four-member gangs' pods waiting with a reason")
    assert {n for n, node in placements(kube, namespace).items() if node} == {
        f"{short}-{i}" for short in PEER_KEYS for i in range(3)
    }


def test_a_pod_whose_keys_name_two_groups_waits_naming_both(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "8", "memory": "16Gi"})
    create(kube, namespace, pod_group("g", 3, api_version=KUBE_BATCH_V1ALPHA2))
    create(kube, namespace, pod_group("h", 1, api_version=KUBE_BATCH_V1ALPHA2))
    for member in members("g", "annotations", "scheduling.volcano.sh/group-name", count=2):
        create(kube, namespace, member)
    torn = pod("torn", CPU)
    torn["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "g"}
    torn["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "h"}
    create(kube, namespace, torn)
    start_scheduler()

    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["torn"]), what="torn's reason"
    )
    assert message == (
        f"Pod {namespace}/torn: names two groups, 'g' by annotation scheduling.k8s.io/group-name "
        "and 'h' by label scheduling.x-k8s.io/pod-group; remove one key or make them agree"
    )
    # The gang it would have completed stays one member short, so binds nothing.
    eventually(
        lambda: all(unschedulable_message(pods(kube, namespace)[f"g-{i}"]) for i in range(2)),
        what="g's members waiting",
    )
    assert set(placements(kube, namespace).values()) == {None}
