"""HTTP/1.1 to one server over asyncio, with the standard library only: pooled keep-alive
connections for requests, and a dedicated connection per streamed response (a watch).

Why our own: the general-purpose client batchsched used before took about 110 ms of the
operator's start to import, and about 0.2 ms of CPU per request, which on a small
machine the API server itself is short of. batchsched needs a small part of HTTP: one
origin, bodies it frames itself, responses framed by Content-Length or chunked.
Connections are `asyncio.Protocol`s: the parser runs in the transport's callbacks,
where a stream reader would cost a task switch and a buffer copy per read.
"""

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from functools import partial

# A response head larger than this is not one the API server would send.
HEAD_LIMIT = 64 * 1024
# A stream whose reader has this much unread stops reading from the socket, so that a
# busy reader makes the server wait (or drop a watch) instead of growing our memory.
STREAM_BUFFER = 4 * 1024 * 1024

# Where a connection is in the response it is reading.
_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE = range(8)


class TransportError(ConnectionError):
    """The exchange failed below HTTP; like a 5xx answer, worth trying again."""


class ConnectFailed(TransportError):
    """No connection could be opened (refused, unreachable, the name does not resolve)."""


class ConnectionClosed(TransportError):
    """The connection ended (closed, reset) before the response was complete."""


class ProtocolError(TransportError):
    """A message that is not HTTP/1.1 (a response, or a request to our endpoints);
    the error says what is wrong with it."""


def header_fields(lines: Iterable[str]) -> dict[str, str]:
    """A message's header fields by lower-case name, a repeated field's values joined
    with commas (RFC 9110, 5.3). Whitespace before the colon is refused, not trimmed:
    RFC 9112 (5.1) forbids it because proxies have read such lines differently.
    """
    fields: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name or name[0] in " \t" or name[-1] in " \t":
            raise ProtocolError(f"malformed header line {line[:100]!r}")
        name = name.lower()
        value = value.strip(" \t")
        fields[name] = f"{fields[name]}, {value}" if name in fields else value
    return fields


@dataclass(slots=True, frozen=True)
class Response:
    status: int
    # Names in lower case; a repeated field is joined with ", ", as RFC 9110 allows.
    headers: dict[str, str]
    body: bytes


