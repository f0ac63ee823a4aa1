"""What the binder writes to a job's ResourceClaims before binding its pods, in which
order, how it answers conflicts and refusals, and what it takes back when a bind fails.
(tests/integration/test_dra_operator.py checks the same writes on a real API server.)"""

import asyncio
import copy
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from batchsched.api.dra import (
    AllocatedDevice,
    ClaimRequest,
    ClaimSpec,
    DeviceClass,
    DeviceRequest,
    ExtendedMapping,
    class_from_object,
)
from batchsched.api.selectors import Requirement
from batchsched.k8s.allocations import FINALIZER, allocation_status, node_selector
from batchsched.k8s.binder import DEVICE_BINDING_FAILED, Binder
from batchsched.k8s.client import JSON, ApiError
from batchsched.k8s.watch import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS
from batchsched.model.decisions import Binding, DeviceAllocation

from .recording_api import RecordingApi, watch_over
from tests.support.objects import device_class, exactly, first_available, pod, resource_claim

DRIVER = "gpu.example.com"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


class Claims:
    """The claims as the API server holds them: read, updated and patched in turn, each
    write raising the resourceVersion; `conflicts` answers that many writes with 409."""

    def __init__(self, *names: str, allocated_elsewhere: bool = False) -> None:
        self.claims = {name: stored(name, version=5) for name in names}
        self.conflicts = 0
        self.refuse_binds: set[str] = set()
        if allocated_elsewhere:
            for claim in self.claims.values():
                claim["status"] = {"allocation": {"devices": {"results": [result("gpu-9")]}}}

    def __call__(self, method: str, path: str, body: Any) -> JSON:
        if path.endswith("/binding"):
            name = path.split("/")[-2]
            if name in self.refuse_binds:
                raise ApiError(method, path, 404, {"message": "gone"})
            return {}
        if method == "GET" and "/pods/" in path:
            raise ApiError(method, path, 404, {"message": "gone"})  # read back: deleted
        if not path.startswith(CLAIMS):
            return {}
        if method == "POST":
            return self._create(body)
        name = path.removeprefix(f"{CLAIMS}/").removesuffix("/status")
        claim = self.claims[name]
        if method == "GET":
            return copy.deepcopy(claim)
        if method == "DELETE":
            return self.claims.pop(name)
        version = (body.get("metadata") or {}).get("resourceVersion")
        if self.conflicts or version != claim["metadata"]["resourceVersion"]:
            self.conflicts = max(self.conflicts - 1, 0)
            bump(claim)
            raise ApiError(method, path, 409, {"message": "the object has been modified"})
        if method == "PUT":
            claim["metadata"] = copy.deepcopy(body["metadata"])
        else:
            patch_status(claim, body["status"])
        bump(claim)
        return copy.deepcopy(claim)

    def _create(self, body: JSON) -> JSON:
        made = copy.deepcopy(body)
        name = made["metadata"].pop("generateName") + "x2b4z"
        made["metadata"] |= {"name": name, "uid": f"claim-{name}", "resourceVersion": "1"}
        self.claims[name] = made
        return copy.deepcopy(made)


def stored(name: str, *, version: int) -> JSON:
    claim = resource_claim(name, exactly("gpu", "gpu"), namespace="default")
    claim["metadata"] |= {"uid": f"claim-{name}", "resourceVersion": str(version)}
    claim["spec"]["devices"]["config"] = [
        {"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"claim": 1}}}
    ]
    return claim


def bump(claim: JSON) -> None:
    claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)


def patch_status(claim: JSON, status: JSON) -> None:
    """The strategic merge patch of the status the writer sends (reservedFor merged by uid)."""
    held = claim.setdefault("status", {})
    reserved = [r for r in held.get("reservedFor", []) if r["uid"] not in gone(status)]
    reserved += [r for r in status.get("reservedFor", []) if "$patch" not in r]
    held["reservedFor"] = reserved
    if "allocation" in status:
        held["allocation"] = status["allocation"]
    for key in [k for k, v in held.items() if v in (None, [])]:
        del held[key]


def gone(status: JSON) -> set[str]:
    return {r["uid"] for r in status.get("reservedFor", []) if r.get("$patch") == "delete"}


