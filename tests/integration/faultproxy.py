"""A fault-injecting TLS proxy between one client and the real API server.

Split-brain bugs show only when one replica's requests hang or fail while another's go
through, which no real API server can be asked to do. This proxy stands between one
replica and the API server: it presents the API server's own certificate (so the
replica's kubeconfig trusts it), passes every request on with its Authorization header
(so the API server, and its audit log, see the replica's own identity) and streams the
answers back (watches are long chunked responses). A test switches faults on and off
while it runs: requests whose path matches a pattern are held until released, or
answered with an error status, optionally after letting the first N through.

A held request is never sent on if its client gives up first: the handler is cancelled
when the client's connection closes, as it is for every request when the proxy closes.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

# Headers about one connection, not the request (RFC 9110 section 7.6.1), and those
# the two sides of the proxy work out for themselves.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def path_pattern(glob: str) -> re.Pattern[str]:
    """`*` stands for one path segment: `/api/v1/namespaces/*/pods/*/binding`."""
    return re.compile("[^/]+".join(re.escape(part) for part in glob.split("*")) + r"\Z")


@dataclass(eq=False)
class Fault:
    """Requests whose path matches `pattern`: the first `after` pass, then each is held
    (`action` "hang") or answered with `action` as its status, until `release`.

    The counters are written by the proxy's thread and read by the test's; `paths`
    counts the matching requests by path, to tell which objects they were about.
    """

    proxy: FaultProxy
    pattern: re.Pattern[str]
    action: int | Literal["hang"]
    after: int
    seen: int = 0
    passed: int = 0
    failed: int = 0
    held: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    # Bound to the proxy's loop when first awaited there, and only set there.
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        """Stop faulting: later requests pass, and held ones are sent on (unless their
        client has gone)."""
        self.proxy.remove(self)


class FaultProxy:
    """Listens on 127.0.0.1 (`url`) and forwards to `upstream`; see the module docstring."""

    def __init__(self, upstream: str, *, ca_file: Path, cert: Path, key: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self._client_tls = ssl.create_default_context(cafile=str(ca_file))
        self._server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_tls.load_cert_chain(cert, key)
        self._server_tls.set_alpn_protocols(["http/1.1"])
        self._faults: list[Fault] = []
        self._handlers: set[asyncio.Task[Any]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def hang(self, glob: str, *, after: int = 0) -> Fault:
        """Hold matching requests (after the first `after`) until released."""
        return self._add(Fault(self, path_pattern(glob), "hang", after))

    def fail(self, glob: str, *, status: int = 500, after: int = 0) -> Fault:
        """Answer matching requests (after the first `after`) with `status`."""
        return self._add(Fault(self, path_pattern(glob), status, after))

    def remove(self, fault: Fault) -> None:
        self._call(self._remove(fault))

    @property
    def in_progress(self) -> int:
        """Requests the proxy is holding, forwarding or answering: none once every
        request it took has been answered or dropped."""
        return len(self._handlers)

    def close(self) -> None:
        """Drop every request in progress (held ones are never sent on) and stop."""
        if self._thread.is_alive():
            self._call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=30)

    def _add(self, fault: Fault) -> Fault:
        self._call(self._append(fault))
        return fault

    async def _append(self, fault: Fault) -> None:
        self._faults.append(fault)

    async def _remove(self, fault: Fault) -> None:
        if fault in self._faults:
            self._faults.remove(fault)
        fault.released.set()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._client_tls),
            # Watches stay open for minutes; compressed answers pass through as sent.
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A handler is cancelled when its client disconnects: a held request whose
        # client has given up (or was killed) must never reach the API server.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._server_tls)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"

    async def _stop(self) -> None:
        for task in list(self._handlers):
            task.cancel()
        for fault in self._faults:
            fault.released.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            fault = next((f for f in self._faults if f.pattern.match(request.path)), None)
            if fault is not None:
                fault.seen += 1
                fault.paths[request.path] += 1
                if fault.seen <= fault.after:
                    fault.passed += 1
                elif fault.action == "hang":
                    fault.held += 1
                    try:
                        await fault.released.wait()
                    finally:
                        fault.held -= 1
                else:
                    fault.failed += 1
                    return _status(fault.action)
            return await self._forward(request)
        finally:
            self._handlers.discard(task)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = CIMultiDict(
            (name, value)
            for name, value in request.headers.items()
            if name.lower() not in _HOP_BY_HOP
        )
        body = await request.read()
        async with self._session.request(
            request.method,
            URL(self.upstream + request.raw_path, encoded=True),
            headers=headers,
            data=body or None,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    response.headers.add(name, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def _status(code: int) -> web.Response:
    """An error as the API server words one, so the client reads it as from the server."""
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"injected by the test's fault proxy (HTTP {code})",
            "reason": "InternalError",
            "code": code,
        },
        status=code,
    )
