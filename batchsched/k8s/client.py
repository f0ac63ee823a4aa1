"""Reaching the API server: one connection pool (`batchsched.k8s.http`) for every
request batchsched makes, authenticated with the credentials of
`batchsched.k8s.credentials`.

Requests go through our own small HTTP client: the generated `kubernetes` client blocks
the event loop and cannot decode the reply to a Binding, and the general-purpose async
client used before cost more start-up time and CPU per request (see the http module).
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

from batchsched import __version__
from batchsched.k8s import protobuf
from batchsched.k8s.credentials import REFRESH_SECONDS, Credentials, CredentialsError
from batchsched.k8s.http import Pool, Stream, TransportError
from batchsched.k8s.protobuf import PROTOBUF

JSON = dict[str, Any]
T = TypeVar("T")

# Transport failures worth retrying, like 429 and 5xx answers: everything the http
# module raises. ssl.SSLError comes from connecting, a server certificate that does not
# verify among them.
TRANSPORT_ERRORS = (TimeoutError, TransportError, ssl.SSLError)

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
        await asyncio.sleep(backoff(attempt))
        attempt += 1


class Requests(abc.ABC):
    """The REST verbs over one `request`: what the binder, status writer and lease use,
    so that unit tests can stand in a recorder for the API server."""

    @abc.abstractmethod
    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = APPLICATION_JSON,
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


class Api(Requests):
    """JSON requests to one API server; errors raise ApiError or a TRANSPORT_ERRORS type."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        connections: int = 128,
        timeout: float = 30.0,
    ) -> None:
        self.credentials = credentials
        self.server = credentials.server.rstrip("/")
        self.timeout = timeout
        url = urlsplit(self.server)
        try:
            host, port = url.hostname, url.port
        except ValueError as error:  # a port that is not a number
            raise CredentialsError(f"server {self.server!r}: {error}") from None
        if not host:
            raise CredentialsError(f"server {self.server!r} names no host")
        https = url.scheme == "https"
        # A server behind a proxy may sit under a path, as Rancher's do.
        self._prefix = url.path
        self._headers: dict[str, str] = {}
        self._credentials_at = -REFRESH_SECONDS
        self._pool = Pool(
            host,
            port or (443 if https else 80),
            tls=credentials.ssl_context() if https else None,
            server_hostname=credentials.tls_server_name,
            limit=connections,
        )

    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = APPLICATION_JSON,
    ) -> JSON:
        headers = self.headers()
        data = None
        if body is not None:
            data = _encode(body, content_type)
            headers = {**headers, "Content-Type": content_type}
        return decode(await self._send(method, path, headers, data))

    async def get_raw(self, path: str) -> bytes:
        """A GET's body as received, for callers that cut it down before decoding."""
        return await self._send("GET", path, self.headers(), None)

    async def _send(
        self, method: str, path: str, headers: dict[str, str], data: bytes | None
    ) -> bytes:
        reply = await self._pool.request(
            method, self._prefix + path, headers, data, timeout=self.timeout
        )
        if reply.status >= 400:
            raise _error(method, path, reply.status, reply.headers, reply.body)
        return reply.body

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, silence: float) -> AsyncIterator[Stream]:
        """GET `path` (a watch) and read its body as it arrives; raises ApiError for an
        error status, TimeoutError after `silence` seconds without a byte."""
        async with self._pool.stream(
            "GET", self._prefix + path, self.headers(), silence=silence
        ) as reply:
            if reply.status >= 400:
                raise _error("WATCH", path, reply.status, reply.headers, await reply.read())
            yield reply

    def headers(self) -> dict[str, str]:
        """Asking the credentials for the token may read a file or run a plugin, which
        costs far more than a request: it is done once every REFRESH_SECONDS."""
        now = time.monotonic()
        if now - self._credentials_at > REFRESH_SECONDS:
            token = self.credentials.token()
            # Uncompressed: on the cluster network, gzipping a page of a thousand pods
            # costs the API server more CPU than sending it as it is saves time.
            self._headers = {
                "Accept": APPLICATION_JSON,
                "Accept-Encoding": "identity",
                # What audit logs and API priority and fairness know the caller by.
                "User-Agent": USER_AGENT,
            }
            if token:
                self._headers["Authorization"] = f"Bearer {token}"
            self._credentials_at = now
        return self._headers

    async def close(self) -> None:
        await self._pool.close()


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


def _error(method: str, path: str, status: int, headers: dict[str, str], raw: bytes) -> ApiError:
    # Not every error is a Status object: a missing resource type is plain text.
    is_json = headers.get("content-type", "").partition(";")[0].strip() == APPLICATION_JSON
    body = json.loads(raw) if is_json else {"message": raw.decode(errors="replace")}
    return ApiError(method, path, status, body)
