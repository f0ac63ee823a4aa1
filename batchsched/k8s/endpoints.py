"""/metrics, /livez, /healthz and /readyz on one port, served by aiohttp from the
operator's event loop.

Serving them from the loop that runs sessions and watches makes /livez (and /healthz,
its older name) an honest liveness probe: the answer itself shows the loop is running,
and if the loop ever stalls the probe times out. /readyz turns ready once the cache has
seen the whole cluster, on standby replicas too, so both replicas of a Deployment are
scraped and neither is restarted for merely waiting on the lease.

With `auth`, /metrics is protected as kube-scheduler protects it: the caller's bearer
token is checked with a TokenReview and its user with a SubjectAccessReview for `get` on
the non-resource URL /metrics. Probes stay open, as kube-scheduler's are, since the
kubelet sends no token.
"""

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

from aiohttp import web
from prometheus_client import REGISTRY
from prometheus_client.aiohttp import make_aiohttp_handler

from batchsched.api.errors import InvalidObject
from batchsched.k8s.client import JSON, TRANSPORT_ERRORS, ApiError, Requests

log = logging.getLogger(__name__)

# How long a token's verdict is kept, so that scrapes every few seconds cost the API
# server two reviews per token per period rather than two per scrape (kube-scheduler
# keeps its delegated authentication and authorization verdicts for 10 s too).
VERDICT_SECONDS = 10.0
# Verdicts kept at most; past it the expired ones go, and if none has, all of them.
VERDICT_LIMIT = 1024
METRICS_PATH = "/metrics"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Hosts that mean every interface and address family, as kube-scheduler reads them.
EVERY_INTERFACE = ("", "0.0.0.0", "::")


@dataclass(frozen=True, kw_only=True)
class BindAddress:
    """Where the server listens; `host` None is every interface and address family."""

    host: str | None
    port: int

    @classmethod
    def parse(cls, raw: str, *, where: str) -> "BindAddress":
        """`HOST:PORT`, `[IPv6]:PORT` or `:PORT`; a port from 1 to 65535."""
        host, colon, port = raw.rpartition(":")
        if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise InvalidObject(f"{where}: {raw!r} is not HOST:PORT with a port from 1 to 65535")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return cls(host=None if host in EVERY_INTERFACE else host, port=int(port))

    def __str__(self) -> str:
        host = self.host or ""
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


class Verdict(Enum):
    """What a /metrics caller is told: the HTTP status, and why."""

    ALLOWED = (200, "")
    NO_TOKEN = (401, "a bearer token is needed")
    # The API server's TokenReview did not authenticate it: garbage, expired or revoked.
    TOKEN_NOT_ACCEPTED = (401, "the bearer token was not accepted: it is invalid or expired")
    FORBIDDEN = (403, "not allowed to get /metrics")

    @property
    def status(self) -> int:
        return self.value[0]


class MetricsAuth:
    """Who may read /metrics: allowed, refused for want of a valid token, or forbidden."""

    def __init__(self, api: Requests, *, ttl: float = VERDICT_SECONDS) -> None:
        self.api = api
        self.ttl = ttl
        # sha256 of the token -> (verdict, monotonic time it expires).
        self._verdicts: dict[bytes, tuple[Verdict, float]] = {}

    async def verdict(self, authorization: str | None) -> Verdict:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Verdict.NO_TOKEN
        key = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        cached = self._verdicts.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        verdict = await self._review(token)
        if len(self._verdicts) >= VERDICT_LIMIT:
            self._verdicts = {k: v for k, v in self._verdicts.items() if v[1] > now}
            if len(self._verdicts) >= VERDICT_LIMIT:
                self._verdicts.clear()
        self._verdicts[key] = (verdict, now + self.ttl)
        return verdict

    async def _review(self, token: str) -> Verdict:
        review = await self.api.post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Verdict.TOKEN_NOT_ACCEPTED
        user: JSON = status.get("user") or {}
        access = await self.api.post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user.get("username", ""),
                    "uid": user.get("uid", ""),
                    "groups": user.get("groups", []),
                    "extra": user.get("extra", {}),
                    "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"},
                },
            },
        )
        return Verdict.ALLOWED if (access.get("status") or {}).get("allowed") else Verdict.FORBIDDEN


class Endpoints:
    """The running server; `serve` starts it, `close` stops it and drops its clients."""

    def __init__(self, runner: web.AppRunner) -> None:
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        await self._runner.cleanup()


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text)


async def _alive(request: web.Request) -> web.Response:
    return _text(200, "ok")


def _readyz(ready: Callable[[], bool]) -> Handler:
    async def readyz(request: web.Request) -> web.Response:
        return _text(200, "ok") if ready() else _text(503, "waiting for the cache to sync")

    return readyz


def _metrics(auth: MetricsAuth | None) -> Handler:
    # prometheus-client's own handler: it honours the scraper's Accept (OpenMetrics or
    # text) and compression; only the caller check in front of it is ours.
    exposition = make_aiohttp_handler(REGISTRY)

    async def metrics(request: web.Request) -> web.StreamResponse:
        if auth is not None:
            try:
                verdict = await auth.verdict(request.headers.get("Authorization"))
            except (ApiError, *TRANSPORT_ERRORS) as error:
                log.warning("could not check a /metrics caller: %s", error)
                return _text(503, "could not check the caller's credentials")
            if verdict is not Verdict.ALLOWED:
                return _text(*verdict.value)
        return await exposition(request)

    return metrics


async def serve(
    port: int,
    *,
    ready: Callable[[], bool],
    host: str | None = None,
    auth: MetricsAuth | None = None,
) -> Endpoints:
    """Start serving on `host`, by default every interface and address family; the
    caller closes the returned server. With `port` 0 the system picks one: give a host
    then, as each interface would get a port of its own."""
    app = web.Application()
    app.router.add_get("/livez", _alive)
    app.router.add_get("/healthz", _alive)
    app.router.add_get("/readyz", _readyz(ready))
    app.router.add_get(METRICS_PATH, _metrics(auth))
    # Probes every few seconds would flood the log at INFO; failures are logged anyway.
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return Endpoints(runner)
