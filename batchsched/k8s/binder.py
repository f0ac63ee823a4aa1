"""Binding decided pods to their nodes, many requests at a time, without stalling sessions.

Each decision is already assumed in the cache when it gets here, so sessions go on as if
it were bound. The API server's answer settles it:
- 201: bound; counted, and a Scheduled event goes out.
- 429, 5xx, timeouts: retried with backoff for `retry_seconds`, then given up.
- 409 (bound already, or a different pod of that name), 404 (gone), other errors: the
  assumption is dropped and the pod read again. A 409 can also be our own earlier attempt
  that succeeded after its reply was lost: if the pod sits on our node, it counts as bound.
When one member of a gang fails, its members not yet sent are not sent: they are
forgotten, so the gang shows what is really bound and the next session places the rest
together. Bindings decided by a replica that has lost its lease are not sent at all.
Bindings go as protobuf (k8s/protobuf.py), which the API server reads for less CPU.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from batchsched.api.gpu import GPU_INDEX_ANNOTATION, format_gpu_index
from batchsched.framework.decisions import Binding
from batchsched.k8s.client import TRANSPORT_ERRORS, ApiError, Requests, error_code, with_retries
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.k8s.status import pod_ref
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
    """The members of one job decided in one session; `failure` stops the rest."""

    failure: str | None = None


@dataclass(slots=True)
class _Bind:
    binding: Binding
    gang: _Gang
    created: float


class Binder:
    def __init__(
        self,
        api: Requests,
        watch: Watch,
        *,
        leading: Callable[[], bool],
        idle: asyncio.Event,
        concurrency: int = 64,
        retry_seconds: float = 60.0,
    ) -> None:
        self.api = api
        self.watch = watch
        self.cache = watch.cache
        self.status = watch.status
        self.leading = leading
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self._queue: asyncio.Queue[_Bind] = asyncio.Queue()
        # Set while nothing is queued or in flight and no session is deciding more;
        # status writes wait for it.
        self.idle = idle
        self._unsettled = 0
        self._deciding = False

    def submit(self, bindings: Sequence[Binding]) -> None:
        """Queue one session's bindings; each must already be assumed in the cache."""
        gangs: dict[str, _Gang] = {}
        for binding in bindings:
            gang = gangs.setdefault(binding.job, _Gang())
            created = self.cache.tasks[binding.key].creation
            self._queue.put_nowait(_Bind(binding, gang, created))
        self._unsettled += len(bindings)
        if bindings:
            self.idle.clear()

    @contextlib.contextmanager
    def deciding(self) -> Iterator[None]:
        """Held while a session runs. Its jobs arrive one by one, and the binds sent so
        far may all settle before the next job comes; status writes slipping into such
        gaps would take the API server from the binds still to come."""
        self._deciding = True
        self.idle.clear()
        try:
            yield
        finally:
            self._deciding = False
            self._check_idle()

    def _check_idle(self) -> None:
        if not self._unsettled and not self._deciding:
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
        binding = item.binding
        if item.gang.failure is not None or not self.leading():
            reason = item.gang.failure or "this replica lost the leader lease"
            self._drop(binding, "cancelled", f"not bound: {reason}")
            return
        failure = await self._bind(item)
        if failure is not None and item.gang.failure is None:
            item.gang.failure = f"{binding.key} could not be bound: {failure}"

    async def _bind(self, item: _Bind) -> str | None:
        """Bind one pod; returns why it failed, None when it is bound."""
        binding = item.binding
        try:
            await with_retries(
                lambda: self._post(binding), seconds=self.retry_seconds, on_error=_count_error
            )
        except ApiError as error:
            if error.status == 409 and await self._already_ours(binding):
                self._bound(item)
                return None
            result = {409: "conflict", 404: "gone"}.get(error.status, "failed")
            self._drop(binding, result, f"binding to {binding.node} failed: {error.message}")
            await self._resync(binding)
            return error.message
        except TRANSPORT_ERRORS as error:
            self._drop(binding, "failed", f"binding to {binding.node} failed: {error!r}")
            return repr(error)
        self._bound(item)
        return None

    async def _post(self, binding: Binding) -> None:
        metadata: dict[str, object] = {
            "name": binding.name,
            "namespace": binding.namespace,
            "uid": binding.uid,
        }
        if binding.gpu_index:
            metadata["annotations"] = {GPU_INDEX_ANNOTATION: format_gpu_index(binding.gpu_index)}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": binding.node},
        }
        started = time.perf_counter()
        try:
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
        self.watch.changes.note()
        self.status.event(pod_ref(binding.key, binding.uid), "Warning", "FailedScheduling", message)

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
