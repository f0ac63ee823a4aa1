"""Running work in a forked child process, its messages streamed back as it goes.

Sessions run this way (loop.py). A session is pure computation on a snapshot the
operator already holds. A child made by fork starts with that snapshot in its memory,
shared copy-on-write, so nothing is serialized on the way in; only what the session
decides travels back through a pipe, each job's bindings the moment they are final.

Why not a thread: a thread shares the GIL with the event loop, which then waits up to a
switch interval every time it wakes while a session runs; watches, binds in flight and
the lease all slow down for as long as the session lasts, seconds on a large cluster.

Why a lower CPU priority (niceness +10): on a busy machine the CPU a session takes comes
out of the event loop's binding and, where the API server shares the cores, out of the
API server's. Binds already decided are worth more than the next decisions, which the
binder could not send any sooner anyway. The child still gets whatever CPU is idle.

The cost is a fork per session and a copy of each page the child touches; the
measurements behind the choice are in docs/benchmarks.md.

The child keeps none of the descriptors it inherits but its end of the pipe (a child
outliving a killed operator must not hold its listening port), leaves the operator's
signal handling alone, does not collect garbage (a collection would touch, and so copy,
the parent's objects; the child is short-lived), and leaves through os._exit, so nothing
of the parent's (asyncio, atexit handlers, buffered output) runs twice. A failure in
the child comes back as ForkedFailure with its traceback; a child that dies is named
with how it died. Cancelling the caller kills the child. This needs fork: Linux, as in
the operator's image.
"""

import asyncio
import contextlib
import gc
import os
import pickle
import signal
import struct
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Generic, NoReturn, TypeVar

M = TypeVar("M")
R = TypeVar("R")

NICENESS = 10
# Each frame: its length, then a pickled (kind, payload).
HEADER = struct.Struct("<Q")
MESSAGE, RESULT, FAILED = range(3)


class ForkedFailure(Exception):
    """The work raised in the child, or the child died before it finished."""


@dataclass(frozen=True)
class Finished(Generic[R]):
    result: R
    # The child's peak resident memory, pages it shared with the parent included.
    peak_rss_bytes: int


async def run_forked(
    work: Callable[[Callable[[M], None]], R],
    *,
    on_message: Callable[[M], None],
    niceness: int = NICENESS,
) -> Finished[R]:
    """`work(send)` in a child process; each `send(message)` there is `on_message(message)`
    here, in order, before the result returns. Both must pickle."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(work, write_end, niceness)
    os.close(write_end)
    reader = asyncio.StreamReader()
    pipe = os.fdopen(read_end, "rb", buffering=0)  # the transport closes it
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    reaped = False
    try:
        while True:
            try:
                size = HEADER.unpack(await reader.readexactly(HEADER.size))[0]
                kind, payload = pickle.loads(await reader.readexactly(size))
            except asyncio.IncompleteReadError:
                status, _ = _reap(pid)
                reaped = True
                message = f"the child process {_ended(status)} before it finished"
                raise ForkedFailure(message) from None
            if kind == MESSAGE:
                on_message(payload)
            elif kind == FAILED:
                raise ForkedFailure(f"the child process failed:\n{payload}")
            else:
                break
        await reader.read()  # its end of the pipe closes as it exits
        _, peak = _reap(pid)
        reaped = True
        return Finished(payload, peak)
    finally:
        transport.close()
        if not reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)


def _child(work: Callable[[Callable[[Any], None]], object], fd: int, niceness: int) -> NoReturn:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        gc.disable()
        os.nice(niceness)
        with os.fdopen(fd, "wb") as out:
            try:
                result = work(lambda message: _send(out, MESSAGE, message))
            except Exception:
                _send(out, FAILED, traceback.format_exc())
            else:
                _send(out, RESULT, result)
                code = 0
    finally:
        os._exit(code)


def _send(out: BinaryIO, kind: int, payload: object) -> None:
    data = pickle.dumps((kind, payload), pickle.HIGHEST_PROTOCOL)
    out.write(HEADER.pack(len(data)) + data)
    out.flush()


def _reap(pid: int) -> tuple[int, int]:
    """Wait for the child (it has exited or been killed); its status and peak RSS."""
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_maxrss * 1024  # Linux counts kilobytes


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"
