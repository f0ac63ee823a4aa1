"""Claims as kube-scheduler's volume plugins see them, and the volumes a session gives out."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.model.decisions import ClaimBinding
from batchsched.plugins.volumefilters import BIND_CONFLICT, MAX_VOLUME_COUNT
from batchsched.scheduler import run_session

from tests.support.objects import SCHEDULER, Obj, cache_of, decide, node, placements, pod, pod_group

HOST = "kubernetes.io/hostname"


def hosts(count: int) -> list[Obj]:
    return [node(f"n{i}", labels={HOST: f"n{i}"}) for i in range(count)]


def mounting(name: str, *claims: str, **kwargs: Any) -> Obj:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    obj = pod(name, requests={"cpu": "1"}, spec={"volumes": volumes}, **kwargs)
    obj["metadata"]["uid"] = f"{name}-uid"
    return obj


def claim(
    name: str, storage_class: str, *, size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",)
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"{name}-uid"},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": list(modes),
            "resources": {"requests": {"storage": size}},
        },
    }


def local_volume(name: str, host: str, *, size: str = "1Gi", storage_class: str = "local") -> Obj:
    term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [host]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": storage_class,
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
        "status": {"phase": "Available"},
    }


def storage_class(name: str, provisioner: str) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


LOCAL = storage_class("local", "kubernetes.io/no-provisioner")


def test_a_placed_pod_takes_the_smallest_volume_that_fits_and_says_so() -> None:
    objects = [
        *hosts(1),
        LOCAL,
        local_volume("big", "n0", size="10Gi"),
        local_volume("small", "n0", size="2Gi"),
        local_volume("tiny", "n0", size="500Mi"),
        claim("data", "local"),
        mounting("p", "data"),
    ]
    decisions = decide(objects)
    assert [b.claims for b in decisions.bindings] == [
        (ClaimBinding("default", "data", "data-uid", "n0", "small"),)
    ]


def test_two_pods_never_get_one_volume() -> None:
    objects = [
        *hosts(2),
        LOCAL,
        local_volume("pv", "n1"),
        claim("a", "local"),
        claim("b", "local"),
        mounting("first", "a"),
        mounting("second", "b"),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/first": "n1"}
    assert decisions.pending["default/second"] == f"0/2 nodes are available: 2 {BIND_CONFLICT}."


def test_claims_of_one_pod_are_matched_together_on_a_node() -> None:
    """n0 has one volume that fits both claims, n1 two: only n1 can hold the pod."""
    objects = [
        *hosts(2),
        LOCAL,
        local_volume("n0-only", "n0", size="5Gi"),
        local_volume("n1-a", "n1", size="5Gi"),
        local_volume("n1-b", "n1", size="5Gi"),
        claim("a", "local"),
        claim("b", "local", size="2Gi"),
        mounting("p", "a", "b"),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/p": "n1"}
    given = {c.claim: c.volume for c in decisions.bindings[0].claims}
    assert sorted(given.values()) == ["n1-a", "n1-b"]


def test_a_gang_that_falls_short_gives_its_volumes_back() -> None:
    """The gang of three finds volumes for two members only and is undone; the lone
    pod after it then gets one of the volumes the gang held for a while."""
    members = [mounting(f"w{i}", f"w{i}", group="train", created=1) for i in range(3)]
    objects = [
        *hosts(2),
        LOCAL,
        pod_group("train", 3, created=0),
        *(claim(f"w{i}", "local") for i in range(3)),
        local_volume("pv0", "n0"),
        local_volume("pv1", "n1"),
        *members,
        claim("solo", "local"),
        mounting("solo", "solo", created=2),
    ]
    decisions = decide(objects)
    assert list(placements(decisions)) == ["default/solo"]
    assert decisions.bindings[0].claims[0].volume in ("pv0", "pv1")
    assert BIND_CONFLICT in decisions.pending["default/w0"]


def test_provisioned_claims_name_the_node_and_no_volume() -> None:
    objects = [
        *hosts(1),
        storage_class("fast", "disk.example.com"),
        claim("data", "fast"),
        mounting("p", "data"),
    ]
    (binding,) = decide(objects).bindings
    assert binding.claims == (ClaimBinding("default", "data", "data-uid", "n0", ""),)


def test_an_unreadable_claim_is_named_with_its_error() -> None:
    bad = claim("data", "fast")
    bad["spec"]["resources"]["requests"]["storage"] = "lots"
    cache = cache_of([*hosts(1), mounting("p", "data")])
    with pytest.raises(InvalidObject):
        cache.apply(bad)
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    reason = run_session(snapshot, default_config()).pending["default/p"]
    assert reason.startswith(
        "0/1 nodes are available: persistentvolumeclaim default/data is invalid: "
    )
    assert "spec.resources.requests.storage" in reason


def csi_bound(name: str, driver: str) -> list[Obj]:
    """A claim bound to a CSI volume of `driver` (handle: the volume's name)."""
    bound = claim(name, "")
    bound["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    bound["spec"]["volumeName"] = f"{name}-pv"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{name}-pv"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"namespace": "default", "name": name},
            "csi": {"driver": driver, "volumeHandle": f"{name}-pv"},
        },
    }
    return [volume, bound]


def test_a_node_past_its_attach_limit_takes_a_pod_that_attaches_nothing_new() -> None:
    """kube-scheduler's NodeVolumeLimits checks only the drivers the pod adds volumes of:
    a volume already attached there adds none, however many the node has."""
    driver = "disk.example.com"
    limit = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n0"},
        "spec": {"drivers": [{"name": driver, "nodeID": "n0", "allocatable": {"count": 1}}]},
    }
    objects = [
        *hosts(1),
        limit,
        *csi_bound("a", driver),
        *csi_bound("b", driver),
        mounting("holder", "a", "b", node_name="n0", scheduler="default-scheduler"),
        mounting("reader", "a"),
        mounting("writer", "a", "b", "c"),
        *csi_bound("c", driver),
    ]
    decisions = decide(objects)
    assert placements(decisions) == {"default/reader": "n0"}
    assert MAX_VOLUME_COUNT in decisions.pending["default/writer"]
