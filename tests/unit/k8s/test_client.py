"""The API client against real HTTP servers on loopback: aiohttp.web ones for what the
API server answers, and a few lines of asyncio for what only a misbehaving connection
does (a keep-alive connection closed under a request, a proxy's CONNECT)."""

import asyncio
import itertools
import json
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from batchsched.k8s import protobuf
from batchsched.k8s.client import (
    STREAM_BUFFER,
    TRANSPORT_ERRORS,
    USER_AGENT,
    Api,
    ApiError,
    with_retries,
)
from batchsched.k8s.credentials import Credentials, StaticToken, TokenFile, TokenSource
from batchsched.k8s.fence import Fenced, fenced
from batchsched.k8s.protobuf import PROTOBUF

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def retries(reason: str) -> float:
    value = REGISTRY.get_sample_value("batchsched_api_request_retries_total", {"reason": reason})
    return value or 0.0


def requests(verb: str, code: str) -> float:
    labels = {"verb": verb, "code": code}
    return REGISTRY.get_sample_value("batchsched_api_requests_total", labels) or 0.0


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start an aiohttp.web server answering every path with `handler`; its URL."""
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, *, tls: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        # Handlers still waiting when the client has gone are cancelled, not awaited.
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def closing() -> AsyncIterator[list[Api]]:
    """Clients to close after the test."""
    clients: list[Api] = []
    yield clients
    for api in clients:
        await api.close()


def client(closing: list[Api], server: str, **options: Any) -> Api:
    api = Api(Credentials(server=server, **options))
    closing.append(api)
    return api


@dataclass
class Seen:
    """What a server read: each request's method, path, headers and body."""

    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    async def record(self, request: web.Request) -> None:
        body = await request.read()
        self.requests.append((request.method, request.path_qs, dict(request.headers), body))


