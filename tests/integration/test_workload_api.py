"""Kubernetes' own gang API (scheduling.k8s.io/v1alpha2) and the controllers that act on
it, on a real kube-apiserver and kube-controller-manager of the release we build.

These tests pin down what Kubernetes itself does, which the scheduler's reading of
Workloads and PodGroups relies on: which Jobs the Job controller turns into a gang
(feature gate WorkloadWithJob), the objects it writes and their fields, the pods'
`spec.schedulingGroup`, garbage collection, the PodGroup protection finalizer and the
API server's admission checks. No scheduler runs: the pods stay Pending.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import kube_controller_manager, start_control_plane
from .operator_support import eventually
from tests.support import ControlPlane, ControlPlaneError, Kube
from tests.support.objects import SCHEDULER, pod

pytestmark = pytest.mark.integration

V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
# TopologyAwareWorkloadScheduling: the API server keeps a PodGroup's
# spec.schedulingConstraints only with it (test_native_gangs' topology case).
GATES = {"GenericWorkload": True, "WorkloadWithJob": True, "TopologyAwareWorkloadScheduling": True}
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "podgroup-protection-controller",
)
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:"
# The controllers' first actions wait for their informers and service accounts.
SETTLE = 90.0


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    """A control plane of its own, serving v1alpha2 with the gates on, and the
    controllers this module needs (the API server's gates are the controllers' too)."""
    binary = kube_controller_manager()
    with start_control_plane(feature_gates=GATES, runtime_config={V1ALPHA2: True}) as plane:
        plane.start_controller_manager(binary, controllers=CONTROLLERS)
        yield plane


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:
    return control_plane.kube()


def job(
    name: str,
    *,
    parallelism: int,
    completions: int,
    indexed: bool = True,
    scheduling_group: str | None = None,
) -> dict[str, Any]:
    template = pod("worker", {"cpu": "100m"})
    spec = template["spec"]
    spec["restartPolicy"] = "Never"
    if scheduling_group is not None:
        spec["schedulingGroup"] = {"podGroupName": scheduling_group}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "template": {"spec": spec},
        },
    }


def items(kube: Kube, path: str, **query: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kube.get(path, query=query).expect(200)["items"]
    return found


def scheduling(namespace: str, plural: str) -> str:
    return f"/apis/{V1ALPHA2}/namespaces/{namespace}/{plural}"


def job_pods(kube: Kube, namespace: str, name: str, count: int) -> list[dict[str, Any]]:
    """The Job's pods, once the Job controller has created `count` of them."""

    def created() -> list[dict[str, Any]] | None:
        pods = items(
            kube, f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{JOB_NAME_LABEL}={name}"
        )
        return pods if len(pods) == count else None

    return eventually(created, timeout=SETTLE, what=f"{count} pods of Job {name}")


