import asyncio
import os
import signal
import socket
from collections.abc import Callable

import pytest

from batchsched.k8s.forked import NICENESS, ForkedFailure, run_forked

Send = Callable[[object], None]


async def test_messages_arrive_in_order_before_the_result() -> None:
    def work(send: Send) -> dict[str, int]:
        for i in range(3):
            send(("job", i))
        return {"pid": os.getpid()}

    heard: list[object] = []
    finished = await run_forked(work, on_message=heard.append)
    assert heard == [("job", 0), ("job", 1), ("job", 2)]
    assert finished.result["pid"] != os.getpid(), "it ran in another process"
    assert finished.peak_rss_bytes > 1_000_000


async def test_large_messages_cross_the_pipe_whole() -> None:
    big = "x" * 5_000_000  # beyond any pipe buffer

    def work(send: Send) -> int:
        send(big)
        return len(big)

    heard: list[object] = []
    finished = await run_forked(work, on_message=heard.append)
    assert heard == [big]
    assert finished.result == len(big)


async def test_the_child_runs_at_a_lower_priority() -> None:
    finished = await run_forked(lambda send: os.nice(0), on_message=print)
    assert finished.result == min(os.nice(0) + NICENESS, 19)  # Linux stops at 19


async def test_the_child_keeps_no_inherited_descriptor_but_its_pipe() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        fd = listening.fileno()

        def still_open(send: Send) -> bool:
            try:
                os.fstat(fd)
            except OSError:
                return False
            return True

        assert not (await run_forked(still_open, on_message=print)).result


async def test_an_error_in_the_child_comes_back_with_its_traceback() -> None:
    def work(send: Send) -> None:
        send("before")
        raise ValueError("no such plugin")

    heard: list[object] = []
    with pytest.raises(ForkedFailure, match=r"(?s)Traceback.*ValueError: no such plugin"):
        await run_forked(work, on_message=heard.append)
    assert heard == ["before"]


async def test_a_child_that_dies_is_named_with_how() -> None:
    def work(send: Send) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(ForkedFailure, match="was killed by SIGKILL before it finished"):
        await run_forked(work, on_message=print)


async def test_an_error_handling_a_message_kills_the_child() -> None:
    pids: list[int] = []

    def work(send: Send) -> None:
        send(os.getpid())
        send("refused")
        signal.pause()  # until killed

    def hear(message: object) -> None:
        if message == "refused":
            raise RuntimeError("cannot accept this")
        assert isinstance(message, int)
        pids.append(message)

    with pytest.raises(RuntimeError, match="cannot accept this"):
        await asyncio.wait_for(run_forked(work, on_message=hear), 60)
    with pytest.raises(ChildProcessError):  # killed and reaped: no longer our child
        os.waitpid(pids[0], os.WNOHANG)


async def test_cancelling_kills_the_child() -> None:
    pids: list[int] = []

    def work(send: Send) -> None:
        send(os.getpid())
        signal.pause()

    def hear(message: object) -> None:
        assert isinstance(message, int)
        pids.append(message)

    task = asyncio.create_task(run_forked(work, on_message=hear))
    async with asyncio.timeout(60):
        while not pids:
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)