def result(name: str) -> JSON:
    return {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": name}


def setup(
    api_claims: Claims, *, members: int = 1, leading: bool = True
) -> tuple[Binder, RecordingApi, list[Binding]]:
    """A job of `members` pods, each using the claim of its index, which the session
    allocated (gpu-<index> on node n1)."""
    api = RecordingApi(api_claims)
    watch = watch_over(api, scheduler_name="s")
    made = device_class("gpu")
    made["spec"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": {"class": 1}}}]
    watch.apply(DEVICE_CLASSES, made)
    bindings = []
    for i in range(members):
        name = f"c{i}"
        watch.apply(RESOURCE_CLAIMS, api_claims.claims[name])
        manifest = pod(f"p{i}", requests={"cpu": "1"}, namespace="default")
        manifest["metadata"]["uid"] = f"uid-{i}"
        manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        watch.apply(PODS, manifest)
        devices = (AllocatedDevice("gpu", DRIVER, "n1", f"gpu-{i}"),)
        terms = ((Requirement("metadata.name", "In", ("n1",), field=True),),)
        allocation = DeviceAllocation("default", name, devices, terms)
        binding = Binding("default", f"p{i}", f"uid-{i}", "n1", "g", devices=(allocation,))
        watch.cache.assume(binding.key, binding.node, devices=binding.devices)
        bindings.append(binding)
    binder = Binder(
        api,
        watch,
        valid_for=lambda: 30.0 if leading else 0.0,
        idle=watch.status.binds_idle,
        concurrency=1,
    )
    return binder, api, bindings


async def settle(
    binder: Binder, bindings: list[Binding], until: Callable[[], bool] = lambda: True
) -> None:
    """Submit and wait until the job's claims are written (or not) and every bind has
    settled: a job's binds are not queued before its claims are written (`until` says
    when a claim to be created is done with). A failed bind asks for a session, which
    the loop would run: an empty one is run here."""
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    async with asyncio.timeout(30):
        while binder.cache.assumed_claims or not binder.idle.is_set() or not until():
            if binder.watch.changes.take():
                with binder.deciding():
                    pass
            await asyncio.sleep(0.001)
    task.cancel()


def writes(api: RecordingApi) -> list[tuple[str, str]]:
    """The claim and Binding requests sent, in order, by method and last path segments."""
    return [
        (method, "/".join(path.split("/")[-2:]))
        for method, path, _ in api.requests
        if path.startswith(CLAIMS) or path.endswith("/binding")
    ]


async def test_a_claim_is_read_then_finalized_then_allocated_and_reserved_before_the_bind() -> None:
    claims = Claims("c0")
    binder, api, bindings = setup(claims)
    await settle(binder, bindings)
    assert writes(api) == [
        ("GET", "resourceclaims/c0"),
        ("PUT", "resourceclaims/c0"),
        ("PATCH", "c0/status"),
        ("POST", "p0/binding"),
    ]
    [update] = api.sent("PUT", "resourceclaims/c0")
    assert update["metadata"]["resourceVersion"] == "5"
    assert update["metadata"]["finalizers"] == [FINALIZER]
    [patch] = api.sent("PATCH", "c0/status")
    assert patch["metadata"] == {"uid": "claim-c0", "resourceVersion": "6"}
    assert patch["status"]["reservedFor"] == [{"resource": "pods", "name": "p0", "uid": "uid-0"}]
    allocation = patch["status"]["allocation"]
    assert allocation["devices"]["results"] == [result("gpu-0")]
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    assert [c["source"] for c in allocation["devices"]["config"]] == ["FromClass", "FromClaim"]
    # The cache shows the claim as written, assumed binds settled.
    claim = binder.cache.resource_claims["default/c0"]
    assert claim.reserved_for == ("uid-0",) and claim.allocation is not None
    assert binder.cache.assumed_claims == {}


async def test_a_replica_that_lost_the_lease_writes_no_claim() -> None:
    claims = Claims("c0")
    binder, api, bindings = setup(claims, leading=False)
    await settle(binder, bindings)
    assert [w for w in writes(api) if w[0] != "GET"] == []
    assert binder.cache.assumed == {} and binder.cache.assumed_claims == {}
    assert binder.cache.resource_claims["default/c0"].allocation is None


async def test_a_claim_allocated_elsewhere_meanwhile_fails_the_job_unwritten() -> None:
    claims = Claims("c0", allocated_elsewhere=True)
    binder, api, bindings = setup(claims)
    await settle(binder, bindings)
    assert writes(api) == [("GET", "resourceclaims/c0")]
    assert binder.cache.tasks["default/p0"].node_name is None
    assert binder.cache.assumed_claims == {}


async def test_a_conflict_reads_the_claim_again_and_writes_over_its_new_version() -> None:
    claims = Claims("c0")
    claims.conflicts = 1
    binder, api, bindings = setup(claims)
    await settle(binder, bindings)
    assert writes(api) == [
        ("GET", "resourceclaims/c0"),
        ("PUT", "resourceclaims/c0"),
        ("GET", "resourceclaims/c0"),
        ("PUT", "resourceclaims/c0"),
        ("PATCH", "c0/status"),
        ("POST", "p0/binding"),
    ]
    first, second = api.sent("PUT", "resourceclaims/c0")
    assert (first["metadata"]["resourceVersion"], second["metadata"]["resourceVersion"]) == (
        "5",
        "6",
    )


async def test_a_member_not_bound_gives_back_the_claim_allocated_for_it() -> None:
    """The second member's Binding fails: its claim loses the pod, its allocation and the
    finalizer, over the version written; the first member's claim stays; the cache
    forgets the second member's bind only then."""
    claims = Claims("c0", "c1")
    claims.refuse_binds.add("p1")
    binder, api, bindings = setup(claims, members=2)
    await settle(binder, bindings)
    undo = [body for body in api.sent("PATCH", "c1/status") if "$patch" in str(body)]
    assert undo == [
        {
            "metadata": {"uid": "claim-c1", "resourceVersion": "7"},
            "status": {"reservedFor": [{"$patch": "delete", "uid": "uid-1"}], "allocation": None},
        }
    ]
    assert claims.claims["c1"]["metadata"]["finalizers"] == []
    assert not claims.claims["c1"].get("status")
    assert claims.claims["c0"]["status"]["reservedFor"][0]["uid"] == "uid-0"
    assert binder.cache.resource_claims["default/c1"].allocation is None
    assert "default/p1" not in binder.cache.assumed
    assert binder.cache.tasks["default/p0"].node_name == "n1"


async def test_a_claim_deleted_while_it_is_given_back_only_loses_the_pod() -> None:
    """The undo meets a conflict: the claim is being deleted since. The pod leaves
    reservedFor; the allocation and finalizer are left for the claim controller."""

    class DeletedMeanwhile(Claims):
        def __call__(self, method: str, path: str, body: Any) -> JSON:
            claim = self.claims["c1"]
            if "$patch" in str(body) and "deletionTimestamp" not in claim["metadata"]:
                claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                bump(claim)
            return super().__call__(method, path, body)

    claims = DeletedMeanwhile("c0", "c1")
    claims.refuse_binds.add("p1")
    binder, api, bindings = setup(claims, members=2)
    await settle(binder, bindings)
    undo = [body for body in api.sent("PATCH", "c1/status") if "$patch" in str(body)]
    assert [body["status"] for body in undo] == [
        {"reservedFor": [{"$patch": "delete", "uid": "uid-1"}], "allocation": None},
        {"reservedFor": [{"$patch": "delete", "uid": "uid-1"}]},
    ]
    assert claims.claims["c1"]["metadata"]["finalizers"] == [FINALIZER]
    assert claims.claims["c1"]["status"]["allocation"]


async def test_a_write_the_api_server_refuses_backs_the_pods_off_with_its_reason() -> None:
    def refusing(method: str, path: str, body: Any) -> JSON:
        if path.endswith("/status"):
            raise ApiError(method, path, 422, {"message": "needs resourceclaims/binding"})
        return Claims("c0")(method, path, body)

    binder, _, bindings = setup(Claims("c0"))
    binder.api = binder.devices.api = RecordingApi(refusing)
    await settle(binder, bindings)
    refusal = binder.cache.refusals["default/p0"]
    assert refusal.message.startswith(DEVICE_BINDING_FAILED)
    assert "needs resourceclaims/binding" in refusal.message


def test_the_allocation_is_written_as_upstream_writes_it() -> None:
    """Class configs once per class, every request of the class named in them; the
    chosen subrequest's name; a claim config naming two requests appended once for each
    (dynamic-resource-allocation v0.36.3 does so); admin access and tolerations per
    result."""
    toleration = {"key": "k", "operator": "Exists"}
    spec: JSON = {
        "requests": [
            exactly("a", "gpu", tolerations=[toleration]),
            first_available("b", exactly("big", "big"), exactly("small", "gpu")),
            exactly("c", "gpu", admin=True),
        ],
        "config": [
            {"requests": ["a", "b"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}},
            {"opaque": {"driver": DRIVER, "parameters": {"all": 1}}},
        ],
    }
    gpu = device_class("gpu")
    classes = {"gpu": _parsed_class(gpu, {"g": 1}), "big": _parsed_class(device_class("big"), {})}
    devices = (
        AllocatedDevice("a", DRIVER, "p", "d0"),
        AllocatedDevice("b/small", DRIVER, "p", "d1"),
        AllocatedDevice("c", DRIVER, "p", "d2", admin_access=True),
    )
    written = allocation_status(DeviceAllocation("ns", "c", devices), spec, classes, 0.0)
    assert written["devices"]["results"] == [
        {
            "request": "a",
            "driver": DRIVER,
            "pool": "p",
            "device": "d0",
            "tolerations": [toleration],
        },
        {"request": "b/small", "driver": DRIVER, "pool": "p", "device": "d1"},
        {"request": "c", "driver": DRIVER, "pool": "p", "device": "d2", "adminAccess": True},
    ]
    class_config = {"driver": DRIVER, "parameters": {"g": 1}}
    claim_config = spec["config"][0]
    assert written["devices"]["config"] == [
        {"source": "FromClass", "requests": ["a", "b/small", "c"], "opaque": class_config},
        {"source": "FromClaim", **claim_config},
        {"source": "FromClaim", **claim_config},
        {"source": "FromClaim", **spec["config"][1]},
    ]
    assert written["allocationTimestamp"] == "1970-01-01T00:00:00Z"
    assert "nodeSelector" not in written


def test_a_share_of_a_device_carries_its_share_id_and_consumed_capacity() -> None:
    share = AllocatedDevice(
        "gpu",
        DRIVER,
        "p",
        "d0",
        share_id="4f1c2a9e-0000-5000-8000-000000000001",
        consumed=(("cores", Decimal("0.5")), ("memory", Decimal(16 * 2**30))),
    )
    spec: JSON = {"requests": [exactly("gpu", "gpu")]}
    written = allocation_status(DeviceAllocation("ns", "c", (share,)), spec, {}, 0.0)
    assert written["devices"]["results"] == [
        {
            "request": "gpu",
            "driver": DRIVER,
            "pool": "p",
            "device": "d0",
            "shareID": "4f1c2a9e-0000-5000-8000-000000000001",
            "consumedCapacity": {"cores": "500m", "memory": "16Gi"},
        }
    ]


def test_a_node_selector_keeps_expressions_and_fields_apart() -> None:
    terms = (
        (
            Requirement("zone", "In", ("a", "b")),
            Requirement("gpu", "Exists", ()),
            Requirement("metadata.name", "In", ("n1",), field=True),
        ),
    )
    assert node_selector(terms) == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "gpu", "operator": "Exists"},
                ],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            }
        ]
    }


