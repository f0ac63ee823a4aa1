"""kube-scheduler v1.36.3 itself on the cases of tests/sim/test_kube_scheduler_topology.py
(all but those with priorities of their own): each case's objects on a real API server,
kube-scheduler with TopologyAwareWorkloadScheduling placing them (a case with a
configuration of its own by a profile made of it), and the case's assertion on its
answer. The simulator test checks batchsched against the
same assertions; this one checks that the translation (the cluster made of an upstream
case, its expectation) is what the real kube-scheduler does with it.

A case's steps are its creation times: the objects of one are created, then its pods'
answers (bound, or PodScheduled False) awaited before the next. The pod the upstream
test deletes (the simulator's pinned pod that succeeds at DELETED_AT) is deleted then,
and the pods that waited for it must be bound after, not before. Each case's nodes and
the label keys its groups ask for carry a suffix of its own, so that the nodes of cases
run before it (cluster-scoped, and deleted only after each test) are in no domain it may
take. kube-scheduler serves the pods' scheduler name; batchsched does not run here.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from batchsched.sim.simulator import DURATION_ANNOTATION

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
from tests.support.objects import HOSTNAME, SCHEDULER

pytestmark = pytest.mark.integration

GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
SCHEDULER_GATES = {**GATES, "GangScheduling": True}
# The cases' own configurations (their resource weights), each a profile of its own.
CONFIGURED = sorted(
    {case.config for table in TABLES.values() for case in table.values() if case.config}
)


def profile(config: str | None) -> str:
    """The scheduler name of the profile serving a case of this configuration."""
    return SCHEDULER if config is None else f"{SCHEDULER}-{CONFIGURED.index(config)}"


# Every node scored; the default profile serving the scheduler the cases' pods name,
# beside one per configuration of a case, its profile renamed.
CONFIG: JSON = {
    "percentageOfNodesToScore": 100,
    "profiles": [
        {"schedulerName": SCHEDULER},
        *(
            {**yaml.safe_load(config)["profiles"][0], "schedulerName": profile(config)}
            for config in CONFIGURED
        ),
    ],
}
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


CASES = [
    pytest.param(case, id=f"{test}/{name}")
    for test, table in TABLES.items()
    if test != "TestPodGroupScheduling"  # priorities, which the API server sets from classes
    for name, case in table.items()
]


def renamed(case: Case, suffix: str) -> tuple[list[JSON], dict[str, list[JSON]]]:
    """The case's nodes, and its namespaced objects by creationTimestamp; node names and
    the label keys asked for suffixed, pods as the API server takes them (no priority of
    their own; an extended resource's limit equal to its request)."""
    keys = {
        entry["key"]
        for obj in case.objects
        if obj["kind"] == "PodGroup"
        for entry in (obj["spec"].get("schedulingConstraints") or {}).get("topology", [])
    }

    def key_of(key: str) -> str:
        return f"{key}-{suffix}" if key in keys else key

    nodes: list[JSON] = []
    steps: dict[str, list[JSON]] = {}
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
            spec["schedulerName"] = profile(case.config)
            if spec.get("nodeName"):
                spec["nodeName"] = f"{spec['nodeName']}-{suffix}"
            if HOSTNAME in spec.get("nodeSelector", {}):
                spec["nodeSelector"] = {HOSTNAME: f"{spec['nodeSelector'][HOSTNAME]}-{suffix}"}
            spec["containers"] = [limited(c) for c in spec["containers"]]
        step = steps.setdefault(obj["metadata"]["creationTimestamp"], [])
        step.append(
            {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": spec}
        )
    return nodes, steps


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
    nodes, steps = renamed(case, suffix)
    for manifest in nodes:
        ready_node(cluster_objects, kube, manifest)
    waiting: list[str] = []
    deleted: list[str] = []
    # Every step comes before DELETED_AT.
    for when in sorted(steps):
        for obj in steps[when]:
            create(kube, namespace, obj)
            if obj["kind"] == "Pod" and not obj["spec"].get("nodeName"):
                waiting.append(obj["metadata"]["name"])
                if DURATION_ANNOTATION in obj["metadata"].get("annotations", {}):
                    deleted.append(obj["metadata"]["name"])
        eventually(lambda: answered(kube, namespace, waiting), timeout=120, what=f"step {when}")
    if deleted:
        deletion(kube, namespace, deleted, case.waited)
    first = placements(kube, namespace)
    time.sleep(STEADY)
    where = placements(kube, namespace)
    assert where == first, "kube-scheduler's answer changed"
    check(case, {name: node and node.removesuffix(f"-{suffix}") for name, node in where.items()})


def deletion(kube: Kube, namespace: str, deleted: list[str], waited: tuple[str, ...]) -> None:
    """The test's deletion: the pods waiting for it are not bound before, and are after."""
    before = placements(kube, namespace)
    assert not any(before[name] for name in waited), before
    for name in deleted:
        # At once, as upstream's pods of zero grace: no kubelet here ends them.
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        kube.delete(path, grace_period_seconds=0).expect(200)
    eventually(
        lambda: all(placements(kube, namespace).get(name) for name in waited),
        timeout=120,
        what="the pods that waited bound",
    )
