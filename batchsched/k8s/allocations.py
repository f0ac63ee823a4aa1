"""ResourceClaims written before their pods are bound, as kube-scheduler's
DynamicResources plugin writes them in PreBind (v1.36.3), and undone when a bind fails.

For each ResourceClaim the pods of a job use, before any of them is bound:
- A claim the session allocated is read afresh, given the finalizer
  `resource.kubernetes.io/delete-protection` by an update of the whole object (1.36.3
  refuses every patch of a claim whose spec holds opaque configuration, as a change of
  its immutable spec), then its status.allocation (results, config, nodeSelector,
  allocationTimestamp) and its pods in status.reservedFor, in one strategic merge patch
  of the status subresource carrying the resourceVersion just read.
- A claim allocated already (shared by name) gets its pods added to status.reservedFor
  the same way, over the resourceVersion the watch last showed.
Every write is conflict-checked. After a conflict the claim is read again, and the write
goes on only if it is still the claim the session saw (same uid, not being deleted) and
still as the session saw it: unallocated, or allocated with the same devices (an earlier
attempt of ours whose reply was lost); otherwise the job fails, in kube-scheduler's words
("got allocated elsewhere in the meantime"). Writing status.allocation or reservedFor
needs `patch` on the synthetic subresource resourceclaims/binding besides
resourceclaims/status (DRAResourceClaimGranularStatusAuthorization, on in 1.36): without
it the API server answers 422 naming that permission, and the job fails saying so.

The claim for a pod's extended resources backed by devices is made as kube-scheduler
makes it in PreBind: created (generateName `<pod>-extended-resources-`, the annotation
`resource.kubernetes.io/extended-resource-claim: "true"`, the pod as controller owner,
the requests the session chose), then given the finalizer, allocation and reservation
as above, then named in the pod's status.extendedResourceClaimStatus with which request
serves each container. Undoing deletes it (the finalizer taken off first), as
kube-scheduler's Unreserve does; so does a write of it that fails after its creation.
One left by an earlier attempt (a leader lost between its creation and the Binding)
keeps its pod waiting until it is deleted (`leftovers`, kube-scheduler's
PostFilter); then the pod is tried afresh.

Undoing, once a job's binds are settled and some of its pods were not bound: those pods
leave reservedFor (kube-scheduler's Unreserve patch, by uid), and a claim the job
allocated that no bound pod of it uses loses its allocation in the same patch (checked
against the version written, as kube-scheduler's PostFilter deallocates), then the
finalizer. Writes of either kind are fenced as Bindings are: a replica that lost the lease
writes nothing, not even an undo. What it leaves (a claim allocated and reserved for a pod
not bound) is what the next leader finds: the pod goes where its claim's devices are, and
nothing needs writing again.

A claim the session decides to deallocate for a pod no node takes (Decisions.deallocations,
kube-scheduler's PostFilter) gets the same undo write: its allocation and reservedFor
cleared over the resourceVersion the watch last showed, then the finalizer taken off;
only while it is still the claim the session saw, allocated with the same devices,
reserved for nobody or for that pod alone, and no write of ours is at it (after a
conflict it is read again and checked again). Fenced as every other write.

Each reply goes to the watch at once (Watch.written), so that the cache shows what was
written before the watch does; the writes of jobs sharing a claim go one job at a time.
"""

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from batchsched.api.dra import (
    EXACT_COUNT,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    AllocatedDevice,
    ClaimSpec,
    DeviceClass,
    NodeTerms,
    claim_keys,
)
from batchsched.api.quantity import format_quantity
from batchsched.framework.deviceclaims import EXTENDED_CLAIM_SUFFIX
from batchsched.k8s.client import (
    JSON,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    Requests,
    with_retries,
)
from batchsched.k8s.events import rfc3339
from batchsched.k8s.fence import Fenced, fenced
from batchsched.k8s.watch import DRA_API, RESOURCE_CLAIMS, Watch, resource_version, version_key
from batchsched.model.decisions import Binding, Deallocation, DeviceAllocation

