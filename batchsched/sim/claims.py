"""ResourceClaims in the simulator, standing in for kube-controller-manager's
resource-claim controller and for the claim writes of the scheduler.

- A pod's claim from a ResourceClaimTemplate is made as the controller makes it: named
  `<pod>-<claim>-<5 characters>` (here derived from the pod, so that a run is
  reproducible), owned by the pod, annotated with the pod's claim name, and recorded in
  the pod's status.resourceClaimStatuses. A template that does not exist makes none:
  the pod waits for its claim, as it would on a cluster.
- A binding's allocations are written to the claims (status.allocation and the pod in
  status.reservedFor), and a claim already allocated gets the pod added to reservedFor.
- A pod that finishes or is evicted leaves its claims' reservedFor, and a claim no pod
  is reserved for loses its allocation: its devices are free again.
- A claim the session decides to deallocate for a pod no node takes (kube-scheduler's
  PostFilter) loses its allocation and reservedFor, if it is still as the session saw it.
- The claim for a pod's extended resources backed by devices is made as kube-scheduler
  makes it in PreBind (owned by the pod, named `<pod>-extended-resources-<5
  characters>`), allocated and reserved for the pod; it goes with the pod.
"""

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from batchsched.api.dra import (
    POD_CLAIM_NAME_ANNOTATION,
    Allocation,
    ClaimSpec,
    ResourceClaim,
    claim_keys,
)
from batchsched.api.meta import Obj, describe, mapping, name_of, namespace_of, sequence
from batchsched.api.objects import Task
from batchsched.api.pods import pod_uid
from batchsched.cache.cluster import ClusterCache
from batchsched.framework.deviceclaims import EXTENDED_CLAIM_SUFFIX
from batchsched.model.decisions import Deallocation, DeviceAllocation

# The characters Kubernetes' generated names draw from (no vowels, no look-alikes).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class Made:
    """What the resource-claim controller does for one pod."""

    pod: dict[str, Any]
    claims: list[dict[str, Any]] = field(default_factory=list)
    # Why a claim could not be made (its template does not exist).
    missing: list[str] = field(default_factory=list)


def template_claims(pod: dict[str, Any], templates: Mapping[str, Obj]) -> Made:
    """The claims the resource-claim controller makes for a pod's template claims, and
    the pod with them recorded in its status (the pod as given when it needs none, or
    when its status names them already)."""
    spec, meta = pod.get("spec"), pod.get("metadata")
    if not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return Made(pod)
    where = describe(pod)
    name, namespace = name_of(pod), namespace_of(pod)
    status = mapping(pod.get("status"), where=f"{where}.status")
    if status.get("resourceClaimStatuses"):
        return Made(pod)
    uid = pod_uid(mapping(meta, where=where), namespace, name)
    made = Made(pod)
    recorded = []
    for index, raw in enumerate(sequence(spec["resourceClaims"], where=f"{where}.spec")):
        entry = mapping(raw, where=f"{where}.spec.resourceClaims[{index}]")
        template_name = entry.get("resourceClaimTemplateName")
        if not template_name:
            continue
        template = templates.get(f"{namespace}/{template_name}")
        if template is None:
            made.missing.append(
                f"{where}: spec.resourceClaims[{index}].resourceClaimTemplateName: "
                f"ResourceClaimTemplate {namespace}/{template_name} not found; the pod "
                "waits for its claim"
            )
            continue
        claim_name = f"{name}-{entry.get('name')}-{_suffix(uid, str(entry.get('name')))}"
        body = mapping(template.get("spec"), where=describe(template))
        template_meta = mapping(body.get("metadata"), where=describe(template))
        made.claims.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": claim_name,
                    "namespace": namespace,
                    "labels": dict(mapping(template_meta.get("labels"), where=describe(template))),
                    "annotations": {
                        **mapping(template_meta.get("annotations"), where=describe(template)),
                        POD_CLAIM_NAME_ANNOTATION: entry.get("name"),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": name,
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": body.get("spec") or {},
            }
        )
        recorded.append({"name": entry.get("name"), "resourceClaimName": claim_name})
    if recorded:
        made.pod = {**pod, "status": {**status, "resourceClaimStatuses": recorded}}
    return made


def _suffix(uid: str, claim: str) -> str:
    digest = hashlib.sha256(f"{uid}/{claim}".encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:5])


def write_allocations(
    cache: ClusterCache, task: Task, allocations: tuple[DeviceAllocation, ...]
) -> None:
    """The scheduler's claim writes for a bound pod: its new allocations, and the pod
    reserved on every claim it uses."""
    made = {allocation.key: allocation for allocation in allocations}
    for special in allocations:
        if special.extended:
            name = extended_claim_name(task)
            # As kube-scheduler records it in pod.status.extendedResourceClaimStatus.
            task.extended_claim = name
            cache.resource_claims[f"{task.namespace}/{name}"] = ResourceClaim(
                namespace=task.namespace,
                name=name,
                uid=f"{task.uid}/{name}",
                spec=ClaimSpec(()),
                allocation=Allocation(special.devices, special.terms),
                reserved_for=(task.uid,),
                controller=task.uid,
            )
    for key in claim_keys(task):
        claim = cache.resource_claims.get(key)
        if claim is None:
            continue
        found = made.get(key)
        allocation = claim.allocation
        if found is not None:
            allocation = Allocation(found.devices, found.terms)
        reserved = claim.reserved_for
        if task.uid not in reserved:
            reserved = (*reserved, task.uid)
        cache.resource_claims[key] = dataclasses.replace(
            claim, allocation=allocation, reserved_for=reserved
        )


def extended_claim_name(task: Task) -> str:
    """The name of the claim for the pod's extended resources backed by devices."""
    return f"{task.name}{EXTENDED_CLAIM_SUFFIX}{_suffix(task.uid, EXTENDED_CLAIM_SUFFIX)}"


def release(cache: ClusterCache, task: Task) -> None:
    """kube-controller-manager's part when a pod is done: out of reservedFor, and a
    claim reserved for nobody deallocated; the pod's extended-resource claim is
    deleted with it."""
    if task.extended_claim:
        cache.resource_claims.pop(f"{task.namespace}/{task.extended_claim}", None)
    for key in claim_keys(task):
        claim = cache.resource_claims.get(key)
        if claim is None or task.uid not in claim.reserved_for:
            continue
        reserved = tuple(uid for uid in claim.reserved_for if uid != task.uid)
        cache.resource_claims[key] = _cleared(claim, reserved)


def deallocate(cache: ClusterCache, deallocation: Deallocation) -> bool:
    """The scheduler's PostFilter write: the claim's allocation and reservedFor cleared,
    if it is still the claim the session saw, not being deleted, allocated with the same devices and
    reserved for nobody or for that pod alone; whether it was."""
    claim = cache.resource_claims.get(deallocation.key)
    if (
        claim is None
        or claim.uid != deallocation.uid
        or claim.deleting
        or claim.allocation is None
        or claim.allocation.devices != deallocation.devices
        or not set(claim.reserved_for) <= {deallocation.pod_uid}
    ):
        return False
    cache.resource_claims[deallocation.key] = _cleared(claim, ())
    return True


def _cleared(claim: ResourceClaim, reserved: tuple[str, ...]) -> ResourceClaim:
    return dataclasses.replace(
        claim, reserved_for=reserved, allocation=claim.allocation if reserved else None
    )