class _Connection(asyncio.Protocol):
    """One connection, reading the response to the one request in flight on it.

    Callbacks record what happened (`complete`, `error`, body pieces) and wake the one
    coroutine waiting on the connection, which looks at the state itself.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed = False
        # A response has been read in full on it before: a failure now may only mean
        # the server closed it while idle.
        self.used = False
        # Some of the current response has arrived.
        self.answered = False
        self.reusable = False
        self.complete = False
        self.error: Exception | None = None
        self.status = 0
        self.headers: dict[str, str] = {}
        self.pieces: list[bytes] = []
        self.heard_at = 0.0
        self._state = _IDLE
        self._pending = b""
        self._remaining = 0
        self._head_only = False
        self._streaming = False
        self._queued = 0
        self._paused = False
        self._silence = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # The transport's callbacks.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == _UNTIL_CLOSE and exc is None:
            self._finish()
        elif self._state != _IDLE:
            what = "the response was complete" if self.answered else "any response"
            error = ConnectionClosed(f"the connection closed before {what}")
            error.__cause__ = exc
            self._fail(error)
        if self._timer is not None:
            self._timer.cancel()
        self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.answered = True
        self.heard_at = self._loop.time()
        if self._pending:
            data = self._pending + data
            self._pending = b""
        try:
            self._feed(data)
        except ProtocolError as error:
            self._fail(error)
            self.transport.abort()

    # Parsing.

    def _feed(self, data: bytes) -> None:
        """Advance through `data`; an incomplete head or framing line waits in _pending."""
        pos, size = 0, len(data)
        while pos < size:
            state = self._state
            if state in (_LENGTH, _CHUNK_DATA):
                take = min(self._remaining, size - pos)
                self._piece(data if take == size else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    if state == _LENGTH:
                        self._finish()
                    else:
                        self._state = _CHUNK_END
            elif state == _HEAD:
                end = data.find(b"\r\n\r\n", pos)
                if end < 0:
                    self._keep(data, pos)
                    return
                self._head(data[pos:end])
                pos = end + 4
            elif state == _UNTIL_CLOSE:
                self._piece(data[pos:] if pos else data)
                return
            elif state == _IDLE:
                # Nobody asked: whatever the server meant, the connection is unusable.
                self.reusable = False
                self.transport.abort()
                return
            else:
                end = data.find(b"\r\n", pos)
                if end < 0:
                    self._keep(data, pos)
                    return
                line = data[pos:end]
                pos = end + 2
                if state == _CHUNK_SIZE:
                    self._chunk(line)
                elif state == _CHUNK_END:
                    if line:
                        raise ProtocolError("a chunk is longer than its size")
                    self._state = _CHUNK_SIZE
                elif not line:  # the blank line that ends the trailer fields
                    self._finish()

    def _keep(self, data: bytes, pos: int) -> None:
        rest = data[pos:]
        if len(rest) > HEAD_LIMIT:
            what = "response head" if self._state == _HEAD else "chunk framing line"
            raise ProtocolError(f"{what} longer than {HEAD_LIMIT} bytes")
        self._pending = rest

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if (
            version not in ("HTTP/1.1", "HTTP/1.0")
            or not (code.isdigit() and len(code) == 3)
            or rest[3:4] not in ("", " ")
        ):
            raise ProtocolError(f"malformed status line {lines[0][:100]!r}")
        status = int(code)
        if status < 200:
            return  # informational (1xx): the real response follows
        headers = header_fields(lines[1:])
        self.status = status
        self.headers = headers
        closes = "close" in headers.get("connection", "").lower()
        self.reusable = version == "HTTP/1.1" and not closes
        if self._head_only or status in (204, 304):
            self._finish()
        elif "transfer-encoding" in headers:
            if headers["transfer-encoding"].lower().endswith("chunked"):
                self._state = _CHUNK_SIZE
            else:
                self._until_close()
        elif "content-length" in headers:
            length = headers["content-length"]
            if not (length.isascii() and length.isdigit()):
                raise ProtocolError(f"malformed Content-Length {length[:100]!r}")
            self._remaining = int(length)
            self._state = _LENGTH
            if not self._remaining:
                self._finish()
        else:
            self._until_close()
        if self._streaming:
            self._wake()

    def _until_close(self) -> None:
        self.reusable = False
        self._state = _UNTIL_CLOSE

    def _chunk(self, line: bytes) -> None:
        try:
            size = int(line.partition(b";")[0], 16)
        except ValueError:
            size = -1
        if size < 0:
            raise ProtocolError(f"malformed chunk size {line[:100]!r}")
        if size:
            self._remaining = size
            self._state = _CHUNK_DATA
        else:
            self._state = _TRAILER

    def _piece(self, piece: bytes) -> None:
        self.pieces.append(piece)
        if self._streaming:
            self._queued += len(piece)
            if self._queued > STREAM_BUFFER and not self._paused:
                self._paused = True
                self.transport.pause_reading()
            self._wake()

    def _finish(self) -> None:
        self._state = _IDLE
        self.complete = True
        self._wake()

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        self._state = _IDLE
        self.reusable = False
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # What the pool and streams call.

    def abort(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.transport.abort()

    async def wait(self) -> None:
        """Until the next callback that matters; raises the connection's error if any."""
        if self.error is None:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self.error is not None:
            raise self.error

    def _start(self, message: bytes, *, head_only: bool) -> None:
        self.answered = self.complete = False
        self.status = 0
        self.pieces = []
        self.heard_at = self._loop.time()
        self._head_only = head_only
        if self.closed:  # while idle, noticed after the pool handed it out
            raise ConnectionClosed("the connection closed before any response")
        self._state = _HEAD
        self.transport.write(message)

    async def exchange(self, message: bytes, deadline: float, *, head_only: bool) -> Response:
        """Send one request and read its whole response, by `deadline` (loop time)."""
        self._timer = self._loop.call_at(deadline, self._expire)
        try:
            self._start(message, head_only=head_only)
            while not self.complete:
                await self.wait()
        finally:
            self._timer.cancel()
        self.used = True
        pieces = self.pieces
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return Response(self.status, self.headers, body)

    def _expire(self) -> None:
        self._fail(TimeoutError("no complete response within the request's timeout"))
        self.transport.abort()

    async def open_stream(self, message: bytes, silence: float) -> None:
        """Send the request and wait for the response's head; its body is then read as
        it arrives, and nothing heard for `silence` seconds fails the stream."""
        self._streaming = True
        self._silence = silence
        self._start(message, head_only=False)
        self._timer = self._loop.call_at(self.heard_at + silence, self._check_silence)
        while not self.status:
            await self.wait()

    def take(self) -> bytes:
        """Everything received and not yet taken, resuming reading if it had stopped."""
        pieces = self.pieces
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self._queued = 0
        if self._paused:
            self._paused = False
            self.heard_at = self._loop.time()
            self.transport.resume_reading()
        return data

    def _check_silence(self) -> None:
        now = self._loop.time()
        if self._paused:
            self.heard_at = now  # waiting on our own reader, not on the server
        due = self.heard_at + self._silence
        if due > now:
            self._timer = self._loop.call_at(due, self._check_silence)
        else:
            self._fail(TimeoutError(f"nothing received for {self._silence:g} s"))
            self.transport.abort()


