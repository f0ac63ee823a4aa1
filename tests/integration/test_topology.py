"""Topology domains through `batchsched run` on a real API server with Volcano's released
HyperNode and PodGroup CRDs and ours: the operator watches HyperNodes, a Volcano gang
asking for one tier-1 HyperNode (hard) lands in the one rack that holds it, our PodGroup's
networkTopology survives our CRD's schema and is kept, Kueue's required-topology pods wait
where no rack holds them, and a tier name that does not exist is named in the waiting
reason. A gang asking for a rack preempts inside one, and its PodGroup's status names the
rack. The same forms run in the simulator in tests/sim/test_topology.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from .operator_support import (  # noqa: F401 (fixtures)
    REPO,
    StartScheduler,
    create,
    events_about,
    eventually,
    placements,
    pods,
    priority_class,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_scheduler_fixture,
    unschedulable_message,
    waiting_saying,
)
from .test_preemption import preempted
from tests.support import JSON, ClusterObjects, Kube
from tests.support.objects import node, pod, pod_group

pytestmark = pytest.mark.integration

DROP_IN = REPO / "examples" / "config" / "drop-in.yaml"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
OUR_API = "scheduling.batchsched.io/v1alpha1"
RACK = "topology.kubernetes.io/rack"


def member(name: str, group: str, *, volcano: bool, notes: dict[str, str] | None = None) -> JSON:
    key = "scheduling.k8s.io/group-name" if volcano else "scheduling.batchsched.io/group-name"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {key: group, **(notes or {})}},
        "spec": {
            "schedulerName": "volcano" if volcano else "batch-scheduler",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "4"}}}
            ],
        },
    }


def group(api: str, name: str, size: int, topology: JSON) -> JSON:
    return {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": size, "networkTopology": topology},
    }


def test_gangs_in_hypernodes_and_label_domains(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    racks = {"r1": 3, "r2": 5}
    names: dict[str, list[str]] = {}
    for rack, count in racks.items():
        names[rack] = [f"{rack}-{i}-{namespace}" for i in range(count)]
        for name in names[rack]:
            ready_node(
                cluster_objects, kube, node(name, cpu="4", labels={RACK: f"{rack}-{namespace}"})
            )
    for rack, members in names.items():
        cluster_objects.create(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"{rack}-{namespace}"},
                "spec": {
                    "tier": 1,
                    "tierName": "rack",
                    "members": [
                        {"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in members
                    ],
                },
            }
        )
    objects = [
        group(VOLCANO_API, "train", 4, {"mode": "hard", "highestTierAllowed": 1}),
        *(member(f"train-{i}", "train", volcano=True) for i in range(4)),
        group(OUR_API, "ours", 3, {"highestTierName": "rack"}),
        *(member(f"ours-{i}", "ours", volcano=False) for i in range(3)),
        group(VOLCANO_API, "bad", 1, {"highestTierName": "zone"}),
        member("bad-0", "bad", volcano=True),
    ]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    def bound() -> dict[str, str]:
        return {k: v for k, v in placements(kube, namespace).items() if v}

    eventually(lambda: len(bound()) == 7, what="both gangs bound")
    where = bound()
    assert {where[f"train-{i}"] for i in range(4)} <= set(names["r2"])
    assert {where[f"ours-{i}"] for i in range(3)} <= set(names["r1"])
    # Each group names its domain where its project keeps it: Volcano's annotation (the
    # HyperNode), our status.
    volcano = f"/apis/{VOLCANO_API}/namespaces/{namespace}/podgroups/train"
    annotation = eventually(
        lambda: (
            kube.get(volcano)
            .expect(200)["metadata"]
            .get("annotations", {})
            .get("volcano.sh/job-allocated-hypernode")
        ),
        what="the Volcano group's allocated HyperNode",
    )
    assert annotation == f"r2-{namespace}"
    ours = f"/apis/{OUR_API}/namespaces/{namespace}/podgroups/ours"
    domain = eventually(
        lambda: kube.get(ours).expect(200).get("status", {}).get("topologyDomain"),
        what="our group's domain",
    )
    assert domain == {"tier": "rack", "name": f"r1-{namespace}"}
    message = eventually(
        lambda: unschedulable_message(pods(kube, namespace)["bad-0"]),
        what="the group naming no tier told why it waits",
    )
    assert (
        f"PodGroup {namespace}/bad.spec.networkTopology.highestTierName: no tier is named 'zone'"
        in message
    )

    # Kueue's pods: two that must share a rack, where no rack has two nodes free.
    required = {"kueue.x-k8s.io/podset-required-topology": RACK}
    kueue = [
        {**group(OUR_API, "kueue", 2, {"mode": "soft"}), "spec": {"minMember": 2}},
        *(member(f"kueue-{i}", "kueue", volcano=False, notes=required) for i in range(2)),
    ]
    for obj in kueue:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    asked = (
        "[kueue.x-k8s.io/podset-required-topology] asks its members in one domain of "
        "topology.kubernetes.io/rack (hard)"
    )
    seen: list[str | None] = []

    def told() -> bool:
        # A session that saw only the first pod says the gang lacks a member: a true
        # message, but not yet the one this waits for.
        seen.append(unschedulable_message(pods(kube, namespace)["kueue-0"]))
        return asked in (seen[-1] or "")

    try:
        eventually(told, what="the Kueue pods told why they wait")
    except AssertionError:
        assert asked in (seen[-1] or "")  # shows the last message
        raise
    now = placements(kube, namespace)
    assert (now["kueue-0"], now["kueue-1"]) == (None, None)


def test_a_gang_asking_for_a_rack_preempts_inside_one_and_its_status_names_it(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """Racks r1 and r2 of two 4-CPU nodes, each node running a lone pod of 4 CPUs: r1's of
    priority 0 and 50, r2's both of priority 0. A gang of two 4-CPU pods of priority
    1000 asking for one rack evicts r2's two pods (the cheapest rack; the cheapest pods
    over the cluster, priority 0, span both racks), is nominated there and bound there
    once they are gone; its PodGroup's status names rack r2."""
    config = tmp_path / "topology.yaml"
    config.write_text(f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}\n")
    racks = {rack: [f"{rack}-{i}-{namespace}" for i in range(2)] for rack in ("r1", "r2")}
    for rack, names in racks.items():
        for name in names:
            labels = {RACK: f"{rack}-{namespace}"}
            ready_node(cluster_objects, kube, node(name, cpu="4", memory="8Gi", labels=labels))
    classes = {v: priority_class(cluster_objects, kube, f"p{v}-{namespace}", v) for v in (0, 50)}
    high = priority_class(cluster_objects, kube, f"p1000-{namespace}", 1000)
    busy = {}
    for where, value in zip([*racks["r1"], *racks["r2"]], (0, 50, 0, 0), strict=True):
        manifest = pod(f"busy-{where}", {"cpu": "4", "memory": "64Mi"})
        manifest["spec"] |= {"priorityClassName": classes[value], "nodeName": where}
        busy[create(kube, namespace, manifest)["metadata"]["name"]] = where
    set_running(kube, namespace, busy)
    start_scheduler(config=config)
    topology = {"mode": "hard", "highestTierName": "rack"}
    create(kube, namespace, pod_group("big", 2, priorityClassName=high, networkTopology=topology))
    members = [f"big-{i}" for i in range(2)]
    for name in members:
        manifest = member(name, "big", volcano=False)
        manifest["spec"]["priorityClassName"] = high
        manifest["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Mi"
        create(kube, namespace, manifest)

    in_r2 = [name for name, where in busy.items() if where in racks["r2"]]
    eventually(
        lambda: all(preempted(p) for n, p in pods(kube, namespace).items() if n in in_r2),
        timeout=60,
        what="r2's pods preempted",
    )
    shown = pods(kube, namespace)
    assert not any(shown[n]["metadata"].get("deletionTimestamp") for n in busy if n not in in_r2)

    def nominated() -> dict[str, str] | None:
        shown = {n: p["status"].get("nominatedNodeName") for n, p in pods(kube, namespace).items()}
        held = {n: shown[n] for n in members}
        return held if all(held.values()) else None

    held = eventually(nominated, what="the gang nominated")
    assert set(held.values()) == set(racks["r2"])
    for name in in_r2:
        kube.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", grace_period_seconds=0)
    eventually(
        lambda: all(placements(kube, namespace).get(n) for n in members), what="the gang bound"
    )
    assert {placements(kube, namespace)[n] for n in members} == set(racks["r2"])
    path = f"/apis/{OUR_API}/namespaces/{namespace}/podgroups/big"
    status = eventually(
        lambda: kube.get(path).expect(200).get("status", {}).get("topologyDomain"),
        what="the group's status naming its rack",
    )
    assert status == {"tier": "rack", "name": f"r2-{namespace}"}


def test_a_volcano_soft_sub_group_waits_its_soft_wait_for_a_rack_then_spans(
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    """Racks r1 and r2 of two 4-CPU nodes, one node of each running a pod: a Volcano gang
    of two (Volcano's released PodGroup CRD) whose one sub-group asks softly for a rack
    waits its softWait for one, saying which part waits and for how long, then is bound
    across both racks once the wait is over, nothing else having changed."""
    config = tmp_path / "topology.yaml"
    config.write_text(
        f"{DROP_IN.read_text()}\n"
        f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}], softWait: 20s}}\n"
    )
    racks = {rack: [f"{rack}-{i}-{namespace}" for i in range(2)] for rack in ("r1", "r2")}
    for rack, names in racks.items():
        for name in names:
            labels = {RACK: f"{rack}-{namespace}"}
            ready_node(cluster_objects, kube, node(name, cpu="4", labels=labels))
    busy = {}
    for rack, names in racks.items():
        manifest = pod(f"busy-{rack}", {"cpu": "4"})
        manifest["spec"]["nodeName"] = names[0]
        busy[create(kube, namespace, manifest)["metadata"]["name"]] = names[0]
    set_running(kube, namespace, busy)
    policy = [{"name": "workers", "subGroupSize": 2, "networkTopology": {"mode": "soft"}}]
    train = {
        **group(VOLCANO_API, "train", 2, {}),
        "spec": {"minMember": 2, "subGroupPolicy": policy},
    }
    for obj in (train, *(member(f"train-{i}", "train", volcano=True) for i in range(2))):
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=config)

    members = [f"train-{i}" for i in range(2)]
    eventually(
        lambda: all(placements(kube, namespace).get(n) for n in members),
        what="the gang bound once its wait is over",
    )
    # What it said while it waited, read from its events once it is bound: its
    # condition then says it is scheduled.
    asked = (
        f"sub-group workers: PodGroup {namespace}/train.spec.subGroupPolicy[0].networkTopology"
        " asks its members in one domain of rack (soft) and waits "
    )
    said = [e.get("note", "") for e in events_about(kube, namespace, "FailedScheduling", members)]
    assert any(asked in note and "(topology.softWait)" in note for note in said), said
    where = placements(kube, namespace)
    assert {where[n] for n in members} == {racks["r1"][1], racks["r2"][1]}


