"""Reaching the API server: one aiohttp session for every request batchsched makes,
authenticated with the credentials of `batchsched.k8s.credentials`.

Requests go through aiohttp rather than the generated `kubernetes` client: that client
blocks the event loop and cannot decode the reply to a Binding.
"""

import abc
import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

from batchsched.k8s.credentials import REFRESH_SECONDS, Credentials

JSON = dict[str, Any]
T = TypeVar("T")

# Transport failures worth retrying, like 429 and 5xx answers.
TRANSPORT_ERRORS = (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)

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
        content_type: str = "application/json",
    ) -> JSON:
        """Send one request; errors raise ApiError or one of TRANSPORT_ERRORS."""

    async def get(self, path: str) -> JSON:
        return await self.request("GET", path)

    async def post(self, path: str, body: object) -> JSON:
        return await self.request("POST", path, body)

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
        self._headers: dict[str, str] = {}
        self._credentials_at = -REFRESH_SECONDS
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=credentials.ssl_context(), limit=connections),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "application/json",
    ) -> JSON:
        headers = dict(self.headers())
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = content_type
        async with self.session.request(
            method,
            self.server + path,
            data=data,
            headers=headers,
            server_hostname=self.credentials.tls_server_name,
        ) as reply:
            raw = await reply.read()
            status = reply.status
            is_json = reply.content_type == "application/json"
        if status >= 400:
            # Not every error is a Status object: a missing resource type is plain text.
            body = json.loads(raw) if is_json else {"message": raw.decode(errors="replace")}
            raise ApiError(method, path, status, body)
        parsed: object = json.loads(raw) if raw.strip() else {}
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def headers(self) -> dict[str, str]:
        """Asking the credentials for the token may read a file or run a plugin, which
        costs far more than a request: it is done once every REFRESH_SECONDS."""
        now = time.monotonic()
        if now - self._credentials_at > REFRESH_SECONDS:
            token = self.credentials.token()
            # Uncompressed: on the cluster network, gzipping a page of a thousand pods
            # costs the API server more CPU than sending it as it is saves time.
            self._headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
            if token:
                self._headers["Authorization"] = f"Bearer {token}"
            self._credentials_at = now
        return self._headers

    async def close(self) -> None:
        await self.session.close()
        # Lets the TLS transports finish closing before the loop goes away (aiohttp docs).
        await asyncio.sleep(0.1)