class Stream:
    """A response whose body is read as it arrives; iterating yields what has arrived
    since the last step (never empty), until the body ends."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self) -> bytes:
        connection = self._connection
        while not connection.pieces:
            if connection.complete:
                raise StopAsyncIteration
            await connection.wait()
        return connection.take()

    async def read(self) -> bytes:
        """The rest of the body (an error's, which is short)."""
        return b"".join([chunk async for chunk in self])

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines, without their b"\\n": a watch sends one event per line."""
        rest = b""
        async for chunk in self:
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                yield line
        if rest:
            yield rest


class Pool:
    """Requests to one server (`tls` given: https) over at most `limit` keep-alive
    connections; beyond that, requests queue for one in the order they came.

    The idle connection used most recently is reused first, so that the ones a lull
    leaves idle are the ones the server times out, rather than every connection by
    turns. `server_hostname` is the name the server's certificate must carry, when
    it is not `host`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int = 128,
    ) -> None:
        self.host = host
        self.port = port
        self.limit = limit
        self._tls = tls
        self._server_hostname = server_hostname if tls is not None else None
        authority = f"[{host}]" if ":" in host else host
        if port != (443 if tls is not None else 80):
            authority = f"{authority}:{port}"
        self._host_field = f"Host: {authority}\r\n"
        self._idle: list[_Connection] = []
        # Connections that count against the limit: idle, busy or being opened.
        self._open = 0
        # Each waiter gets a connection, or None: a free slot to open one in.
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._connections: set[_Connection] = set()
        self._closed = False

    def _message(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        start = f"{method} {target} HTTP/1.1\r\n{self._host_field}{fields}"
        if body is None:
            return f"{start}\r\n".encode()
        return f"{start}Content-Length: {len(body)}\r\n\r\n".encode() + body

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        *,
        timeout: float,
    ) -> Response:
        """One request, its response read in full within `timeout` seconds, waiting for
        a connection included. Raises TimeoutError, ssl.SSLError or a TransportError.

        A request that fails on a reused connection before any byte of its answer came
        is sent once more, on a new connection: the server most likely closed the idle
        connection as we wrote to it. The server may also have received it and died
        before answering; sending it again is safe for what batchsched sends: reads,
        merge patches, writes of a resourceVersion, and creates of named objects, which
        a second time fail with 409. A Binding that did succeed answers 409 again, and
        the binder then reads the pod back to find it bound by us.
        """
        message = self._message(method, target, headers, body)
        deadline = asyncio.get_running_loop().time() + timeout
        head_only = method == "HEAD"
        connection = await self._acquire(deadline)
        try:
            try:
                response = await connection.exchange(message, deadline, head_only=head_only)
            except ConnectionClosed:
                if not connection.used or connection.answered:
                    raise
                connection.abort()
                self._connections.discard(connection)
                connection = await self._connect(deadline)  # in the same slot
                response = await connection.exchange(message, deadline, head_only=head_only)
        except BaseException:
            self._discard(connection)
            raise
        if connection.reusable and not connection.closed and not self._closed:
            self._release(connection)
        else:
            self._discard(connection)
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, target: str, headers: Mapping[str, str], *, silence: float
    ) -> AsyncIterator[Stream]:
        """Send a request and read its response's body as it arrives, failing with
        TimeoutError when nothing arrives for `silence` seconds.

        On a connection of its own, outside the limit: a watch holds it for minutes and
        must not wait behind requests. It is closed on leaving the context, whatever
        was read.
        """
        message = self._message(method, target, headers, None)
        connection = await self._connect(asyncio.get_running_loop().time() + silence)
        try:
            await connection.open_stream(message, silence)
            yield Stream(connection)
        finally:
            connection.abort()
            self._connections.discard(connection)

    async def _acquire(self, deadline: float) -> _Connection:
        idle = self._idle
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
            self._connections.discard(connection)
            self._open -= 1
        if self._open < self.limit:
            self._open += 1
            return await self._connect_in_slot(deadline)
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                given = await waiter
        except BaseException as error:
            # Handed something just as the wait ended: pass it on.
            if waiter.done() and not waiter.cancelled():
                handed = waiter.result()
                if handed is None:
                    self._free_slot()
                else:
                    self._release(handed)
            if isinstance(error, TimeoutError):
                raise TimeoutError(f"all {self.limit} connections busy until the timeout") from None
            raise
        return given if given is not None else await self._connect_in_slot(deadline)

    async def _connect_in_slot(self, deadline: float) -> _Connection:
        try:
            return await self._connect(deadline)
        except BaseException:
            self._free_slot()
            raise

    async def _connect(self, deadline: float) -> _Connection:
        if self._closed:
            raise ConnectionClosed("the client is closed")
        loop = asyncio.get_running_loop()
        where = f"{self.host}:{self.port}"
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    partial(_Connection, loop),
                    self.host,
                    self.port,
                    ssl=self._tls,
                    server_hostname=self._server_hostname,
                )
        except ssl.SSLError:
            raise
        except TimeoutError:
            raise TimeoutError(f"no connection to {where} within the timeout") from None
        except OSError as error:
            raise ConnectFailed(f"cannot connect to {where}: {error}") from error
        self._connections.add(connection)
        return connection

    def _release(self, connection: _Connection) -> None:
        """A connection free for the next request: to the first waiter, else idle."""
        if not self._hand_over(connection):
            self._idle.append(connection)

    def _discard(self, connection: _Connection) -> None:
        connection.abort()
        self._connections.discard(connection)
        self._free_slot()

    def _free_slot(self) -> None:
        """A connection's slot is free: the first waiter opens one in it."""
        if not self._hand_over(None):
            self._open -= 1

    def _hand_over(self, connection: _Connection | None) -> bool:
        """Wake the first waiter still waiting with `connection` (None: a free slot);
        False when nobody waits."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return True
        return False

    async def close(self) -> None:
        """Close every connection, streams' too; requests in flight fail, later ones
        raise ConnectionClosed. TLS connections get a moment to say goodbye."""
        self._closed = True
        connections = list(self._connections)
        self._connections.clear()
        self._idle.clear()
        for connection in connections:
            connection.transport.close()
        lost = [connection.lost for connection in connections if not connection.lost.done()]
        if lost:
            await asyncio.wait(lost, timeout=1.0)
        for connection in connections:
            connection.abort()
