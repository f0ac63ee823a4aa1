"""Binding decided pods to their nodes, many requests at a time, without stalling sessions.

Each decision is already assumed in the cache when it gets here, so sessions go on as if
it were bound. The API server's answer settles it:
- 201: bound; counted, and a Scheduled event goes out.
- 429, 5xx, timeouts: retried with backoff for `retry_seconds`, then given up.
- 403 (a namespace being deleted, a policy): the pod waits with the reason, and is
  tried again after a backoff that doubles with each refusal (cache.refuse).
- 409 (bound already, or a different pod of that name), 404 (gone), other errors: the
  assumption is dropped and the pod read again. A 409 can also be our own earlier attempt
  that succeeded after its reply was lost: if the pod sits on our node, it counts as bound.
When one member of a gang fails, its members not yet sent are not sent: they are
forgotten, so the gang shows what is really bound and the next session places the rest
together. A gang's first member is bound alone, carrying the whole gang's placement in
its annotations (api/placement.py); the others follow once it is bound, so a leader cut
off in between leaves a record from which the next one finishes the gang.

Fencing: a replica that cannot prove it holds the lease sends nothing. `valid_for` is
asked before every request and every retry of one, and bounds how long the request may
take, so no Binding is still on its way when the lease's renew deadline passes; what is
queued then is dropped, for the next leader to decide again.
Bindings go as protobuf (k8s/protobuf.py), which the API server reads for less CPU.

Claims: a job whose pods still need volumes binds none of its pods until every claim of
theirs is bound, as kube-scheduler's VolumeBinding does before binding a pod (PreBind).
The chosen administrator's volume gets the claim in its claimRef, or the claim gets the
chosen node in its selected-node annotation for a provisioner; then the job waits,
without holding a worker, until the watch shows each claim bound. A write refused, a
provisioner that gives up (the annotation is taken away), a volume that lets go of the
claim or does not fit the node, a claim or pod deleted, or `bind_timeout` passing fails
the whole job, as a failed member does: it is forgotten and the next session decides it
again. Those writes are fenced like Bindings, and a job waiting when the lease is lost
is dropped.

ResourceClaims (Dynamic Resource Allocation): a job whose pods use any has them all
allocated and reserved for its pods before any pod is bound (allocations.py), after
its volumes, as kube-scheduler's DynamicResources PreBind follows VolumeBinding's. A
write that fails fails the whole job; once its members are all bound or dropped, what
was written for those not bound is undone before the cache forgets their binds.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from batchsched.api.gpu import GPU_INDEX_ANNOTATION, format_gpu_index
from batchsched.api.placement import PLACEMENT_ANNOTATION, format_placement
from batchsched.api.selectors import node_matches
from batchsched.api.volumes import (
    BIND_TIMEOUT_SECONDS,
    BINDING_SINCE_ANNOTATION,
    BOUND_BY_CONTROLLER_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    Claim,
)
from batchsched.k8s.allocations import AllocationFailed, ClaimWriter, Written
from batchsched.k8s.client import (
    JSON,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    Requests,
    error_code,
    with_retries,
)
from batchsched.k8s.events import rfc3339
from batchsched.k8s.fence import Fenced, fenced
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.k8s.status import NAMESPACE_TERMINATING
from batchsched.k8s.watch import CLAIMS, PODS, VOLUMES, Watch, resource_version, version_key
from batchsched.k8s.workers import run_workers
from batchsched.metrics import (
    BINDING_DURATION,
    BINDING_ERRORS,
    BINDINGS,
    POD_CREATION_TO_BOUND,
    SCHEDULE_ATTEMPTS,
)
from batchsched.model.decisions import SCHEDULED, Binding, ClaimBinding, Condition, JobStatus
from batchsched.plugins.volumefilters import awaited

log = logging.getLogger(__name__)

# How often a job waiting on its claims looks at the cache again. Polling rather than
# being woken by the watch: one place sees every way the wait can end (a claim, a volume
# or a pod changed, the lease, the time), and it costs a few dict lookups per job.
CLAIM_POLL_SECONDS = 0.2
LEASE_LOST = "this replica lost the leader lease"
# The PodScheduled reason of a placed pod whose claims are being bound, and the reason of
# its group's Scheduled=False condition (kube-scheduler, binding in PreBind, says nothing).
VOLUME_BINDING_REASON = "WaitingForVolumeBinding"
# How kube-scheduler words a failure of its VolumeBinding PreBind; what failed follows.
VOLUME_BINDING_FAILED = 'running PreBind plugin "VolumeBinding": binding volumes: '
# Its bind timeout's error (wait.PollUntilContextTimeout's).
DEADLINE_EXCEEDED = "context deadline exceeded"
# How it words a failure of its DynamicResources PreBind (writing the claims).
DEVICE_BINDING_FAILED = 'running PreBind plugin "DynamicResources": '


class _ClaimFailed(Exception):
    """Why a job's claims cannot be bound as the session decided."""


