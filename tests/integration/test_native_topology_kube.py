"""kube-scheduler v1.36.3 itself on the cases of tests/sim/test_kube_scheduler_topology.py
that are one step (every object created at once, nothing deleted, the default scoring
weights): each case's objects on a real API server, kube-scheduler with
TopologyAwareWorkloadScheduling placing them, and the case's assertion on its answer.
The simulator test checks batchsched against the same assertions; this one checks that
the translation (the cluster made of an upstream case, its expectation) is what the
real kube-scheduler does with it.

Each case's nodes and the label keys its groups ask for carry a suffix of its own, so
that the nodes of cases run before it (cluster-scoped, and deleted only after each
test) are in no domain it may take. kube-scheduler serves the pods' scheduler name;
batchsched does not run here.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import kube_scheduler, start_control_plane
from .operator_support import (
    create,
    eventually,
    placements,
    pods,
    ready_node,
)
from tests.sim.test_kube_scheduler_topology import TABLES, Case, check
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import HOSTNAME, SCHEDULER, stamp

pytestmark = pytest.mark.integration

GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
SCHEDULER_GATES = {**GATES, "GangScheduling": True}
# The default profile, every node scored, serving the scheduler the cases' pods name.
CONFIG: JSON = {"percentageOfNodesToScore": 100, "profiles": [{"schedulerName": SCHEDULER}]}
# How long a settled answer must stay as it is: kube-scheduler retries after a second.
STEADY = 3.0


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    binary = kube_scheduler()
    with start_control_plane(
        feature_gates=GATES, runtime_config={"scheduling.k8s.io/v1alpha2": True}
    ) as plane:
        plane.start_scheduler(binary, CONFIG, feature_gates=SCHEDULER_GATES)
        yield plane


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:
    return control_plane.kube()


def one_step(case: Case) -> bool:
    """Created at once (by the second after the start), nothing deleted, default weights."""
    return (
        case.config is None
        and not case.waited
        and all(obj["metadata"].get("creationTimestamp", "") <= stamp(1) for obj in case.objects)
    )


CASES = [
    pytest.param(case, id=f"{test}/{name}")
    for test, table in TABLES.items()
    if test != "TestPodGroupScheduling"  # priorities, which the API server sets from classes
    for name, case in table.items()
    if one_step(case)
]


def renamed(case: Case, suffix: str) -> tuple[list[JSON], list[JSON]]:
    """The case's nodes and namespaced objects, node names and the label keys asked for
    suffixed, pods as the API server takes them (no priority of their own; an extended
    resource's limit equal to its request)."""
    keys = {
        entry["key"]
        for obj in case.objects
        if obj["kind"] == "PodGroup"
        for entry in (obj["spec"].get("schedulingConstraints") or {}).get("topology", [])
    }

    def key_of(key: str) -> str:
        return f"{key}-{suffix}" if key in keys else key

    nodes, namespaced = [], []
    for obj in case.objects:
        meta: dict[str, Any] = {
            k: v for k, v in obj["metadata"].items() if k not in ("creationTimestamp", "namespace")
        }
        if obj["kind"] == "Node":
            meta["name"] = f"{meta['name']}-{suffix}"
            meta["labels"] = {key_of(k): v for k, v in meta["labels"].items()}
            meta["labels"][HOSTNAME] = meta["name"]
            nodes.append({**obj, "metadata": meta})
            continue
        spec = dict(obj["spec"])
        if obj["kind"] == "PodGroup":
            topology = (spec.get("schedulingConstraints") or {}).get("topology")
            if topology:
                spec["schedulingConstraints"] = {"topology": [{"key": key_of(topology[0]["key"])}]}
        else:
            spec.pop("priority", None)
            if spec.get("nodeName"):
                spec["nodeName"] = f"{spec['nodeName']}-{suffix}"
            spec["containers"] = [limited(c) for c in spec["containers"]]
        namespaced.append(
            {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": spec}
        )
    return nodes, namespaced


def limited(container: JSON) -> JSON:
    requests = (container.get("resources") or {}).get("requests") or {}
    extended = {k: v for k, v in requests.items() if "/" in k}
    if not extended:
        return container
    return {**container, "resources": {"requests": requests, "limits": extended}}


def answered(kube: Kube, namespace: str, waiting: list[str]) -> dict[str, str | None] | None:
    """Where the pods are once each waiting one is bound or found unschedulable."""
    found = pods(kube, namespace)
    for name in waiting:
        pod = found.get(name)
        if pod is None or not (pod["spec"].get("nodeName") or refused(pod)):
            return None
    return placements(kube, namespace)


def refused(pod: JSON) -> bool:
    """PodScheduled False: Unschedulable, or SchedulerError where a case's status is an
    error (members in two domains, or on a node it cannot place in one)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)


@pytest.mark.parametrize("case", CASES)
def test_kube_scheduler_places_the_case_as_upstream_asserts(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, case: Case
) -> None:
    suffix = secrets.token_hex(3)
    nodes, namespaced = renamed(case, suffix)
    for manifest in nodes:
        ready_node(cluster_objects, kube, manifest)
    for obj in namespaced:
        create(kube, namespace, obj)
    waiting = [
        o["metadata"]["name"]
        for o in namespaced
        if o["kind"] == "Pod" and not o["spec"].get("nodeName")
    ]
    first = eventually(
        lambda: answered(kube, namespace, waiting), timeout=120, what="kube-scheduler's answer"
    )
    time.sleep(STEADY)
    where = placements(kube, namespace)
    assert where == first, "kube-scheduler's answer changed"
    check(case, {name: node and node.removesuffix(f"-{suffix}") for name, node in where.items()})
