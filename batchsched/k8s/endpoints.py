"""/metrics, /healthz and /readyz on one port, served from the operator's event loop.

Serving them from the loop that runs sessions and watches makes /healthz an honest
liveness probe: if the loop ever stalls, the probe times out. /readyz turns ready once
the cache has seen the whole cluster, on standby replicas too, so both replicas of a
Deployment are scraped and neither is restarted for merely waiting on the lease.

Three fixed answers need little of HTTP/1.1: GET and HEAD, no request bodies, keep-alive
for Prometheus, which holds its connection open between scrapes. A client that sends
anything else is told so (400, 405) or dropped; no client can stop the server.
"""

import asyncio
import logging
import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from batchsched.k8s.http import ProtocolError, header_fields

log = logging.getLogger(__name__)

# A request's head longer than this is not from a probe or a scraper.
HEAD_LIMIT = 16 * 1024
# A keep-alive connection idle for longer is closed; a scraper then opens another one.
IDLE_SECONDS = 120.0
TEXT = "text/plain; charset=utf-8"
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}

Answer = tuple[int, str, bytes]


class Endpoints:
    """The server's state; `serve` starts it, `close` stops it and drops its clients."""

    listener: asyncio.Server

    def __init__(self, ready: Callable[[], bool]) -> None:
        self._ready = ready
        self._routes: dict[str, Callable[[], Answer]] = {
            "/metrics": self._metrics,
            "/healthz": lambda: (200, TEXT, b"ok"),
            "/readyz": self._readyz,
        }
        # Each connection's task, and its writer to close it by.
        self._clients: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    @property
    def port(self) -> int:
        return int(self.listener.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and close every connection. Closing the sockets, not
        cancelling the tasks, ends them: Python 3.11's streams log a cancelled one."""
        self.listener.close()
        for writer in self._clients.values():
            writer.close()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self.listener.wait_closed()

    def _metrics(self) -> Answer:
        return 200, CONTENT_TYPE_LATEST, generate_latest(REGISTRY)

    def _readyz(self) -> Answer:
        if self._ready():
            return 200, TEXT, b"ok"
        return 503, TEXT, b"waiting for the cache to sync"

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection's requests until it closes, idles or misbehaves."""
        task = asyncio.current_task()
        assert task is not None
        self._clients[task] = writer
        try:
            while await self._answer(reader, writer):
                pass
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or fell silent
        except Exception:
            log.exception("answering %s", writer.get_extra_info("peername"))
        finally:
            del self._clients[task]
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False when the connection is to be closed."""
        try:
            async with asyncio.timeout(IDLE_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            await _send(writer, (400, TEXT, b"request head too long"), head=False, keep=False)
            return False
        request = _parse(head)
        if request is None:
            await _send(writer, (400, TEXT, b"malformed request"), head=False, keep=False)
            return False
        method, target, version, fields = request
        connection = fields.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        # A body would have to be read past; none of the endpoints takes one.
        if fields.get("content-length", "0") != "0" or "transfer-encoding" in fields:
            keep = False
        route = self._routes.get(target.partition("?")[0])
        if route is None:
            answer: Answer = (404, TEXT, b"not found")
        elif method not in ("GET", "HEAD"):
            answer = (405, TEXT, b"only GET and HEAD")
        else:
            answer = route()
        await _send(writer, answer, head=method == "HEAD", keep=keep)
        return keep


def _parse(head: bytes) -> tuple[str, str, str, dict[str, str]] | None:
    """(method, target, version, fields by lower-case name); None if malformed."""
    lines = head.decode("latin-1").split("\r\n")
    request = lines[0].split(" ")
    if len(request) != 3 or not request[2].startswith("HTTP/1."):
        return None
    try:
        fields = header_fields(lines[1:-2])  # the head ends with an empty line and its CRLF
    except ProtocolError:
        return None
    method, target, version = request
    return method, target, version, fields


async def _send(writer: asyncio.StreamWriter, answer: Answer, *, head: bool, keep: bool) -> None:
    status, content_type, body = answer
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
    fields = [
        f"HTTP/1.1 {status} {REASONS[status]}",
        f"Date: {date}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
    ]
    if status == 405:
        fields.append("Allow: GET, HEAD")
    if not keep:
        fields.append("Connection: close")
    fields.append("\r\n")
    writer.write("\r\n".join(fields).encode() + (b"" if head else body))
    await writer.drain()


async def serve(port: int, *, ready: Callable[[], bool], host: str | None = None) -> Endpoints:
    """Start serving on `host`, by default all interfaces; the caller closes the
    returned server. With `port` 0 the system picks one: give a host then, as each
    interface would get a port of its own."""
    endpoints = Endpoints(ready)
    endpoints.listener = await asyncio.start_server(endpoints.client, host, port, limit=HEAD_LIMIT)
    return endpoints