@dataclass(slots=True)
class _Gang:
    """The members of one job decided in one session; `failure` stops the rest, and
    `waiting` holds them until the first member, which carries the record, is bound.
    With `claims`, some member's volumes still need one, settled before any is bound.
    With `devices`, some member uses ResourceClaims: written before any is bound, and
    undone for those not bound once all are settled (`left` counts those not yet)."""

    failure: str | None = None
    waiting: list["_Bind"] = field(default_factory=list)
    claims: bool = False
    devices: bool = False
    members: list[Binding] = field(default_factory=list)
    left: int = 0
    written: list[Written] = field(default_factory=list)
    # Uids of the members bound, and the keys of those dropped, forgotten by the cache
    # only once their claims are undone (placed again before, they would be bound on
    # claims about to lose them).
    bound: set[str] = field(default_factory=set)
    dropped: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Bind:
    binding: Binding
    gang: _Gang
    created: float
    # The gang's placement (api/placement.py), on its first member only.
    record: str | None = None


@dataclass(frozen=True, slots=True)
class VolumeWait:
    """A job placed and assumed, none of its pods bound yet: its claims come first."""

    # Pod key -> what its claims wait on.
    members: dict[str, str]

    def status(self, job: JobStatus) -> JobStatus:
        """The group's status as it stands: its waiting members are not scheduled yet,
        and a gang they would complete is Inqueue with Scheduled=False saying why."""
        scheduled = max(job.scheduled - len(self.members), 0)
        if job.phase != "Running" or scheduled + job.succeeded >= job.min_member:
            return replace(job, scheduled=scheduled)
        waits = sorted(set(self.members.values()))
        message = f"{len(self.members)} member(s) placed, waiting for volume binding: "
        message += "; ".join(waits)
        condition = Condition(SCHEDULED, VOLUME_BINDING_REASON, message, status="False")
        return replace(job, phase="Inqueue", scheduled=scheduled, condition=condition)