log = logging.getLogger(__name__)

# Set on a claim by whoever allocates it, taken off by kube-controller-manager once it
# deallocates it: the claim cannot be deleted while its devices may be in use.
FINALIZER = "resource.kubernetes.io/delete-protection"
# How often a write in conflict is tried again (client-go's retry.DefaultRetry).
CONFLICT_ATTEMPTS = 5
# A device of a result, as compared between what was decided and what a claim shows.
DeviceKey = tuple[str, str, str, str]


class AllocationFailed(Exception):
    """Why a job's claims cannot be written as the session decided; `refused` when the
    API server refused the write itself (RBAC, validation): trying again at once would
    be refused again."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What one claim needs for a job's pods: the pods to reserve it for, and the
    allocation to write, or the devices it was seen allocated with."""

    namespace: str
    name: str
    uid: str
    # (name, uid) of each pod.
    pods: tuple[tuple[str, str], ...]
    allocation: DeviceAllocation | None
    devices: frozenset[DeviceKey]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/apis/{DRA_API}/namespaces/{self.namespace}/resourceclaims/{self.name}"


@dataclass(frozen=True, slots=True)
class Written:
    """A claim as a job's write left it: its resourceVersion, and whether the job
    allocated it (then undoing may deallocate it)."""

    claim: ClaimWrite
    version: int
    allocated: bool


@dataclass(slots=True)
class _Seen:
    """What a write checks of a claim: from the API server, or as the watch showed it."""

    uid: str
    deleting: bool
    devices: frozenset[DeviceKey] | None
    reserved: frozenset[str]
    version: int

    @classmethod
    def of(cls, claim: JSON) -> "_Seen":
        meta, status = claim.get("metadata") or {}, claim.get("status") or {}
        allocation = status.get("allocation")
        return cls(
            uid=str(meta.get("uid") or ""),
            deleting=meta.get("deletionTimestamp") is not None,
            devices=None if allocation is None else _result_keys(allocation),
            reserved=frozenset(str(r.get("uid")) for r in status.get("reservedFor") or ()),
            version=resource_version(claim),
        )


