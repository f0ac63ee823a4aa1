"""The informer against the real API server when the ground moves under it: a watch
resumed after the server lost the history it needs (410 Gone), and a kind whose CRD is
missing when the scheduler starts; and its watch checking the server's certificate the
way every other request does.

The first two are provoked for real. The API server serves every watch that names a
resourceVersion from its watch cache, and etcd compaction does not shorten that cache's
history; what it cannot serve is a version older than the cache itself. Clients resuming
after an API server restart meet exactly that. Changing a CRD's spec rebuilds the cache
of that one kind in the same way, without restarting the API server the whole session
shares, so that is how the first test makes the server forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from batchsched.api.nativegroups import NATIVE_API
from batchsched.cache.cluster import ClusterCache
from batchsched.k8s import pages
from batchsched.k8s.client import Api
from batchsched.k8s.credentials import load_credentials
from batchsched.k8s.informer import Informer
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.watch import WATCHED, Watch, Watched

from .conftest import start_control_plane
from tests.support import ControlPlane, Kube, peer_crds
from tests.support.objects import pod_group

pytestmark = pytest.mark.integration

API_VERSION = "scheduling.x-k8s.io/v1alpha1"
# A foreign PodGroup kind, whose CRD is scheduler-plugins' released one: the tests may
# change or delete it, and put it back.
PODGROUPS = next(w for w in WATCHED if w.api_version == API_VERSION)
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io"


class Relay:
    """A TCP relay to the API server, listening on `address`, that the test can cut as a
    network fault would: open connections drop, and new ones wait until it is mended.
    TLS passes through untouched, so the client still verifies the server's certificate."""

    def __init__(self, server: str, *, address: str = "127.0.0.1") -> None:
        parts = urlsplit(server)
        assert parts.hostname is not None and parts.port is not None
        self._host, self._port = parts.hostname, parts.port
        self._mended = asyncio.Event()
        self._mended.set()
        self._links: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._address = address
        self._listener: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self._listener = await asyncio.start_server(self._serve, self._address, 0)
        self.url = f"https://{self._address}:{self._listener.sockets[0].getsockname()[1]}"

    def cut(self) -> None:
        self._mended.clear()
        for writer in list(self._links):
            writer.transport.abort()

    def mend(self) -> None:
        self._mended.set()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        links = [client_out]
        try:
            await self._mended.wait()
            server_in, server_out = await asyncio.open_connection(self._host, self._port)
            links.append(server_out)
            self._links.update(links)
            await asyncio.gather(_pipe(client_in, server_out), _pipe(server_in, client_out))
        finally:
            self._links.difference_update(links)
            for writer in links:
                writer.transport.abort()
            self._handlers.discard(handler)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until the source ends or fails, then drop the sink so the other direction ends too."""
    with contextlib.suppress(OSError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    sink.transport.abort()


@contextlib.asynccontextmanager
async def informing(
    api: Api, kinds: Iterable[Watched], *, absent_retry: float = 30.0
) -> AsyncIterator[Watch]:
    """Informers for `kinds` feeding one Watch over a ClusterCache, as the operator runs
    them, stopped on exit; one that stopped by itself fails the test."""
    status = StatusWriter(
        api, scheduler_name="batch-scheduler", instance="test", binds_idle=asyncio.Event()
    )
    watch = Watch(ClusterCache(), status)
    informers = [
        asyncio.create_task(Informer(api, kind, watch, absent_retry=absent_retry).run())
        for kind in kinds
    ]
    try:
        yield watch
    finally:
        for informer in informers:
            informer.cancel()
        for outcome in await asyncio.gather(*informers, return_exceptions=True):
            if not isinstance(outcome, asyncio.CancelledError):
                raise AssertionError(f"an informer stopped by itself: {outcome!r}")


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll `check` until it holds, letting the informers run in between."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        await asyncio.sleep(0.02)


def in_cluster(kube: Kube) -> dict[str, int]:
    """Every PodGroup of the kind, by cache key, with its minMember."""
    items = kube.get(PODGROUPS.path).expect(200)["items"]
    return {
        f"{pg['metadata']['namespace']}/{pg['metadata']['name']}": pg["spec"]["minMember"]
        for pg in items
    }


def in_cache(watch: Watch) -> dict[str, int]:
    """What the informer has given the cache of the same kind."""
    groups = watch.cache.pod_groups
    return {key: groups[key].min_member for key in watch.keys(PODGROUPS)}


def history_lost(kube: Kube, version: str) -> bool:
    """Whether a watch of the kind from `version` is answered 410 Gone."""
    query: dict[str, str | int] = {"watch": "true", "resourceVersion": version, "timeoutSeconds": 1}
    event = kube.get(PODGROUPS.path, query=query).body
    return event.get("type") == "ERROR" and event["object"].get("code") == 410


@pytest.fixture
def api_via(control_plane: ControlPlane) -> Callable[[str], Api]:
    """An Api with the admin's credentials that reaches the API server at `server`."""
    credentials = load_credentials(str(control_plane.kubeconfig))
    return lambda server: Api(replace(credentials, server=server))


