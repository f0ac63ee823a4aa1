"""`batchsched run` making the claim for an extended resource backed by a DeviceClass
(B.13 13), on a real kube-apiserver, kube-controller-manager (its garbage collector)
and kube-scheduler v1.36.3, which makes the same claim for a pod of its own.

A pod asking `<resource>: 2` on a node without it in allocatable gets, before its
Binding and in kube-scheduler's order, a claim created for it (generated name, the
annotation, the pod as controller owner, one request per container), the claim's
finalizer, allocation and reservation, then `status.extendedResourceClaimStatus` on the
pod. A failed bind deletes the claim; a claim left by an earlier attempt is deleted
before the pod gets a new one, so the pod never has two.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from batchsched.api.dra import DEVICE_CLASS_RESOURCE_PREFIX, EXTENDED_RESOURCE_CLAIM_ANNOTATION
from batchsched.k8s.allocations import FINALIZER

from .conftest import PROJECT_CRDS, kube_controller_manager, kube_scheduler, start_control_plane
from .faultproxy import Fault
from .operator_support import (  # noqa: F401 (fixtures)
    BINDING_PATHS,
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    create,
    eventually,
    pods,
    scheduler_kubeconfig_fixture,
    start_proxy_fixture,
    start_scheduler_fixture,
)
from .test_dra_operator import (  # noqa: F401 (fixtures)
    CPU,
    DRIVER,
    Dra,
    claims_path,
    dra_fixture,
    gpus,
    kube_fixture,
)
from tests.support import JSON, ControlPlane
from tests.support.objects import device_class, load_manifests, pod

pytestmark = pytest.mark.integration

HOSTNAME = "kubernetes.io/hostname"
# The container's requests sorted by name are cpu, the extended resource, memory: its
# request is the container's second (kube-scheduler's createResourceRequestAndMappings).
REQUEST = "container-0-request-1"


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    controllers = ("resourceclaim-controller", "garbage-collector-controller")
    manager, scheduler = kube_controller_manager(), kube_scheduler()
    with start_control_plane(crds=load_manifests(PROJECT_CRDS)) as plane:
        plane.start_controller_manager(manager, controllers=controllers)
        plane.start_scheduler(scheduler, {})
        yield plane


def backed(dra: Dra) -> str:
    """A DeviceClass of the test's GPUs backing an extended resource; returns it."""
    resource = f"example.com/{dra.name('gpu')}"
    made = device_class(dra.name("gpu"), f"device.driver == '{DRIVER}'")
    made["spec"]["extendedResourceName"] = resource
    dra.objects.create(made)
    return resource


def asking(dra: Dra, name: str, resource: str, node: str, **options: Any) -> JSON:
    """A pod whose container asks two of `resource`, kept to `node`."""
    manifest = pod(name, {**CPU, resource: "2"}, spec={"nodeSelector": {HOSTNAME: node}}, **options)
    manifest["spec"]["containers"][0]["resources"]["limits"] = {resource: "2"}
    return create(dra.kube, dra.namespace, manifest)


def extended_claims(dra: Dra, made: JSON) -> list[JSON]:
    """The claims annotated as made for the pod's extended resources, owned by it."""
    found = []
    for claim in dra.kube.get(claims_path(dra.namespace)).expect(200)["items"]:
        meta = claim["metadata"]
        owners = [o["uid"] for o in meta.get("ownerReferences") or () if o.get("controller")]
        notes = meta.get("annotations") or {}
        if notes.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true" and owners == [
            made["metadata"]["uid"]
        ]:
            found.append(claim)
    return found


def named_claim(dra: Dra, name: str) -> JSON:
    status: JSON = pods(dra.kube, dra.namespace)[name].get("status") or {}
    return status.get("extendedResourceClaimStatus") or {}


