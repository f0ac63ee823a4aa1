"""The HTTP client against a real server on loopback, scripted per test: framing,
connection reuse and its limit, the one retry, timeouts, streams and bad answers."""

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from batchsched.k8s.http import (
    ConnectFailed,
    ConnectionClosed,
    Pool,
    ProtocolError,
    header_fields,
)


@dataclass
class Exchange:
    """One request as the server read it, and the means to answer it."""

    connection: int  # which connection, counted from 0 in the order they were accepted
    head: bytes
    body: bytes
    writer: asyncio.StreamWriter

    async def send(self, *parts: bytes, pause: float = 0.0) -> None:
        """Write each part separately, so that the client reads them in turn."""
        for part in parts:
            self.writer.write(part)
            await self.writer.drain()
            if pause:
                await asyncio.sleep(pause)


# What the server does with a request: answer (or not); False closes the connection.
Script = Callable[[Exchange], Awaitable[bool]]


def ok(body: bytes, *fields: str) -> bytes:
    head = "".join(f"{f}\r\n" for f in fields)
    return f"HTTP/1.1 200 OK\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def answer_ok(exchange: Exchange) -> bool:
    await exchange.send(ok(b"hello", "Content-Type: text/plain"))
    return True


@dataclass
class Server:
    script: Script
    requests: list[Exchange] = field(default_factory=list)
    readers: list[asyncio.StreamReader] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0

    @property
    def connections(self) -> int:
        return len(self.readers)

    @property
    def ended(self) -> set[int]:
        """The connections the client has closed (or reset)."""
        return {
            index
            for index, reader in enumerate(self.readers)
            if reader.at_eof() or reader.exception() is not None
        }

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.readers.append(reader)
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.partition(b":")[2])
                exchange = Exchange(index, head, await reader.readexactly(length), writer)
                self.requests.append(exchange)
                if not await self.script(exchange):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection
        finally:
            self.open_now -= 1
            writer.close()


