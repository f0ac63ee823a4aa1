"""The /metrics, /livez, /healthz and /readyz server on loopback, and how /metrics
callers are checked and their verdicts kept (the reviews themselves are answered by the
real API server in tests/integration/test_rbac.py)."""

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from batchsched.k8s.client import JSON, ApiError
from batchsched.k8s.endpoints import Endpoints, MetricsAuth, serve

from .recording_api import RecordingApi


@pytest.fixture
async def ready() -> list[bool]:
    return [False]


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def endpoints(ready: list[bool]) -> AsyncIterator[Endpoints]:
    server = await serve(0, ready=lambda: ready[0], host="127.0.0.1")
    yield server
    await server.close()


async def fetch(
    http: aiohttp.ClientSession, endpoints: Endpoints, path: str, **options: Any
) -> tuple[int, str]:
    url = f"http://127.0.0.1:{endpoints.port}{path}"
    async with http.get(url, **options) as reply:
        return reply.status, await reply.text()


async def test_probes_and_metrics(
    http: aiohttp.ClientSession, endpoints: Endpoints, ready: list[bool]
) -> None:
    assert await fetch(http, endpoints, "/livez") == (200, "ok")
    assert await fetch(http, endpoints, "/healthz") == (200, "ok")
    assert await fetch(http, endpoints, "/readyz") == (503, "waiting for the cache to sync")
    ready[0] = True
    assert await fetch(http, endpoints, "/readyz?verbose") == (200, "ok")
    async with http.get(f"http://127.0.0.1:{endpoints.port}/metrics") as reply:
        assert reply.status == 200
        # No Accept header: the text format every Prometheus reads.
        assert reply.headers["Content-Type"] == CONTENT_TYPE_PLAIN_0_0_4
        assert "\n# TYPE python_gc_objects_collected_total counter\n" in await reply.text()
    openmetrics = {"Accept": "application/openmetrics-text; version=1.0.0"}
    async with http.get(f"http://127.0.0.1:{endpoints.port}/metrics", headers=openmetrics) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await reply.text()).endswith("# EOF\n")


async def test_unknown_paths_methods_and_head(
    http: aiohttp.ClientSession, endpoints: Endpoints
) -> None:
    base = f"http://127.0.0.1:{endpoints.port}"
    assert (await fetch(http, endpoints, "/"))[0] == 404
    async with http.post(f"{base}/metrics") as reply:
        assert reply.status == 405
        assert "GET" in reply.headers["Allow"]
    async with http.head(f"{base}/livez") as reply:
        assert (reply.status, await reply.read()) == (200, b"")


async def test_close_stops_listening(http: aiohttp.ClientSession) -> None:
    endpoints = await serve(0, ready=lambda: True, host="127.0.0.1")
    assert (await fetch(http, endpoints, "/livez"))[0] == 200
    await endpoints.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        await fetch(http, endpoints, "/livez")


def reviews(users: dict[str, str | None]) -> RecordingApi:
    """An API server that knows `users` by token, each allowed /metrics or not
    ("allowed" / "denied"); a token it does not know is not authenticated."""

    def answer(method: str, path: str, body: Any) -> JSON:
        spec = body["spec"]
        if path.endswith("/tokenreviews"):
            name = users.get(spec["token"])
            return {"status": {"authenticated": name is not None, "user": {"username": name}}}
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] == "allowed"}}

    return RecordingApi(answer)


@pytest.mark.parametrize(
    ("authorization", "status", "said", "reviews_sent"),
    [
        (None, 401, "a bearer token is needed", 0),
        ("Basic dXNlcjpwYXNz", 401, "a bearer token is needed", 0),
        ("Bearer ", 401, "a bearer token is needed", 0),
        ("Bearer unknown", 401, "the bearer token was not accepted", 1),
        ("Bearer t-denied", 403, "not allowed to get /metrics", 2),
        ("Bearer t-allowed", 200, "", 2),
        ("bearer t-allowed", 200, "", 2),
    ],
)
async def test_metrics_callers_are_reviewed(
    http: aiohttp.ClientSession,
    authorization: str | None,
    status: int,
    said: str,
    reviews_sent: int,
) -> None:
    api = reviews({"t-allowed": "allowed", "t-denied": "denied"})
    endpoints = await serve(0, ready=lambda: True, host="127.0.0.1", auth=MetricsAuth(api))
    headers = {"Authorization": authorization} if authorization else {}
    try:
        got, text = await fetch(http, endpoints, "/metrics", headers=headers)
        assert got == status
        assert text.startswith(said)
        # Probes need no token: the kubelet sends none.
        assert (await fetch(http, endpoints, "/readyz"))[0] == 200
    finally:
        await endpoints.close()
    assert len(api.requests) == reviews_sent


async def test_verdicts_are_kept_for_their_ttl_then_asked_again() -> None:
    api = reviews({"a": "allowed", "d": "denied"})
    auth = MetricsAuth(api)
    verdicts = [await auth.verdict(f"Bearer {t}") for t in ("a", "d", "x", "a", "d", "x")]
    assert [v.status for v in verdicts] == [200, 403, 401, 200, 403, 401]
    assert len(api.requests) == 5  # two reviews each for a and d, one for x; then none
    expiring = MetricsAuth(api, ttl=0.0)
    await expiring.verdict("Bearer a")
    await expiring.verdict("Bearer a")
    assert len(api.requests) == 9


async def test_a_failed_review_answers_503_and_is_not_kept(http: aiohttp.ClientSession) -> None:
    failing = [True]

    def answer(method: str, path: str, body: Any) -> JSON:
        if failing[0]:
            raise ApiError(method, path, 500, {"message": "etcd is down"})
        if path.endswith("/tokenreviews"):
            return {"status": {"authenticated": True, "user": {"username": "u"}}}
        return {"status": {"allowed": True}}

    auth = MetricsAuth(RecordingApi(answer))
    endpoints = await serve(0, ready=lambda: True, host="127.0.0.1", auth=auth)
    headers = {"Authorization": "Bearer t"}
    try:
        assert (await fetch(http, endpoints, "/metrics", headers=headers))[0] == 503
        failing[0] = False
        assert (await fetch(http, endpoints, "/metrics", headers=headers))[0] == 200
    finally:
        await endpoints.close()
