"""Devices as a resource of the session: gangs' claims allocated all or nothing,
shared claims followed, victims' devices freed, bad input named (CEL by api/cel.py)."""

from typing import Any

from batchsched.api.selectors import Requirement
from batchsched.model.decisions import Decisions

from tests.support.objects import (
    at,
    decide,
    device,
    device_class,
    exactly,
    gang,
    node,
    placements,
    pod,
    resource_claim,
    resource_slice,
)

DRIVER = "gpu.example.com"
GPU_CLASS = device_class("gpu", f"device.driver == '{DRIVER}'")


def gpus(node_name: str, count: int, **more: Any) -> dict[str, Any]:
    """The node's GPUs in a slice of its own pool."""
    devices = [device(f"gpu-{i}", attributes={"index": {"int": i}}) for i in range(count)]
    return resource_slice(
        f"{node_name}-gpus",
        driver=DRIVER,
        pool=node_name,
        node_name=node_name,
        devices=devices,
        **more,
    )


def claimed(name: str, *claims: str, **more: Any) -> dict[str, Any]:
    """A pod using the named ResourceClaims."""
    spec = {"resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]}
    return pod(name, spec=spec, **more)


def gpu_claim(name: str, count: int = 1, **more: Any) -> dict[str, Any]:
    return resource_claim(name, exactly("gpu", "gpu", count=count), **more)


def allocated_devices(decisions: Decisions) -> dict[str, list[str]]:
    """Claim key -> the devices the session allocated it."""
    return {
        allocation.key: [d.id for d in allocation.devices]
        for binding in decisions.bindings
        for allocation in binding.devices
    }


def test_a_gang_gets_all_its_claims_or_none_and_leaves_no_device_taken() -> None:
    """Three members asking two GPUs each on two nodes of two GPUs: the gang is not
    placed, and the pod created after it gets the devices its members had tentatively."""
    members = gang("train", 3, requests={"cpu": "1"})
    for i, member in enumerate(members[1:]):
        member["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": f"train-{i}"}]
    objects = [
        node("n1"),
        node("n2"),
        gpus("n1", 2),
        gpus("n2", 2),
        GPU_CLASS,
        *members,
        *(gpu_claim(f"train-{i}", 2) for i in range(3)),
        gpu_claim("solo", 2),
        claimed("solo", "solo", created=10),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/solo": "n1"}
    assert allocated_devices(decisions) == {
        "default/solo": [f"{DRIVER}/n1/gpu-0", f"{DRIVER}/n1/gpu-1"]
    }
    assert decisions.pending["default/train-0"].endswith("cannot allocate all claims.")


def test_two_pods_sharing_a_claim_by_name_follow_its_one_allocation() -> None:
    objects = [
        node("n1"),
        node("n2"),
        gpus("n1", 1),
        gpus("n2", 1),
        GPU_CLASS,
        gpu_claim("pair"),
        claimed("a", "pair", created=1),
        claimed("b", "pair", created=2),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/a": "n1", "default/b": "n1"}
    assert allocated_devices(decisions) == {"default/pair": [f"{DRIVER}/n1/gpu-0"]}
    # A node-local device's allocation is usable on its node alone, named by field.
    (allocation,) = decisions.bindings[0].devices
    assert allocation.terms == ((Requirement("metadata.name", "In", ("n1",), field=True),),)


def _allocated_on(node_name: str, device_name: str, reserved: str) -> dict[str, Any]:
    return {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device_name}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": reserved, "uid": reserved}],
    }


def test_an_allocated_claim_pins_its_pods_to_where_its_devices_are() -> None:
    objects = [
        node("n1"),
        node("n2", cpu="1"),
        gpus("n1", 1),
        gpus("n2", 1),
        GPU_CLASS,
        gpu_claim("shared", status=_allocated_on("n2", "gpu-0", "first")),
        claimed("first", "shared", node_name="n2", phase="Running", created=0),
        claimed("second", "shared", created=1),
        claimed("third", "shared", created=2),
    ]
    objects[-2]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    objects[-1]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    decisions = decide(objects)
    assert placements(decisions) == {"default/second": "n2"}
    assert allocated_devices(decisions) == {}
    assert decisions.pending["default/third"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node."
    )


def test_preemption_frees_the_devices_of_the_victim() -> None:
    low = claimed("low", "low-gpu", node_name="n1", phase="Running", created=0)
    low["spec"]["priority"] = 1
    high = claimed("high", "high-gpu", created=10)
    high["spec"]["priority"] = 100
    objects = [
        node("n1"),
        gpus("n1", 1),
        GPU_CLASS,
        gpu_claim("low-gpu", status=_allocated_on("n1", "gpu-0", "low")),
        gpu_claim("high-gpu"),
        low,
        high,
    ]
    decisions = decide(objects, now=at(20))
    assert [e.key for e in decisions.evictions] == ["default/low"]


def test_a_device_in_use_is_not_given_twice_across_claims() -> None:
    objects = [
        node("n1"),
        gpus("n1", 1),
        GPU_CLASS,
        gpu_claim("taken", status=_allocated_on("n1", "gpu-0", "holder")),
        claimed("holder", "taken", node_name="n1", phase="Running", created=0),
        gpu_claim("wanted"),
        claimed("waiting", "wanted", created=1),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {}
    assert decisions.pending["default/waiting"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
    )


# Bad input: the pod waits naming the object and field, the rest is still scheduled.


def _with_plain(*objects: dict[str, Any]) -> Decisions:
    decisions = decide([node("n1"), gpus("n1", 2), *objects, pod("plain", created=5)])
    assert placements(decisions).get("default/plain") == "n1"
    return decisions


def test_a_class_that_does_not_exist() -> None:
    decisions = _with_plain(
        resource_claim("c", exactly("gpu", "nope")), claimed("p", "c", created=1)
    )
    assert decisions.pending["default/p"] == (
        "0/1 nodes are available: request gpu: device class nope does not exist."
    )


def test_a_selector_that_does_not_compile() -> None:
    decisions = _with_plain(
        device_class("gpu", "device.driver == "), gpu_claim("c"), claimed("p", "c", created=1)
    )
    message = decisions.pending["default/p"]
    assert message.startswith("0/1 nodes are available: class gpu: selector #0: CEL compile error")


def test_a_selector_that_fails_on_a_device() -> None:
    claim = resource_claim(
        "c", exactly("gpu", "gpu", selectors=[f"device.attributes['{DRIVER}'].model == 'x'"])
    )
    decisions = _with_plain(GPU_CLASS, claim, claimed("p", "c", created=1))
    assert decisions.pending["default/p"] == (
        "0/1 nodes are available: 1 claim default/c, request gpu: selector #0: CEL runtime "
        f"error on device {DRIVER}/n1/gpu-0: no such key: model."
    )
    assert allocated_devices(decisions) == {}


def test_an_incomplete_pool_gives_no_device_and_refuses_all() -> None:
    incomplete = gpus("n2", 2, slice_count=2)
    objects = [
        node("n2"),
        incomplete,
        GPU_CLASS,
        gpu_claim("one"),
        claimed("one", "one", created=1),
        resource_claim("all", exactly("gpu", "gpu", mode="All")),
        claimed("all", "all", created=2),
    ]
    decisions = _with_plain(*objects)
    assert "default/one" in placements(decisions)
    assert allocated_devices(decisions)["default/one"] == [f"{DRIVER}/n1/gpu-0"]
    assert decisions.pending["default/all"] == (
        "0/2 nodes are available: 2 claim default/all, request gpu: asks for all devices, but "
        f"resource pool {DRIVER}/n2 is currently being updated."
    )


def test_a_slice_with_duplicate_devices_makes_its_pool_invalid() -> None:
    duplicated = resource_slice(
        "n2-gpus",
        driver=DRIVER,
        pool="n2",
        node_name="n2",
        devices=[device("gpu-0"), device("gpu-0")],
    )
    objects = [node("n2"), duplicated, GPU_CLASS, gpu_claim("c", 3), claimed("p", "c", created=1)]
    decisions = _with_plain(*objects)
    assert decisions.pending["default/p"] == (
        "0/2 nodes are available: 1 cannot allocate all claims, 1 resource pool "
        f"{DRIVER}/n2 is currently invalid: ResourceSlice n2-gpus: spec.devices: duplicate "
        "device 'gpu-0'."
    )


def test_a_template_claim_not_made_yet_and_one_made_for_another_pod() -> None:
    waiting = pod(
        "waiting", spec={"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]}
    )
    stolen = pod(
        "stolen",
        spec={"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]},
    )
    stolen["status"] = {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "other-g"}]}
    decisions = _with_plain(
        GPU_CLASS, gpu_claim("other-g", owner_uid="someone-else"), waiting, stolen
    )
    assert decisions.pending["default/waiting"] == (
        "0/1 nodes are available: pod default/waiting: spec.resourceClaims[g]: "
        "ResourceClaim not created yet."
    )
    assert decisions.pending["default/stolen"] == (
        "0/1 nodes are available: ResourceClaim default/other-g was not created for Pod "
        "default/stolen (Pod is not owner)."
    )


def test_a_claim_asking_for_consumable_capacity_is_refused_by_field() -> None:
    claim = gpu_claim("c")
    claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
        "requests": {"memory": "10Gi"}
    }
    decisions = _with_plain(GPU_CLASS, claim, claimed("p", "c", created=1))
    assert decisions.pending["default/p"] == (
        "0/1 nodes are available: claim default/c: ResourceClaim default/c.spec.devices."
        "requests[0].exactly.capacity (consumable capacity) is not supported yet."
    )


def test_a_whole_gpu_blocks_its_partitions_through_shared_counters() -> None:
    """Partitionable devices: the whole GPU and its two halves share one counter set."""

    def kind(name: str, memory: str, of: str) -> dict[str, Any]:
        return device(
            name, attributes={"kind": {"string": of}}, consumes={"gpu-0": {"memory": memory}}
        )

    devices = resource_slice(
        "n1-gpus",
        driver=DRIVER,
        pool="n1",
        node_name="n1",
        slice_count=2,
        devices=[
            kind("whole", "80Gi", "whole"),
            kind("half-0", "40Gi", "half"),
            kind("half-1", "40Gi", "half"),
        ],
    )
    counters = resource_slice(
        "n1-counters",
        driver=DRIVER,
        pool="n1",
        slice_count=2,
        counters={"gpu-0": {"memory": "80Gi"}},
    )

    def asking(of: str, name: str) -> dict[str, Any]:
        selector = f"device.attributes['{DRIVER}'].kind == '{of}'"
        return resource_claim(name, exactly("gpu", "gpu", selectors=[selector]))

    objects = [
        node("n1"),
        devices,
        counters,
        GPU_CLASS,
        asking("whole", "w"),
        asking("half", "h"),
        claimed("first", "w", created=1),
        claimed("second", "h", created=2),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/first": "n1"}
    assert decisions.pending["default/second"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
    )
    # And the other way round: a half taken first leaves no room for the whole.
    objects[-2]["metadata"]["creationTimestamp"], objects[-1]["metadata"]["creationTimestamp"] = (
        objects[-1]["metadata"]["creationTimestamp"],
        objects[-2]["metadata"]["creationTimestamp"],
    )
    decisions = decide(objects)
    assert placements(decisions) == {"default/second": "n1"}
    assert allocated_devices(decisions) == {"default/h": [f"{DRIVER}/n1/half-0"]}


def test_a_claim_reserved_for_as_many_pods_as_it_may_is_in_use() -> None:
    status = _allocated_on("n1", "gpu-0", "user-0")
    status["reservedFor"] = [
        {"resource": "pods", "name": f"user-{i}", "uid": f"user-{i}"} for i in range(256)
    ]
    decisions = _with_plain(GPU_CLASS, gpu_claim("full", status=status), claimed("p", "full"))
    assert decisions.pending["default/p"] == "0/1 nodes are available: resourceclaim in use."