Serve = Callable[[Script], Awaitable[tuple[Server, Pool]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a scripted server and a pool to it; both are closed after the test."""
    started: list[tuple[asyncio.Server, Pool]] = []

    async def start(script: Script) -> tuple[Server, Pool]:
        server = Server(script)
        listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        pool = Pool("127.0.0.1", port, tls=None, limit=4)
        started.append((listener, pool))
        return server, pool

    yield start
    for listener, pool in started:
        await pool.close()
        listener.close()


async def until(condition: Callable[[], bool]) -> None:
    """Wait for something the other end of a socket does."""
    async with asyncio.timeout(2.0):
        while not condition():
            await asyncio.sleep(0.01)


async def get(pool: Pool, target: str = "/", *, timeout: float = 5.0) -> tuple[int, bytes]:
    response = await pool.request("GET", target, {"Accept": "*/*"}, timeout=timeout)
    return response.status, response.body


async def test_content_length_body_and_what_is_sent(serve: Serve) -> None:
    server, pool = await serve(answer_ok)
    response = await pool.request("POST", "/a?b=c", {"X-Test": "1"}, b'{"k": "v"}', timeout=5.0)
    assert (response.status, response.body) == (200, b"hello")
    assert response.headers == {"content-type": "text/plain", "content-length": "5"}
    [exchange] = server.requests
    assert exchange.head.startswith(b"POST /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nX-Test: 1\r\nContent-Length: 10\r\n\r\n" in exchange.head
    assert exchange.body == b'{"k": "v"}'


async def test_chunked_body_arriving_in_pieces(serve: Serve) -> None:
    async def chunked(exchange: Exchange) -> bool:
        await exchange.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwi",
            b"ki\r\n5;ext=1\r\npedia\r",
            b"\n0\r\nTrailer: x\r\n",
            b"\r\n",
            pause=0.01,
        )
        return True

    server, pool = await serve(chunked)
    assert await get(pool) == (200, b"wikipedia")
    assert await get(pool) == (200, b"wikipedia")
    assert server.connections == 1  # the chunked framing ended exactly where it should


async def test_body_until_close(serve: Serve) -> None:
    async def unframed(exchange: Exchange) -> bool:
        await exchange.send(b"HTTP/1.1 200 OK\r\n\r\npart one, ", b"part two", pause=0.01)
        return False

    server, pool = await serve(unframed)
    assert await get(pool) == (200, b"part one, part two")
    assert await get(pool) == (200, b"part one, part two")
    assert server.connections == 2


async def test_sequential_requests_share_one_connection(serve: Serve) -> None:
    server, pool = await serve(answer_ok)
    for _ in range(5):
        assert await get(pool) == (200, b"hello")
    assert server.connections == 1


async def test_no_more_connections_than_the_limit(serve: Serve) -> None:
    async def slow(exchange: Exchange) -> bool:
        await asyncio.sleep(0.02)
        return await answer_ok(exchange)

    server, pool = await serve(slow)
    results = await asyncio.gather(*(get(pool) for _ in range(20)))
    assert results == [(200, b"hello")] * 20
    assert server.connections == server.most_open == 4


async def test_waiting_for_a_connection_counts_against_the_timeout(serve: Serve) -> None:
    async def stuck(exchange: Exchange) -> bool:
        await asyncio.sleep(10)
        return False

    server, pool = await serve(stuck)
    busy = [asyncio.create_task(get(pool)) for _ in range(4)]
    await until(lambda: len(server.requests) == 4)
    with pytest.raises(TimeoutError, match="all 4 connections busy"):
        await get(pool, timeout=0.1)
    for task in busy:
        task.cancel()
    await asyncio.gather(*busy, return_exceptions=True)


async def test_connection_close_from_the_server(serve: Serve) -> None:
    async def closing(exchange: Exchange) -> bool:
        await exchange.send(ok(b"bye", "Connection: close"))
        return True  # the client must not wait for the server to close it

    server, pool = await serve(closing)
    assert await get(pool) == (200, b"bye")
    assert await get(pool) == (200, b"bye")
    assert server.connections == 2
    assert 0 in server.ended


async def test_retried_once_when_a_reused_connection_was_closed(serve: Serve) -> None:
    async def drops_second(exchange: Exchange) -> bool:
        if len(server.requests) == 2:
            return False  # read the request, close without a byte of answer
        return await answer_ok(exchange)

    server, pool = await serve(drops_second)
    assert await get(pool) == (200, b"hello")
    assert await get(pool, "/again") == (200, b"hello")
    assert [e.connection for e in server.requests] == [0, 0, 1]
    assert server.requests[2].head.startswith(b"GET /again ")


async def test_not_retried_once_the_answer_had_started(serve: Serve) -> None:
    async def cut_short(exchange: Exchange) -> bool:
        if len(server.requests) == 1:
            return await answer_ok(exchange)
        await exchange.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        return False

    server, pool = await serve(cut_short)
    await get(pool)
    with pytest.raises(ConnectionClosed, match="before the response was complete"):
        await get(pool)
    assert len(server.requests) == 2


async def test_not_retried_on_a_new_connection(serve: Serve) -> None:
    async def hang_up(exchange: Exchange) -> bool:
        return False

    server, pool = await serve(hang_up)
    with pytest.raises(ConnectionClosed, match="before any response"):
        await get(pool)
    assert len(server.requests) == 1


async def test_timeout_closes_the_connection(serve: Serve) -> None:
    async def first_never_answered(exchange: Exchange) -> bool:
        if len(server.requests) == 1:
            await asyncio.sleep(10)
        return await answer_ok(exchange)

    server, pool = await serve(first_never_answered)
    with pytest.raises(TimeoutError):
        await get(pool, timeout=0.1)
    assert await get(pool) == (200, b"hello")
    assert [e.connection for e in server.requests] == [0, 1]
    await until(lambda: 0 in server.ended)


async def test_cancelled_request_closes_the_connection(serve: Serve) -> None:
    async def slow_first(exchange: Exchange) -> bool:
        if len(server.requests) == 1:
            await asyncio.sleep(10)
        return await answer_ok(exchange)

    server, pool = await serve(slow_first)
    task = asyncio.create_task(get(pool))
    await until(lambda: len(server.requests) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await get(pool) == (200, b"hello")
    assert [e.connection for e in server.requests] == [0, 1]


async def test_stream_yields_the_body_as_it_arrives(serve: Serve) -> None:
    async def events(exchange: Exchange) -> bool:
        await exchange.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b'9\r\n{"a": 1}\n\r\n',
            b'6\r\n{"b": \r\n',
            b"3\r\n2}\n\r\n0\r\n\r\n",
            pause=0.01,
        )
        return True

    server, pool = await serve(events)
    async with pool.stream("GET", "/watch", {}, silence=1.0) as reply:
        assert reply.status == 200
        lines = [line async for line in reply.lines()]
    assert lines == [b'{"a": 1}', b'{"b": 2}']
    await until(lambda: server.ended == {0})  # closed once read, not kept for reuse


async def test_stream_fails_after_silence(serve: Serve) -> None:
    async def falls_silent(exchange: Exchange) -> bool:
        await exchange.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab\n\r\n")
        await asyncio.sleep(10)
        return False

    server, pool = await serve(falls_silent)
    chunks = []
    with pytest.raises(TimeoutError, match=r"nothing received for 0\.2 s"):
        async with pool.stream("GET", "/watch", {}, silence=0.2) as reply:
            async for chunk in reply:
                chunks.append(chunk)
    assert chunks == [b"ab\n"]
    await until(lambda: server.ended == {0})


async def test_abandoned_stream_closes_its_connection(serve: Serve) -> None:
    async def endless(exchange: Exchange) -> bool:
        await exchange.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while True:
            await exchange.send(b"2\r\nx\n\r\n", pause=0.01)

    server, pool = await serve(endless)
    async with pool.stream("GET", "/watch", {}, silence=1.0) as reply:
        async for _ in reply:
            break
    await until(lambda: server.ended == {0})


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 abc\r\n\r\n", "malformed status line 'HTTP/1.1 abc'"),
        (b"SMTP ready\r\n\r\n", "malformed status line 'SMTP ready'"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "malformed header line 'no colon'"),
        (b"HTTP/1.1 200 OK\r\nServer :x\r\n\r\n", "malformed header line 'Server :x'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length '-1'"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"),
    ],
)
async def test_malformed_answers(serve: Serve, answer: bytes, error: str) -> None:
    async def garbage(exchange: Exchange) -> bool:
        await exchange.send(answer)
        await asyncio.sleep(10)
        return False

    _, pool = await serve(garbage)
    with pytest.raises(ProtocolError, match=error):
        await get(pool)


def test_header_fields_are_named_in_lower_case_and_repeated_ones_joined() -> None:
    lines = ["Content-Type: text/plain", "Warning:\t299 - a ", "warning: 299 - b", "X-Empty:"]
    assert header_fields(lines) == {
        "content-type": "text/plain",
        "warning": "299 - a, 299 - b",
        "x-empty": "",
    }


async def test_nothing_listening() -> None:
    with socket.socket() as bound:  # bound, not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        pool = Pool("127.0.0.1", port, tls=None)
        with pytest.raises(ConnectFailed, match=f"cannot connect to 127.0.0.1:{port}"):
            await get(pool)
        await pool.close()


async def test_closed_pool_refuses_requests(serve: Serve) -> None:
    _, pool = await serve(answer_ok)
    await get(pool)
    await pool.close()
    with pytest.raises(ConnectionClosed, match="the client is closed"):
        await get(pool)


async def test_connections_the_server_closed_while_idle_are_not_used(serve: Serve) -> None:
    async def one_each(exchange: Exchange) -> bool:
        await answer_ok(exchange)
        return False  # closes the connection, without saying so beforehand

    server, pool = await serve(one_each)
    for _ in range(6):  # more than the limit: each closed connection gives its slot back
        assert await get(pool) == (200, b"hello")
        await asyncio.sleep(0.02)
    assert [e.connection for e in server.requests] == [0, 1, 2, 3, 4, 5]
