"""Reaching the API server: one aiohttp connection pool for every request batchsched
makes, authenticated with the credentials of `batchsched.k8s.credentials`.

aiohttp rather than the generated `kubernetes` client, which blocks the event loop and
cannot decode the reply to a Binding. What aiohttp does not do is here: bodies are
framed, and errors read, as the API server writes them; a refused token is read again
and the request sent once more; every attempt is counted by its outcome, and every
request sent again by why.
"""

import abc
import asyncio
import contextlib
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from batchsched import __version__
from batchsched.k8s import fence, protobuf
from batchsched.k8s.credentials import (
    REFRESH_SECONDS,
    Credentials,
    CredentialsError,
    load_client_certificate,
)
from batchsched.k8s.protobuf import PROTOBUF
from batchsched.metrics import API_REQUEST_RETRIES, API_REQUESTS

JSON = dict[str, Any]
T = TypeVar("T")

# Transport failures worth retrying, like 429 and 5xx answers: what aiohttp raises
# (a server certificate that does not verify is also an ssl.SSLError), and timeouts.
TRANSPORT_ERRORS = (TimeoutError, aiohttp.ClientError, ssl.SSLError)
# A stream whose reader has twice this unread stops reading from the socket, so that a
# busy reader makes the server wait (or drop a watch) instead of growing our memory.
STREAM_BUFFER = 2 * 1024 * 1024

USER_AGENT = f"batchsched/{__version__}"
APPLICATION_JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """The API server answered with an error status; `reason` is the Status reason."""

    def __init__(self, method: str, path: str, status: int, body: JSON) -> None:
        self.status = status
        self.reason = str(body.get("reason") or "")
        self.message = str(body.get("message") or body or "no details")
        details = body.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        listed = [cause for cause in causes or () if isinstance(cause, dict)]
        # What the server says caused it, e.g. NamespaceTerminating on a 403.
        self.causes = frozenset(str(c.get("reason") or c.get("type") or "") for c in listed)
        # And in its words: which PodDisruptionBudget refused an eviction, and why.
        self.explanations = tuple(str(c["message"]) for c in listed if c.get("message"))
        super().__init__(f"{method} {path}: HTTP {status}: {self.message}")

    @property
    def transient(self) -> bool:
        """Worth retrying after a pause: throttled or a server-side failure."""
        return self.status == 429 or self.status >= 500


def error_code(error: BaseException) -> str:
    """How metrics label a failed request."""
    if isinstance(error, ApiError):
        return str(error.status)
    return "timeout" if isinstance(error, TimeoutError) else "connection"


def is_transient(error: BaseException) -> bool:
    return isinstance(error, TRANSPORT_ERRORS) or (isinstance(error, ApiError) and error.transient)


