"""Devices as a resource of the session: gangs' claims allocated all or nothing,
shared claims followed, victims' devices freed, bad input named (CEL by api/cel.py)."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from batchsched.api.selectors import Requirement
from batchsched.framework.deviceclaims import LEFT_FROM_EARLIER
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
    pod_group,
    resource_claim,
    resource_slice,
)

DRIVER = "gpu.example.com"
GPU_CLASS = device_class("gpu", f"device.driver == '{DRIVER}'")
FGD_CONFIG = (
    Path(__file__).resolve().parents[3] / "examples" / "config" / "gpu-fragmentation.yaml"
).read_text()


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


def test_devices_reaching_every_node_are_free_again_when_a_gang_falls_short() -> None:
    """Two network-attached GPUs reach both nodes: a gang of three asking one each
    takes both, falls short and gives them back, so that the pod created after it has
    them. Free devices are counted as they change hands: a device reaching several
    nodes is counted again on each of them."""
    members = gang("train", 3, requests={"cpu": "1"})
    for i, member in enumerate(members[1:]):
        member["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": f"gpu-{i}"}]
    devices = [device(f"gpu-{i}", attributes={"index": {"int": i}}) for i in range(2)]
    objects = [
        node("n1"),
        node("n2"),
        resource_slice("fabric", driver=DRIVER, pool="fabric", all_nodes=True, devices=devices),
        GPU_CLASS,
        *members,
        *(gpu_claim(f"gpu-{i}") for i in range(3)),
        gpu_claim("solo", 2),
        claimed("solo", "solo", created=10),
    ]
    decisions = decide(objects)
    assert set(placements(decisions)) == {"default/solo"}
    assert allocated_devices(decisions) == {
        "default/solo": [f"{DRIVER}/fabric/gpu-0", f"{DRIVER}/fabric/gpu-1"]
    }


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


def _allocated_on(node_name: str, device_name: str, reserved: str, *more: str) -> dict[str, Any]:
    """A claim's status: allocated `device_name` (and `more`) of the node's pool, reserved
    for the pod `reserved`."""
    return {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": name}
                    for name in (device_name, *more)
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


def _shared_gpu(node_name: str) -> dict[str, Any]:
    """One GPU of 40Gi that claims may share, by steps of 8Gi (default 8Gi)."""
    policy = {"default": "8Gi", "validRange": {"min": "8Gi", "step": "8Gi", "max": "40Gi"}}
    gpu = device("gpu-0", multiple=True, capacity={"memory": "40Gi"}, policies={"memory": policy})
    return resource_slice(
        f"{node_name}-gpus", driver=DRIVER, pool=node_name, node_name=node_name, devices=[gpu]
    )


def _memory_claim(name: str, memory: str, **more: Any) -> dict[str, Any]:
    return resource_claim(name, exactly("gpu", "gpu", capacity={"memory": memory}), **more)


def test_claims_share_a_device_by_its_consumable_capacity() -> None:
    """A gang of three asking 12Gi each (rounded up to 16Gi) of one 40Gi GPU: two fit,
    so the gang waits whole; a pod asking 8Gi after it gets the GPU, shared, with its
    shareID and the capacity it consumes in its result."""
    members = gang("train", 3, requests={"cpu": "1"})
    for i, member in enumerate(members[1:]):
        member["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"train-{i}"}]
    objects = [
        node("n1"),
        _shared_gpu("n1"),
        GPU_CLASS,
        *members,
        *(_memory_claim(f"train-{i}", "12Gi") for i in range(3)),
        _memory_claim("small", "8Gi"),
        claimed("small", "small", created=10),
        _memory_claim("other", "8Gi"),
        claimed("other", "other", created=11),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/small": "n1", "default/other": "n1"}
    assert decisions.pending["default/train-0"].endswith("cannot allocate all claims.")
    results = {a.key: a.devices for b in decisions.bindings for a in b.devices}
    (small,) = results["default/small"]
    (other,) = results["default/other"]
    assert small.id == other.id == f"{DRIVER}/n1/gpu-0"
    assert small.consumed == (("memory", Decimal(8 * 2**30)),)
    assert small.share_id and other.share_id and small.share_id != other.share_id


def test_shares_allocated_before_count_against_the_capacity() -> None:
    """Shares in claims' status consume capacity: 32Gi of 40Gi taken leaves room for
    one 8Gi share, not for 16Gi."""
    held = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "n1",
                        "device": "gpu-0",
                        "shareID": "5f0c9a7e-0000-4000-8000-000000000001",
                        "consumedCapacity": {"memory": "32Gi"},
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "holder", "uid": "holder"}],
    }
    objects = [
        node("n1"),
        _shared_gpu("n1"),
        GPU_CLASS,
        _memory_claim("held", "32Gi", status=held),
        claimed("holder", "held", node_name="n1", phase="Running", created=0),
        _memory_claim("big", "16Gi"),
        claimed("big", "big", created=1),
        _memory_claim("fits", "8Gi"),
        claimed("fits", "fits", created=2),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/fits": "n1"}
    assert decisions.pending["default/big"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
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


# Packing (plugins/binpack.py): devices count as a resource the pod requests.


def test_a_request_goes_where_it_fills_the_free_devices_best() -> None:
    """n2 has 2 of its 8 GPUs free, n1 all 8: a pod asking 2 goes to n2, which it
    fills, and leaves n1's 8 whole for a pod asking 8. Without packing devices the
    nodes tie (a running pod on each, CPU and memory alike), the first, n1, was taken
    and the pod asking 8 had no node."""
    held = [f"gpu-{i}" for i in range(6)]
    objects = [
        node("n1"),
        node("n2"),
        gpus("n1", 8),
        gpus("n2", 8),
        GPU_CLASS,
        gpu_claim("held", 6, status=_allocated_on("n2", held[0], "holder", *held[1:])),
        claimed("holder", "held", node_name="n2", phase="Running", created=0),
        pod("neighbour", node_name="n1", phase="Running", created=0),
        gpu_claim("two", 2),
        claimed("pair", "two", created=1),
        gpu_claim("eight", 8),
        claimed("octet", "eight", created=2),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/pair": "n2", "default/octet": "n1"}
    assert allocated_devices(decisions)["default/two"] == [
        f"{DRIVER}/n2/gpu-6",
        f"{DRIVER}/n2/gpu-7",
    ]


def _partitionable(node_name: str) -> list[dict[str, Any]]:
    """One GPU as a driver publishes a partitionable one: the whole device and its two
    halves, all drawing on one counter set."""

    def kind(name: str, memory: str, of: str) -> dict[str, Any]:
        return device(
            name, attributes={"kind": {"string": of}}, consumes={"gpu-0": {"memory": memory}}
        )

    devices = [kind("whole", "80Gi", "whole"), kind("half-0", "40Gi", "half")]
    devices.append(kind("half-1", "40Gi", "half"))
    return [
        resource_slice(
            f"{node_name}-gpus",
            driver=DRIVER,
            pool=node_name,
            node_name=node_name,
            slice_count=2,
            devices=devices,
        ),
        resource_slice(
            f"{node_name}-counters",
            driver=DRIVER,
            pool=node_name,
            slice_count=2,
            counters={"gpu-0": {"memory": "80Gi"}},
        ),
    ]


def _asking(of: str, name: str) -> dict[str, Any]:
    selector = f"device.attributes['{DRIVER}'].kind == '{of}'"
    return resource_claim(name, exactly("gpu", "gpu", selectors=[selector]))


@pytest.mark.parametrize("config", [None, FGD_CONFIG], ids=["binpack", "gpufragmentation"])
def test_a_partition_goes_to_a_gpu_already_split_and_a_whole_one_stays_whole(
    config: str | None,
) -> None:
    """n2's GPU has one half in use, n1's is whole: a pod asking a half goes to n2, by
    the shared counters consumed there, and the pod asking a whole GPU after it has
    n1's. Without packing devices the half went to n1 (the first of two tied nodes),
    splitting its GPU, and the whole GPU was to be had nowhere. Binpack (the default
    configuration) and gpufragmentation pack devices alike."""
    in_use = _asking("half", "in-use")
    in_use["status"] = _allocated_on("n2", "half-0", "holder")
    objects = [
        node("n1"),
        node("n2"),
        *_partitionable("n1"),
        *_partitionable("n2"),
        GPU_CLASS,
        in_use,
        claimed("holder", "in-use", node_name="n2", phase="Running", created=0),
        pod("neighbour", node_name="n1", phase="Running", created=0),
        _asking("half", "h"),
        _asking("whole", "w"),
        claimed("part", "h", created=1),
        claimed("entire", "w", created=2),
    ]
    decisions = decide(objects, config)
    assert placements(decisions) == {"default/part": "n2", "default/entire": "n1"}
    assert allocated_devices(decisions) == {
        "default/h": [f"{DRIVER}/n2/half-1"],
        "default/w": [f"{DRIVER}/n1/whole"],
    }


# Extended resources backed by a DeviceClass.


def _backing(name: str, resource: str | None = None) -> dict[str, Any]:
    found = device_class(name, f"device.driver == '{DRIVER}'")
    if resource is not None:
        found["spec"]["extendedResourceName"] = resource
    return found


def test_an_extended_resource_backed_by_a_class_is_allocated_from_devices() -> None:
    """n1 has no example.com/gpu in allocatable but 4 DRA GPUs of class gpu, which
    backs it: a pod asking 2 gets two devices there through a claim whose request is
    named after its container, and a pod asking 3 more cannot; on n2 the device plugin
    gives 8, counted as any extended resource. The implicit name of a class works too."""
    objects = [
        node("n1"),
        node("n2", extra={"example.com/gpu": "8"}),
        gpus("n1", 4),
        _backing("gpu", "example.com/gpu"),
        pod("two", {"example.com/gpu": "2"}, created=1),
        pod("three", {"example.com/gpu": "3", "cpu": "7"}, created=2),
        pod("implicit", {"deviceclass.resource.kubernetes.io/gpu": "1"}, created=3),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {
        "default/two": "n1",
        "default/three": "n2",
        "default/implicit": "n1",
    }
    made = {b.key: b.devices for b in decisions.bindings}
    (two,) = made["default/two"]
    assert two.claim == "two-extended-resources-"
    assert [(d.request, d.device) for d in two.devices] == [
        ("container-0-request-0", "gpu-0"),
        ("container-0-request-0", "gpu-1"),
    ]
    assert [(m.container, m.resource, m.request) for m in two.extended] == [
        ("main", "example.com/gpu", "container-0-request-0")
    ]
    assert made["default/three"] == ()
    (implicit,) = made["default/implicit"]
    assert [d.device for d in implicit.devices] == ["gpu-2"]


def test_an_extended_resource_backed_by_devices_waits_when_they_are_taken() -> None:
    objects = [
        node("n1"),
        gpus("n1", 2),
        _backing("gpu", "example.com/gpu"),
        pod("first", {"example.com/gpu": "2"}, created=1),
        pod("second", {"example.com/gpu": "1"}, created=2),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/first": "n1"}
    assert decisions.pending["default/second"] == (
        "0/1 nodes are available: 1 cannot allocate all claims."
    )


def test_preempting_a_pod_frees_the_devices_of_its_extended_resource_claim() -> None:
    """A running low-priority pod holds both GPUs through the claim made for its
    extended resource (named in its status): a high-priority pod asking them evicts it."""
    held = resource_claim(
        "low-extended-resources-abcde",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "container-0-request-0",
                            "driver": DRIVER,
                            "pool": "n1",
                            "device": f"gpu-{i}",
                        }
                        for i in range(2)
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "low", "uid": "default/low"}],
        },
        owner_uid="default/low",
    )
    low = pod("low", {"example.com/gpu": "2"}, node_name="n1", phase="Running", created=0)
    low["spec"]["priority"] = 1
    low["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "low-extended-resources-abcde",
        "requestMappings": [
            {
                "containerName": "main",
                "resourceName": "example.com/gpu",
                "requestName": "container-0-request-0",
            }
        ],
    }
    high = pod("high", {"example.com/gpu": "2"}, created=10)
    high["spec"]["priority"] = 100
    objects = [node("n1"), gpus("n1", 2), _backing("gpu", "example.com/gpu"), held, low, high]
    decisions = decide(objects, now=at(20))
    assert [e.key for e in decisions.evictions] == ["default/low"]


def _named(manifest: dict[str, Any], claim: str) -> dict[str, Any]:
    """The pod's status naming `claim` as made for its extended resources."""
    mapping = {"containerName": "main", "resourceName": "example.com/gpu"}
    made = {"resourceClaimName": claim, "requestMappings": [{**mapping, "requestName": "r"}]}
    manifest.setdefault("status", {})["extendedResourceClaimStatus"] = made
    return manifest