def shape(claim: JSON, made: JSON, node: str) -> JSON:
    """What the claim says, but for the names and uids of pod, claim and devices."""
    meta = claim["metadata"]
    pod_name = made["metadata"]["name"]
    allocation = claim["status"]["allocation"]
    return {
        "generateName": meta["generateName"].replace(pod_name, "<pod>"),
        "name": meta["name"].startswith(f"{pod_name}-extended-resources-"),
        "annotations": meta.get("annotations"),
        "owners": [
            {**o, "name": o["name"] == pod_name, "uid": o["uid"] == made["metadata"]["uid"]}
            for o in meta["ownerReferences"]
        ],
        "finalizers": meta.get("finalizers"),
        "spec": claim["spec"],
        "results": [
            {**r, "device": "<device>", "pool": r["pool"] == node}
            for r in allocation["devices"]["results"]
        ],
        "nodeSelector": str(allocation.get("nodeSelector")).replace(node, "<node>"),
        "allocation keys": sorted(allocation),
        "reservedFor": [
            {**r, "name": r["name"] == pod_name, "uid": r["uid"] == made["metadata"]["uid"]}
            for r in claim["status"]["reservedFor"]
        ],
    }


def test_a_pod_asking_an_extended_resource_gets_its_claim_before_its_binding(
    dra: Dra, control_plane: ControlPlane
) -> None:
    """The claim is created, allocated and reserved, and the pod's status names it with
    the container's request, in kube-scheduler's order, then the pod is bound; the claim
    is as kube-scheduler v1.36.3 makes it for a pod of its own on the same server."""
    ours, theirs = dra.add_nodes(2)
    for node in (ours, theirs):
        dra.devices(node, *gpus(3))
    resource = backed(dra)
    dra.start_scheduler()
    made = asking(dra, "train", resource, ours)
    upstream = asking(dra, "upstream", resource, theirs, scheduler="default-scheduler")
    assert dra.bound("train", "upstream") == {"train": ours, "upstream": theirs}

    [claim] = extended_claims(dra, made)
    [reference] = extended_claims(dra, upstream)
    assert shape(claim, made, ours) == shape(reference, upstream, theirs)
    assert claim["metadata"]["generateName"] == "train-extended-resources-"
    assert claim["metadata"]["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
    assert FINALIZER in claim["metadata"]["finalizers"]
    assert [r["request"] for r in claim["status"]["allocation"]["devices"]["results"]] == [
        REQUEST,
        REQUEST,
    ]
    mapping = {"containerName": "main", "resourceName": resource}
    assert named_claim(dra, "train") == {
        "resourceClaimName": claim["metadata"]["name"],
        "requestMappings": [{**mapping, "requestName": REQUEST}],
    }
    assert (
        named_claim(dra, "upstream")["requestMappings"]
        == named_claim(dra, "train")["requestMappings"]
    )

    # The API server's own order: claim created, finalizer, allocation with the
    # reservation, the pod's status naming it, Binding.
    steps = [
        ("create", "resourceclaims", ""),
        ("update", "resourceclaims", ""),
        ("patch", "resourceclaims", "status"),
        ("patch", "pods", "status"),
        ("create", "pods", "binding"),
    ]
    names = {claim["metadata"]["name"], "train", "", None}
    done = [
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
        for e in control_plane.audit_events()
        if e["user"]["username"].endswith(":scheduler")
        and e["stage"] == "ResponseComplete"
        and e["objectRef"].get("namespace") == dra.namespace
        and e["objectRef"].get("name") in names
        and e["responseStatus"]["code"] < 300
    ]
    found = iter(done)
    assert all(step in found for step in steps), done


def test_a_class_asked_by_its_implicit_resource_name_gets_its_claim(dra: Dra) -> None:
    """Every DeviceClass is also the extended resource
    `deviceclass.resource.kubernetes.io/<class>`, with no `extendedResourceName`: asked
    so, the pod gets the claim for it as kube-scheduler's own pod does."""
    ours, theirs = dra.add_nodes(2)
    for node in (ours, theirs):
        dra.devices(node, *gpus(3))
    dra.objects.create(device_class(dra.name("gpu"), f"device.driver == '{DRIVER}'"))
    resource = f"{DEVICE_CLASS_RESOURCE_PREFIX}{dra.name('gpu')}"
    dra.start_scheduler()
    made = asking(dra, "implicit", resource, ours)
    upstream = asking(dra, "upstream", resource, theirs, scheduler="default-scheduler")
    assert dra.bound("implicit", "upstream") == {"implicit": ours, "upstream": theirs}

    [claim] = extended_claims(dra, made)
    [reference] = extended_claims(dra, upstream)
    assert shape(claim, made, ours) == shape(reference, upstream, theirs)
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
    assert named_claim(dra, "implicit")["resourceClaimName"] == claim["metadata"]["name"]
    assert (
        named_claim(dra, "upstream")["requestMappings"]
        == named_claim(dra, "implicit")["requestMappings"]
    )


def test_a_refused_bind_deletes_the_claim_and_the_next_attempt_makes_one(
    dra: Dra, scheduler_accounts: SchedulerAccounts, start_proxy: StartProxy
) -> None:
    """A Binding refused after the claim was made: the claim is deleted (its devices
    free), and once binds go through the pod gets a new claim, its only one."""
    [node] = dra.add_nodes(1)
    dra.devices(node, *gpus(2))
    resource = backed(dra)
    proxy = start_proxy()
    refused: Fault = proxy.fail(BINDING_PATHS, status=403)
    dra.start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("scheduler", server=proxy.url))
    made = asking(dra, "p", resource, node)
    eventually(lambda: refused.paths, what="a refused Binding")
    first = eventually(lambda: named_claim(dra, "p").get("resourceClaimName"), what="a claim")
    eventually(
        lambda: dra.kube.get(claims_path(dra.namespace, first)).status == 404,
        what="the claim of the refused bind deleted",
    )
    proxy.remove(refused)
    assert dra.bound("p") == {"p": node}
    [claim] = extended_claims(dra, made)
    assert claim["metadata"]["name"] != first
    assert named_claim(dra, "p")["resourceClaimName"] == claim["metadata"]["name"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2


def test_a_claim_left_by_an_earlier_attempt_is_deleted_before_the_pod_gets_one(
    dra: Dra,
) -> None:
    """A leader lost after making the claim and before the Binding leaves it allocated
    and reserved, the pod pending: the next one deletes it (as kube-scheduler's
    PostFilter does) and makes one claim, never a second beside it."""
    [node] = dra.add_nodes(1)
    pool = dra.devices(node, *gpus(2))
    resource = backed(dra)
    made = asking(dra, "p", resource, node)
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "uid": made["metadata"]["uid"],
        "controller": True,
    }
    request = {"deviceClassName": dra.name("gpu"), "allocationMode": "ExactCount", "count": 2}
    left = dra.kube.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": "p-extended-resources-",
                "ownerReferences": [owner],
                "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                "finalizers": [FINALIZER],
            },
            "spec": {"devices": {"requests": [{"name": REQUEST, "exactly": request}]}},
        },
        dra.namespace,
    )
    name = left["metadata"]["name"]
    results = [
        {"request": REQUEST, "driver": DRIVER, "pool": pool, "device": d}
        for d in ("gpu-0", "gpu-1")
    ]
    status = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": made["metadata"]["uid"]}],
    }
    path = f"{claims_path(dra.namespace, name)}/status"
    dra.kube.patch(path, {"status": status}).expect(200)
    pod_status = f"/api/v1/namespaces/{dra.namespace}/pods/p/status"
    mappings = [{"containerName": "main", "resourceName": resource, "requestName": REQUEST}]
    named = {"resourceClaimName": name, "requestMappings": mappings}
    dra.kube.patch(pod_status, {"status": {"extendedResourceClaimStatus": named}}).expect(200)
    dra.start_scheduler()
    assert dra.bound("p") == {"p": node}
    assert dra.kube.get(claims_path(dra.namespace, name)).status == 404
    [claim] = extended_claims(dra, made)
    assert named_claim(dra, "p")["resourceClaimName"] == claim["metadata"]["name"] != name