def backoff(attempt: int, *, first: float = 0.2, cap: float = 10.0) -> float:
    """Exponential pause with full jitter, so retrying clients do not move in step."""
    return random.uniform(0, min(cap, first * 2**attempt))


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    seconds: float,
    on_error: Callable[[BaseException], None] | None = None,
) -> T:
    """`call()`, again after a pause while it fails transiently, for up to `seconds`.

    Other failures, and the last transient one, are raised; `on_error` sees every failure.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return await call()
        except (ApiError, *TRANSPORT_ERRORS) as error:
            if on_error is not None:
                on_error(error)
            if not is_transient(error) or time.monotonic() - started > seconds:
                raise
            API_REQUEST_RETRIES.labels(error_code(error)).inc()
        await asyncio.sleep(backoff(attempt))
        attempt += 1


class Requests(abc.ABC):
    """The REST verbs over one `request`: what the binder, status writer and lease use,
    so that unit tests can stand in a recorder for the API server."""

    @abc.abstractmethod
    async def request(
        self, method: str, path: str, body: object = None, *, content_type: str = APPLICATION_JSON
    ) -> JSON:
        """Send one request; errors raise ApiError or one of TRANSPORT_ERRORS."""

    async def get(self, path: str) -> JSON:
        return await self.request("GET", path)

    async def post(self, path: str, body: object, *, content_type: str = APPLICATION_JSON) -> JSON:
        return await self.request("POST", path, body, content_type=content_type)

    async def put(self, path: str, body: object) -> JSON:
        return await self.request("PUT", path, body)

    async def patch(self, path: str, body: object, *, content_type: str = MERGE_PATCH) -> JSON:
        return await self.request("PATCH", path, body, content_type=content_type)


class Stream:
    """A response whose body is read as it arrives; iterating yields what has arrived
    since the last step (never empty), until the body ends."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()

    async def read(self) -> bytes:
        """The rest of the body (an error's, which is short)."""
        return await self._response.read()

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines, without their b"\\n": a watch sends one event per line.
        Split here rather than by aiohttp's readline, which refuses a line longer than
        its buffer, as one event of a large object is. A line's pieces are joined once
        it ends, so a line of many chunks is not copied again with each one."""
        pieces: list[bytes] = []
        async for chunk in self:
            if b"\n" not in chunk:
                pieces.append(chunk)
                continue
            first, *lines, last = chunk.split(b"\n")
            yield b"".join([*pieces, first]) if pieces else first
            for line in lines:
                yield line
            pieces = [last] if last else []
        if pieces:
            yield b"".join(pieces)


class Api(Requests):
    """JSON requests to one API server; errors raise ApiError or a TRANSPORT_ERRORS type.

    Requests share at most `connections` keep-alive connections; streams (watches) each
    have one of their own, outside that limit, so that a watch never waits behind
    requests nor requests behind the watches holding connections for minutes.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        connections: int = 128,
        timeout: float = 30.0,
    ) -> None:
        self.credentials = credentials
        self.server = credentials.server.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        url = urlsplit(self.server)
        try:
            url.port  # noqa: B018 - raises for a port that is not a number
        except ValueError as error:
            raise CredentialsError(f"server {self.server!r}: {error}") from None
        if not url.hostname:
            raise CredentialsError(f"server {self.server!r} names no host")
        https = url.scheme == "https"
        self._tls: ssl.SSLContext | bool = credentials.ssl_context() if https else False
        self._server_hostname = credentials.tls_server_name if https else None
        self._proxy = credentials.proxy()
        self._connections = connections
        # (requests, streams), made by open().
        self._sessions: tuple[aiohttp.ClientSession, aiohttp.ClientSession] | None = None
        self._opening = asyncio.Lock()
        self._headers: dict[str, str] = {}
        self._credentials_at = -REFRESH_SECONDS
        self._refreshing = asyncio.Lock()
        self._closed = False

    async def request(
        self, method: str, path: str, body: object = None, *, content_type: str = APPLICATION_JSON
    ) -> JSON:
        data = None if body is None else _encode(body, content_type)
        kind = None if body is None else content_type
        return decode(await self._send(method, path, data, kind))

    async def get_raw(self, path: str) -> bytes:
        """A GET's body as received, for callers that cut it down before decoding."""
        return await self._send("GET", path, None, None)

    async def _send(
        self, method: str, path: str, data: bytes | None, content_type: str | None
    ) -> bytes:
        session = (self._sessions or await self._open())[0]
        url = URL(self.server + path, encoded=True)
        check = fence.guard()
        payload = data if data is None or check is None else _FencedBody(data, check=check)
        renewed = False
        while True:
            sent = await self.headers()
            headers = sent if content_type is None else {**sent, "Content-Type": content_type}
            try:
                async with session.request(
                    method,
                    url,
                    data=payload,
                    headers=headers,
                    timeout=self._timeout,
                    proxy=self._proxy,
                    server_hostname=self._server_hostname,
                    allow_redirects=False,
                    middlewares=(_Attempts(),),
                ) as response:
                    status = response.status
                    body = await response.read()
            except TRANSPORT_ERRORS as error:
                if isinstance(error.__cause__, fence.Fenced):
                    raise error.__cause__ from None
                API_REQUESTS.labels(method, error_code(error)).inc()
                raise
            API_REQUESTS.labels(method, str(status)).inc()
            if status == 401 and not renewed and await self._renew(sent):
                API_REQUEST_RETRIES.labels("unauthorized").inc()
                renewed = True
                continue
            if status >= 400:
                raise _error(method, path, status, response.headers, body)
            return body

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, silence: float) -> AsyncIterator[Stream]:
        """GET `path` (a watch) and read its body as it arrives; raises ApiError for an
        error status, TimeoutError after `silence` seconds without a byte. A 401 renews
        the token for the caller's next attempt, which a watch makes anyway."""
        session = (self._sessions or await self._open())[1]
        sent = await self.headers()
        limit = aiohttp.ClientTimeout(total=None, sock_connect=silence, sock_read=silence)
        answered = False
        try:
            async with session.get(
                URL(self.server + path, encoded=True),
                headers=sent,
                timeout=limit,
                proxy=self._proxy,
                server_hostname=self._server_hostname,
                allow_redirects=False,
                middlewares=(_Attempts(),),
            ) as response:
                answered = True
                API_REQUESTS.labels("WATCH", str(response.status)).inc()
                if response.status >= 400:
                    body = await response.read()
                    if response.status == 401:
                        await self._renew(sent)
                    raise _error("WATCH", path, response.status, response.headers, body)
                yield Stream(response)
        except TRANSPORT_ERRORS as error:
            if not answered:
                API_REQUESTS.labels("WATCH", error_code(error)).inc()
            raise

    async def open(self) -> None:
        """Open the connection pools and fetch the first token now rather than with the
        first request: an exec plugin runs here, so that credentials it cannot give are
        reported before any task depends on them."""
        await self._open()
        await self.headers()

    async def headers(self) -> dict[str, str]:
        """What every request carries. Asking the credentials for the token may read a
        file or run a plugin, which costs far more than a request: it is done once every
        REFRESH_SECONDS, or at once after a 401."""
        if time.monotonic() - self._credentials_at > REFRESH_SECONDS:
            async with self._refreshing:
                if time.monotonic() - self._credentials_at > REFRESH_SECONDS:
                    await self._refresh(fresh=False)
        return self._headers

    async def _renew(self, sent: dict[str, str]) -> bool:
        """After the server refused the token in `sent` (401): the token read again,
        once for all the requests refused with it; whether it is another one."""
        if self.credentials.token_source is None:
            return False
        async with self._refreshing:
            if self._headers is sent:
                await self._refresh(fresh=True)
        return self._headers.get("Authorization") != sent.get("Authorization")

    async def _refresh(self, *, fresh: bool) -> None:
        token = await self.credentials.token(fresh=fresh)
        # Uncompressed: on the cluster network, gzipping a page of a thousand pods
        # costs the API server more CPU than sending it as it is saves time.
        headers = {
            "Accept": APPLICATION_JSON,
            "Accept-Encoding": "identity",
            # What audit logs and API priority and fairness know the caller by.
            "User-Agent": USER_AGENT,
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._headers = headers
        self._credentials_at = time.monotonic()

    async def _open(self) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
        """The sessions, made on first use: inside the event loop, as aiohttp wants,
        and after an exec plugin has given the client certificate, if it gives one."""
        async with self._opening:
            if self._closed:
                raise aiohttp.ClientConnectionError("the client is closed")
            if self._sessions is None:
                source = self.credentials.token_source
                certificate = None if source is None else await source.certificate()
                if certificate is not None and isinstance(self._tls, ssl.SSLContext):
                    load_client_certificate(self._tls, *certificate)
                self._sessions = (
                    self._session(limit=self._connections),
                    self._session(limit=0),
                )
            return self._sessions

    def _session(self, *, limit: int) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit, ssl=self._tls),
            read_bufsize=STREAM_BUFFER,
            # The API server sends JSON as it is (Accept-Encoding: identity).
            auto_decompress=False,
            # The kubeconfig and the environment say what is used: no cookies, no netrc.
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def close(self) -> None:
        """Close every connection; requests after this raise a ClientConnectionError."""
        async with self._opening:
            self._closed = True
            sessions, self._sessions = self._sessions or (), None
            for session in sessions:
                await session.close()