def test_a_waiting_pod_whose_status_names_a_claim_gone_gets_a_new_one() -> None:
    """The claim of a failed attempt was deleted; the pod's status still names it, as
    kube-scheduler leaves it: the pod is placed with a new claim."""
    objects = [
        node("n1"),
        gpus("n1", 2),
        _backing("gpu", "example.com/gpu"),
        _named(pod("p", {"example.com/gpu": "2"}), "p-extended-resources-gone1"),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/p": "n1"}
    [binding] = decisions.bindings
    assert binding.devices[0].claim == "p-extended-resources-"


def test_a_waiting_pod_whose_claim_is_left_from_an_earlier_attempt_waits_for_its_deletion() -> None:
    left = resource_claim("p-extended-resources-left1", owner_uid="default/p")
    waits = _named(pod("p", {"example.com/gpu": "1"}), "p-extended-resources-left1")
    objects = [node("n1"), gpus("n1", 2), _backing("gpu", "example.com/gpu"), left, waits]
    decisions = decide(objects)
    assert placements(decisions) == {}
    assert (
        f"ResourceClaim default/p-extended-resources-left1 {LEFT_FROM_EARLIER}"
        in decisions.pending["default/p"]
    )


# kube-scheduler's DynamicResources PostFilter: a claim allocated for a node where its
# pod cannot go is deallocated, so that it may be allocated elsewhere next time.


def _pinned_to_full(status: dict[str, Any], *more: dict[str, Any]) -> Decisions:
    """Claim `held` allocated n2's GPU with `status`; n2 has no cpu left for the pod
    `p` using it, n1 has a free GPU and room."""
    pinned = claimed("p", "held", created=1)
    pinned["metadata"]["uid"] = "uid-p"
    pinned["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    objects = [
        node("n1"),
        node("n2", cpu="1"),
        gpus("n1", 1),
        gpus("n2", 1),
        GPU_CLASS,
        gpu_claim("held", status=status),
        pinned,
        *more,
    ]
    return decide(objects)


def _released(decisions: Decisions) -> list[tuple[str, str]]:
    return [(d.key, d.pod) for d in decisions.deallocations]


def test_a_claim_allocated_where_its_pod_does_not_fit_is_deallocated() -> None:
    status = _allocated_on("n2", "gpu-0", "x")
    del status["reservedFor"]
    decisions = _pinned_to_full(status)
    assert placements(decisions) == {}
    assert decisions.pending["default/p"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node."
    )
    assert _released(decisions) == [("default/held", "default/p")]
    (deallocation,) = decisions.deallocations
    assert [d.id for d in deallocation.devices] == [f"{DRIVER}/n2/gpu-0"]
    assert deallocation.pod_uid == "uid-p"


def test_a_claim_reserved_for_its_pod_alone_is_deallocated_and_one_of_another_is_not() -> None:
    assert _released(_pinned_to_full(_allocated_on("n2", "gpu-0", "uid-p"))) == [
        ("default/held", "default/p")
    ]
    assert _released(_pinned_to_full(_allocated_on("n2", "gpu-0", "other"))) == []


def test_a_claim_allocated_for_a_node_gone_is_deallocated() -> None:
    status = _allocated_on("gone", "gpu-0", "uid-p")
    pinned = claimed("p", "held")
    pinned["metadata"]["uid"] = "uid-p"
    decisions = decide(
        [node("n1"), gpus("n1", 1), GPU_CLASS, gpu_claim("held", status=status), pinned]
    )
    assert decisions.pending["default/p"] == (
        "0/1 nodes are available: 1 resourceclaim not available on the node."
    )
    assert _released(decisions) == [("default/held", "default/p")]


def test_no_claim_is_deallocated_when_no_other_node_passes_the_other_filters() -> None:
    """n1 is full too: the claim is not what keeps the pod waiting (upstream's Filter
    never saw a node its node selector fails on)."""
    status = _allocated_on("n2", "gpu-0", "x")
    del status["reservedFor"]
    filler = pod("filler", {"cpu": "8"}, node_name="n1", phase="Running")
    decisions = _pinned_to_full(status, filler)
    assert decisions.pending["default/p"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert _released(decisions) == []


def test_no_claim_is_deallocated_for_a_pod_that_fits_where_it_is_allocated() -> None:
    decisions = decide(
        [
            node("n1"),
            node("n2"),
            gpus("n1", 1),
            gpus("n2", 1),
            GPU_CLASS,
            gpu_claim("held", status=_allocated_on("n2", "gpu-0", "uid-p")),
            claimed("p", "held"),
        ]
    )
    assert placements(decisions) == {"default/p": "n2"}
    assert decisions.deallocations == []


def test_a_claim_another_pod_of_the_session_is_placed_with_is_kept() -> None:
    """`first` is placed on n2 with the shared claim and fills it; `p` then fits no
    node, but the claim is now in use."""
    status = _allocated_on("n2", "gpu-0", "x")
    del status["reservedFor"]
    first = claimed("first", "held", created=0)
    first["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    decisions = _pinned_to_full(status, first)
    assert placements(decisions) == {"default/first": "n2"}
    assert "default/p" in decisions.pending
    assert decisions.deallocations == []


def test_one_claim_per_pod_is_deallocated() -> None:
    status = _allocated_on("n2", "gpu-0", "uid-p")
    second = _allocated_on("n2", "gpu-1", "uid-p")
    pinned = claimed("p", "held", "also")
    pinned["metadata"]["uid"] = "uid-p"
    decisions = decide(
        [
            node("n1"),
            gpus("n1", 2),
            gpus("n2", 2),
            GPU_CLASS,
            gpu_claim("held", status=status),
            gpu_claim("also", status=second),
            pinned,
        ]
    )
    assert _released(decisions) == [("default/held", "default/p")]


def test_a_gang_member_pinned_to_a_full_node_has_its_claim_deallocated() -> None:
    """The gang's first member fits n1; the second's claim holds n2's GPU, n2 has no
    room for it: the gang waits whole this session, the claim is deallocated, and the
    member then takes n1's other GPU with it."""
    status = _allocated_on("n2", "gpu-0", "x")
    del status["reservedFor"]
    members = []
    for index, claim in enumerate(("free", "held")):
        member = claimed(f"m{index}", claim, group="g", created=index)
        member["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        members.append(member)
    objects = [
        node("n1"),
        node("n2", cpu="1"),
        gpus("n1", 2),
        gpus("n2", 1),
        GPU_CLASS,
        pod_group("g", 2),
        gpu_claim("free"),
        gpu_claim("held", status=status),
        *members,
    ]
    decisions = decide(objects)
    assert placements(decisions) == {}
    assert _released(decisions) == [("default/held", "default/m1")]
    objects[7] = gpu_claim("held")
    again = decide(objects)
    assert placements(again) == {"default/m0": "n1", "default/m1": "n1"}