def _parsed_class(manifest: JSON, parameters: JSON) -> DeviceClass:
    if parameters:
        manifest["spec"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": parameters}}]
    return class_from_object(manifest)


GPU = "example.com/gpu"
MADE = "p0-extended-resources-x2b4z"


def setup_extended(
    api_claims: Claims, *, leading: bool = True
) -> tuple[Binder, RecordingApi, list[Binding]]:
    """A pod asking one example.com/gpu, which the session gave it from device gpu-0 of
    node n1 through the claim to be made for its extended resources."""
    api = RecordingApi(api_claims)
    watch = watch_over(api, scheduler_name="s")
    watch.apply(DEVICE_CLASSES, device_class("gpu"))
    manifest = pod("p0", requests={"cpu": "1", GPU: "1"}, namespace="default")
    manifest["metadata"]["uid"] = "uid-0"
    watch.apply(PODS, manifest)
    request = "container-0-request-1"
    devices = (AllocatedDevice(request, DRIVER, "n1", "gpu-0"),)
    spec = ClaimSpec((ClaimRequest(request, (DeviceRequest(request, "gpu", count=1),)),))
    mappings = (ExtendedMapping("main", GPU, request),)
    allocation = DeviceAllocation(
        "default", "p0-extended-resources-", devices, None, mappings, spec
    )
    binding = Binding("default", "p0", "uid-0", "n1", "g", devices=(allocation,))
    watch.cache.assume(binding.key, binding.node, devices=binding.devices)
    valid_for = 30.0 if leading else 0.0
    binder = Binder(api, watch, valid_for=lambda: valid_for, idle=watch.status.binds_idle)
    return binder, api, [binding]


def extended_writes(api: RecordingApi) -> list[tuple[str, str]]:
    return [
        (method, "/".join(path.split("/")[-2:]))
        for method, path, _ in api.requests
        if method != "GET"
    ]


async def test_the_claim_for_extended_resources_is_made_then_written_then_named_in_the_pod() -> (
    None
):
    """As kube-scheduler's PreBind: created, finalized, allocated and reserved, named in
    the pod's status, then the pod is bound; the devices are held meanwhile."""
    claims = Claims()
    binder, api, bindings = setup_extended(claims)
    held = binder.cache.resource_claims["default/p0-extended-resources-"]
    assert held.allocation is not None and held.reserved_for == ("uid-0",)
    await settle(binder, bindings, lambda: bool(api.sent("POST", "binding")))
    assert extended_writes(api) == [
        ("POST", "default/resourceclaims"),
        ("PUT", f"resourceclaims/{MADE}"),
        ("PATCH", f"{MADE}/status"),
        ("PATCH", "p0/status"),
        ("POST", "p0/binding"),
    ]
    [created] = api.sent("POST", "resourceclaims")
    assert created["metadata"] == {
        "generateName": "p0-extended-resources-",
        "namespace": "default",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p0", "uid": "uid-0", "controller": True}
        ],
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
    }
    exact = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    assert created["spec"] == {
        "devices": {"requests": [{"name": "container-0-request-1", "exactly": exact}]}
    }
    [named] = api.sent("PATCH", "pods/p0/status")
    mapping = {"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}
    assert named == {
        "metadata": {"uid": "uid-0"},
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [mapping],
                "resourceClaimName": MADE,
            }
        },
    }
    cache = binder.cache
    assert set(cache.resource_claims) == {f"default/{MADE}"}
    assert cache.resource_claims[f"default/{MADE}"].allocation is not None
    assert cache.tasks["default/p0"].extended_claim == MADE
    assert cache.extended_claims == {"uid-0": f"default/{MADE}"}