class ClaimWriter:
    def __init__(
        self,
        api: Requests,
        watch: Watch,
        *,
        valid_for: Callable[[], float],
        retry_seconds: float = 60.0,
    ) -> None:
        self.api = api
        self.watch = watch
        self.cache = watch.cache
        self.valid_for = valid_for
        self.retry_seconds = retry_seconds
        # One job at a time writes a claim, and a claim's lock lives while used.
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()

    def needed(self, bindings: Sequence[Binding]) -> bool:
        """Whether some pod of the job uses a ResourceClaim, or has one to be made for
        its extended resources (one dict lookup per pod)."""
        tasks = self.cache.tasks
        return any(
            b.devices or ((task := tasks.get(b.key)) is not None and task.resource_claims)
            for b in bindings
        )

    def plan(self, members: Sequence[Binding]) -> list[ClaimWrite]:
        """Each claim the members use, with what it needs, as the cache shows it now
        (the members' binds assumed)."""
        allocations = {a.key: a for member in members for a in member.devices}
        pods: dict[str, list[tuple[str, str]]] = {}
        for member in members:
            task = self.cache.tasks.get(member.key)
            for key in claim_keys(task) if task is not None else ():
                pods.setdefault(key, []).append((member.name, member.uid))
        writes = []
        for key, users in pods.items():
            claim = self.cache.resource_claims.get(key)
            if claim is None:
                raise AllocationFailed(f"claim {key} got deleted in the meantime")
            allocation = allocations.get(key)
            shown = allocation or claim.allocation
            writes.append(
                ClaimWrite(
                    claim.namespace,
                    claim.name,
                    claim.uid,
                    tuple(users),
                    allocation,
                    frozenset(_keys(shown.devices if shown else ())),
                )
            )
        return writes

    async def reserve(self, members: Sequence[Binding]) -> list[Written]:
        """Write every claim of the job, all or none: when one fails, those written are
        undone and the failure raised (AllocationFailed, or Fenced)."""
        writes = self.plan(members)
        outcomes = await asyncio.gather(*map(self._write, writes), return_exceptions=True)
        written = [outcome for outcome in outcomes if isinstance(outcome, Written)]
        failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failed:
            await self.release(written, {uid for write in writes for _, uid in write.pods})
            raise failed[0]
        return written

    async def _write(self, write: ClaimWrite, made: JSON | None = None) -> Written | None:
        """Allocate and reserve one claim (`made`: as its creation left it); None when
        there was nothing to write."""
        if write.allocation is not None and write.allocation.extended and made is None:
            return await self._write_extended(write)
        async with self._lock(write.key):
            claim: JSON | None = made
            if made is not None:
                seen: _Seen | None = _Seen.of(made)
            else:
                seen = None if write.allocation is not None else self._shown(write)
            for _ in range(CONFLICT_ATTEMPTS):
                if seen is None:
                    claim = await self._read(write)
                    seen = _Seen.of(claim)
                _check(write, seen)
                missing = [(name, uid) for name, uid in write.pods if uid not in seen.reserved]
                allocate = write.allocation is not None and seen.devices is None
                if not missing and not allocate:
                    if claim is None:
                        return None
                    # An earlier attempt of ours, whose reply was lost, did it.
                    self.watch.written(RESOURCE_CLAIMS, claim)
                    return Written(write, seen.version, write.allocation is not None)
                status: JSON = {"reservedFor": [_consumer(n, u) for n, u in missing]}
                try:
                    if allocate:
                        assert claim is not None and write.allocation is not None
                        version = await self._finalize(write, claim)
                        status["allocation"] = self._allocation(write.allocation, claim)
                    else:
                        version = seen.version
                    reply = await self._patch_status(write, version, status)
                except ApiError as error:
                    if error.status != 409:
                        raise AllocationFailed(
                            f"claim {write.key}: {error.message}", refused=not error.transient
                        ) from error
                    seen = None
                    continue
                self.watch.written(RESOURCE_CLAIMS, reply)
                return Written(write, resource_version(reply), write.allocation is not None)
        raise AllocationFailed(
            f"claim {write.key}: still changing after {CONFLICT_ATTEMPTS} attempts to write it"
        )

    async def _write_extended(self, write: ClaimWrite) -> Written | None:
        """Create the claim for the pod's extended resources, allocate and reserve it,
        then name it in the pod's status; deleted again if any of it fails."""
        assert write.allocation is not None and write.allocation.spec is not None
        ((pod, uid),) = write.pods
        body = extended_claim_body(write.namespace, pod, uid, write.allocation.spec)
        collection = f"/apis/{DRA_API}/namespaces/{write.namespace}/resourceclaims"
        what = f"create claim for extended resources of pod {write.namespace}/{pod}"
        try:
            # Sent once: a retry after a reply lost would make a second claim.
            async with fenced(self.valid_for):
                reply = await self.api.post(collection, body)
        except ApiError as error:
            raise AllocationFailed(
                f"{what}: {error.message}", refused=not error.transient
            ) from error
        except TRANSPORT_ERRORS as error:
            raise AllocationFailed(f"{what}: {error!r}") from error
        meta = reply.get("metadata") or {}
        made = replace(write, name=str(meta.get("name")), uid=str(meta.get("uid")))
        self.cache.extended_created(uid, made.name, made.uid)
        # A claim of ours the watch may not have shown yet: the reply is what it is.
        self.watch.apply(RESOURCE_CLAIMS, reply)
        try:
            written = await self._write(made, reply)
            await self._name_in_pod(made, pod, uid)
        except AllocationFailed:
            await self._delete(made)
            raise
        return written

    async def _name_in_pod(self, write: ClaimWrite, pod: str, uid: str) -> None:
        """pod.status.extendedResourceClaimStatus, as kube-scheduler patches it."""
        assert write.allocation is not None
        mappings = [
            {"containerName": m.container, "resourceName": m.resource, "requestName": m.request}
            for m in write.allocation.extended
        ]
        made = {"requestMappings": mappings, "resourceClaimName": write.name}
        body = {"metadata": {"uid": uid}, "status": {"extendedResourceClaimStatus": made}}
        path = f"/api/v1/namespaces/{write.namespace}/pods/{pod}/status"
        try:
            await self._send(
                write, lambda: self.api.patch(path, body, content_type=STRATEGIC_MERGE_PATCH)
            )
        except ApiError as error:
            raise AllocationFailed(
                f"update pod {write.namespace}/{pod} ExtendedResourceClaimStatus: {error.message}",
                refused=not error.transient,
            ) from error

    async def _delete(self, write: ClaimWrite) -> None:
        """Delete a claim made for extended resources, its finalizer taken off first (by
        a conflict-checked update, read again after a conflict), as kube-scheduler's
        deleteClaim does. Failing, it is left for `leftovers`."""
        try:
            async with self._lock(write.key):
                for _ in range(CONFLICT_ATTEMPTS):
                    claim = await with_retries(
                        lambda: self.api.get(write.path), seconds=self.retry_seconds
                    )
                    if _Seen.of(claim).uid != write.uid:
                        return
                    try:
                        claim = await self._finalizer(write, claim, present=False)
                    except ApiError as error:
                        if error.status == 409:
                            continue
                        raise
                    break
                body = {"preconditions": {"uid": write.uid}}
                reply = await self._send(
                    write, lambda: self.api.request("DELETE", write.path, body)
                )
        except ApiError as error:
            if error.status == 404:
                self.watch.delete(RESOURCE_CLAIMS, write.key)
            else:
                log.warning("claim %s: cannot delete it: %s", write.key, error.message)
            return
        except (Fenced, AllocationFailed, *TRANSPORT_ERRORS) as error:
            log.warning("claim %s: cannot delete it: %s", write.key, error)
            return
        if (reply.get("metadata") or {}).get("finalizers"):
            self.watch.written(RESOURCE_CLAIMS, reply)
        else:
            self.watch.delete(RESOURCE_CLAIMS, write.key)

    def leftovers(self, scheduler_names: Iterable[str]) -> list[ClaimWrite]:
        """The claims made for the extended resources of our pods that wait, left by an
        earlier attempt (a leader lost before the Binding, an undo that failed), that
        no write of ours is at: to be deleted, as kube-scheduler's PostFilter does."""
        return [
            ClaimWrite(c.namespace, c.name, c.uid, (), None, frozenset())
            for c in self.cache.extended_leftovers(scheduler_names)
            if c.key not in self._locks
        ]

    async def delete(self, writes: Iterable[ClaimWrite]) -> None:
        await asyncio.gather(*map(self._delete, writes))

    async def deallocate(self, deallocations: Iterable[Deallocation]) -> None:
        await asyncio.gather(*map(self._deallocate, deallocations))

    async def _deallocate(self, deallocation: Deallocation) -> None:
        """Clear one claim's allocation and reservedFor, as the module's docstring says."""
        key, pod = deallocation.key, deallocation.pod_uid
        if key in self._locks or key in self.cache.assumed_claims:
            # A pod is being bound with it since the session decided.
            return
        write = ClaimWrite(
            deallocation.namespace,
            deallocation.claim,
            deallocation.uid,
            ((deallocation.pod.partition("/")[2], pod),),
            None,
            frozenset(_keys(deallocation.devices)),
        )
        try:
            async with self._lock(key):
                seen = self._shown(write) or _Seen.of(await self._read(write))
                if (
                    seen.uid != write.uid
                    or seen.deleting
                    or seen.devices != write.devices
                    or not seen.reserved <= {pod}
                ):
                    return
                await self._unreserve(write, seen.version, {pod}, deallocate=True)
        except (Fenced, AllocationFailed, ApiError, *TRANSPORT_ERRORS) as error:
            log.warning("claim %s: cannot deallocate it: %s", key, error)
            return
        log.info("claim %s deallocated: pod %s fits no node with it", key, deallocation.pod)

    def _shown(self, write: ClaimWrite) -> _Seen | None:
        """The claim as the watch showed it, when its version is known."""
        claim = self.cache.seen_claim(write.key)
        version = self.watch.versions.get(version_key(RESOURCE_CLAIMS, write.key), 0)
        if claim is None or not version:
            return None
        devices = None if claim.allocation is None else frozenset(_keys(claim.allocation.devices))
        return _Seen(claim.uid, claim.deleting, devices, frozenset(claim.reserved_for), version)

    async def _read(self, write: ClaimWrite) -> JSON:
        try:
            claim: JSON = await with_retries(
                lambda: self.api.get(write.path), seconds=self.retry_seconds
            )
        except ApiError as error:
            if error.status == 404:
                raise AllocationFailed(f"claim {write.key} got deleted in the meantime") from error
            raise AllocationFailed(
                f"claim {write.key}: {error.message}", refused=not error.transient
            ) from error
        except TRANSPORT_ERRORS as error:
            raise AllocationFailed(f"claim {write.key}: {error!r}") from error
        return claim

    async def _finalize(self, write: ClaimWrite, claim: JSON) -> int:
        """The finalizer added (conflict-checked by the version read); returns the
        claim's version after it."""
        return resource_version(await self._finalizer(write, claim, present=True))

    async def _finalizer(self, write: ClaimWrite, claim: JSON, *, present: bool) -> JSON:
        """The claim with our finalizer added or taken off by an update of the whole
        object (a patch is refused, see the module's docstring); the claim as it is when
        it already is so."""
        meta = claim.get("metadata") or {}
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        if present == (FINALIZER in (meta.get("finalizers") or ())):
            return claim
        if present:
            finalizers.append(FINALIZER)
        updated = {**claim, "metadata": {**meta, "finalizers": finalizers}}
        return await self._send(write, lambda: self.api.put(write.path, updated))

    def _allocation(self, allocation: DeviceAllocation, claim: JSON) -> JSON:
        spec = (claim.get("spec") or {}).get("devices") or {}
        return allocation_status(allocation, spec, self.cache.device_classes, time.time())

    async def _patch_status(self, write: ClaimWrite, version: int, status: JSON) -> JSON:
        body = {"metadata": {"uid": write.uid, "resourceVersion": str(version)}, "status": status}
        path = f"{write.path}/status"
        return await self._send(
            write, lambda: self.api.patch(path, body, content_type=STRATEGIC_MERGE_PATCH)
        )

    async def _send(self, write: ClaimWrite, call: Callable[[], Awaitable[JSON]]) -> JSON:
        """One write, fenced, retried while it fails transiently; API errors are raised."""

        async def attempt() -> JSON:
            async with fenced(self.valid_for):
                return await call()

        try:
            return await with_retries(attempt, seconds=self.retry_seconds)
        except TRANSPORT_ERRORS as error:
            raise AllocationFailed(f"claim {write.key}: {error!r}") from error

    async def _unfinalize(self, write: ClaimWrite, claim: JSON) -> None:
        """The finalizer taken off a claim deallocated: it guards allocated claims only.
        A conflict leaves it for kube-controller-manager, which takes it off when the
        claim is deleted."""
        reply = await self._finalizer(write, claim, present=False)
        if reply is not claim:
            self.watch.written(RESOURCE_CLAIMS, reply)

    async def release(self, written: Sequence[Written], unbound: set[str]) -> None:
        """Undo what the jobs wrote for their pods that were not bound (`unbound` uids)."""
        await asyncio.gather(*(self._release(w, unbound) for w in written))

    async def _release(self, written: Written, unbound: set[str]) -> None:
        write = written.claim
        leaving = {uid for _, uid in write.pods if uid in unbound}
        if not leaving:
            return
        if write.allocation is not None and write.allocation.extended:
            await self._delete(write)
            return
        # Allocated for these pods only, so no one else can be reserved on it.
        deallocate = written.allocated and len(leaving) == len(write.pods)
        try:
            async with self._lock(write.key):
                await self._unreserve(write, written.version, leaving, deallocate=deallocate)
        except (Fenced, AllocationFailed, ApiError, *TRANSPORT_ERRORS) as error:
            log.warning("claim %s: cannot undo what was written: %s", write.key, error)

    async def _unreserve(
        self, write: ClaimWrite, version: int, leaving: set[str], *, deallocate: bool
    ) -> None:
        """The pods out of reservedFor, and the allocation cleared with them when
        `deallocate`, over `version`; after a conflict, as the claim is then."""
        for _ in range(CONFLICT_ATTEMPTS):
            status: JSON = {"reservedFor": [{"$patch": "delete", "uid": u} for u in leaving]}
            if deallocate:
                status["allocation"] = None
            try:
                reply = await self._patch_status(write, version, status)
            except ApiError as error:
                if error.status != 409:
                    raise
                seen = _Seen.of(await self._read(write))
                if seen.uid != write.uid:
                    return
                # Allocated again, or for others since, or being deleted (the claim
                # controller deallocates it once no pod holds it): only the pods leave.
                deallocate = (
                    deallocate
                    and not seen.deleting
                    and seen.reserved <= leaving
                    and seen.devices == write.devices
                )
                if not deallocate and not seen.reserved & leaving:
                    return
                version = seen.version
                continue
            self.watch.written(RESOURCE_CLAIMS, reply)
            if deallocate:
                await self._unfinalize(write, reply)
            return
        raise AllocationFailed(f"still changing after {CONFLICT_ATTEMPTS} attempts to write it")

    @contextlib.asynccontextmanager
    async def _lock(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]