class Binder:
    def __init__(
        self,
        api: Requests,
        watch: Watch,
        *,
        valid_for: Callable[[], float],
        idle: asyncio.Event,
        concurrency: int = 64,
        retry_seconds: float = 60.0,
        bind_timeout: float = BIND_TIMEOUT_SECONDS,
    ) -> None:
        self.api = api
        self.watch = watch
        self.cache = watch.cache
        self.status = watch.status
        self.valid_for = valid_for
        # Through the binder's own `valid_for`, which tests replace.
        self.devices = ClaimWriter(
            api, watch, valid_for=lambda: self.valid_for(), retry_seconds=retry_seconds
        )
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self.bind_timeout = bind_timeout
        self._queue: asyncio.Queue[_Bind] = asyncio.Queue()
        # First members of jobs whose claims come first.
        self._claimed: asyncio.Queue[_Bind] = asyncio.Queue()
        # Set while nothing is queued or in flight and no session is deciding more;
        # status writes wait for it. A job waiting on its claims sends nothing meanwhile,
        # so it counts only once its pods are queued.
        self.idle = idle
        self._unsettled = 0
        self._deciding = False
        # A bind failed since the last session: what sessions wrote before it (a group's
        # `scheduled` among them) is stale until the next one has decided again.
        self._redecide = False
        # Jobs whose claims are being bound, by job key: what their status says.
        self.waiting: dict[str, VolumeWait] = {}

    def submit(self, bindings: Sequence[Binding]) -> None:
        """Queue one session's bindings; each must already be assumed in the cache."""
        gangs: dict[str, list[_Bind]] = {}
        for binding in bindings:
            created = self.cache.tasks[binding.key].creation
            members = gangs.setdefault(binding.job, [])
            gang = members[0].gang if members else _Gang()
            members.append(_Bind(binding, gang, created))
            if binding.claims:
                gang.claims = True
        for job, members in gangs.items():
            first = members[0]
            gang = first.gang
            if len(members) > 1:
                first.record = self._record(members)
                gang.waiting = members[1:]
            gang.members = [m.binding for m in members]
            gang.left = len(members)
            gang.devices = self.devices.needed(gang.members)
            if gang.claims:
                self.waiting[job] = VolumeWait({m.binding.key: self._awaited(m) for m in members})
            if gang.claims or gang.devices:
                self._claimed.put_nowait(first)
            else:
                self._enqueue(first)

    def _awaited(self, member: _Bind) -> str:
        """What the member's claims wait on, or that they are bound already."""
        claims, classes = self.cache.claims, self.cache.storage_classes
        waits = [awaited(c, claims.get(c.key), classes) for c in member.binding.claims]
        return "; ".join(waits) or "its claims are bound"

    def _enqueue(self, first: _Bind) -> None:
        """Hand a job to the workers: its first member, which lets the rest follow."""
        self._unsettled += 1 + len(first.gang.waiting)
        self.idle.clear()
        self._queue.put_nowait(first)

    def _record(self, members: list[_Bind]) -> str | None:
        placed = [(m.binding.name, m.binding.uid, m.binding.node) for m in members]
        record = format_placement(time.time(), placed)
        if record is None:
            log.warning(
                "%s: %d members are too many to record their placement; a leader lost "
                "while binding them would leave the gang partly bound",
                members[0].binding.job,
                len(members),
            )
        return record

    @contextlib.contextmanager
    def deciding(self) -> Iterator[None]:
        """Held while a session runs. Its jobs arrive one by one, and the binds sent so
        far may all settle before the next job comes; status writes slipping into such
        gaps would take the API server from the binds still to come. After a failed bind,
        status writes also wait for this: the session before it counted the pod as
        scheduled, and the next one, which the failure starts, corrects that."""
        self._deciding = True
        self._redecide = False
        self.idle.clear()
        try:
            yield
        finally:
            self._deciding = False
            self._check_idle()

    def _check_idle(self) -> None:
        if not self._unsettled and not self._deciding and not self._redecide:
            self.idle.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(run_workers(self.concurrency, self._work))
            while True:
                first = await self._claimed.get()
                tasks.create_task(self._prepare(first))

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                await self._settle(item)
            finally:
                self._unsettled -= 1
                self._check_idle()

    async def _settle(self, item: _Bind) -> None:
        binding, gang = item.binding, item.gang
        if gang.failure is None and self.valid_for() <= 0:
            gang.failure = LEASE_LOST
        if gang.failure is not None:
            self._drop(binding, "cancelled", f"not bound: {gang.failure}", gang)
        else:
            failure = await self._bind(item)
            if failure is not None and gang.failure is None:
                gang.failure = f"{binding.key} could not be bound: {failure}"
        # The rest of the gang follows its first member, bound or not.
        waiting, gang.waiting = gang.waiting, []
        for member in waiting:
            self._queue.put_nowait(member)
        gang.left -= 1
        if not gang.left and gang.devices:
            await self._settle_devices(gang)

    async def _settle_devices(self, gang: _Gang) -> None:
        """Every member is bound or dropped: the claims written for those dropped are
        undone, then the cache shows the claims as the API server does, and forgets
        the dropped members' binds."""
        unbound = {b.uid for b in gang.members if b.uid not in gang.bound}
        if unbound and gang.written:
            await self.devices.release(gang.written, unbound)
        for member in gang.members:
            self.cache.settle_claims(member.uid)
        for key in gang.dropped:
            self.cache.forget(key)
        if gang.dropped:
            self.watch.changes.note()

    async def _bind(self, item: _Bind) -> str | None:
        """Bind one pod; returns why it failed, None when it is bound."""
        binding = item.binding
        try:
            await with_retries(
                lambda: self._post(item), seconds=self.retry_seconds, on_error=_count_error
            )
        except Fenced:
            self._drop(binding, "cancelled", f"not bound: {LEASE_LOST}", item.gang)
            return LEASE_LOST
        except ApiError as error:
            if error.status == 409 and await self._already_ours(binding):
                self._bound(item)
                return None
            if error.status == 403:
                self._refused(binding, error, item.gang)
                return error.message
            result = {409: "conflict", 404: "gone"}.get(error.status, "failed")
            message = f"binding to {binding.node} failed: {error.message}"
            self._drop(binding, result, message, item.gang)
            await self._resync(binding)
            return error.message
        except TRANSPORT_ERRORS as error:
            message = f"binding to {binding.node} failed: {error!r}"
            self._drop(binding, "failed", message, item.gang)
            return repr(error)
        self._bound(item)
        return None

    async def _post(self, item: _Bind) -> None:
        """One attempt, sent only while the lease is ours and given up before it may not be."""
        binding = item.binding
        metadata: dict[str, object] = {
            "name": binding.name,
            "namespace": binding.namespace,
            "uid": binding.uid,
        }
        annotations = {}
        if binding.gpu_index:
            annotations[GPU_INDEX_ANNOTATION] = format_gpu_index(binding.gpu_index)
        if item.record is not None:
            annotations[PLACEMENT_ANNOTATION] = item.record
        if annotations:
            metadata["annotations"] = annotations
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
        }
        started = time.perf_counter()
        try:
            async with fenced(self.valid_for):
                await self.api.post(
                    f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}/binding",
                    body,
                    content_type=PROTOBUF,
                )
        finally:
            BINDING_DURATION.observe(time.perf_counter() - started)

    async def _prepare(self, first: _Bind) -> None:
        """Settle a job's claims (volumes, then ResourceClaims), then hand it to the
        workers: to be bound, or, when its claims failed, dropped member by member as a
        failed gang is."""
        gang = first.gang
        try:
            if gang.claims:
                await self._settle_claims(first)
            if gang.devices:
                gang.written = await self.devices.reserve(gang.members)
        except Fenced:
            gang.failure = LEASE_LOST
        except _ClaimFailed as failure:
            log.warning("%s: its volumes cannot be bound: %s", first.binding.job, failure)
            gang.failure = f"{VOLUME_BINDING_FAILED}{failure}"
        except AllocationFailed as failure:
            log.warning("%s: its ResourceClaims cannot be written: %s", first.binding.job, failure)
            gang.failure = f"{DEVICE_BINDING_FAILED}{failure}"
            if failure.refused:
                # As a refused Binding: the pods wait with the reason, backing off.
                for member in gang.members:
                    self.cache.refuse(member.key, gang.failure, now=time.time())
        finally:
            # What the group's status said while it waited no longer holds: the next
            # session reports it again.
            if self.waiting.pop(first.binding.job, None) is not None:
                self.cache.touch(first.binding.key)
                self.watch.changes.note()
        self._enqueue(first)

    async def _settle_claims(self, first: _Bind) -> None:
        """Write what each claim needs, then wait until the cache shows them all bound."""
        members = [first.binding, *(m.binding for m in first.gang.waiting)]
        # Members sharing a claim name it once.
        claims = list({c.key: c for member in members for c in member.claims}.values())
        # Version key -> the resourceVersion our write gave the object.
        written: dict[str, int] = {}
        # The bind timeout runs from the oldest request, as the objects record it: a
        # leader that takes over a wait goes on with its clock, not a fresh one.
        since = min([await self._write_claim(claim, written) for claim in claims])
        log.info("%s: waiting for claims %s", first.binding.job, ", ".join(c.key for c in claims))
        unbound = self._unbound(members, claims, written)
        wait = self.waiting.get(first.binding.job)
        if unbound and wait is not None:
            await self._tell_waiting(members, wait)
        while unbound:
            if time.time() >= since + self.bind_timeout:
                await self._restart_clocks(claims)
                raise _ClaimFailed(
                    f"{DEADLINE_EXCEEDED} ({', '.join(unbound)} not bound within "
                    f"{self.bind_timeout:g}s)"
                )
            await asyncio.sleep(CLAIM_POLL_SECONDS)
            unbound = self._unbound(members, claims, written)

    async def _tell_waiting(self, members: list[Binding], wait: VolumeWait) -> None:
        """PodScheduled=False on each member, saying what its claims wait on; sent before
        any member can be bound, so it never overwrites the API server's True."""
        stamp = rfc3339(time.time())
        for binding in members:
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": VOLUME_BINDING_REASON,
                "message": f"waiting for volume binding: {wait.members[binding.key]}",
                "lastTransitionTime": stamp,
            }
            path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}/status"
            body = {"status": {"conditions": [condition]}}
            try:
                await with_retries(
                    partial(self._patch, path, body, STRATEGIC_MERGE_PATCH),
                    seconds=self.retry_seconds,
                )
            except (ApiError, *TRANSPORT_ERRORS) as error:
                log.warning("%s: cannot say it waits for its volumes: %s", binding.key, error)
            # What the writer remembers of the pod's condition no longer holds.
            self.status.forget("Pod", binding.key)

    async def _restart_clocks(self, claims: list[ClaimBinding]) -> None:
        """The bind timeout passed: take its start off the objects, so the next attempt
        (the job is decided again) times itself afresh; a leader that dies before this
        leaves a passed time, which the next one reports as a timeout at once."""
        body = {"metadata": {"annotations": {BINDING_SINCE_ANNOTATION: None}}}
        for claim in claims:
            if claim.volume:
                path = f"/api/v1/persistentvolumes/{claim.volume}"
            else:
                path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.claim}"
            try:
                await self._patch(path, body)
            except (ApiError, *TRANSPORT_ERRORS) as error:
                log.warning("claim %s: cannot restart its bind timeout: %s", claim.key, error)

    async def _write_claim(self, claim: ClaimBinding, written: dict[str, int]) -> float:
        """Bind the chosen volume to the claim (its claimRef, as the PersistentVolume
        controller would), or ask for one provisioned on the chosen node, recording when
        (BINDING_SINCE_ANNOTATION); returns that time. Nothing is sent when the cache
        shows it asked already."""
        current = self._claim(claim)
        target = _target(claim)
        now = time.time()
        if current.bound:
            return now
        stamp = {BINDING_SINCE_ANNOTATION: rfc3339(now, micro=True)}
        if claim.volume:
            if self._volume_names(claim, current):
                since = self.cache.volumes[claim.volume].binding_since
                if since is not None:
                    return since
            path = f"/api/v1/persistentvolumes/{claim.volume}"
            metadata: JSON = {"annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes", **stamp}}
            # Only over the volume as the cache shows it, free: another claim given it
            # meanwhile makes a conflict, not a claimRef taken from that claim.
            if self.watch.versions.get(target):
                metadata["resourceVersion"] = str(self.watch.versions[target])
            ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "uid": claim.uid}
            body = {
                "metadata": metadata,
                "spec": {"claimRef": {**ref, "namespace": claim.namespace, "name": claim.claim}},
            }
        else:
            if current.selected_node == claim.node and current.binding_since is not None:
                return current.binding_since
            path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.claim}"
            # The uid makes it this claim, not one recreated under its name.
            notes = {SELECTED_NODE_ANNOTATION: claim.node, **stamp}
            body = {"metadata": {"uid": claim.uid, "annotations": notes}}
        try:
            reply = await with_retries(
                lambda: self._patch(path, body), seconds=self.retry_seconds, on_error=_count_error
            )
        except ApiError as error:
            raise _ClaimFailed(f"claim {claim.key}: {error.message}") from error
        except TRANSPORT_ERRORS as error:
            raise _ClaimFailed(f"claim {claim.key}: {error!r}") from error
        written[target] = resource_version(reply)
        return now

    async def _patch(self, path: str, body: JSON, content_type: str = MERGE_PATCH) -> JSON:
        async with fenced(self.valid_for):
            return await self.api.patch(path, body, content_type=content_type)

    def _unbound(
        self, members: list[Binding], claims: list[ClaimBinding], written: dict[str, int]
    ) -> list[str]:
        """The claims not bound yet, judged as kube-scheduler's checkBindings does; each
        only once the cache shows the write made for it."""
        if self.valid_for() <= 0:
            raise Fenced
        for binding in members:
            task = self.cache.tasks.get(binding.key)
            if task is None or task.uid != binding.uid:
                raise _ClaimFailed(f"pod {binding.key} was deleted")
        unbound = []
        for claim in claims:
            current = self._claim(claim)
            target = _target(claim)
            if self.watch.versions.get(target, 0) < written.get(target, 0):
                unbound.append(claim.key)
                continue
            if claim.volume:
                if not self._volume_names(claim, current):
                    raise _ClaimFailed(f"volume {claim.volume} let go of claim {claim.key}")
            elif current.selected_node != claim.node:
                # A provisioner that gives up takes the annotation away.
                raise _ClaimFailed(f"provisioning failed for claim {claim.key}")
            if not current.bound or not self._fits(claim, current.volume_name):
                unbound.append(claim.key)
        return unbound

    def _fits(self, claim: ClaimBinding, volume_name: str) -> bool:
        """Whether the volume the claim got may be used on the chosen node (False: the
        cache does not show the volume yet); a provisioner may have made it elsewhere."""
        volume = self.cache.volumes.get(volume_name)
        if volume is None:
            return False
        node = self.cache.nodes.get(claim.node)
        if node is None:
            raise _ClaimFailed(f"node {claim.node} was removed")
        if not node_matches(node, volume.node_affinity):
            raise _ClaimFailed(
                f"volume {volume_name} of claim {claim.key} does not fit node {claim.node}"
            )
        return True

    def _claim(self, claim: ClaimBinding) -> Claim:
        """The claim as the cache shows it, if it is still the one the session saw."""
        current = self.cache.claims.get(claim.key)
        if current is None or current.uid != claim.uid:
            raise _ClaimFailed(f"claim {claim.key} was deleted")
        if current.deleting:
            raise _ClaimFailed(f"claim {claim.key} is being deleted")
        return current

    def _volume_names(self, claim: ClaimBinding, current: Claim) -> bool:
        """Whether the chosen volume's claimRef names the claim (False: it names none)."""
        volume = self.cache.volumes.get(claim.volume)
        if volume is None:
            raise _ClaimFailed(f"volume {claim.volume} for claim {claim.key} was deleted")
        if volume.claim is None:
            return False
        if not volume.claim.names(current):
            taken = f"{volume.claim.namespace}/{volume.claim.name}"
            raise _ClaimFailed(f"volume {claim.volume} was bound to claim {taken} instead")
        return True

    def _bound(self, item: _Bind) -> None:
        item.gang.bound.add(item.binding.uid)
        BINDINGS.labels("bound").inc()
        POD_CREATION_TO_BOUND.observe(max(time.time() - item.created, 0.0))
        self.status.bound(item.binding)

    def _drop(self, binding: Binding, result: str, message: str, gang: _Gang) -> None:
        """Forget the assumed bind (once its claims are undone, for a gang using
        ResourceClaims) and say why, on the pod and in the log."""
        BINDINGS.labels(result).inc()
        SCHEDULE_ATTEMPTS.labels("error").inc()
        log.warning("%s: %s", binding.key, message)
        if gang.devices:
            gang.dropped.append(binding.key)
        else:
            self.cache.forget(binding.key)
        self._redecide = True
        self.watch.changes.note()
        self.status.bind_failed(binding.key, binding.uid, message, self.cache.tasks)

    def _refused(self, binding: Binding, error: ApiError, gang: _Gang) -> None:
        """403: the namespace is being deleted, or a policy forbids it. Trying again at
        once would be refused again, so the pod waits, with the reason, and backs off."""
        self.cache.refuse(
            binding.key, f"the API server refused to bind it: {error.message}", now=time.time()
        )
        if NAMESPACE_TERMINATING in error.causes:
            self.status.namespace_terminating(binding.namespace)
        message = f"binding to {binding.node} refused: {error.message}"
        self._drop(binding, "refused", message, gang)

    async def _already_ours(self, binding: Binding) -> bool:
        """After a 409: is the pod, with this uid, on the node we chose (a lost reply)?"""
        try:
            pod = await self.api.get(f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}")
        except (ApiError, *TRANSPORT_ERRORS) as error:
            log.warning("%s: cannot read it back after a conflict: %s", binding.key, error)
            return False
        spec = pod.get("spec") or {}
        uid = (pod.get("metadata") or {}).get("uid")
        return uid == binding.uid and spec.get("nodeName") == binding.node

    async def _resync(self, binding: Binding) -> None:
        """Read the pod again, so the cache does not wait for the watch to catch up."""
        path = f"/api/v1/namespaces/{binding.namespace}/pods/{binding.name}"
        try:
            pod = await self.api.get(path)
        except ApiError as error:
            if error.status == 404:
                self.watch.delete(PODS, binding.key)
            else:
                log.warning("%s: cannot read it back: %s", binding.key, error)
            return
        except TRANSPORT_ERRORS as error:
            log.warning("%s: cannot read it back: %r", binding.key, error)
            return
        self.watch.apply(PODS, pod)


def _count_error(error: BaseException) -> None:
    BINDING_ERRORS.labels(error_code(error)).inc()


def _target(claim: ClaimBinding) -> str:
    """The object written for the claim, as Watch.versions keys it."""
    return version_key(VOLUMES, claim.volume) if claim.volume else version_key(CLAIMS, claim.key)