async def test_what_is_sent_and_how_answers_are_read(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    seen = Seen()

    async def echo(request: web.Request) -> web.StreamResponse:
        await seen.record(request)
        if request.path.endswith("/list"):
            return web.json_response([1, 2])
        if request.path.endswith("/empty"):
            return web.Response(status=201)
        return web.json_response({"kind": "Pod", "got": request.path_qs})

    # A server behind a proxy may sit under a path, as Rancher's do.
    server = await serve(echo) + "/k8s/clusters/c-1"
    api = client(closing, server, token_source=StaticToken("secret"))
    assert await api.get("/api/v1/pods?limit=2") == {
        "kind": "Pod",
        "got": "/k8s/clusters/c-1/api/v1/pods?limit=2",
    }
    assert await api.post("/api/v1/x/list", {"a": "é"}) == {"value": [1, 2]}
    assert await api.patch("/api/v1/x/empty", {"b": None}) == {}
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    await api.post("/api/v1/namespaces/n/pods/p/binding", binding, content_type=PROTOBUF)

    get, post, patch, bind = seen.requests
    assert get[2]["Authorization"] == "Bearer secret"
    assert get[2]["User-Agent"] == USER_AGENT
    assert get[2]["Accept"] == "application/json"
    assert get[2]["Accept-Encoding"] == "identity"
    assert "Content-Type" not in get[2] and get[3] == b""
    assert post[2]["Content-Type"] == "application/json"
    assert json.loads(post[3]) == {"a": "é"}
    assert post[2]["Content-Length"] == str(len(post[3]))
    assert patch[0] == "PATCH" and patch[2]["Content-Type"] == "application/merge-patch+json"
    assert bind[2]["Content-Type"] == PROTOBUF
    assert bind[3] == protobuf.encode(binding)


async def test_errors_are_read_as_the_api_server_writes_them(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    async def refuse(request: web.Request) -> web.StreamResponse:
        if request.path == "/status":
            status = {"kind": "Status", "reason": "NotFound", "message": 'pods "p" not found'}
            return web.json_response(status, status=404)
        if request.path == "/busy":
            return web.json_response({"kind": "Status", "reason": "TooManyRequests"}, status=429)
        return web.Response(status=404, text="404 page not found\n")

    api = client(closing, await serve(refuse))
    with pytest.raises(ApiError) as raised:
        await api.get("/status")
    assert (raised.value.status, raised.value.reason) == (404, "NotFound")
    assert str(raised.value) == 'GET /status: HTTP 404: pods "p" not found'
    assert not raised.value.transient
    with pytest.raises(ApiError, match="HTTP 404: 404 page not found") as raised:
        await api.get("/apis/unknown.group/v1")
    assert raised.value.reason == ""
    with pytest.raises(ApiError) as raised:
        await api.get("/busy")
    assert raised.value.transient


async def test_a_request_past_its_timeout(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        if request.path == "/slow":
            await asyncio.sleep(30)
        return web.json_response({})

    api = Api(Credentials(server=await serve(slow)), timeout=0.2)
    closing.append(api)
    timeouts = requests("GET", "timeout")
    with pytest.raises(TimeoutError):
        await api.get("/slow")
    assert requests("GET", "timeout") == timeouts + 1
    # The client still answers after a timeout; given time enough that a busy machine
    # cannot make this request time out too.
    api._timeout = aiohttp.ClientTimeout(total=30)
    assert await api.get("/fast") == {}


async def test_a_fenced_write_is_checked_again_as_it_is_sent_and_then_sends_nothing(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    reached: list[str] = []

    async def record(request: web.Request) -> web.StreamResponse:
        # Called on the headers alone: a request cut off before its body shows here too.
        reached.append(request.path)
        await request.read()
        return web.json_response({})

    api = client(closing, await serve(record))
    # A keep-alive connection is ready, as a leader's always is.
    assert await api.get("/warm") == {}
    failed = requests("POST", "connection")
    # Valid at fenced()'s own check, lapsed by the time the bytes would go: a replica
    # paused in between (SIGSTOP, a VM stall) wakes up here.
    lease = iter([5.0, 0.0])
    with pytest.raises(Fenced):
        async with fenced(lambda: next(lease)):
            await api.post("/late", {"kind": "Binding"})
    async with fenced(lambda: 5.0):
        assert await api.post("/on-time", {}) == {}
    assert await api.post("/unfenced", {}) == {}
    assert reached == ["/warm", "/on-time", "/unfenced"]
    assert requests("POST", "connection") == failed


async def test_stream_lines_longer_than_any_buffer(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    # One event of a large object is one line, longer than aiohttp reads at a time.
    long = b"x" * (3 * STREAM_BUFFER)
    events = [b'{"a": 1}', b"", b'{"b": 2}', long, b'{"c": 3}', b'{"d": 4}']

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        body = b"\n".join(events)  # the last line without its newline
        # Pieces that end on, just before and just after a newline, and long ones.
        sizes = itertools.cycle([8, 1, 2, 7, 65_537])
        start = 0
        while start < len(body):
            end = start + next(sizes)
            await response.write(body[start:end])
            await asyncio.sleep(0)  # a chance for the client to read them apart
            start = end
        await response.write_eof()
        return response

    api = client(closing, await serve(watch))
    async with api.stream("/watch", silence=5.0) as reply:
        assert reply.status == 200
        assert [line async for line in reply.lines()] == events


async def test_a_silent_stream_fails(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    async def falls_silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"a": 1}\n')
        await asyncio.sleep(30)
        return response

    api = client(closing, await serve(falls_silent))
    lines = []
    with pytest.raises(TRANSPORT_ERRORS) as raised:
        async with api.stream("/watch", silence=0.3) as reply:
            async for line in reply.lines():
                lines.append(line)
    assert isinstance(raised.value, TimeoutError)
    assert lines == [b'{"a": 1}']


async def test_a_stream_with_an_error_status(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    async def gone(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "reason": "Expired"}, status=410)

    api = client(closing, await serve(gone))
    watches = requests("WATCH", "410")
    with pytest.raises(ApiError, match="WATCH /watch: HTTP 410") as raised:
        async with api.stream("/watch", silence=5.0):
            pass
    assert raised.value.reason == "Expired"
    assert requests("WATCH", "410") == watches + 1


class Rotating(TokenSource):
    """Hands out `tokens` in turn, the next one only when asked `fresh`."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.fresh_asks = 0

    async def token(self, *, fresh: bool = False) -> str:
        if fresh:
            self.fresh_asks += 1
            if len(self.tokens) > 1:
                self.tokens.pop(0)
        return self.tokens[0]


def accepting(token: str, seen: Seen) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        await seen.record(request)
        if request.headers.get("Authorization") != f"Bearer {token}":
            status = {"kind": "Status", "reason": "Unauthorized", "message": "Unauthorized"}
            return web.json_response(status, status=401)
        return web.json_response({"ok": True})

    return handler


async def test_a_refused_token_is_read_again_once_for_all_the_requests_it_failed(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    seen = Seen()
    source = Rotating("revoked", "current")
    api = client(closing, await serve(accepting("current", seen)), token_source=source)
    unauthorized = retries("unauthorized")
    results = await asyncio.gather(*(api.get(f"/{n}") for n in range(5)))
    assert results == [{"ok": True}] * 5
    assert source.fresh_asks == 1
    sent = sorted(headers["Authorization"] for _, _, headers, _ in seen.requests)
    assert sent == ["Bearer current"] * 5 + ["Bearer revoked"] * 5
    assert retries("unauthorized") == unauthorized + 5


async def test_a_token_refused_again_after_reading_it_is_not_sent_again(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    seen = Seen()
    source = Rotating("revoked")
    api = client(closing, await serve(accepting("current", seen)), token_source=source)
    unauthorized = retries("unauthorized")
    with pytest.raises(ApiError, match="HTTP 401"):
        await api.get("/")
    assert (source.fresh_asks, len(seen.requests)) == (1, 1)
    assert retries("unauthorized") == unauthorized


async def test_a_rotated_token_file_is_read_on_a_401(
    serve: Callable[..., Awaitable[str]], closing: list[Api], tmp_path: Path
) -> None:
    seen = Seen()
    (tmp_path / "token").write_text("first\n")
    source = TokenFile(tmp_path / "token", where="test")
    api = client(closing, await serve(accepting("second", seen)), token_source=source)
    with pytest.raises(ApiError, match="HTTP 401"):
        await api.get("/")
    # Rotated well before the client would read the file again on its own.
    (tmp_path / "token").write_text("second\n")
    assert await api.get("/") == {"ok": True}
    sent = [headers["Authorization"] for _, _, headers, _ in seen.requests]
    assert sent == ["Bearer first", "Bearer first", "Bearer second"]

    # A watch refused is not sent again by the client, but its next attempt is renewed.
    (tmp_path / "token").write_text("third\n")
    seen.requests.clear()
    api = client(closing, api.server, token_source=source)
    await api.headers()
    (tmp_path / "token").write_text("second\n")
    with pytest.raises(ApiError, match="HTTP 401"):
        async with api.stream("/watch", silence=5.0):
            pass
    async with api.stream("/watch", silence=5.0) as reply:
        assert await reply.read() == b'{"ok": true}'
    sent = [headers["Authorization"] for _, _, headers, _ in seen.requests]
    assert sent == ["Bearer third", "Bearer second"]


@dataclass
class Connection:
    """One connection a raw server accepted, and the requests read on it."""

    requests: list[bytes] = field(default_factory=list)


@dataclass
class RawServer:
    """HTTP/1.1 by hand, for what aiohttp.web would never do: each connection answers
    `answers` requests with `{}` and then closes the next one without a byte."""

    answers: int
    connections: list[Connection] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection()
        self.connections.append(connection)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.partition(b":")[2])
                await reader.readexactly(length)
                connection.requests.append(head.partition(b" HTTP/1.1")[0])
                if len(connection.requests) > self.answers:
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\n\r\n{}"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def raw() -> AsyncIterator[Callable[[int], Awaitable[tuple[RawServer, str]]]]:
    listeners: list[asyncio.Server] = []

    async def start(answers: int) -> tuple[RawServer, str]:
        server = RawServer(answers)
        listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        listeners.append(listener)
        return server, f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"

    yield start
    for listener in listeners:
        listener.close()


async def test_a_read_sent_again_on_a_stale_keep_alive_connection_is_counted(
    raw: Callable[[int], Awaitable[tuple[RawServer, str]]], closing: list[Api]
) -> None:
    server, url = await raw(1)
    api = client(closing, url)
    stale = retries("stale_connection")
    assert await api.get("/first") == {}
    assert await api.get("/second") == {}
    assert [c.requests for c in server.connections] == [
        [b"GET /first", b"GET /second"],
        [b"GET /second"],
    ]
    assert retries("stale_connection") == stale + 1


async def test_a_write_on_a_stale_connection_fails_counted_and_is_retried_by_the_caller(
    raw: Callable[[int], Awaitable[tuple[RawServer, str]]], closing: list[Api]
) -> None:
    server, url = await raw(1)
    api = client(closing, url)
    failed, retried = requests("POST", "connection"), retries("connection")
    assert await api.post("/first", {}) == {}
    # Not sent again by the transport: a POST may have been acted on.
    with pytest.raises(TRANSPORT_ERRORS):
        await api.post("/second", {})
    assert requests("POST", "connection") == failed + 1
    # The next connection fails its second request too, which with_retries sends again.
    assert await api.post("/third", {}) == {}
    assert await with_retries(lambda: api.post("/fourth", {}), seconds=30) == {}
    assert retries("connection") == retried + 1
    assert [c.requests for c in server.connections] == [
        [b"POST /first", b"POST /second"],
        [b"POST /third", b"POST /fourth"],
        [b"POST /fourth"],
    ]


async def test_a_closed_client_refuses_requests(
    serve: Callable[..., Awaitable[str]], closing: list[Api]
) -> None:
    async def ok(request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    api = client(closing, await serve(ok))
    assert await api.get("/") == {}
    await api.close()
    with pytest.raises(TRANSPORT_ERRORS, match="the client is closed"):
        await api.get("/")


@dataclass
class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), to any host name's port on loopback,
    counting the tunnels it opened."""

    tunnels: list[str] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.decode().split(" ", 2)
        assert method == "CONNECT", head
        self.tunnels.append(target)
        port = int(target.rpartition(":")[2])
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(
            _pipe(reader, upstream_writer), _pipe(upstream_reader, writer), return_exceptions=True
        )


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65_536):
            sink.write(data)
            await sink.drain()
    finally:
        sink.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed serving certificate for k8s.test and 127.0.0.1, and its key."""
    work = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=k8s.test",
         "-addext", "subjectAltName=DNS:k8s.test,IP:127.0.0.1",
         "-keyout", str(work / "key.pem"), "-out", str(work / "cert.pem")],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return work / "cert.pem", work / "key.pem"


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[ConnectProxy, str]]:
    tunnels = ConnectProxy()
    listener = await asyncio.start_server(tunnels.serve, "127.0.0.1", 0)
    yield tunnels, f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    listener.close()


async def test_requests_go_through_the_environments_proxy_unless_exempt(
    serve: Callable[..., Awaitable[str]],
    closing: list[Api],
    certificate: tuple[Path, Path],
    proxy: tuple[ConnectProxy, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(*certificate)

    async def ok(request: web.Request) -> web.StreamResponse:
        return web.json_response({"host": request.host})

    direct = await serve(ok, tls=tls)
    port = direct.rpartition(":")[2]
    tunnels, proxy_url = proxy
    monkeypatch.setenv("HTTPS_PROXY", proxy_url)
    # k8s.test resolves nowhere: only the proxy can reach it.
    api = client(closing, f"https://k8s.test:{port}", ca=certificate[0])
    for _ in range(3):
        assert await api.get("/") == {"host": f"k8s.test:{port}"}
    assert tunnels.tunnels == [f"k8s.test:{port}"]  # one tunnel, kept alive

    # Loopback addresses are never proxied, as in Go.
    api = client(closing, direct, ca=certificate[0])
    assert await api.get("/") == {"host": f"127.0.0.1:{port}"}
    assert len(tunnels.tunnels) == 1


async def test_the_kubeconfigs_proxy_url_is_used_for_requests_and_streams(
    serve: Callable[..., Awaitable[str]],
    closing: list[Api],
    certificate: tuple[Path, Path],
    proxy: tuple[ConnectProxy, str],
) -> None:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(*certificate)

    async def ok(request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    port = (await serve(ok, tls=tls)).rpartition(":")[2]
    tunnels, proxy_url = proxy
    server = f"https://k8s.test:{port}"
    api = client(closing, server, ca=certificate[0], proxy_url=proxy_url)
    assert await api.get("/") == {}
    async with api.stream("/watch", silence=5.0) as reply:
        assert await reply.read() == b"{}"
    assert tunnels.tunnels == [f"k8s.test:{port}"] * 2