def owners(obj: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [
        (ref["kind"], ref["name"], bool(ref.get("controller")))
        for ref in obj["metadata"].get("ownerReferences", [])
    ]


@pytest.mark.parametrize(
    ("shape", "count"),
    [
        ({"parallelism": 2, "completions": 3}, 2),
        ({"parallelism": 1, "completions": 1}, 1),
        ({"parallelism": 2, "completions": 2, "indexed": False}, 2),
        ({"parallelism": 2, "completions": 2, "scheduling_group": "own-group"}, 2),
    ],
    ids=["completions-differ", "parallelism-1", "non-indexed", "own-scheduling-group"],
)
def test_a_job_that_does_not_qualify_gets_pods_and_no_gang(
    kube: Kube, namespace: str, shape: dict[str, Any], count: int
) -> None:
    """Only an Indexed Job with parallelism > 1, completions == parallelism and no
    schedulingGroup of its own becomes a gang; any other gets plain pods."""
    kube.create(job("plain", **shape), namespace)
    pods = job_pods(kube, namespace, "plain", count)

    own = shape.get("scheduling_group")
    for p in pods:
        assert owners(p) == [("Job", "plain", True)]
        assert p["spec"]["schedulerName"] == SCHEDULER
        assert p["spec"].get("schedulingGroup") == ({"podGroupName": own} if own else None)
    if shape.get("indexed", True):
        assert sorted(p["metadata"]["annotations"][COMPLETION_INDEX] for p in pods) == [
            str(i) for i in range(count)
        ]
    # The controller writes the Workload and PodGroup before any pod, so none will come.
    assert items(kube, scheduling(namespace, "workloads")) == []
    assert items(kube, scheduling(namespace, "podgroups")) == []


def test_a_qualifying_job_becomes_a_workload_a_gang_podgroup_and_member_pods(
    kube: Kube, namespace: str
) -> None:
    created = kube.create(job("train", parallelism=4, completions=4), namespace)
    job_ref = ("Job", "train", True)
    pods = job_pods(kube, namespace, "train", 4)

    [workload] = items(kube, scheduling(namespace, "workloads"))
    workload_name = workload["metadata"]["name"]
    assert re.fullmatch(r"train-[a-z0-9]+", workload_name), workload_name
    assert owners(workload) == [job_ref]
    assert workload["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    template_name = "train-pgt-0"
    assert workload["spec"] == {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroupTemplates": [
            {
                "name": template_name,
                "schedulingPolicy": {"gang": {"minCount": 4}},
                # Written out as null, not left out: a reader must take null for absent.
                "schedulingConstraints": None,
            }
        ],
    }

    [group] = items(kube, scheduling(namespace, "podgroups"))
    group_name = group["metadata"]["name"]
    assert re.fullmatch(rf"{workload_name}-{template_name}-[a-z0-9]+", group_name), group_name
    assert owners(group) == [job_ref, ("Workload", workload_name, False)]
    assert group["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert group["spec"] == {
        "podGroupTemplateRef": {
            "workload": {"workloadName": workload_name, "podGroupTemplateName": template_name}
        },
        "schedulingPolicy": {"gang": {"minCount": 4}},
        # Defaulted by the API server although WorkloadAwarePreemption is off.
        "disruptionMode": "Pod",
    }
    # Nobody has scheduled it: the status is the scheduler's to write.
    assert not group.get("status", {}).get("conditions")

    for p in pods:
        assert p["spec"]["schedulingGroup"] == {"podGroupName": group_name}
        # The template's scheduler is kept: such a gang is the named scheduler's to place.
        assert p["spec"]["schedulerName"] == SCHEDULER
        # The controller means to add the PodGroup as a second owner, but pods are made
        # from the template with the Job as their only owner.
        assert owners(p) == [job_ref]

    events = items(kube, f"/api/v1/namespaces/{namespace}/events")
    assert any(
        e["reason"] == "WorkloadCreated" and e["involvedObject"]["name"] == "train" for e in events
    )

    # A gang's size is fixed: the API server refuses to change the Job's parallelism.
    refused = kube.patch(
        f"/apis/batch/v1/namespaces/{namespace}/jobs/train", {"spec": {"parallelism": 3}}
    )
    assert refused.status == 403, refused.body
    assert f'gang-scheduled PodGroup "{group_name}"' in refused.body["message"]


def test_a_job_created_suspended_has_its_gang_before_its_pods(kube: Kube, namespace: str) -> None:
    """As a queueing controller (Kueue) creates Jobs: suspended, resumed once admitted.
    The Workload and PodGroup come at the Job's first sync, and wait without pods."""
    suspended = job("queued", parallelism=2, completions=2)
    suspended["spec"]["suspend"] = True
    kube.create(suspended, namespace)
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/queued"
    kube.wait_for(
        path,
        lambda j: any(c["type"] == "Suspended" for c in j.get("status", {}).get("conditions", [])),
        timeout=SETTLE,
    )
    [group] = items(kube, scheduling(namespace, "podgroups"))
    assert items(kube, f"/api/v1/namespaces/{namespace}/pods") == []

    kube.patch(path, {"spec": {"suspend": False}}).expect(200)
    for p in job_pods(kube, namespace, "queued", 2):
        assert p["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}


def test_a_job_with_an_owner_of_its_own_still_becomes_a_gang(kube: Kube, namespace: str) -> None:
    """Being owned by a higher-level controller does not stop the Job controller."""
    parent = kube.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "parent"}}, namespace
    )
    owned = job("child", parallelism=2, completions=2)
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "parent",
            "uid": parent["metadata"]["uid"],
            "controller": True,
        }
    ]
    kube.create(owned, namespace)
    [member, _] = job_pods(kube, namespace, "child", 2)
    [group] = items(kube, scheduling(namespace, "podgroups"))
    assert member["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}


def test_a_workload_made_for_the_job_by_another_keeps_its_pods_out_of_a_gang(
    kube: Kube, namespace: str
) -> None:
    """A Workload naming the Job as its controller but not owned by it (as a
    higher-level controller would write) makes the Job controller stand aside."""
    kube.create(
        {
            "apiVersion": V1ALPHA2,
            "kind": "Workload",
            "metadata": {"name": "made-elsewhere"},
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "adopted"},
                "podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
                ],
            },
        },
        namespace,
    )
    kube.create(job("adopted", parallelism=2, completions=2), namespace)
    for p in job_pods(kube, namespace, "adopted", 2):
        assert p["spec"].get("schedulingGroup") is None
    assert items(kube, scheduling(namespace, "podgroups")) == []
    [workload] = items(kube, scheduling(namespace, "workloads"))
    assert workload["metadata"]["name"] == "made-elsewhere"


def test_deleting_the_job_collects_its_workload_podgroup_and_pods(
    kube: Kube, namespace: str
) -> None:
    kube.create(job("short", parallelism=2, completions=2), namespace)
    job_pods(kube, namespace, "short", 2)
    background = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    kube.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/short", background).expect(
        200
    )

    def collected() -> bool:
        return not any(
            items(kube, path)
            for path in (
                scheduling(namespace, "workloads"),
                scheduling(namespace, "podgroups"),
                f"/api/v1/namespaces/{namespace}/pods",
            )
        )

    eventually(collected, timeout=SETTLE, what="the Job's Workload, PodGroup and pods deleted")