def _check(write: ClaimWrite, seen: _Seen) -> None:
    """The claim is still the one the session saw, as it saw it (kube-scheduler's words)."""
    if seen.uid != write.uid or seen.deleting:
        raise AllocationFailed(f"claim {write.key} got deleted in the meantime")
    if seen.devices is None and write.allocation is None:
        raise AllocationFailed(f"claim {write.key} got deallocated elsewhere in the meantime")
    if seen.devices is not None and seen.devices != write.devices:
        raise AllocationFailed(f"claim {write.key} got allocated elsewhere in the meantime")


def extended_claim_body(namespace: str, pod: str, uid: str, spec: ClaimSpec) -> JSON:
    """The claim kube-scheduler creates for a pod's extended resources backed by
    devices: each request one ExactCount of a class (api/dra.py: extended_claim)."""
    requests = []
    for request in spec.requests:
        (asked,) = request.alternatives
        exactly = {
            "deviceClassName": asked.class_name,
            "allocationMode": EXACT_COUNT,
            "count": asked.count,
        }
        requests.append({"name": request.name, "exactly": exactly})
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid, "controller": True}
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{pod}{EXTENDED_CLAIM_SUFFIX}",
            "namespace": namespace,
            "ownerReferences": [owner],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": requests}},
    }


def _consumer(name: str, uid: str) -> JSON:
    return {"resource": "pods", "name": name, "uid": uid}


