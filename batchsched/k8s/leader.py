"""Leader election with a coordination.k8s.io/v1 Lease, as kube-scheduler does it.

Two replicas must never both schedule. The holder renews every `retry_seconds` and stops
scheduling on its own once `renew_seconds` have passed without a successful renewal.
Another replica takes over only after it has seen the lease unchanged for the lease
duration by its own clock, which is longer than `renew_seconds`; so the old holder has
always stopped first, whatever the two clocks read. A holder that loses the lease exits
(like kube-scheduler) and starts over with a fresh cache. With client-go's defaults a
replica takes over at most lease + 2 x retry = 19 s after the holder died; a holder
that shuts down cleanly hands the lease over at once.

Stopping is fencing, and every writer does it itself (fence.py): `valid_for()` is asked
before each request and each retry, and again as its bytes are sent, and it bounds how
long the request may take, so none is still on the wire when the renew deadline passes.
Lease requests have a deadline of their own, so a hung lease request cannot hold the
loop past the renew deadline. The clock is CLOCK_BOOTTIME where there is one: unlike the
monotonic clock it keeps counting while the machine is suspended or its VM paused, so a
leader that wakes up knows it slept.
"""

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from batchsched.k8s.client import JSON, TRANSPORT_ERRORS, ApiError, Requests
from batchsched.metrics import LEADER

log = logging.getLogger(__name__)


class LeadershipLost(RuntimeError):
    """The lease could not be renewed in time; this replica must stop scheduling."""


def _now() -> float:
    """Seconds on a clock that does not stand still while the host is suspended."""
    return time.clock_gettime(_CLOCK)


_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElection:
    def __init__(
        self,
        api: Requests,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = 15,
        renew_seconds: float = 10.0,
        retry_seconds: float = 2.0,
    ) -> None:
        self.api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.retry_seconds = retry_seconds
        self.acquired = asyncio.Event()
        # When our last successful acquire or renew was sent (by _now).
        self._renewed: float | None = None
        # The other holder's record as last seen, and since when it has not changed.
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0

    def leading(self) -> bool:
        return self.valid_for() > 0

    def valid_for(self) -> float:
        """Seconds left before the renew deadline; 0 when the lease is not ours."""
        renewed = self._renewed
        if renewed is None:
            return 0.0
        return max(0.0, renewed + self.renew_seconds - _now())

    async def run(self) -> None:
        while True:
            # A renewal must prove the lease before the deadline, or it proves nothing.
            deadline = self.valid_for() or self.renew_seconds
            try:
                async with asyncio.timeout(min(deadline, self.renew_seconds / 2)):
                    await self._try_acquire_or_renew()
            except (ApiError, *TRANSPORT_ERRORS) as error:
                log.warning("lease %s/%s: %r", self.namespace, self.name, error)
            if self.acquired.is_set() and not self.leading():
                LEADER.set(0)
                raise LeadershipLost(
                    f"lease {self.namespace}/{self.name} not renewed for {self.renew_seconds:g}s"
                )
            # Wake at the deadline too: losing the lease is noticed when it happens.
            pause = self.retry_seconds
            if self.acquired.is_set():
                pause = min(pause, self.valid_for())
            await asyncio.sleep(pause)

    async def _try_acquire_or_renew(self) -> None:
        sent = _now()
        try:
            lease = await self.api.get(self.path)
        except ApiError as error:
            if error.status != 404:
                raise
            await self._write("POST", self._lease(transitions=0), sent)
            return
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder != self.identity:
            record = (holder, spec.get("renewTime"), lease["metadata"].get("resourceVersion"))
            if record != self._observed:
                self._observed, self._observed_at = record, sent
            duration = spec.get("leaseDurationSeconds") or self.lease_seconds
            if holder and sent - self._observed_at < duration:
                return
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        acquired = spec.get("acquireTime") if holder == self.identity else None
        body = self._lease(transitions=transitions, acquired=acquired)
        body["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
        await self._write("PUT", body, sent)

    def _lease(self, *, transitions: int, acquired: str | None = None) -> JSON:
        now = _micro_time()
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.lease_seconds,
                "acquireTime": acquired or now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    async def _write(self, method: str, body: JSON, sent: float) -> None:
        """Create or update the lease; losing the race to another replica is not an error."""
        collection = self.path.rsplit("/", 1)[0]
        try:
            await self.api.request(method, collection if method == "POST" else self.path, body)
        except ApiError as error:
            if error.status == 409:
                return
            raise
        if not self.acquired.is_set():
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
            LEADER.set(1)
            self.acquired.set()
        self._renewed = sent

    async def release(self) -> None:
        """Hand the lease over at shutdown, so a standby need not wait for it to expire."""
        if not self.leading():
            return
        self._renewed = None
        try:
            lease = await self.api.get(self.path)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {
                **lease["spec"],
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "renewTime": _micro_time(),
            }
            await self.api.put(self.path, lease)
        except (ApiError, *TRANSPORT_ERRORS) as error:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, error)
        LEADER.set(0)