@pytest.fixture
def rebuild_kind_cache(kube: Kube) -> Iterator[Callable[[], None]]:
    """Changes the CRD's spec (a printer column), so the API server drops its storage of
    the kind and builds it anew; the CRD is put back as it was afterwards."""
    original = kube.get(CRD_PATH).expect(200)["spec"]

    def rebuild() -> None:
        crd = kube.get(CRD_PATH).expect(200)
        column = {"name": "Min", "type": "integer", "jsonPath": ".spec.minMember"}
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = [column]
        kube.put(CRD_PATH, crd).expect(200)

    yield rebuild
    crd = kube.get(CRD_PATH).expect(200)
    if crd["spec"] != original:
        kube.put(CRD_PATH, {**crd, "spec": original}).expect(200)
    # For a moment after a change the kind answers 429 "storage is (re)initializing".
    kube.wait_for(PODGROUPS.path, lambda _: True)


@pytest.fixture
def reinstall_crd(kube: Kube) -> Iterator[Callable[[], None]]:
    """Deletes the CRD (and so every object of the kind) and gives the test the function
    that installs it again, which the teardown calls if the test did not."""
    manifests = [
        crd
        for crd in peer_crds("scheduler-plugins")
        if crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    ]
    kube.delete(CRD_PATH).expect(200)
    deadline = time.monotonic() + 30
    while kube.get(CRD_PATH).status != 404 or kube.get(PODGROUPS.path).status != 404:
        assert time.monotonic() < deadline, "the CRD was not deleted"
        time.sleep(0.02)

    def install() -> None:
        kube.apply_crds(manifests)

    yield install
    if kube.get(CRD_PATH).status == 404:
        install()


async def test_a_watch_resumed_after_the_server_lost_its_history_lists_again(
    kube: Kube,
    namespace: str,
    api_via: Callable[[str], Api],
    rebuild_kind_cache: Callable[[], None],
    control_plane: ControlPlane,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="batchsched.k8s.informer")
    path = f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups"
    for name in ("deleted", "modified", "unchanged"):
        kube.post(path, pod_group(name, 1, api_version=API_VERSION)).expect(201)
    relay = Relay(control_plane.server)
    await relay.start()
    api = api_via(relay.url)
    try:
        async with informing(api, [PODGROUPS]) as watch:
            await until(lambda: in_cache(watch) == in_cluster(kube), "the first list")
            before = in_cache(watch)

            relay.cut()
            # Listed after the cut, so no older than where the informer will resume: a
            # server that has forgotten this version has forgotten that one too.
            seen = kube.get(PODGROUPS.path).expect(200)["metadata"]["resourceVersion"]
            kube.delete(f"{path}/deleted").expect(200)
            kube.post(path, pod_group("created", 1, api_version=API_VERSION)).expect(201)
            kube.patch(f"{path}/modified", {"spec": {"minMember": 3}}).expect(200)
            rebuild_kind_cache()
            await until(lambda: history_lost(kube, seen), "the server answering 410 Gone")
            assert in_cache(watch) == before, "the informer saw changes while cut off"
            relay.mend()

            await until(lambda: in_cache(watch) == in_cluster(kube), "the cache as the cluster")
            current = in_cache(watch)
            assert f"{namespace}/deleted" not in current
            assert current[f"{namespace}/created"] == 1
            assert current[f"{namespace}/modified"] == 3
    finally:
        await api.close()
        await relay.close()
    relisted = [r for r in caplog.records if "listing again" in r.getMessage()]
    assert relisted, "the informer did not take the 410 for history lost"