def _keys(devices: Iterable[AllocatedDevice]) -> Iterable[DeviceKey]:
    return ((d.request, d.driver, d.pool, d.device) for d in devices)


def _result_keys(allocation: JSON) -> frozenset[DeviceKey]:
    results = (allocation.get("devices") or {}).get("results") or ()
    return frozenset(
        (str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
    )


def allocation_status(
    allocation: DeviceAllocation,
    spec: JSON,
    classes: Mapping[str, DeviceClass],
    now: float,
) -> JSON:
    """status.allocation as kube-scheduler's allocator writes it (dynamic-resource-
    allocation v0.36.3, stable allocator): a result per device with its request's
    tolerations (and, for a share of a device allowing multiple allocations, its
    shareID and consumedCapacity), the configs of the chosen requests' classes then the claim's own
    (`spec` is the claim's spec.devices), the node selector, and the time."""
    requests = {str(r.get("name")): r for r in spec.get("requests") or ()}
    results = []
    # Request -> the name its devices were allocated under ("req" or "req/sub").
    chosen: dict[str, str] = {}
    for device in allocation.devices:
        result: JSON = {
            "request": device.request,
            "driver": device.driver,
            "pool": device.pool,
            "device": device.device,
        }
        if device.admin_access:
            result["adminAccess"] = True
        tolerations = _request(requests, device.request).get("tolerations")
        if tolerations:
            result["tolerations"] = tolerations
        if device.share_id:
            result["shareID"] = device.share_id
        if device.consumed:
            result["consumedCapacity"] = {k: format_quantity(v) for k, v in device.consumed}
        results.append(result)
        chosen.setdefault(device.request.partition("/")[0], device.request)
    devices: JSON = {"results": results}
    config = _config(requests, chosen, spec.get("config") or (), classes)
    if config:
        devices["config"] = config
    status: JSON = {"devices": devices, "allocationTimestamp": rfc3339(now)}
    if allocation.terms is not None:
        status["nodeSelector"] = node_selector(allocation.terms)
    return status


def _request(requests: Mapping[str, JSON], name: str) -> JSON:
    """The `exactly` request or firstAvailable subrequest a result names."""
    parent, _, sub = name.partition("/")
    request = requests.get(parent) or {}
    if not sub:
        found: JSON = request.get("exactly") or {}
        return found
    return next((s for s in request.get("firstAvailable") or () if s.get("name") == sub), {})


def _config(
    requests: Mapping[str, JSON],
    chosen: Mapping[str, str],
    claim_config: Iterable[JSON],
    classes: Mapping[str, DeviceClass],
) -> list[JSON]:
    """Each chosen request's class configs once per class (later requests of the class
    added to its entries), then the claim's configs: one with no requests as it is, one
    naming requests once for each of the claim's requests it names (by the request's
    name, or by its chosen subrequest's), as upstream appends them."""
    config: list[JSON] = []
    of_class: dict[str, range] = {}
    for parent in requests:
        name = chosen.get(parent)
        if name is None:
            continue
        class_name = str(_request(requests, name).get("deviceClassName") or "")
        if class_name in of_class:
            for index in of_class[class_name]:
                config[index]["requests"].append(name)
            continue
        start = len(config)
        device_class = classes.get(class_name)
        for entry in device_class.config if device_class else ():
            config.append({**entry, "source": "FromClass", "requests": [name]})
        of_class[class_name] = range(start, len(config))
    for entry in claim_config:
        named = list(entry.get("requests") or ())
        if not named:
            config.append({**entry, "source": "FromClaim"})
            continue
        for parent in requests:
            if parent in named or chosen.get(parent, parent) in named:
                config.append({**entry, "source": "FromClaim"})
    return config


def node_selector(terms: NodeTerms) -> JSON:
    """status.allocation.nodeSelector from the terms the allocation was made with."""
    rendered = []
    for term in terms:
        entry: dict[str, list[JSON]] = {}
        for requirement in term:
            part = "matchFields" if requirement.field else "matchExpressions"
            found: JSON = {"key": requirement.key, "operator": requirement.operator}
            if requirement.values:
                found["values"] = list(requirement.values)
            entry.setdefault(part, []).append(found)
        rendered.append(entry)
    return {"nodeSelectorTerms": rendered}