class _Attempts:
    """aiohttp sends an idempotent request again, once, when its connection fails before
    an answer: in practice a pooled keep-alive connection the server had closed while
    it was idle. It does so silently; as the request's middleware, called once per
    attempt, this counts the second. (A middleware costs a few microseconds a request,
    where aiohttp's connection trace hooks cost tens.)"""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False

    async def __call__(
        self, request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        if self.sent:
            API_REQUEST_RETRIES.labels("stale_connection").inc()
        self.sent = True
        return await handler(request)


class _FencedBody(aiohttp.BytesPayload):
    """A fenced write's body (fence.py): the lease is checked again as it is written,
    in the same step of the event loop that hands the request to the socket; aiohttp
    holds the headers back until then, so a refused write sends nothing at all."""

    def __init__(self, value: bytes, *, check: Callable[[], None]) -> None:
        super().__init__(value)
        self._check = check

    async def write_with_length(
        self, writer: aiohttp.abc.AbstractStreamWriter, content_length: int | None
    ) -> None:
        self._check()
        await super().write_with_length(writer, content_length)


def _encode(body: object, content_type: str) -> bytes:
    """JSON, or protobuf for the kinds `protobuf.KINDS` lists."""
    if content_type != PROTOBUF:
        return json.dumps(body).encode()
    if not isinstance(body, Mapping):
        raise TypeError(f"a protobuf body is a manifest, not {type(body).__name__}")
    return protobuf.encode(body)


def decode(raw: bytes) -> JSON:
    """A response body as a JSON object; an empty body is an empty one."""
    # isspace() rather than strip(): a page of pods is megabytes, ending in b"\n".
    parsed: object = {} if not raw or raw.isspace() else json.loads(raw)
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _error(method: str, path: str, status: int, headers: Mapping[str, str], raw: bytes) -> ApiError:
    # Not every error is a Status object: a missing resource type is plain text.
    is_json = headers.get("Content-Type", "").partition(";")[0].strip() == APPLICATION_JSON
    body = json.loads(raw) if is_json else {"message": raw.decode(errors="replace")}
    return ApiError(method, path, status, body)