async def test_a_kind_whose_crd_is_missing_is_picked_up_once_it_is_installed(
    kube: Kube,
    namespace: str,
    api_via: Callable[[str], Api],
    reinstall_crd: Callable[[], None],
    control_plane: ControlPlane,
) -> None:
    api = api_via(control_plane.server)
    try:
        async with informing(api, WATCHED, absent_retry=0.1) as watch:
            # The missing kind counts as listed: it does not keep the cache from syncing.
            await until(watch.synced.is_set, "the cache synced without the kind")
            # Installing takes seconds, during which the informers keep running.
            await asyncio.to_thread(reinstall_crd)
            path = f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups"
            kube.post(path, pod_group("late", 2, api_version=API_VERSION)).expect(201)
            await until(
                lambda: in_cache(watch).get(f"{namespace}/late") == 2, "the new kind's object"
            )
    finally:
        await api.close()


async def test_a_watch_checks_the_certificate_against_the_tls_server_name(
    kube: Kube, namespace: str, control_plane: ControlPlane
) -> None:
    """A kubeconfig's tls-server-name is what the server's certificate must name when the
    server's address does not (here a loopback address it does not list, by way of the
    relay); the watch must check it too, or it fails on every connection."""
    path = f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups"
    kube.post(path, pod_group("listed", 1, api_version=API_VERSION)).expect(201)
    relay = Relay(control_plane.server, address="127.0.0.2")
    await relay.start()
    credentials = load_credentials(str(control_plane.kubeconfig))
    api = Api(replace(credentials, server=relay.url, tls_server_name="localhost"))
    try:
        async with informing(api, [PODGROUPS]) as watch:
            await until(lambda: f"{namespace}/listed" in in_cache(watch), "the first list")
            kube.post(path, pod_group("watched", 1, api_version=API_VERSION)).expect(201)
            await until(lambda: f"{namespace}/watched" in in_cache(watch), "the watch event")
    finally:
        await api.close()
        await relay.close()


async def test_a_kind_is_listed_page_by_page_each_page_asked_for_once(
    kube: Kube,
    namespace: str,
    api_via: Callable[[str], Api],
    control_plane: ControlPlane,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups"
    for index in range(5):
        kube.post(path, pod_group(f"g{index}", index + 1, api_version=API_VERSION)).expect(201)
    monkeypatch.setattr(pages, "PAGE", 2)
    asked: list[str] = []
    page = pages._page

    async def spy(api: Api, path: str, token: str) -> bytes:
        asked.append(token)
        return await page(api, path, token)

    monkeypatch.setattr(pages, "_page", spy)
    api = api_via(control_plane.server)
    try:
        async with informing(api, [PODGROUPS]) as watch:
            await until(lambda: in_cache(watch) == in_cluster(kube), "the first list")
    finally:
        await api.close()
    assert len(asked) >= 3 and asked[0] == ""
    assert len(set(asked)) == len(asked), "a page was asked for twice"


async def test_kubernetes_own_gangs_not_served_are_said_so_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On an API server without the alpha gates (the default), the native PodGroups and
    DeviceTaintRules are absent, the cache syncs without them, and one warning per kind
    says what that means however often it is looked for again (the Workloads, shown
    only, and the peers' kinds, whose CRDs are missing here too, say nothing)."""
    [native] = [w for w in WATCHED if w.api_version == NATIVE_API and w.kind == "PodGroup"]
    with start_control_plane() as plain:
        api = Api(load_credentials(str(plain.kubeconfig)))
        lists = 0
        get_raw = api.get_raw

        async def counted(path: str) -> bytes:
            nonlocal lists
            lists += path.startswith(native.path)
            return await get_raw(path)

        api.get_raw = counted  # type: ignore[method-assign]
        try:
            with caplog.at_level(logging.INFO, logger="batchsched.k8s.informer"):
                async with informing(api, WATCHED, absent_retry=0.05) as watch:
                    await until(watch.synced.is_set, "the cache synced without the kind")
                    await until(lambda: lists >= 3, "the kind looked for three times")
        finally:
            await api.close()
    said = [r.getMessage() for r in caplog.records if "served" in r.getMessage()]
    [rules] = [w for w in WATCHED if w.kind == "DeviceTaintRule"]
    assert sorted(said) == sorted(f"{w.id} is not served: {w.absent_note}" for w in (native, rules))
    assert "--runtime-config=scheduling.k8s.io/v1alpha2=true" in native.absent_note
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in rules.absent_note