async def test_a_failed_bind_deletes_the_claim_made_for_extended_resources() -> None:
    """Its finalizer taken off, then deleted (kube-scheduler's Unreserve): its devices
    are free, and the pod no longer has it."""
    claims = Claims()
    claims.refuse_binds.add("p0")
    binder, api, bindings = setup_extended(claims)
    await settle(binder, bindings, lambda: bool(api.sent("DELETE")))
    assert extended_writes(api)[-3:] == [
        ("POST", "p0/binding"),
        ("PUT", f"resourceclaims/{MADE}"),
        ("DELETE", f"resourceclaims/{MADE}"),
    ]
    removed, _ = api.sent("PUT", f"resourceclaims/{MADE}")[::-1]
    assert removed["metadata"]["finalizers"] == []
    assert claims.claims == {}
    assert binder.cache.resource_claims == {} and binder.cache.extended_claims == {}


async def test_a_claim_made_for_extended_resources_is_deleted_when_its_pod_status_is_refused() -> (
    None
):
    def refusing(method: str, path: str, body: Any) -> JSON:
        if path.endswith("pods/p0/status"):
            raise ApiError(method, path, 403, {"message": "forbidden"})
        return claims(method, path, body)

    claims = Claims()
    binder, _, bindings = setup_extended(claims)
    binder.api = binder.devices.api = recording = RecordingApi(refusing)
    await settle(binder, bindings, lambda: bool(recording.sent("DELETE")))
    assert ("DELETE", f"resourceclaims/{MADE}") in extended_writes(recording)
    assert not any(path.endswith("/binding") for _, path, _ in recording.requests)
    assert claims.claims == {} and binder.cache.resource_claims == {}
    assert binder.cache.tasks["default/p0"].node_name is None


