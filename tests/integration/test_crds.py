"""The CRDs in crds/ as the API server enforces them: validation, defaults, the
status subresource, short names and printer columns (docs/drop-in.md, "Short names")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import JSON, ClusterObjects, Kube

pytestmark = pytest.mark.integration

GROUP_VERSION = "scheduling.batchsched.io/v1alpha1"
_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _podgroup(name: str, **spec: Any) -> JSON:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def _queue(name: str, **spec: Any) -> JSON:
    return {"apiVersion": GROUP_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _podgroups(namespace: str) -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/podgroups"


def test_podgroup_defaults_and_accepts_quantities(kube: Kube, namespace: str) -> None:
    body = _podgroup(
        "pg", minMember=2, minResources={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 2}
    )
    created = kube.post(_podgroups(namespace), body).expect(201)
    assert created["spec"]["queue"] == "default"
    assert created["spec"]["minResources"] == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    "spec",
    [
        {"minMember": 0},
        {},
        {"minMember": "two"},
        {"minMember": 1, "scheduleTimeoutSeconds": 0},
        {"minMember": 1, "minResources": {"cpu": "lots"}},
        {"minMember": 1, "queue": ""},
    ],
    ids=[
        "min-member-0",
        "no-min-member",
        "min-member-string",
        "timeout-0",
        "bad-quantity",
        "empty-queue",
    ],
)
def test_podgroup_validation_rejects(kube: Kube, namespace: str, spec: JSON) -> None:
    reply = kube.post(_podgroups(namespace), _podgroup("bad", **spec))
    assert reply.status == 422, reply.body


def test_podgroup_status_is_a_subresource(kube: Kube, namespace: str) -> None:
    path = f"{_podgroups(namespace)}/pg"
    kube.post(_podgroups(namespace), _podgroup("pg", minMember=1)).expect(201)

    # Writes to the main resource leave status alone; only /status changes it.
    kube.patch(path, {"status": {"phase": "Running"}}).expect(200)
    assert "status" not in kube.get(path).expect(200)

    status = {
        "phase": "Inqueue",
        "scheduled": 1,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "conditions": [
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": "1/2 tasks fit",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    updated = kube.patch(f"{path}/status", {"status": status}).expect(200)
    assert updated["status"] == status
    bad_phase = kube.patch(f"{path}/status", {"status": {"phase": "Sleeping"}})
    assert bad_phase.status == 422, bad_phase.body


def test_queue_defaults_and_validation(kube: Kube, cluster_objects: ClusterObjects) -> None:
    created = cluster_objects.create(_queue("q-defaults"))
    assert created["spec"] == {"weight": 1, "reclaimable": True, "state": "Open"}
    assert "namespace" not in created["metadata"]

    for bad in ({"weight": 0}, {"state": "Paused"}, {"capability": {"cpu": "-x"}}):
        reply = kube.post(f"/apis/{GROUP_VERSION}/queues", _queue("q-bad", **bad))
        assert reply.status == 422, (bad, reply.body)

    path = f"/apis/{GROUP_VERSION}/queues/q-defaults/status"
    status = {"allocated": {"cpu": "2", "memory": "4Gi"}, "pending": 1, "inqueue": 0, "running": 2}
    assert kube.patch(path, {"status": status}).expect(200)["status"] == status


def test_queue_keeps_guarantee_deserved_and_parent(cluster_objects: ClusterObjects) -> None:
    """Fields the scheduler reads survive the API server's pruning."""
    spec = {
        "guarantee": {"resource": {"cpu": "2"}},
        "deserved": {"cpu": "4"},
        "capability": {"cpu": "8"},
        "parent": "org",
    }
    created = cluster_objects.create(_queue("q-tree", **spec))
    assert {key: created["spec"][key] for key in spec} == spec


# Quantities in every form the API server's own parser takes, each sign and integers.
NEGATIVE = ["-1", "-500m", "-1Gi", "-.5", "-1e3", -2]
NOT_NEGATIVE = ["0", "+1", "500m", "1Gi", "1e-3", ".5", 0, 2]


@pytest.mark.parametrize("amount", NEGATIVE, ids=repr)
def test_negative_quantities_are_refused(kube: Kube, namespace: str, amount: object) -> None:
    amounts = {"cpu": amount}
    group = kube.post(_podgroups(namespace), _podgroup("pg", minMember=1, minResources=amounts))
    queue = kube.post(f"/apis/{GROUP_VERSION}/queues", _queue("q-negative", capability=amounts))
    assert (group.status, queue.status) == (422, 422), (group.body, queue.body)


def test_a_negative_queue_status_is_refused(kube: Kube, cluster_objects: ClusterObjects) -> None:
    cluster_objects.create(_queue("q-status"))
    path = f"/apis/{GROUP_VERSION}/queues/q-status/status"
    for amount in NEGATIVE:
        reply = kube.patch(path, {"status": {"allocated": {"cpu": amount}}})
        assert reply.status == 422, (amount, reply.body)


@pytest.mark.parametrize("amount", NOT_NEGATIVE, ids=repr)
def test_other_quantities_are_accepted(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, amount: object
) -> None:
    amounts = {"cpu": amount}
    kube.post(_podgroups(namespace), _podgroup("pg", minMember=1, minResources=amounts)).expect(201)
    cluster_objects.create(_queue("q-amounts", capability=amounts))
    status = {"status": {"allocated": amounts}}
    kube.patch(f"/apis/{GROUP_VERSION}/queues/q-amounts/status", status).expect(200)


def test_short_names_and_printer_columns(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects
) -> None:
    listing = kube.request(
        "GET",
        "/apis",
        accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    )
    groups = {g["metadata"]["name"]: g for g in listing.expect(200)["items"]}
    resources = {
        r["resource"]: r for r in groups["scheduling.batchsched.io"]["versions"][0]["resources"]
    }
    assert resources["podgroups"]["shortNames"] == ["pg"]
    assert resources["queues"]["shortNames"] == ["q"]
    assert resources["podgroups"]["scope"] == "Namespaced"
    assert resources["queues"]["scope"] == "Cluster"

    kube.post(_podgroups(namespace), _podgroup("pg", minMember=3, queue="research")).expect(201)
    table = kube.request("GET", _podgroups(namespace), accept=_TABLE).expect(200)
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == [
        "Name",
        "Phase",
        "MinMember",
        "Scheduled",
        "Running",
        "Queue",
        "Domain",
        "Age",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[columns.index("MinMember")] == 3
    assert cells[columns.index("Queue")] == "research"

    cluster_objects.create(_queue("q-columns", weight=4))
    table = kube.request("GET", f"/apis/{GROUP_VERSION}/queues", accept=_TABLE).expect(200)
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Weight", "State", "Pending", "Inqueue", "Running", "Age"]


@pytest.mark.parametrize(
    ("group_version", "kept"),
    [
        ("scheduling.volcano.sh/v1beta1", {"minMember": 3, "queue": "research"}),
        ("scheduling.x-k8s.io/v1alpha1", {"minMember": 3}),
    ],
)
def test_foreign_podgroups_keep_their_fields(
    kube: Kube, namespace: str, group_version: str, kept: JSON
) -> None:
    """The peers' released CRDs, installed beside ours: each keeps the fields of its
    own API and prunes the rest, as on a user's cluster."""
    body = {
        "apiVersion": group_version,
        "kind": "PodGroup",
        "metadata": {"name": "foreign"},
        "spec": {"minMember": 3, "queue": "research", "anything": {"nested": True}},
    }
    created = kube.create(body, namespace)
    assert created["spec"] == kept