def test_bad_topology_input_is_named_and_the_rest_is_scheduled(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> None:
    """The issue's bad inputs on the real API server, with Volcano's released HyperNode
    CRD: two HyperNodes naming each other (a cycle), a Kueue pod set asking a label no
    node has, and Kueue slices of 3 in a pod set of 4. Each gang waits with a reason
    naming the object and field; a lone pod, a plain gang and a gang asking one rack by
    its label are scheduled meanwhile. (A tier name no tier has is covered above.)"""
    racks = {rack: [f"{rack}-{i}-{namespace}" for i in range(3)] for rack in ("r1", "r2")}
    for rack, names in racks.items():
        for name in names:
            labels = {RACK: f"{rack}-{namespace}"}
            ready_node(cluster_objects, kube, node(name, cpu="4", labels=labels))
    looped = [f"c1-{namespace}", f"c2-{namespace}"]
    for tier, (name, other) in enumerate(zip(looped, reversed(looped), strict=True), start=1):
        cluster_objects.create(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {
                    "tier": tier,
                    "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": other}}}],
                },
            }
        )
    one_rack = {"kueue.x-k8s.io/podset-required-topology": RACK}
    nowhere = {"kueue.x-k8s.io/podset-required-topology": "example.com/none"}
    slices = {
        "kueue.x-k8s.io/podset-slice-required-topology": RACK,
        "kueue.x-k8s.io/podset-slice-size": "3",
    }
    objects = [
        group(VOLCANO_API, "looped", 2, {"mode": "hard", "highestTierAllowed": 2}),
        *(member(f"looped-{i}", "looped", volcano=True) for i in range(2)),
    ]
    sizes = {"nowhere": 2, "sliced": 4, "racked": 3, "plain": 2}
    asks: dict[str, dict[str, str]] = {
        "nowhere": nowhere,
        "sliced": slices,
        "racked": one_rack,
        "plain": {},
    }
    for name, notes in asks.items():
        objects.append(pod_group(name, sizes[name]))
        for i in range(sizes[name]):
            manifest = member(f"{name}-{i}", name, volcano=False, notes=notes)
            manifest["metadata"]["labels"] = {"kueue.x-k8s.io/podset": "workers"}
            objects.append(manifest)
    objects.append(pod("lone", {"cpu": "1"}))
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        kube.create(obj)
    start_scheduler(config=DROP_IN)

    scheduled = ["lone", *(f"{n}-{i}" for n in ("racked", "plain") for i in range(sizes[n]))]
    eventually(
        lambda: all(placements(kube, namespace)[n] for n in scheduled), what="the rest bound"
    )
    where = placements(kube, namespace)
    assert any({where[f"racked-{i}"] for i in range(3)} == set(names) for names in racks.values())
    annotations = f"Pod {namespace}/{{}}-0.metadata.annotations"
    reasons = {
        "looped": (
            f"PodGroup {namespace}/looped.spec.networkTopology: the topology is not usable: "
            f"HyperNode {looped[0]}: spec.members form a cycle: "
            f"{looped[0]} -> {looped[1]} -> {looped[0]}"
        ),
        "nowhere": (
            f"{annotations.format('nowhere')}[kueue.x-k8s.io/podset-required-topology]: "
            "no node has the label example.com/none"
        ),
        "sliced": (
            f"{annotations.format('sliced')}[kueue.x-k8s.io/podset-slice-size]: slice size 3 "
            "does not divide the 4 members of pod set workers"
        ),
    }
    waiting_saying(kube, namespace, {f"{n}-0": reason for n, reason in reasons.items()})
    now = placements(kube, namespace)
    assert not any(now[f"{n}-{i}"] for n in reasons for i in range(sizes.get(n, 2)))
