"""Workload controllers turned into the pods their controllers would create.

Names follow the controllers' conventions (`web-0`, `tfjob-worker-3`,
`deploy-<hash>-<suffix>`), with deterministic suffixes so that equal input gives equal
output. Kubeflow jobs that name a group after themselves also get the PodGroup their
operator would create with gang scheduling enabled. A StatefulSet's volumeClaimTemplates
become a claim per pod (`data-web-0`), mounted by it, and a pod's generic ephemeral
volumes become the claims the ephemeral volume controller would make (`<pod>-<volume>`,
owned by the pod).
"""

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.api.meta import (
    Obj,
    describe,
    mapping,
    name_of,
    namespace_of,
    sequence,
    whole_number,
)
from batchsched.api.pods import group_of, pod_uid

# Kubeflow kinds -> the spec key holding their replica specs.
KUBEFLOW_REPLICAS = {
    "TFJob": "tfReplicaSpecs",
    "PyTorchJob": "pytorchReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
}
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", *KUBEFLOW_REPLICAS)
IMPLIED_LABEL = "implied-by"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def expand(obj: Obj) -> list[dict[str, Any]]:
    """The pods (and implied PodGroup) of a workload object."""
    kind = str(obj.get("kind"))
    where = describe(obj)
    name, namespace = name_of(obj), namespace_of(obj)
    spec = mapping(obj.get("spec"), where=f"{where}.spec")
    if kind in KUBEFLOW_REPLICAS:
        return _kubeflow(obj, spec, kind=kind, name=name, namespace=namespace, where=where)
    if kind == "Job":
        count = whole_number(
            spec.get("parallelism", 1), where=f"{where}.spec.parallelism", minimum=0
        )
        names = [f"{name}-{_suffix(name, i, 5)}" for i in range(count)]
    else:
        count = whole_number(spec.get("replicas", 1), where=f"{where}.spec.replicas", minimum=0)
        if kind == "StatefulSet":
            names = [f"{name}-{i}" for i in range(count)]
        elif kind == "Deployment":
            template_hash = _suffix(name, -1, 10)
            names = [f"{name}-{template_hash}-{_suffix(name, i, 5)}" for i in range(count)]
        else:
            names = [f"{name}-{_suffix(name, i, 5)}" for i in range(count)]
    template_where = f"{where}.spec.template"
    template = mapping(spec.get("template"), where=template_where)
    pods = [_pod(template, pod_name, namespace, {}, where=template_where) for pod_name in names]
    if kind != "StatefulSet":
        return pods
    claims = []
    at = f"{where}.spec.volumeClaimTemplates"
    for index, raw in enumerate(sequence(spec.get("volumeClaimTemplates"), where=at)):
        claim_template = mapping(raw, where=f"{at}[{index}]")
        volume = name_of(claim_template, kind="PersistentVolumeClaim")
        for pod in pods:
            claim_name = f"{volume}-{pod['metadata']['name']}"
            claims.append(_claim(claim_template, claim_name, namespace, where=f"{at}[{index}]"))
            volumes = [v for v in pod["spec"].get("volumes") or [] if v.get("name") != volume]
            mount = {"name": volume, "persistentVolumeClaim": {"claimName": claim_name}}
            pod["spec"]["volumes"] = [*volumes, mount]
    return pods + claims


def ephemeral_claims(pod: Obj) -> list[dict[str, Any]]:
    """The claims the ephemeral volume controller makes for a pod's ephemeral volumes.

    A pod too malformed to read is left for the cache to report, once.
    """
    spec, meta = pod.get("spec"), pod.get("metadata")
    if not isinstance(spec, dict) or not isinstance(spec.get("volumes"), list):
        return []
    where = describe(pod)
    name, namespace = name_of(pod), namespace_of(pod)
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": name,
        "uid": pod_uid(mapping(meta, where=where), namespace, name),
        "controller": True,
    }
    claims = []
    for index, raw in enumerate(spec["volumes"]):
        volume = mapping(raw, where=f"{where}.spec.volumes[{index}]")
        if volume.get("ephemeral") is None:
            continue
        at = f"{where}.spec.volumes[{index}].ephemeral.volumeClaimTemplate"
        template = mapping(
            mapping(volume["ephemeral"], where=at).get("volumeClaimTemplate"), where=at
        )
        claim = _claim(template, f"{name}-{volume.get('name')}", namespace, where=at)
        claim["metadata"]["ownerReferences"] = [owner]
        claims.append(claim)
    return claims


