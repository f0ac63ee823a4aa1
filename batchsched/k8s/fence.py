"""Fencing: a write leaves this replica only while it can prove it holds the lease.

Every writer wraps each attempt in `fenced(valid_for)` (`LeaderElection.valid_for`, or
`unbounded` without leader election). It is checked twice: on entry, and once more by
the client just before the request's bytes are handed to the socket (`guard`). The
second check is what stops a replica paused between the two (SIGSTOP, a VM stalled, a
long step of its event loop): on waking, the part of a request already queued to be
written would go out before the timeout's callback could cancel it.
"""

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar


class Fenced(Exception):
    """This replica can no longer prove that it holds the lease: nothing more is sent."""


# The lease check of the write this task is sending, if it is fenced.
_VALID_FOR: ContextVar[Callable[[], float] | None] = ContextVar("valid_for", default=None)


@contextlib.asynccontextmanager
async def fenced(valid_for: Callable[[], float]) -> AsyncIterator[None]:
    """Around one write: refused outright once the lease is not provably ours, and cut
    off (TimeoutError) when the renew deadline comes while it is still on its way."""
    valid = valid_for()
    if valid <= 0:
        raise Fenced
    token = _VALID_FOR.set(valid_for)
    try:
        async with asyncio.timeout(None if math.isinf(valid) else valid):
            yield
    finally:
        _VALID_FOR.reset(token)


def guard() -> Callable[[], None] | None:
    """For the client: what to call just before the current write's bytes go out, or
    None when the write is not fenced."""
    valid_for = _VALID_FOR.get()
    if valid_for is None:
        return None

    def check() -> None:
        if valid_for() <= 0:
            raise Fenced

    return check


def unbounded() -> float:
    """`valid_for` of a replica that runs without leader election: it may always write."""
    return math.inf