def test_a_claim_left_for_a_waiting_pod_is_found_as_its_own_and_listed_for_deletion() -> None:
    """Found by its annotation and controller (kube-scheduler's findExtendedResourceClaim)
    though the pod's status names none; a bound pod's is left alone."""
    binder, _, _ = setup(Claims("c0"))
    watch = binder.watch
    for name, uid, node in (("waits", "uid-w", None), ("runs", "uid-r", "n1")):
        manifest = pod(name, {GPU: "1"}, namespace="default", node_name=node, scheduler="s")
        manifest["metadata"]["uid"] = uid
        watch.apply(PODS, manifest)
        claim = resource_claim(f"{name}-extended-resources-abc", namespace="default")
        claim["metadata"] |= {
            "uid": f"claim-{name}",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [{"kind": "Pod", "name": name, "uid": uid, "controller": True}],
        }
        watch.apply(RESOURCE_CLAIMS, claim)
    assert binder.cache.tasks["default/waits"].extended_claim == "waits-extended-resources-abc"
    [left] = binder.devices.leftovers(["s"])
    assert left.key == "default/waits-extended-resources-abc"
    assert binder.devices.leftovers(["someone-else"]) == []


async def test_a_replica_that_lost_the_lease_creates_no_claim_for_extended_resources() -> None:
    """Fenced as every write: nothing is created, and the devices held for the claim
    to be made are free again."""
    binder, api, bindings = setup_extended(Claims(), leading=False)
    await settle(binder, bindings, lambda: not binder.cache.resource_claims)
    assert extended_writes(api) == []
    assert binder.cache.extended_claims == {}
    assert binder.cache.tasks["default/p0"].node_name is None
