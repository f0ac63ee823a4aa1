"""`batchsched run` allocating DRA ResourceClaims on a real kube-apiserver and
kube-controller-manager v1.36.3 (its resource-claim controller making claims from
templates and deallocating those of pods gone, its garbage collector deleting them), as
the scheduler's least-privilege account (manifests/rbac.yaml).

Each test asserts what is written on the real objects, as kube-scheduler's
DynamicResources plugin writes it: status.allocation (results, config, nodeSelector,
allocationTimestamp), status.reservedFor and the delete-protection finalizer, all
before the pod's Binding (the API server's audit log says in which order), and taken
back when the bind fails. What waits says why, and a lone pod still binds beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from batchsched.k8s.allocations import FINALIZER
from batchsched.k8s.binder import DEVICE_BINDING_FAILED

from .conftest import PROJECT_CRDS, kube_controller_manager, start_control_plane
from .faultproxy import Fault
from .operator_support import (  # noqa: F401 (fixtures)
    BINDING_PATHS,
    FAST_LEADER_ELECTION,
    SchedulerAccounts,
    StartProxy,
    StartScheduler,
    account_token,
    add_nodes,
    cluster_role_binding,
    create,
    eventually,
    placements,
    pods,
    scheduler_kubeconfig_fixture,
    start_proxy_fixture,
    start_scheduler_fixture,
    token_kubeconfig,
    unschedulable_message,
)
from .test_leader_fencing import GUARD, _audited, lease_acquired, paused, stamp, written
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import (
    DRA_API,
    claim_template,
    device,
    device_class,
    exactly,
    first_available,
    load_manifests,
    pod,
    pod_group,
    resource_claim,
    resource_slice,
)

pytestmark = pytest.mark.integration

CONTROLLERS = ("resourceclaim-controller", "garbage-collector-controller")
DRIVER = "gpu.example.com"
CPU = {"cpu": "100m", "memory": "64Mi"}
ROOM = {"cpu": "8", "memory": "16Gi"}
GROUP_KEY = "scheduling.batchsched.io/group-name"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
HOSTNAME = "kubernetes.io/hostname"
RBAC = Path(__file__).resolve().parents[2] / "manifests" / "rbac.yaml"


@pytest.fixture(scope="module")
def control_plane() -> Any:
    binary = kube_controller_manager()
    with start_control_plane(crds=load_manifests(PROJECT_CRDS)) as plane:
        plane.start_controller_manager(binary, controllers=CONTROLLERS)
        yield plane


# Imported by the other DRA modules under their own control planes.
@pytest.fixture(name="kube", scope="module")
def kube_fixture(control_plane: ControlPlane) -> Kube:
    return control_plane.kube()


def claims_path(namespace: str, name: str = "") -> str:
    path = f"/apis/{DRA_API}/namespaces/{namespace}/resourceclaims"
    return f"{path}/{name}" if name else path


@dataclass
class Dra:
    """A test's namespace on the module's control plane, and the devices it adds."""

    kube: Kube
    namespace: str
    objects: ClusterObjects
    start_scheduler: StartScheduler
    nodes: list[str] = field(default_factory=list)

    def name(self, stem: str) -> str:
        return f"{stem}-{self.namespace}"[:63].rstrip("-")

    def add_nodes(self, count: int) -> list[str]:
        names = [self.name(f"n{len(self.nodes) + i}") for i in range(count)]
        add_nodes(self.objects, self.kube, names, ROOM)
        self.nodes += names
        return names

    def devices(self, node: str | None, *devices: JSON, **pool: Any) -> str:
        """A slice of `devices` (pool named after the node, or `pool`), on `node` or, when
        None, on all nodes; returns the pool's name."""
        name = str(pool.pop("pool", node))
        where: dict[str, Any] = {"node_name": node} if node else {"all_nodes": True}
        made = resource_slice(
            node or self.name(name), driver=DRIVER, pool=name, devices=devices, **where, **pool
        )
        self.objects.create(made)
        return name

    def device_class(self, stem: str = "gpu", *selectors: str, config: JSON | None = None) -> str:
        name = self.name(stem)
        made = device_class(name, f"device.driver == '{DRIVER}'", *selectors)
        if config is not None:
            made["spec"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": config}}]
        self.objects.create(made)
        return name

    def claim(self, name: str, *requests: JSON, **options: Any) -> JSON:
        return self.kube.create(resource_claim(name, *requests, **options), self.namespace)

    def pod(self, name: str, *, claim: str = "", template: str = "", **options: Any) -> JSON:
        manifest = pod(name, CPU, **options)
        ref = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
        manifest["spec"]["resourceClaims"] = [{"name": "gpu", **ref}]
        return create(self.kube, self.namespace, manifest)

    def read_claim(self, name: str) -> JSON:
        found: JSON = self.kube.get(claims_path(self.namespace, name)).expect(200)
        return found

    def claim_of(self, pod_name: str) -> JSON:
        """The claim the resource-claim controller made for the pod (its status names it)."""

        def named() -> str | None:
            status = pods(self.kube, self.namespace)[pod_name].get("status") or {}
            made = status.get("resourceClaimStatuses") or [{}]
            name = made[0].get("resourceClaimName")
            return str(name) if name else None

        return self.read_claim(eventually(named, what=f"{pod_name}'s claim made"))

    def bound(self, *names: str) -> dict[str, str]:
        def all_bound() -> dict[str, str] | None:
            where = placements(self.kube, self.namespace)
            found = {n: where.get(n) for n in names}
            return {n: str(w) for n, w in found.items() if w} if all(found.values()) else None

        return eventually(all_bound, what=f"{names} bound")

    def waiting(self, name: str, why: str) -> str:
        """The pod's PodScheduled=False message, once it holds `why`."""

        def told() -> str | None:
            message = scheduled_message(pods(self.kube, self.namespace)[name])
            return message if message is not None and why in message else None

        return eventually(told, what=f"{name} waiting: {why}")

    def lone_pod_binds(self) -> None:
        create(self.kube, self.namespace, pod("solo", CPU))
        self.bound("solo")


def scheduled_message(manifest: JSON) -> str | None:
    """The PodScheduled=False condition's message, whatever its reason."""
    for condition in (manifest.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message"))
    return None


@pytest.fixture(name="dra")
def dra_fixture(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> Dra:
    return Dra(kube, namespace, cluster_objects, start_scheduler)


def results(claim: JSON) -> list[JSON]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    found: list[JSON] = (allocation.get("devices") or {}).get("results") or []
    return found


def devices_of(claim: JSON) -> list[str]:
    return [r["device"] for r in results(claim)]


def on_node(node: str) -> JSON:
    """The nodeSelector kube-scheduler writes for devices local to one node."""
    field_term = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {"nodeSelectorTerms": [{"matchFields": [field_term]}]}


def consumer(manifest: JSON) -> JSON:
    meta = manifest["metadata"]
    return {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}


def gpus(count: int, **attributes: Mapping[str, Any]) -> list[JSON]:
    return [device(f"gpu-{i}", attributes=attributes or None) for i in range(count)]


def test_a_template_claim_is_allocated_reserved_and_protected_before_its_pod_is_bound(
    dra: Dra, control_plane: ControlPlane
) -> None:
    """B.13 1-3: the pod waits until the controller made its claim; then the claim gets
    its allocation (a node-local device, the class's and the claim's config, the
    request's tolerations), the pod in reservedFor and the finalizer, before the
    Binding."""
    [node_name] = dra.add_nodes(1)
    pool = dra.devices(node_name, *gpus(2))
    gpu = dra.device_class(config={"sharing": "none"})
    scheduler = dra.start_scheduler()
    made = dra.pod("train", template="one-gpu")
    dra.waiting("train", "ResourceClaim not created yet")
    dra.lone_pod_binds()
    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    template = claim_template("one-gpu", exactly("gpu", gpu, tolerations=[toleration]))
    claim_config = {"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}}
    template["spec"]["spec"]["devices"]["config"] = [claim_config]
    dra.kube.create(template, dra.namespace)
    assert dra.bound("train") == {"train": node_name}

    claim = dra.claim_of("train")
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Pod",
        made["metadata"]["uid"],
        True,
    )
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {
            "request": "gpu",
            "driver": DRIVER,
            "pool": pool,
            "device": "gpu-0",
            "tolerations": [toleration],
        }
    ]
    class_config = {"driver": DRIVER, "parameters": {"sharing": "none"}}
    assert allocation["devices"]["config"] == [
        {"source": "FromClass", "requests": ["gpu"], "opaque": class_config},
        {"source": "FromClaim", **claim_config},
    ]
    assert allocation["nodeSelector"] == on_node(node_name)
    assert allocation["allocationTimestamp"]
    assert claim["status"]["reservedFor"] == [consumer(made)]
    assert FINALIZER in claim["metadata"]["finalizers"]

    # In the API server's own order: finalizer, allocation with the reservation, Binding.
    written = [
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
        for e in control_plane.audit_events()
        if e["user"]["username"].endswith(":scheduler")
        and e["stage"] == "ResponseComplete"
        and e["verb"] in ("update", "patch", "create")
        and e["objectRef"].get("name") in (claim["metadata"]["name"], "train")
        and e["objectRef"].get("namespace") == dra.namespace
        and (e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
        in (("resourceclaims", ""), ("resourceclaims", "status"), ("pods", "binding"))
        and e["responseStatus"]["code"] < 300
    ]
    assert written[:3] == [
        ("update", "resourceclaims", ""),
        ("patch", "resourceclaims", "status"),
        ("create", "pods", "binding"),
    ]
    assert scheduler.metric('batchsched_bindings_total{result="bound"}') == 2


def test_first_available_names_the_subrequest_and_devices_of_all_nodes_set_no_selector(
    dra: Dra,
) -> None:
    """B.13 2: a firstAvailable result is named `request/subrequest`, and an allocation
    of network-attached devices (an allNodes slice) carries no nodeSelector."""
    dra.add_nodes(2)
    pool = dra.devices(None, *gpus(1, model={"string": "a100"}), pool="fabric")
    gpu = dra.device_class()
    h100 = exactly("h100", gpu, selectors=["device.attributes['gpu.example.com'].model == 'h100'"])
    dra.claim("either", first_available("gpu", h100, exactly("any", gpu)))
    dra.start_scheduler()
    dra.pod("p", claim="either")
    dra.bound("p")
    claim = dra.read_claim("either")
    assert results(claim) == [
        {"request": "gpu/any", "driver": DRIVER, "pool": pool, "device": "gpu-0"}
    ]
    assert "nodeSelector" not in claim["status"]["allocation"]


def test_a_claim_shared_by_name_is_allocated_once_and_reserves_each_pod(dra: Dra) -> None:
    """B.13 4: the second pod follows the claim's nodeSelector and joins reservedFor; the
    allocation is not written again."""
    _, second = dra.add_nodes(2)
    dra.devices(second, *gpus(1))
    dra.claim("shared", exactly("gpu", dra.device_class()))
    dra.start_scheduler()
    a = dra.pod("a", claim="shared")
    assert dra.bound("a") == {"a": second}
    allocated = dra.read_claim("shared")["status"]["allocation"]
    b = dra.pod("b", claim="shared")
    assert dra.bound("b") == {"b": second}
    claim = dra.read_claim("shared")
    assert claim["status"]["allocation"] == allocated
    assert sorted(claim["status"]["reservedFor"], key=lambda r: r["name"]) == [
        consumer(a),
        consumer(b),
    ]


@dataclass(frozen=True)
class Step:
    """A claim (its requests, constraints), a pod using it, and what it gets: the
    devices allocated, or the words it waits with."""

    requests: tuple[JSON, ...]
    devices: tuple[str, ...] = ()
    waits: str = ""
    constraints: tuple[JSON, ...] = ()
    admin: bool = False


@dataclass(frozen=True)
class Case:
    """Devices on one node, and claims made one after the other."""

    devices: Callable[[], list[JSON]]
    steps: Callable[[str], tuple[Step, ...]]
    slice_options: Mapping[str, Any] = field(default_factory=dict)
    counters: Mapping[str, Mapping[str, str]] | None = None


NUMA = "gpu.example.com/numa"


def _numa(*zones: int) -> list[JSON]:
    return [device(f"gpu-{i}", attributes={"numa": {"int": z}}) for i, z in enumerate(zones)]


def _models() -> list[JSON]:
    specs = [("a100", "80Gi", "1.4.0"), ("h100", "40Gi", "1.0.0"), ("h100", "80Gi", "1.3.0")]
    return [
        device(
            f"gpu-{i}",
            attributes={"model": {"string": m}, "driverVersion": {"version": v}},
            capacity={"memory": memory},
        )
        for i, (m, memory, v) in enumerate(specs)
    ]


def _tainted() -> list[JSON]:
    broken = {"key": "broken", "value": "fan", "effect": "NoSchedule"}
    noted = {"key": "old-firmware", "effect": "None"}
    return [device("gpu-0", taints=[broken]), device("gpu-1", taints=[noted])]


def _partitions() -> list[JSON]:
    whole = {"gpu-0": {"memory": "80Gi"}}
    half = {"gpu-0": {"memory": "40Gi"}}
    return [
        device("whole", attributes={"kind": {"string": "whole"}}, consumes=whole),
        device("mig-a", attributes={"kind": {"string": "mig"}}, consumes=half),
        device("mig-b", attributes={"kind": {"string": "mig"}}, consumes=half),
    ]


CANNOT = "cannot allocate all claims"
CASES = {
    # B.13 5: two distinct devices; too many waits.
    "exact-count": Case(
        lambda: gpus(3),
        lambda c: (
            Step((exactly("gpu", c, count=2),), ("gpu-0", "gpu-1")),
            Step((exactly("gpu", c, count=2),), waits=CANNOT),
        ),
    ),
    # B.13 6: All takes every device; it waits once one is taken.
    "all": Case(
        lambda: gpus(2),
        lambda c: (
            Step((exactly("gpu", c),), ("gpu-0",)),
            Step((exactly("gpu", c, mode="All"),), waits=CANNOT),
        ),
    ),
    "all-of-a-pool": Case(
        lambda: gpus(2),
        lambda c: (
            Step((exactly("gpu", c, mode="All"),), ("gpu-0", "gpu-1")),
            Step((exactly("gpu", c),), waits=CANNOT),
        ),
    ),
    # B.13 6: a pool with a slice still to come is not used for All.
    "all-over-an-incomplete-pool": Case(
        lambda: gpus(2),
        lambda c: (Step((exactly("gpu", c, mode="All"),), waits="is currently being updated"),),
        slice_options={"slice_count": 2},
    ),
    # B.13 7: matchAttribute and distinctAttribute hold across the chosen devices.
    "match-attribute": Case(
        lambda: _numa(0, 1, 1),
        lambda c: (
            Step(
                (exactly("gpu", c, count=2),),
                ("gpu-1", "gpu-2"),
                constraints=({"matchAttribute": NUMA},),
            ),
        ),
    ),
    "distinct-attribute": Case(
        lambda: _numa(0, 0, 1),
        lambda c: (
            Step(
                (exactly("a", c), exactly("b", c)),
                ("gpu-0", "gpu-2"),
                constraints=({"distinctAttribute": NUMA},),
            ),
        ),
    ),
    # B.13 8: claim selectors over quantities and versions, an unknown domain is an empty
    # map; a missing attribute is an error, and the pod waits.
    "cel": Case(
        _models,
        lambda c: (
            Step(
                (
                    exactly(
                        "gpu",
                        c,
                        selectors=[
                            "device.attributes['gpu.example.com'].model == 'h100'",
                            "device.capacity['gpu.example.com'].memory"
                            ".compareTo(quantity('64Gi')) >= 0",
                            "device.attributes['gpu.example.com'].driverVersion"
                            ".isGreaterThan(semver('1.2.0'))",
                            "!('x' in device.attributes['nope.example.com'])",
                        ],
                    ),
                ),
                ("gpu-2",),
            ),
            Step(
                (exactly("gpu", c, selectors=["device.attributes['gpu.example.com'].rack == 1"]),),
                waits="no such key",
            ),
        ),
    ),
    # B.13 9: a NoSchedule taint keeps a device from requests not tolerating it; None
    # is informational.
    "taints": Case(
        _tainted,
        lambda c: (
            Step((exactly("gpu", c),), ("gpu-1",)),
            Step(
                (exactly("gpu", c, tolerations=[{"key": "broken", "operator": "Exists"}]),),
                ("gpu-0",),
            ),
        ),
    ),
    # B.13 10: a partition takes the GPU's memory counter from the whole GPU, and the
    # other way round.
    "partitionable": Case(
        _partitions,
        lambda c: (
            Step(
                (
                    exactly(
                        "gpu", c, selectors=["device.attributes['gpu.example.com'].kind == 'mig'"]
                    ),
                ),
                ("mig-a",),
            ),
            Step(
                (
                    exactly(
                        "gpu", c, selectors=["device.attributes['gpu.example.com'].kind == 'whole'"]
                    ),
                ),
                waits=CANNOT,
            ),
            Step(
                (
                    exactly(
                        "gpu", c, selectors=["device.attributes['gpu.example.com'].kind == 'mig'"]
                    ),
                ),
                ("mig-b",),
            ),
        ),
        counters={"gpu-0": {"memory": "80Gi"}},
    ),
    # B.13 12: admin access, in a namespace labelled for it, gets a device in use.
    "admin-access": Case(
        lambda: gpus(1),
        lambda c: (
            Step((exactly("gpu", c),), ("gpu-0",)),
            Step((exactly("gpu", c, admin=True),), ("gpu-0",), admin=True),
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_each_request_gets_is_written_to_its_claim(case: str, dra: Dra) -> None:
    """Claims made one after the other on one node's devices: each allocated claim shows
    the devices kube-scheduler's allocator picks (first fit), and one that cannot be
    met leaves its pod waiting with the reason, nothing allocated."""
    spec = CASES[case]
    [node_name] = dra.add_nodes(1)
    if spec.counters is not None:
        counters = resource_slice(
            dra.name("counters"),
            driver=DRIVER,
            pool=node_name,
            counters=spec.counters,
            slice_count=2,
        )
        # The API server asks every slice where it is, counters' too.
        counters["spec"]["nodeName"] = node_name
        dra.objects.create(counters)
        options = {"slice_count": 2}
    else:
        options = dict(spec.slice_options)
    pool = dra.devices(node_name, *spec.devices(), **options)
    gpu = dra.device_class()
    dra.start_scheduler()
    for i, step in enumerate(spec.steps(gpu)):
        if step.admin:
            path = f"/api/v1/namespaces/{dra.namespace}"
            dra.kube.patch(path, {"metadata": {"labels": {ADMIN_LABEL: "true"}}}).expect(200)
        name = f"c{i}"
        dra.claim(name, *step.requests, constraints=step.constraints)
        dra.pod(f"p{i}", claim=name)
        if step.waits:
            dra.waiting(f"p{i}", step.waits)
            assert "allocation" not in (dra.read_claim(name).get("status") or {})
            continue
        assert dra.bound(f"p{i}") == {f"p{i}": node_name}
        claim = dra.read_claim(name)
        assert devices_of(claim) == list(step.devices)
        assert {r["pool"] for r in results(claim)} == {pool}
        assert [r.get("adminAccess", False) for r in results(claim)] == [step.admin] * len(
            step.devices
        )
    dra.lone_pod_binds()


def test_a_pods_devices_are_free_again_once_the_controller_deallocates_its_claim(
    dra: Dra,
) -> None:
    """B.13 11: the pod deleted, kube-controller-manager empties reservedFor, clears the
    allocation and the claim goes; the device goes to the pod that waited for it."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(1))
    dra.kube.create(claim_template("one", exactly("gpu", dra.device_class())), dra.namespace)
    dra.start_scheduler()
    dra.pod("first", template="one")
    dra.bound("first")
    held = dra.claim_of("first")
    dra.pod("second", template="one")
    dra.waiting("second", CANNOT)
    dra.kube.delete(f"/api/v1/namespaces/{dra.namespace}/pods/first", grace_period_seconds=0)
    assert dra.bound("second") == {"second": node_name}
    assert devices_of(dra.claim_of("second")) == devices_of(held) == ["gpu-0"]
    gone = claims_path(dra.namespace, held["metadata"]["name"])
    eventually(lambda: dra.kube.get(gone).status == 404, what="the first pod's claim deleted")


def test_a_gang_that_does_not_fit_allocates_none_of_its_claims(dra: Dra) -> None:
    """All of a gang's claims or none: three GPUs for two members asking two each."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(3))
    dra.kube.create(
        claim_template("two", exactly("gpu", dra.device_class(), count=2)), dra.namespace
    )
    dra.kube.create(pod_group("g", 2), dra.namespace)
    dra.start_scheduler()
    for member in ("g-0", "g-1"):
        dra.pod(member, template="two", annotations={GROUP_KEY: "g"})
    dra.lone_pod_binds()
    for member in ("g-0", "g-1"):
        dra.waiting(member, "")
        claim = dra.claim_of(member)
        assert "allocation" not in (claim.get("status") or {})
        assert FINALIZER not in (claim["metadata"].get("finalizers") or [])
    assert not any(placements(dra.kube, dra.namespace)[m] for m in ("g-0", "g-1"))


def test_a_refused_bind_takes_back_the_claims_allocation(
    dra: Dra, scheduler_accounts: SchedulerAccounts, start_proxy: StartProxy
) -> None:
    """A Binding refused after the claim was written: the pod leaves reservedFor, the
    allocation is cleared and the finalizer taken off, before the pod is tried again;
    once binds go through, it is allocated again and bound."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(1))
    dra.claim("c", exactly("gpu", dra.device_class()))
    proxy = start_proxy()
    refused: Fault = proxy.fail(BINDING_PATHS, status=403)
    dra.start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("scheduler", server=proxy.url))
    dra.pod("p", claim="c")
    eventually(lambda: refused.paths, what="a refused Binding")

    def undone() -> bool:
        claim = dra.read_claim("c")
        status = claim.get("status") or {}
        return (
            "allocation" not in status
            and not status.get("reservedFor")
            and FINALIZER not in (claim["metadata"].get("finalizers") or [])
            and bool(refused.paths)
        )

    eventually(undone, what="the claim's allocation taken back")
    proxy.remove(refused)
    assert dra.bound("p") == {"p": node_name}
    claim = dra.read_claim("c")
    assert devices_of(claim) == ["gpu-0"]
    assert claim["status"]["reservedFor"][0]["name"] == "p"


def test_without_resourceclaims_binding_the_allocation_is_refused(dra: Dra, tmp_path: Path) -> None:
    """B.13 14: with `patch` on resourceclaims/status alone, 1.36.3 refuses the write
    of status.allocation; the pod waits saying so, bound nowhere, its claim unallocated,
    and other pods still bind."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(1))
    dra.claim("c", exactly("gpu", dra.device_class()))
    role = next(
        d
        for d in load_manifests(RBAC)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "batchsched"
    )
    rules = []
    for rule in role["rules"]:
        kept = [r for r in rule.get("resources", []) if r != "resourceclaims/binding"]
        if kept or "nonResourceURLs" in rule:
            rules.append({**rule, "resources": kept} if "resources" in rule else rule)
    name = dra.name("no-binding")
    dra.objects.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }
    )
    token = account_token(dra.kube, dra.namespace, "limited")
    limited_account = {"kind": "ServiceAccount", "name": "limited", "namespace": dra.namespace}
    dra.objects.create(cluster_role_binding(name, name, limited_account))
    limited = token_kubeconfig(tmp_path / "limited", dra.kube.with_token(token))
    dra.start_scheduler(kubeconfig=limited)
    dra.pod("p", claim="c")
    message = dra.waiting("p", 'requires resource="resourceclaims/binding"')
    assert DEVICE_BINDING_FAILED in message
    assert "allocation" not in (dra.read_claim("c").get("status") or {})
    assert placements(dra.kube, dra.namespace)["p"] is None
    dra.lone_pod_binds()


def test_a_leader_paused_while_its_allocation_is_in_retry_writes_none_when_it_wakes(
    dra: Dra,
    control_plane: ControlPlane,
    scheduler_accounts: SchedulerAccounts,
    start_proxy: StartProxy,
) -> None:
    """The leader's allocation write fails (500) and sits in retry; it is paused and the
    standby takes over (its own allocation writes failing too), and the pod is deleted,
    so the claim keeps the version the old write carries: its resourceVersion would not
    stop it. Then the old leader's write would go through, and it wakes: it sends
    none. The API server carried out no write of its after the standby took the lease,
    and the claim is not allocated."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(1))
    dra.claim("c", exactly("gpu", dra.device_class()))
    status = f"{claims_path('*', '*')}/status"
    elect = {
        "leader_elect": True,
        "lease_namespace": dra.namespace,
        "extra_args": FAST_LEADER_ELECTION,
    }
    proxy, standby_proxy = start_proxy(), start_proxy()
    old = dra.start_scheduler(
        kubeconfig=scheduler_accounts.kubeconfig("old-leader", server=proxy.url), **elect
    )
    eventually(lambda: old.metric("batchsched_leader") == 1, what="the first replica leading")
    standby = dra.start_scheduler(
        kubeconfig=scheduler_accounts.kubeconfig("standby", server=standby_proxy.url), **elect
    )
    refused = proxy.fail(status)
    standby_proxy.fail(status)
    dra.pod("p", claim="c")
    eventually(lambda: refused.paths, timeout=GUARD, what="the allocation in retry")
    with paused(old):
        eventually(lambda: standby.metric("batchsched_leader") == 1, timeout=GUARD, what="takeover")
        dra.kube.delete(f"/api/v1/namespaces/{dra.namespace}/pods/p", grace_period_seconds=0)
        refused.release()
    process = old.process
    assert process is not None
    eventually(lambda: process.poll() is not None, timeout=GUARD, what="the old leader exiting")

    events = control_plane.audit_events()
    taken = lease_acquired(events, dra.namespace, scheduler_accounts.username("standby"))
    late = [
        f"{e['verb']} {written(e['objectRef'])}"
        for e in _audited(events, dra.namespace, scheduler_accounts.username("old-leader"))
        if stamp(e["stageTimestamp"]) >= taken
    ]
    assert late == []
    assert not (dra.read_claim("c").get("status") or {}).get("allocation")


def test_a_claim_made_for_another_pod_is_not_used(dra: Dra) -> None:
    """B.13 1: a pod whose status names a claim owned by another pod waits, in
    kube-scheduler's words, and the claim is left as it was."""
    [node_name] = dra.add_nodes(1)
    dra.devices(node_name, *gpus(1))
    gpu = dra.device_class()
    owner = dra.pod("owner", claim="unrelated")
    theirs = resource_claim("theirs", exactly("gpu", gpu), owner_uid=owner["metadata"]["uid"])
    theirs["metadata"]["ownerReferences"][0]["name"] = "owner"
    dra.kube.create(theirs, dra.namespace)
    dra.start_scheduler()
    dra.pod("p", template="missing")  # no template: the controller makes no claim
    named = [{"name": "gpu", "resourceClaimName": "theirs"}]
    path = f"/api/v1/namespaces/{dra.namespace}/pods/p/status"
    dra.kube.patch(path, {"status": {"resourceClaimStatuses": named}}).expect(200)
    dra.waiting("p", f"ResourceClaim {dra.namespace}/theirs was not created for Pod")
    assert not (dra.read_claim("theirs").get("status") or {}).get("allocation")
    dra.lone_pod_binds()


def test_two_claims_share_a_device_allowing_multiple_allocations(dra: Dra) -> None:
    """Consumable capacity: each claim gets its own share of the one device, written with
    its shareID and the capacity it consumes (its request rounded up by the device's
    policy), which the API server validates."""
    [node_name] = dra.add_nodes(1)
    policy = {"default": "8Gi", "validRange": {"min": "8Gi", "step": "8Gi", "max": "40Gi"}}
    shared = device(
        "gpu-0", multiple=True, capacity={"memory": "40Gi"}, policies={"memory": policy}
    )
    pool = dra.devices(node_name, shared)
    gpu = dra.device_class()
    for name in ("a", "b"):
        dra.claim(name, exactly("gpu", gpu, capacity={"memory": "12Gi"}))
    dra.start_scheduler()
    dra.pod("a", claim="a")
    dra.pod("b", claim="b")
    assert dra.bound("a", "b") == {"a": node_name, "b": node_name}
    written = [results(dra.read_claim(name)) for name in ("a", "b")]
    share_ids = set()
    for [result] in written:
        share_ids.add(result.pop("shareID"))
        assert result == {
            "request": "gpu",
            "driver": DRIVER,
            "pool": pool,
            "device": "gpu-0",
            "consumedCapacity": {"memory": "16Gi"},
        }
    assert len(share_ids) == 2


def pinned_to_full_node(
    dra: Dra, name: str = "p", *, reserved: bool = True, **options: Any
) -> tuple[str, str, JSON]:
    """Nodes `full` and `free` with a GPU each, `full` filled by a pod; the claim `name`
    allocated `full`'s GPU and given the finalizer, then the pending pod `name` using
    it, kept to these two nodes, and, when `reserved`, the pod in the claim's
    reservedFor (what a leader lost between the claim's write and the Binding leaves);
    `options` go to the pod (its scheduler)."""
    full, free = dra.add_nodes(2)
    for node_name in (full, free):
        dra.devices(node_name, *gpus(1))
    dra.claim(name, exactly("gpu", dra.device_class(f"gpu-{name}")))
    create(dra.kube, dra.namespace, pod(f"{name}-filler", ROOM, node_name=full))
    path = claims_path(dra.namespace, name)
    claim = dra.read_claim(name)
    claim["metadata"]["finalizers"] = [FINALIZER]
    dra.kube.put(path, claim).expect(200)
    result = {"request": "gpu", "driver": DRIVER, "pool": full, "device": "gpu-0"}
    allocation = {"devices": {"results": [result]}, "nodeSelector": on_node(full)}
    dra.kube.patch(f"{path}/status", {"status": {"allocation": allocation}}).expect(200)
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [full, free]}]}
    nodes = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    waiting = dra.pod(name, claim=name, spec={"affinity": {"nodeAffinity": nodes}}, **options)
    if reserved:
        status = {"reservedFor": [consumer(waiting)]}
        dra.kube.patch(f"{path}/status", {"status": status}).expect(200)
    return full, free, waiting


def test_a_claim_allocated_for_a_node_now_full_is_deallocated_and_its_pod_binds_elsewhere(
    dra: Dra,
) -> None:
    """The pod fits no node: `full` has no room and its claim's devices are nowhere
    else, so the claim is deallocated, as kube-scheduler's DynamicResources PostFilter
    does, and the pod is then allocated and bound on `free`."""
    _, free, waiting = pinned_to_full_node(dra)
    dra.start_scheduler()
    assert dra.bound("p") == {"p": free}
    claim = dra.read_claim("p")
    assert [(r["pool"], r["device"]) for r in results(claim)] == [(free, "gpu-0")]
    assert claim["status"]["allocation"]["nodeSelector"] == on_node(free)
    assert claim["status"]["reservedFor"] == [consumer(waiting)]
    assert FINALIZER in claim["metadata"]["finalizers"]


def test_a_claim_reserved_for_another_pod_while_its_deallocation_is_sent_is_kept(
    dra: Dra, scheduler_accounts: SchedulerAccounts, start_proxy: StartProxy
) -> None:
    """The deallocation is held on its way while another pod (of another scheduler) is
    reserved on the claim: the write, over the version the session's watch showed, is
    in conflict, and read again the claim is no longer reserved for the waiting pod
    alone, so its allocation stays; only the waiting pod leaves reservedFor."""
    full, _, waiting = pinned_to_full_node(dra)
    proxy = start_proxy()
    held = proxy.hang(f"{claims_path(dra.namespace, 'p')}/status")
    dra.start_scheduler(kubeconfig=scheduler_accounts.kubeconfig("scheduler", server=proxy.url))
    eventually(lambda: held.held, what="the deallocation sent")
    other = dra.pod("other", claim="p", scheduler="someone-else")
    reserved = {"reservedFor": [consumer(waiting), consumer(other)]}
    path = f"{claims_path(dra.namespace, 'p')}/status"
    dra.kube.patch(path, {"status": reserved}).expect(200)
    held.release()

    def settled() -> JSON | None:
        claim = dra.read_claim("p")
        return claim if claim["status"].get("reservedFor") == [consumer(other)] else None

    claim = eventually(settled, what="the waiting pod out of reservedFor")
    assert [(r["pool"], r["device"]) for r in results(claim)] == [(full, "gpu-0")]
    assert FINALIZER in claim["metadata"]["finalizers"]
    dra.waiting("p", "resourceclaim not available on the node")
    assert not placements(dra.kube, dra.namespace)["p"]
