"""A cluster written with a peer's PodGroup API and pod key is scheduled exactly as the
same cluster written with ours."""

from typing import Any

import pytest

from batchsched.api.groups import OUR_API

from tests.support.objects import Obj, decide, node, pod, queue

# (PodGroup apiVersion, where the pod names its group, the key)
PEERS = {
    "ours": (OUR_API, "annotations", "scheduling.batchsched.io/group-name"),
    "kube-batch": (
        "scheduling.incubator.k8s.io/v1alpha1",
        "annotations",
        "scheduling.k8s.io/group-name",
    ),
    "kube-batch-v1alpha2": (
        "scheduling.sigs.dev/v1alpha2",
        "annotations",
        "scheduling.k8s.io/group-name",
    ),
    "volcano": ("scheduling.volcano.sh/v1beta1", "annotations", "scheduling.volcano.sh/group-name"),
    "coscheduling": ("scheduling.x-k8s.io/v1alpha1", "labels", "scheduling.x-k8s.io/pod-group"),
    "coscheduling-old": (
        "scheduling.sigs.k8s.io/v1alpha1",
        "labels",
        "pod-group.scheduling.sigs.k8s.io",
    ),
    "tencent": ("batch.scheduler.tencent.com/v1", "labels", "group.batch.scheduler.tencent.com"),
}
# (name, members, minMember, CPUs each, queue, created)
GANGS = [
    ("big", 6, 6, "2", "research", 0),
    ("wide", 5, 3, "1", "prod", 1),
    ("late", 4, 4, "3", "prod", 2),
    ("small", 2, 2, "1", "research", 3),
]


def cluster(peer: str) -> list[Obj]:
    api_version, where, key = PEERS[peer]
    objects: list[Obj] = [node(f"n{i}", cpu="8") for i in range(3)]
    queues = [queue("prod", weight=1), queue("research", weight=2)]
    if peer == "volcano":
        # Volcano's gangs are in Volcano's Queues, whose state is their status.
        for item in queues:
            item["apiVersion"] = api_version
            item["status"] = {"state": item["spec"].pop("state")}
    objects += queues
    for name, size, min_member, cpu, queue_name, created in GANGS:
        group: dict[str, Any] = {
            "apiVersion": api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member, "queue": queue_name},
        }
        objects.append(group)
        for i in range(size):
            member = pod(f"{name}-{i}", requests={"cpu": cpu}, created=created)
            member["metadata"][where] = {key: name}
            objects.append(member)
    return objects


@pytest.mark.parametrize("peer", [p for p in PEERS if p != "ours"])
def test_a_peers_cluster_is_scheduled_as_ours(peer: str) -> None:
    ours, theirs = decide(cluster("ours")), decide(cluster(peer))
    assert ours.bindings, "the scenario binds something"
    assert ours.pending, "and leaves something waiting"
    assert {b.key: b.node for b in theirs.bindings} == {b.key: b.node for b in ours.bindings}
    assert theirs.pending == ours.pending
