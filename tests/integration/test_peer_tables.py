"""scheduler-plugins' coscheduling and capacity scheduling tests, their cases as
tests/conformance translates them for the simulator, run by `batchsched run` on a real
API server with the peer's released PodGroup CRD: the operator is held to the same
assertions as the simulator.

A case's objects are created as they are written, but for what a cluster needs:
- the test's namespace stands for the case's (the capacity scheduling cases without
  ElasticQuota have two, which decide nothing there and hold pods of distinct names);
- cluster-scoped names (nodes, priority classes) carry the test's namespace;
- a pod's priority is given by a PriorityClass (the API server's Priority admission
  refuses a bare `spec.priority`);
- a succeeded pod's phase is written through the status subresource.
The scheduler starts once everything exists, as the simulator sees it all at once.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from .operator_support import (  # noqa: F401 (fixtures)
    StartScheduler,
    eventually,
    placements,
    pods,
    priority_class,
    ready_node,
    scheduler_kubeconfig_fixture,
    start_scheduler_fixture,
    unschedulable_message,
)
from .peer_modules import scheduler_plugins_fixture  # noqa: F401 (fixture)
from tests.conformance.runner import Case
from tests.conformance.scheduler_plugins.test_capacity_scheduling import (
    POST_FILTER,
    REGULAR_PREEMPTION,
)
from tests.conformance.scheduler_plugins.test_coscheduling_integration import (
    BACKOFF,
    COMPLETED,
    PLUGIN_CASES,
)
from tests.support import ClusterObjects, Kube

pytestmark = pytest.mark.integration


def create_case(kube: Kube, cluster_objects: ClusterObjects, case: Case, namespace: str) -> None:
    classes: dict[int, str] = {}
    for obj in copy.deepcopy(case.objects):
        meta = obj["metadata"]
        # The API server sets creation times; objects are created in the case's order.
        meta.pop("creationTimestamp", None)
        if obj["kind"] == "Node":
            meta["name"] = f"{namespace}-{meta['name']}"
            ready_node(cluster_objects, kube, obj)
            continue
        meta["namespace"] = namespace
        spec = obj["spec"]
        if "nodeName" in spec:
            spec["nodeName"] = f"{namespace}-{spec['nodeName']}"
        if "priority" in spec:
            value = spec.pop("priority")
            if value not in classes:
                classes[value] = priority_class(
                    cluster_objects, kube, f"{namespace}-{value}", value
                )
            spec["priorityClassName"] = classes[value]
        phase = (obj.pop("status", None) or {}).get("phase")
        kube.create(obj)
        if phase is not None:
            path = f"/api/v1/namespaces/{namespace}/pods/{meta['name']}/status"
            kube.patch(path, {"status": {"phase": phase}}).expect(200)


def names(keys: frozenset[str]) -> set[str]:
    """The pod names of "namespace/name" keys."""
    return {key.partition("/")[2] for key in keys}


@pytest.mark.usefixtures("scheduler_plugins")
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id)
        for c in [*PLUGIN_CASES, COMPLETED, BACKOFF, REGULAR_PREEMPTION, POST_FILTER]
    ],
)
def test_case(
    case: Case,
    kube: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    start_scheduler: StartScheduler,
    tmp_path: Path,
) -> None:
    create_case(kube, cluster_objects, case, namespace)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(case.config))
    start_scheduler(config=config)

    def bound() -> set[str]:
        return {name for name, where in placements(kube, namespace).items() if where}

    scheduled, unscheduled = names(case.scheduled), names(case.unscheduled)
    eventually(lambda: scheduled <= bound(), what=f"{sorted(scheduled)} bound")
    eventually(
        lambda: all(
            unschedulable_message(p)
            for name, p in pods(kube, namespace).items()
            if name in unscheduled
        ),
        what=f"{sorted(unscheduled)} told why they wait",
    )
    assert not unscheduled & bound()