def test_a_deleted_podgroup_stays_until_its_pods_are_terminal(kube: Kube, namespace: str) -> None:
    kube.create(job("gang", parallelism=2, completions=2), namespace)
    pods = job_pods(kube, namespace, "gang", 2)
    # The Job counts its pods from the informer the protection controller shares, so
    # once both are active the controller sees them too.
    kube.wait_for(
        f"/apis/batch/v1/namespaces/{namespace}/jobs/gang",
        lambda j: j.get("status", {}).get("active") == 2,
        timeout=SETTLE,
    )
    [group] = items(kube, scheduling(namespace, "podgroups"))
    group_path = f"{scheduling(namespace, 'podgroups')}/{group['metadata']['name']}"
    kube.delete(group_path).expect(200)

    # A PodGroup no pod names, deleted after it, is released; the controller works one
    # queue in order, so by then it has looked at the Job's group and kept it.
    idle = kube.create(
        {
            "apiVersion": V1ALPHA2,
            "kind": "PodGroup",
            "metadata": {"name": "idle"},
            "spec": {"schedulingPolicy": {"basic": {}}},
        },
        namespace,
    )
    assert idle["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    kube.delete(f"{scheduling(namespace, 'podgroups')}/idle").expect(200)
    eventually(
        lambda: kube.get(f"{scheduling(namespace, 'podgroups')}/idle").status == 404,
        timeout=SETTLE,
        what="the idle PodGroup released",
    )
    kept = kube.get(group_path).expect(200)
    assert kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["finalizers"] == [PROTECTION_FINALIZER]

    for p in pods:
        status = {"status": {"phase": "Succeeded"}}
        kube.patch(
            f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}/status", status
        ).expect(200)
    eventually(
        lambda: kube.get(group_path).status == 404,
        timeout=SETTLE,
        what="the PodGroup released once its pods succeeded",
    )


def test_api_server_admission_and_immutability(kube: Kube, namespace: str) -> None:
    """What the API server itself refuses, so the scheduler need not."""
    groups = scheduling(namespace, "podgroups")

    def podgroup(name: str, workload: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
        if workload is not None:
            spec["podGroupTemplateRef"] = {
                "workload": {"workloadName": workload, "podGroupTemplateName": "workers"}
            }
        return {
            "apiVersion": V1ALPHA2,
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": spec,
        }

    # PodGroupWorkloadExists: a PodGroup naming a Workload needs it and its template.
    missing = kube.post(groups, podgroup("orphan", workload="absent"))
    assert missing.status == 403, missing.body
    assert 'Workload "absent" not found' in missing.body["message"]
    kube.create(
        {
            "apiVersion": V1ALPHA2,
            "kind": "Workload",
            "metadata": {"name": "w"},
            "spec": {
                "podGroupTemplates": [
                    {"name": "others", "schedulingPolicy": {"gang": {"minCount": 2}}}
                ]
            },
        },
        namespace,
    )
    wrong = kube.post(groups, podgroup("wrong-template", workload="w"))
    assert wrong.status == 403, wrong.body
    assert 'PodGroupTemplate "workers" not found in Workload "w"' in wrong.body["message"]

    # A pod may name a PodGroup that does not exist (yet); the name is then fixed.
    member = pod("member", {"cpu": "100m"})
    member["spec"]["schedulingGroup"] = {"podGroupName": "later"}
    kube.create(member, namespace)
    kube.create(podgroup("later"), namespace)
    moved = kube.patch(
        f"/api/v1/namespaces/{namespace}/pods/member",
        {"spec": {"schedulingGroup": {"podGroupName": "elsewhere"}}},
    )
    assert moved.status == 422, moved.body
    resized = kube.patch(
        f"{groups}/later", {"spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}
    )
    assert resized.status == 422, resized.body


def test_the_gates_decide_what_is_served_and_what_controllers_may_do(kube: Kube) -> None:
    """The controllers' rights come from the API server's bootstrap roles, which follow
    its own gates: kube-controller-manager's gates alone are not enough."""
    job_role = f"{CONTROLLER_ROLES}job-controller"
    protection_role = f"{CONTROLLER_ROLES}podgroup-protection-controller"
    assert {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["podgroups", "workloads"],
        "verbs": ["create", "get", "list", "watch"],
    } in kube.get(job_role).expect(200)["rules"]
    kube.get(protection_role).expect(200)

    with start_control_plane() as plain:
        defaults = plain.kube()
        assert defaults.get(f"/apis/{V1ALPHA2}").status == 404
        assert defaults.get(protection_role).status == 404
        rules = defaults.get(job_role).expect(200)["rules"]
        assert all("scheduling.k8s.io" not in rule.get("apiGroups", []) for rule in rules)

        # kube-controller-manager itself leaves the protection controller out without
        # GenericWorkload (and only logs it); the harness says so, as for a wrong name.
        binary = kube_controller_manager()
        with pytest.raises(ControlPlaneError, match="not in the list of known controllers"):
            plain.start_controller_manager(binary, controllers=["podgroup-protection"])
        with pytest.raises(
            ControlPlaneError,
            match=r'podgroup-protection-controller \(needs \["GenericWorkload"\]\)',
        ):
            plain.start_controller_manager(binary, controllers=["podgroup-protection-controller"])
