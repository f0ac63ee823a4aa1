"""Storage objects read as the API's helpers read them, and bad ones refused by field."""

from collections.abc import Callable

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.meta import Obj
from batchsched.api.selectors import Requirement
from batchsched.api.volumes import (
    ClaimRef,
    PodClaim,
    claim_from_object,
    csi_node_from_object,
    pod_claims,
    storage_class_from_object,
    volume_from_object,
)


def test_a_claim_reads_its_class_from_the_beta_annotation_first() -> None:
    claim = claim_from_object(
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "data",
                "namespace": "ml",
                "annotations": {
                    "volume.beta.kubernetes.io/storage-class": "old",
                    "pv.kubernetes.io/bind-completed": "yes",
                },
                "ownerReferences": [{"uid": "pod-1", "controller": True}],
            },
            "spec": {
                "storageClassName": "new",
                "volumeName": "pv-1",
                "accessModes": ["ReadWriteOncePod"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
            "status": {"phase": "Bound"},
        }
    )
    assert (claim.key, claim.storage_class, claim.request) == ("ml/data", "old", 2**30)
    assert claim.bound and claim.controller == "pod-1"
    assert claim.access_modes == {"ReadWriteOncePod"}


def test_a_claim_without_a_volume_name_is_not_bound_whatever_its_annotations() -> None:
    claim = claim_from_object(
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "d", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        }
    )
    assert not claim.bound and claim.storage_class == ""


def test_a_volume_keeps_its_claim_node_affinity_and_csi_source() -> None:
    volume = volume_from_object(
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "claimRef": {"namespace": "ml", "name": "data", "uid": "u"},
                "csi": {"driver": "disk.example.com", "volumeHandle": "vol-9"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    assert volume.claim == ClaimRef("ml", "data", "u")
    assert volume.csi == ("disk.example.com", "vol-9")
    assert volume.node_affinity == ((Requirement("zone", "In", ("a",)),),)
    assert not volume.available


def test_pods_name_their_claims_and_ephemeral_ones_by_pod_and_volume() -> None:
    spec = {
        "volumes": [
            {"name": "cache", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ]
    }
    assert pod_claims(spec, pod="w-0", where="Pod ml/w-0") == (
        PodClaim("shared"),
        PodClaim("w-0-scratch", ephemeral=True),
    )


@pytest.mark.parametrize(
    ("parse", "obj", "field"),
    [
        (
            storage_class_from_object,
            {"kind": "StorageClass", "metadata": {"name": "s"}, "volumeBindingMode": "Later"},
            "StorageClass s.volumeBindingMode",
        ),
        (
            csi_node_from_object,
            {
                "kind": "CSINode",
                "metadata": {"name": "n0"},
                "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]},
            },
            "CSINode n0.spec.drivers[0].allocatable.count",
        ),
        (
            volume_from_object,
            {
                "kind": "PersistentVolume",
                "metadata": {"name": "v"},
                "spec": {"capacity": {"storage": "x"}},
            },
            "PersistentVolume v.spec.capacity.storage",
        ),
    ],
)
def test_bad_storage_objects_are_refused_naming_the_field(
    parse: Callable[[Obj], object], obj: Obj, field: str
) -> None:
    with pytest.raises(InvalidObject) as error:
        parse(obj)
    assert str(error.value).startswith(field)


def test_a_pod_claim_needs_a_name() -> None:
    spec = {"volumes": [{"name": "data", "persistentVolumeClaim": {}}]}
    with pytest.raises(InvalidObject, match=r"spec.volumes\[0\].persistentVolumeClaim.claimName"):
        pod_claims(spec, pod="p", where="Pod default/p")
