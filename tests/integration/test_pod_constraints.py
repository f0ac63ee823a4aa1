"""`batchsched run` on the real control plane honours what pods say about each other, and
says so out loud when it cannot: the operator sees the same fields the simulator does."""

from __future__ import annotations

from collections import Counter

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    add_nodes,
    create,
    eventually,
    placements,
    pods,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from tests.support import ClusterObjects, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

CPU = {"cpu": "1", "memory": "1Gi"}
GROUP_KEY = "scheduling.batchsched.io/group-name"


def apart(name: str, *, group: str) -> dict[str, object]:
    """A gang member that keeps away from the other members on hostname."""
    member = pod(name, CPU, labels={"app": group})
    member["metadata"]["annotations"] = {GROUP_KEY: group}
    member["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": group}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return member


def test_required_anti_affinity_spreads_a_gang_or_binds_none_of_it(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(
        cluster_objects, kube, [f"a-{namespace}", f"b-{namespace}"], {"cpu": "8", "memory": "16Gi"}
    )
    create(kube, namespace, pod_group("two", 2))
    create(kube, namespace, pod_group("three", 3))
    for i in range(2):
        create(kube, namespace, apart(f"two-{i}", group="two"))
    for i in range(3):
        create(kube, namespace, apart(f"three-{i}", group="three"))
    start_scheduler()

    def two_bound() -> dict[str, str | None] | None:
        where = placements(kube, namespace)
        return where if where["two-0"] and where["two-1"] else None

    where = eventually(two_bound, what="gang two bound")
    assert where["two-0"] != where["two-1"]
    eventually(
        lambda: all(
            "didn't match pod anti-affinity rules" in (unschedulable_message(p) or "")
            for name, p in pods(kube, namespace).items()
            if name.startswith("three-")
        ),
        what="gang three waiting on anti-affinity",
    )
    assert not any(where for name, where in placements(kube, namespace).items() if "three" in name)


def test_zone_spread_is_honoured_for_a_gang(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """Six members, maxSkew 1 over three zones of two nodes: two per zone, never packed."""
    zones = {f"{zone}{i}-{namespace}": zone for zone in "abc" for i in range(2)}
    for name, zone in zones.items():
        labels = {"topology.kubernetes.io/zone": zone}
        ready_node(cluster_objects, kube, node(name, cpu="8", memory="16Gi", labels=labels))
    create(kube, namespace, pod_group("g", 6))
    for i in range(6):
        member = pod(f"g-{i}", CPU, labels={"app": "g"})
        member["metadata"]["annotations"] = {GROUP_KEY: "g"}
        member["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "g"}},
            }
        ]
        create(kube, namespace, member)
    start_scheduler()

    def all_bound() -> dict[str, str | None] | None:
        where = placements(kube, namespace)
        return where if all(where.values()) else None

    where = eventually(all_bound, what="the gang bound")
    per_zone = Counter(zones[str(node)] for node in where.values())
    assert per_zone == {"a": 2, "b": 2, "c": 2}


def test_a_field_not_supported_yet_keeps_the_pod_waiting_and_names_it(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "8", "memory": "16Gi"})
    disk = pod("disk", CPU)
    disk["spec"]["volumes"] = [{"name": "data", "gcePersistentDisk": {"pdName": "data"}}]
    create(kube, namespace, disk)
    create(kube, namespace, pod("plain", CPU))
    start_scheduler()
    eventually(lambda: placements(kube, namespace)["plain"], what="the plain pod bound")
    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["disk"]), what="disk waiting"
    )
    assert "spec.volumes[0].gcePersistentDisk" in message
    assert placements(kube, namespace)["disk"] is None
