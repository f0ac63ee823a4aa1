"""The /metrics, /healthz and /readyz server, spoken to over raw sockets on loopback."""

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from batchsched.k8s.endpoints import Endpoints, serve

Reply = tuple[int, dict[str, str], bytes]


class Client:
    """One connection, reading each response by its Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, endpoints: Endpoints) -> "Client":
        return cls(*await asyncio.open_connection("127.0.0.1", endpoints.port))

    async def send(self, request: bytes, *, head_only: bool = False) -> Reply:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        fields = dict(line.split(": ", 1) for line in lines[1:-2])
        length = 0 if head_only else int(fields["Content-Length"])
        return int(lines[0].split(" ")[1]), fields, await self.reader.readexactly(length)

    async def get(self, path: str, *fields: str) -> Reply:
        extra = "".join(f"{field}\r\n" for field in fields)
        return await self.send(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())

    async def closed_by_server(self) -> bool:
        return await asyncio.wait_for(self.reader.read(), 1.0) == b""

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def ready() -> list[bool]:
    return [False]


@pytest.fixture
async def endpoints(ready: list[bool]) -> AsyncIterator[Endpoints]:
    server = await serve(0, ready=lambda: ready[0], host="127.0.0.1")
    yield server
    await asyncio.wait_for(server.close(), 2.0)


async def test_probes_and_metrics_on_one_kept_alive_connection(
    endpoints: Endpoints, ready: list[bool]
) -> None:
    client = await Client.open(endpoints)
    assert (await client.get("/healthz"))[::2] == (200, b"ok")
    assert (await client.get("/readyz"))[::2] == (503, b"waiting for the cache to sync")
    ready[0] = True
    assert (await client.get("/readyz?verbose"))[::2] == (200, b"ok")
    status, fields, body = await client.get("/metrics")
    assert status == 200
    assert fields["Content-Type"] == CONTENT_TYPE_LATEST
    assert b"\n# TYPE python_gc_objects_collected_total counter\n" in body
    client.close()


async def test_unknown_paths_and_methods(endpoints: Endpoints) -> None:
    client = await Client.open(endpoints)
    assert (await client.get("/"))[::2] == (404, b"not found")
    status, fields, _ = await client.send(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, fields["Allow"]) == (405, "GET, HEAD")
    assert (await client.get("/healthz"))[0] == 200  # still the same connection
    client.close()


async def test_head_has_no_body(endpoints: Endpoints) -> None:
    client = await Client.open(endpoints)
    status, fields, _ = await client.send(b"HEAD /healthz HTTP/1.1\r\n\r\n", head_only=True)
    assert (status, fields["Content-Length"]) == (200, "2")
    assert (await client.get("/healthz"))[::2] == (200, b"ok")
    client.close()


@pytest.mark.parametrize(
    "request_",
    [
        b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    ],
)
async def test_connections_closed_when_asked_or_when_a_body_came(
    endpoints: Endpoints, request_: bytes
) -> None:
    client = await Client.open(endpoints)
    status, fields, _ = await client.send(request_)
    assert (status, fields["Connection"]) == (200, "close")
    assert await client.closed_by_server()
    client.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        b"GET /healthz\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost : example\r\n\r\n",
        b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n",
    ],
)
async def test_garbage_is_refused_and_the_server_goes_on(
    endpoints: Endpoints, garbage: bytes
) -> None:
    bad = await Client.open(endpoints)
    assert (await bad.send(garbage))[0] == 400
    assert await bad.closed_by_server()
    bad.close()
    good = await Client.open(endpoints)
    assert (await good.get("/healthz"))[0] == 200
    good.close()


async def test_clients_that_hang_up_midway_do_no_harm(endpoints: Endpoints) -> None:
    for partial in (b"", b"GET /hea", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"):
        client = await Client.open(endpoints)
        client.writer.write(partial)
        await client.writer.drain()
        client.close()
    client = await Client.open(endpoints)
    assert (await client.get("/healthz"))[0] == 200
    client.close()


async def test_close_drops_kept_alive_connections(ready: list[bool]) -> None:
    endpoints = await serve(0, ready=lambda: True, host="127.0.0.1")
    client = await Client.open(endpoints)
    assert (await client.get("/healthz"))[0] == 200
    await asyncio.wait_for(endpoints.close(), 1.0)
    assert await client.closed_by_server()
    client.close()
