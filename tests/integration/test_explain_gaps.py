"""`kubectl batchsched explain` on the real control plane, where it used to fall short:
refusals a gang meets beside its own members, how many nodes to add, a queue that
reclaim may not take from, and a pod bound but not started."""

from __future__ import annotations

from pathlib import Path

import pytest

from .operator_support import add_nodes, create, ready_node
from .test_explain import plugin
from tests.support import ClusterObjects, ControlPlane, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

GROUP_KEY = "scheduling.batchsched.io/group-name"
QUEUES = "/apis/scheduling.batchsched.io/v1alpha1/queues"


def explained(control_plane: ControlPlane, namespace: str, target: str, *args: str) -> list[str]:
    done = plugin(
        "explain", target, "-n", namespace, "--kubeconfig", str(control_plane.kubeconfig), *args
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_gangs_spread_refusals_beside_its_own_members_are_listed(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, control_plane: ControlPlane
) -> None:
    """Zone a has room for both members, zone b for neither: the second member is
    refused zone a by its spread constraint (beside the first), zone b for cpu."""
    for name, zone, cpu in ((f"a-{namespace}", "a", "4"), (f"b-{namespace}", "b", "1")):
        labels = {f"zone-{namespace}": zone}
        ready_node(cluster_objects, kube, node(name, cpu=cpu, memory="8Gi", labels=labels))
    made = create(kube, namespace, pod("filler", {"cpu": "1"}))
    kube.bind(namespace, "filler", made["metadata"]["uid"], f"b-{namespace}").expect(201)
    create(kube, namespace, pod_group("g", 2))
    for i in range(2):
        member = pod(f"g-{i}", {"cpu": "1"}, labels={"app": "g"}, annotations={GROUP_KEY: "g"})
        member["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": f"zone-{namespace}",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "g"}},
            }
        ]
        create(kube, namespace, member)
    for target in ("pg/g", "pod/g-1"):
        lines = explained(control_plane, namespace, target)
        assert "didn't match pod topology spread constraints" in lines[1], lines
        assert (
            lines[2] == "remedy: see the refusals below: each names the filter and how many nodes"
        )
        refused = "\n".join(lines[3:])
        assert "Insufficient cpu" in refused
        assert "TopologySpread" in refused, lines


def test_a_gang_too_big_for_the_nodes_is_told_how_many_to_add(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, control_plane: ControlPlane
) -> None:
    add_nodes(cluster_objects, kube, [f"small-{namespace}"], {"cpu": "2", "memory": "4Gi"})
    create(kube, namespace, pod_group("big", 3))
    for i in range(3):
        create(kube, namespace, pod(f"big-{i}", {"cpu": "3"}, annotations={GROUP_KEY: "big"}))
    remedy = explained(control_plane, namespace, "pg/big")[2]
    assert "add 3 nodes with 3 cpu allocatable" in remedy, remedy


def test_a_queue_that_reclaim_may_not_take_from_is_named(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "4", "memory": "8Gi"})
    keep, want = f"keep-{namespace}", f"want-{namespace}"
    for name, spec in ((keep, {"weight": 1, "reclaimable": False}), (want, {"weight": 1})):
        cluster_objects.create(
            {
                "apiVersion": "scheduling.batchsched.io/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    create(kube, namespace, pod_group("held", 1, queue=keep))
    made = create(kube, namespace, pod("held-0", {"cpu": "4"}, annotations={GROUP_KEY: "held"}))
    kube.bind(namespace, "held-0", made["metadata"]["uid"], f"n-{namespace}").expect(201)
    create(kube, namespace, pod_group("small", 1, queue=want))
    create(kube, namespace, pod("small-0", {"cpu": "1"}, annotations={GROUP_KEY: "small"}))
    config = tmp_path / "config.yaml"
    config.write_text(
        'actions: "enqueue, allocate, preempt, reclaim, backfill"\n'
        "tiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: binpack}]\n"
    )
    lines = explained(control_plane, namespace, "pod/small-0", "--config", str(config))
    assert f"held by queue(s) {keep}, which are reclaimable: false" in lines[1], lines
    assert f"set spec.reclaimable: true on Queue {keep}" in lines[2], lines


def test_a_pod_bound_but_not_started_is_not_called_running(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, control_plane: ControlPlane
) -> None:
    """No kubelet runs here: a bound pod stays in phase Pending, as one does while its
    images are pulled."""
    add_nodes(cluster_objects, kube, [f"n-{namespace}"], {"cpu": "2", "memory": "4Gi"})
    made = create(kube, namespace, pod("p", {"cpu": "1"}))
    kube.bind(namespace, "p", made["metadata"]["uid"], f"n-{namespace}").expect(201)
    summary = explained(control_plane, namespace, "pod/p")[0]
    assert (
        summary
        == f"pod {namespace}/p: bound to node n-{namespace}, not running yet (phase Pending)"
    )
