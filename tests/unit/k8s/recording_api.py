"""A stand-in for the API server in unit tests: it records every request and answers
through a function the test provides. (Integration tests use the real API server;
these only pin down what the shell sends and how it reacts to answers.)"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from batchsched.cache.cluster import ClusterCache
from batchsched.k8s.client import JSON, Requests
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.watch import Watch

Answer = Callable[[str, str, Any], JSON]


def created(method: str, path: str, body: Any) -> JSON:
    return {}


@dataclass
class RecordingApi(Requests):
    answer: Answer = created
    requests: list[tuple[str, str, Any]] = field(default_factory=list)

    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "",
    ) -> JSON:
        self.requests.append((method, path, body))
        return self.answer(method, path, body)

    def sent(self, method: str, fragment: str = "") -> list[Any]:
        return [body for m, path, body in self.requests if m == method and fragment in path]


class WaitedFor(asyncio.Event):
    """An event that counts who is waiting for it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0

    async def wait(self) -> Literal[True]:
        self.waiting += 1
        try:
            return await super().wait()
        finally:
            self.waiting -= 1


def watch_over(api: Requests, *, scheduler_name: str = "batch-scheduler") -> Watch:
    """A Watch over an empty cache whose status writer reports through `api`; its
    `binds_idle` event starts set, as the operator's does, for a Binder to share."""
    idle = asyncio.Event()
    idle.set()
    status = StatusWriter(api, scheduler_name=scheduler_name, instance="i", binds_idle=idle)
    return Watch(ClusterCache(), status)


async def settle(status: StatusWriter) -> None:
    """Run the writer until it has sent everything queued."""
    task = asyncio.create_task(status.run())
    try:
        await drained(status)
    finally:
        task.cancel()


async def drained(status: StatusWriter) -> None:
    """Wait until the running writer's queue is empty: this API answers at once, so a
    write taken from the queue is sent in that same step. No quiet spell is taken for
    the end: on a busy machine the writer's first step may come later than any such
    spell. Bounded, so a writer that never drains fails the test instead of hanging it."""
    async with asyncio.timeout(30):
        while status._queue:
            await asyncio.sleep(0.001)
