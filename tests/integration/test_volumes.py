"""`batchsched run` on the real control plane honours pods' claims as kube-scheduler does.

There is no PersistentVolume controller, provisioner or kubelet here: the tests play
them, writing volumes and binding claims themselves, and check what the scheduler
wrote (the selected-node annotation) and what it bound, and when.
"""

from __future__ import annotations

import pytest

from batchsched.api.volumes import BIND_COMPLETED_ANNOTATION, SELECTED_NODE_ANNOTATION
from batchsched.k8s.binder import VOLUME_BINDING_REASON

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    add_nodes,
    create,
    eventually,
    placements,
    pods,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

CPU = {"cpu": "1", "memory": "1Gi"}
GROUP_KEY = "scheduling.batchsched.io/group-name"
PROVISIONER = "example.com/csi"
# The CSI driver of the volumes the tests make (a driver's name must be a DNS name).
DRIVER = "csi.example.com"
HOSTNAME = "kubernetes.io/hostname"


def with_claim(name: str, claim: str) -> JSON:
    manifest = pod(name, CPU)
    manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return manifest


def storage_class(cluster_objects: ClusterObjects, name: str) -> None:
    cluster_objects.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )


def claim(kube: Kube, namespace: str, name: str, *, storage_class: str = "") -> JSON:
    manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            # "": no class, so no default class is filled in.
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    return kube.post(path, manifest).expect(201)


def claims(kube: Kube, namespace: str) -> dict[str, JSON]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims").expect(200)
    return {c["metadata"]["name"]: c for c in items["items"]}


def bind_claim(
    kube: Kube,
    cluster_objects: ClusterObjects,
    bound: JSON,
    *,
    node: str,
    storage_class: str = "",
) -> None:
    """What the provisioner and the PersistentVolume controller do for a claim: a volume
    on `node` made for it, and the claim bound to that volume."""
    meta = bound["metadata"]
    name = f"pv-{meta['namespace']}-{meta['name']}"
    cluster_objects.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "storageClassName": storage_class,
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": DRIVER, "volumeHandle": name},
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "apiVersion": "v1",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": HOSTNAME, "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    path = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
    notes = {BIND_COMPLETED_ANNOTATION: "yes"}
    kube.patch(path, {"metadata": {"annotations": notes}, "spec": {"volumeName": name}}).expect(200)
    kube.patch(f"{path}/status", {"status": {"phase": "Bound"}}).expect(200)


def test_a_gang_is_bound_only_once_its_provisioned_claims_are(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    nodes = [f"{letter}-{namespace}" for letter in "abc"]
    add_nodes(cluster_objects, kube, nodes, {"cpu": "2", "memory": "4Gi"})
    storage_class(cluster_objects, f"wait-{namespace}")
    create(kube, namespace, pod_group("g", 3))
    for i in range(3):
        claim(kube, namespace, f"data-{i}", storage_class=f"wait-{namespace}")
        member = with_claim(f"g-{i}", f"data-{i}")
        member["metadata"]["annotations"] = {GROUP_KEY: "g"}
        create(kube, namespace, member)
    scheduler = start_scheduler()

    def selected() -> dict[str, str] | None:
        notes = {
            n: c["metadata"].get("annotations") or {} for n, c in claims(kube, namespace).items()
        }
        chosen = {
            n: a[SELECTED_NODE_ANNOTATION]
            for n, a in notes.items()
            if SELECTED_NODE_ANNOTATION in a
        }
        return chosen if len(chosen) == 3 else None

    def unbound() -> None:
        assert not any(placements(kube, namespace).values()), "bound before its claims"

    def told_waiting() -> bool:
        unbound()
        reasons = [
            c.get("reason")
            for p in pods(kube, namespace).values()
            for c in (p.get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled"
        ]
        return reasons == [VOLUME_BINDING_REASON] * 3

    chosen = eventually(selected, what="a node selected on every claim")
    assert set(chosen.values()) <= set(nodes)
    # The binder tells each member it waits for its volumes once it has written the
    # claims and before it could bind any; sessions then go on, and it keeps waiting.
    eventually(told_waiting, what="every member told it waits for volume binding")
    ticks_pass(scheduler, meanwhile=unbound)
    for name, bound in claims(kube, namespace).items():
        bind_claim(
            kube, cluster_objects, bound, node=chosen[name], storage_class=f"wait-{namespace}"
        )

    def all_bound() -> dict[str, str | None] | None:
        where = placements(kube, namespace)
        return where if all(where.values()) else None

    where = eventually(all_bound, what="the gang bound")
    assert where == {f"g-{i}": chosen[f"data-{i}"] for i in range(3)}


def test_a_pod_whose_claim_is_missing_waits_until_it_exists(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    node = f"n-{namespace}"
    add_nodes(cluster_objects, kube, [node], {"cpu": "2", "memory": "4Gi"})
    create(kube, namespace, with_claim("p", "data"))
    start_scheduler()
    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["p"]), what="the pod waiting"
    )
    assert 'persistentvolumeclaim "data" not found' in message
    bind_claim(kube, cluster_objects, claim(kube, namespace, "data"), node=node)
    assert eventually(lambda: placements(kube, namespace)["p"], what="the pod bound") == node


def test_a_pod_follows_its_bound_volume_to_its_node(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    nodes = [f"{letter}-{namespace}" for letter in "abc"]
    add_nodes(cluster_objects, kube, nodes, {"cpu": "2", "memory": "4Gi"})
    bind_claim(kube, cluster_objects, claim(kube, namespace, "data"), node=nodes[1])
    create(kube, namespace, with_claim("p", "data"))
    start_scheduler()
    assert eventually(lambda: placements(kube, namespace)["p"], what="the pod bound") == nodes[1]
