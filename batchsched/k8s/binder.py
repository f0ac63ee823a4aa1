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
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from batchsched.api.gpu import GPU_INDEX_ANNOTATION, format_gpu_index
from batchsched.api.placement import PLACEMENT_ANNOTATION, format_placement
from batchsched.framework.decisions import Binding
from batchsched.k8s.client import TRANSPORT_ERRORS, ApiError, Requests, error_code, with_retries
from batchsched.k8s.leader import Fenced, fenced
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.k8s.status import NAMESPACE_TERMINATING, pod_ref
from batchsched.k8s.watch import PODS, Watch
from batchsched.k8s.workers import run_workers
from batchsched.metrics import (
    BINDING_DURATION,
    BINDING_ERRORS,
    BINDINGS,
    POD_CREATION_TO_BOUND,
    SCHEDULE_ATTEMPTS,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Gang:
    """The members of one job decided in one session; `failure` stops the rest, and
    `waiting` holds them until the first member, which carries the record, is bound."""

    failure: str | None = None
    waiting: list["_Bind"] = field(default_factory=list)


@dataclass(slots=True)
class _Bind:
    binding: Binding
    gang: _Gang
    created: float
    # The gang's placement (api/placement.py), on its first member only.
    record: str | None = None


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
    ) -> None:
        self.api = api
        self.watch = watch
        self.cache = watch.cache
        self.status = watch.status
        self.valid_for = valid_for
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self._queue: asyncio.Queue[_Bind] = asyncio.Queue()
        # Set while nothing is queued or in flight and no session is deciding more;
        # status writes wait for it.
        self.idle = idle
        self._unsettled = 0
        self._deciding = False
        # A bind failed since the last session: what sessions wrote before it (a group's
        # `scheduled` among them) is stale until the next one has decided again.
        self._redecide = False

    def submit(self, bindings: Sequence[Binding]) -> None:
        """Queue one session's bindings; each must already be assumed in the cache."""
        gangs: dict[str, list[_Bind]] = {}
        for binding in bindings:
            created = self.cache.tasks[binding.key].creation
            members = gangs.setdefault(binding.job, [])
            gang = members[0].gang if members else _Gang()
            members.append(_Bind(binding, gang, created))
        for members in gangs.values():
            first = members[0]
            if len(members) > 1:
                first.record = self._record(members)
                first.gang.waiting = members[1:]
            self._queue.put_nowait(first)
        self._unsettled += len(bindings)
        if bindings:
            self.idle.clear()

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
        await run_workers(self.concurrency, self._work)

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
            gang.failure = "this replica lost the leader lease"
        if gang.failure is not None:
            self._drop(binding, "cancelled", f"not bound: {gang.failure}")
        else:
            failure = await self._bind(item)
            if failure is not None and gang.failure is None:
                gang.failure = f"{binding.key} could not be bound: {failure}"
        # The rest of the gang follows its first member, bound or not.
        waiting, gang.waiting = gang.waiting, []
        for member in waiting:
            self._queue.put_nowait(member)

    async def _bind(self, item: _Bind) -> str | None:
        """Bind one pod; returns why it failed, None when it is bound."""
        binding = item.binding
        try:
            await with_retries(
                lambda: self._post(item), seconds=self.retry_seconds, on_error=_count_error
            )
        except Fenced:
            self._drop(binding, "cancelled", "not bound: this replica lost the leader lease")
            return "this replica lost the leader lease"
        except ApiError as error:
            if error.status == 409 and await self._already_ours(binding):
                self._bound(item)
                return None
            if error.status == 403:
                self._refused(binding, error)
                return error.message
            result = {409: "conflict", 404: "gone"}.get(error.status, "failed")
            self._drop(binding, result, f"binding to {binding.node} failed: {error.message}")
            await self._resync(binding)
            return error.message
        except TRANSPORT_ERRORS as error:
            self._drop(binding, "failed", f"binding to {binding.node} failed: {error!r}")
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

    def _bound(self, item: _Bind) -> None:
        BINDINGS.labels("bound").inc()
        POD_CREATION_TO_BOUND.observe(max(time.time() - item.created, 0.0))
        self.status.bound(item.binding)

    def _drop(self, binding: Binding, result: str, message: str) -> None:
        """Forget the assumed bind and say why, on the pod and in the log."""
        BINDINGS.labels(result).inc()
        SCHEDULE_ATTEMPTS.labels("error").inc()
        log.warning("%s: %s", binding.key, message)
        self.cache.forget(binding.key)
        self._redecide = True
        self.watch.changes.note()
        self.status.event(pod_ref(binding.key, binding.uid), "Warning", "FailedScheduling", message)

    def _refused(self, binding: Binding, error: ApiError) -> None:
        """403: the namespace is being deleted, or a policy forbids it. Trying again at
        once would be refused again, so the pod waits, with the reason, and backs off."""
        self.cache.refuse(
            binding.key, f"the API server refused to bind it: {error.message}", now=time.time()
        )
        if NAMESPACE_TERMINATING in error.causes:
            self.status.namespace_terminating(binding.namespace)
        self._drop(binding, "refused", f"binding to {binding.node} refused: {error.message}")

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