def _claim(template: Obj, name: str, namespace: str, *, where: str) -> dict[str, Any]:
    meta = mapping(template.get("metadata"), where=f"{where}.metadata")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(mapping(meta.get("labels"), where=f"{where}.metadata.labels")),
            "annotations": dict(
                mapping(meta.get("annotations"), where=f"{where}.metadata.annotations")
            ),
        },
        "spec": copy.deepcopy(dict(mapping(template.get("spec"), where=f"{where}.spec"))),
    }


def _kubeflow(
    obj: Obj, spec: Mapping[str, Any], *, kind: str, name: str, namespace: str, where: str
) -> list[dict[str, Any]]:
    key = KUBEFLOW_REPLICAS[kind]
    replica_specs = mapping(spec.get(key), where=f"{where}.spec.{key}")
    pods: list[dict[str, Any]] = []
    for replica_type, raw in replica_specs.items():
        replica = mapping(raw, where=f"{where}.spec.{key}.{replica_type}")
        count = whole_number(
            replica.get("replicas", 1),
            where=f"{where}.spec.{key}.{replica_type}.replicas",
            minimum=0,
        )
        template = mapping(replica.get("template"), where=f"{where}.spec.{key}.{replica_type}")
        role = str(replica_type).lower()
        labels = {
            "training.kubeflow.org/job-name": name,
            "training.kubeflow.org/replica-type": role,
        }
        for index in range(count):
            labels["training.kubeflow.org/replica-index"] = str(index)
            pod_name = f"{name}-{role}-{index}"
            template_where = f"{where}.spec.{key}.{replica_type}.template"
            pods.append(_pod(template, pod_name, namespace, labels, where=template_where))
    return pods + _implied_group(obj, spec, pods, name=name, namespace=namespace, where=where)


def _implied_group(
    obj: Obj,
    spec: Mapping[str, Any],
    pods: list[dict[str, Any]],
    *,
    name: str,
    namespace: str,
    where: str,
) -> list[dict[str, Any]]:
    """The PodGroup a Kubeflow operator creates when its pods name a group after the job."""
    named = {
        ref.name
        for pod in pods
        if (ref := group_of(pod, namespace=namespace, where=where)) and ref.min_available is None
    }
    if name not in named:
        return []
    policy = mapping(
        mapping(spec.get("runPolicy"), where=f"{where}.spec.runPolicy").get("schedulingPolicy"),
        where=f"{where}.spec.runPolicy.schedulingPolicy",
    )
    min_member = policy.get("minAvailable", len(pods))
    group_spec: dict[str, Any] = {"minMember": min_member}
    if policy.get("queue"):
        group_spec["queue"] = policy["queue"]
    return [
        {
            "apiVersion": OUR_API,
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {IMPLIED_LABEL: str(obj["kind"])},
            },
            "spec": group_spec,
        }
    ]


def _pod(
    template: Mapping[str, Any],
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    *,
    where: str,
) -> dict[str, Any]:
    """One pod from a template; a malformed template raises InvalidObject naming it."""
    meta = copy.deepcopy(dict(mapping(template.get("metadata"), where=f"{where}.metadata")))
    meta.pop("creationTimestamp", None)
    meta["name"] = name
    meta["namespace"] = namespace
    meta["labels"] = {**mapping(meta.get("labels"), where=f"{where}.metadata.labels"), **labels}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(dict(mapping(template.get("spec"), where=f"{where}.spec"))),
    }


def _suffix(seed: str, index: int, length: int) -> str:
    digest = hashlib.sha256(f"{seed}/{index}".encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])
