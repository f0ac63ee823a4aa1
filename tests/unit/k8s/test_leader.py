"""Leader election against an in-memory Lease with the API server's optimistic locking."""

import asyncio
import copy
from typing import Any, cast

import pytest

from batchsched.k8s import leader as leader_module
from batchsched.k8s.client import JSON, ApiError, Requests
from batchsched.k8s.leader import LeaderElection

from .recording_api import RecordingApi


class LeaseStore:
    """One Lease: creating an existing one or writing a stale version is a 409."""

    def __init__(self) -> None:
        self.lease: JSON | None = None
        self.version = 0

    def answer(self, method: str, path: str, body: Any) -> JSON:
        if method == "GET":
            if self.lease is None:
                raise ApiError(method, path, 404, {"message": "not found"})
            return copy.deepcopy(self.lease)
        stale = method == "PUT" and body["metadata"]["resourceVersion"] != str(self.version)
        if (method == "POST" and self.lease is not None) or stale:
            raise ApiError(method, path, 409, {"message": "conflict"})
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str | None:
        return None if self.lease is None else self.lease["spec"].get("holderIdentity")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The lease's clock, moved by hand; nothing here sleeps on it."""
    now = [1000.0]
    monkeypatch.setattr(leader_module, "_now", lambda: now[0])
    return now


def replica(store: LeaseStore, identity: str) -> LeaderElection:
    api = RecordingApi(store.answer)
    return LeaderElection(api, namespace="ns", name="sched", identity=identity)


async def test_one_replica_leads_and_the_other_waits_while_it_renews(clock: list[float]) -> None:
    store = LeaseStore()
    a, b = replica(store, "a"), replica(store, "b")
    await a._try_acquire_or_renew()
    assert a.leading() and store.holder == "a"
    for _ in range(10):
        clock[0] += 2
        await b._try_acquire_or_renew()
        await a._try_acquire_or_renew()
        assert a.leading() and not b.leading()
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 0


async def test_a_silent_leader_stops_before_another_takes_over(clock: list[float]) -> None:
    store = LeaseStore()
    a, b = replica(store, "a"), replica(store, "b")
    await a._try_acquire_or_renew()
    await b._try_acquire_or_renew()  # b sees a's record from now on
    clock[0] += a.renew_seconds
    assert not a.leading()  # a stops scheduling on its own ...
    await b._try_acquire_or_renew()
    assert store.holder == "a"  # ... before b may take the lease
    clock[0] += a.lease_seconds - a.renew_seconds
    await b._try_acquire_or_renew()
    assert b.leading() and store.holder == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1
    await a._try_acquire_or_renew()
    assert not a.leading()


async def test_a_released_lease_is_taken_at_once(clock: list[float]) -> None:
    store = LeaseStore()
    a, b = replica(store, "a"), replica(store, "b")
    await a._try_acquire_or_renew()
    await b._try_acquire_or_renew()
    await a.release()
    assert store.holder is None and not a.leading()
    await b._try_acquire_or_renew()
    assert b.leading()


async def test_losing_the_lease_ends_the_run(clock: list[float]) -> None:
    store = LeaseStore()
    a = replica(store, "a")
    a.retry_seconds = 0
    await a._try_acquire_or_renew()
    a.acquired.set()
    clock[0] += a.renew_seconds + 1
    cast(RecordingApi, a.api).answer = _unreachable
    with pytest.raises(leader_module.LeadershipLost):
        await a.run()


def _unreachable(method: str, path: str, body: Any) -> JSON:
    raise ApiError(method, path, 503, {"message": "unavailable"})


class HangingAfterFirst(Requests):
    """Answers like the store until `hang` is set, then never answers at all; counts the
    requests it holds, which only their caller giving up ends."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.hang = False
        self.held = 0
        self.abandoned = 0

    async def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "",
    ) -> JSON:
        if self.hang:
            self.held += 1
            try:
                await asyncio.Event().wait()
            finally:
                self.held -= 1
                self.abandoned += 1
        return self.store.answer(method, path, body)


async def test_a_hung_lease_request_ends_the_run_at_the_renew_deadline() -> None:
    """The lease outlives any bound a test could wait for, and a hung request never
    ends by itself: only the renew deadline, which cuts each request, can end the run."""
    api = HangingAfterFirst(LeaseStore())
    a = LeaderElection(
        api,
        namespace="ns",
        name="sched",
        identity="a",
        lease_seconds=3600,
        renew_seconds=0.4,
        retry_seconds=0.05,
    )
    run = asyncio.create_task(a.run())
    await asyncio.wait_for(a.acquired.wait(), 30)
    api.hang = True
    with pytest.raises(leader_module.LeadershipLost):
        await asyncio.wait_for(run, 60)
    # Each hung request was given up, none is left on the wire.
    assert api.abandoned >= 1 and api.held == 0
    assert not a.leading() and a.valid_for() == 0
