"""Carrying out what preempt and reclaim decide: victims evicted, preemptors nominated.

Each victim is removed in one of two ways (docs/preemption.md says why):
- through the Eviction API, with a precondition on its uid and no grace period of our
  own, so its own applies. The API server marks it `DisruptionTarget` (reason
  EvictionByEvictionAPI) as it accepts the eviction; the condition is then rewritten to
  kube-scheduler's reason and message, `PreemptionByScheduler`, so the pod says who
  took it. Evicting before marking leaves a pod a budget kept unmarked.
- deleted, when the session says the eviction exceeds a PodDisruptionBudget (the
  Eviction API would refuse it): marked first, then deleted with its grace period, as
  kube-scheduler deletes every victim.
Once the API server has accepted either, a `Preempted` event goes to the victim, and a
Kubernetes PodGroup the session's evictions leave short of what it needs (minCount, or
for a basic group every member) gets DisruptionTarget (status.py). A 404
(or a 409 on the uid: the pod was recreated) means the victim is gone already; a 429
from a budget (the session read a stale status.disruptionsAllowed) leaves the pod, with
a warning event quoting the budget, and it is not tried again for `refused_seconds`;
any other error is logged, and the next session may choose it again.

A preemptor's status.nominatedNodeName is written with a merge patch (null clears it),
one write per pod at a time: a nomination decided while an earlier one for the pod is
on its way replaces any still queued and is sent after it, so the write that lands last
is the one decided last, which the cache assumes meanwhile.

Fencing, as in the binder: `valid_for` is asked before every request and every retry,
and bounds how long it may take; once the lease cannot be proven, each write still
queued is dropped when its turn comes, unsent. Requests run `concurrency` at a time and
do not wait behind binds: the room they free is what the preemptors wait for.

What is handed over shows in the cache at once (cache.assume_evicted and
assume_nominated), as an assumed bind does: the victims as being deleted, the
preemptors nominated, until the watch shows it or the write is not made. So a session
that runs before the watch catches up (sessions run on any change, and the writes take
a while under load) holds the nominated room while the victims go, rather than taking
the preemptor for one still without room and choosing more victims for it; nor does
it choose a victim again. An eviction still queued or retried once every pod nominated
for its preemptor is bound (the room came free meanwhile) is dropped, as is a
nomination of a pod bound meanwhile: the API server refuses to nominate a bound pod.
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from batchsched.api.nativegroups import NATIVE_API
from batchsched.api.objects import PodGroup, Task
from batchsched.k8s.binder import LEASE_LOST
from batchsched.k8s.client import (
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiError,
    Requests,
    with_retries,
)
from batchsched.k8s.events import rfc3339
from batchsched.k8s.fence import Fenced, fenced
from batchsched.k8s.status import (
    DISRUPTION_TARGET,
    PREEMPTION_REASON,
    disruption_message,
    pod_ref,
)
from batchsched.k8s.watch import Watch
from batchsched.k8s.workers import run_workers
from batchsched.metrics import API_WRITES, PREEMPTION_FAILURES, PREEMPTION_VICTIMS
from batchsched.model.decisions import Eviction, Nomination

log = logging.getLogger(__name__)

# The cause type the Eviction API gives when a PodDisruptionBudget refuses (429).
BUDGET_CAUSE = "DisruptionBudget"
# How long a victim whose eviction a budget refused is left alone: the disruption
# controller needs a moment to bring status.disruptionsAllowed up to date.
REFUSED_SECONDS = 30.0

Work = Callable[[], Awaitable[object]]


class _Refused(Exception):
    """A PodDisruptionBudget refused the eviction; not retried, unlike other 429s."""

    def __init__(self, error: ApiError) -> None:
        super().__init__("; ".join((error.message, *error.explanations)))


class _Moot(Exception):
    """The preemptor a write was for (its victim's eviction, its own nomination) has
    been bound meanwhile."""


class Evictor:
    def __init__(
        self,
        api: Requests,
        watch: Watch,
        *,
        scheduler_name: str,
        valid_for: Callable[[], float],
        concurrency: int = 16,
        retry_seconds: float = 30.0,
        refused_seconds: float = REFUSED_SECONDS,
    ) -> None:
        self.api = api
        self.cache = watch.cache
        self.status = watch.status
        self.scheduler_name = scheduler_name
        self.valid_for = valid_for
        self.concurrency = concurrency
        self.retry_seconds = retry_seconds
        self.refused_seconds = refused_seconds
        self._queue: asyncio.Queue[Work] = asyncio.Queue()
        # Set while nothing is queued or in flight.
        self.idle = asyncio.Event()
        self.idle.set()
        self._unsettled = 0
        # Victim key -> (uid, monotonic time until which it is not sent again).
        self._sent: dict[str, tuple[str, float]] = {}
        # Pod key -> (uid, node) last written as its nominated node.
        self._nominated: dict[str, tuple[str, str]] = {}
        # Pods with a nomination queued or in flight, and the newest one decided for
        # each not yet sent: one write per pod at a time, so the last decided lands last.
        self._nominating: set[str] = set()
        self._next: dict[str, Nomination] = {}
        # Victim key -> the Kubernetes PodGroup its eviction is part of preempting.
        self._disrupting: dict[str, PodGroup] = {}

    def submit(self, evictions: Sequence[Eviction], nominations: Sequence[Nomination]) -> None:
        """Queue one session's evictions and nominations, leaving out what the cluster
        (as the cache shows it now) or an earlier session's writes have done already."""
        now = time.monotonic()
        self._forget_settled(now)
        # The pods each preemptor has nominated: its evictions are moot once they are
        # all bound.
        preempting: dict[str, list[str]] = {}
        for nomination in nominations:
            if nomination.node:
                preempting.setdefault(nomination.job, []).append(nomination.key)
        sent = {}
        for eviction in evictions:
            if self._current(eviction.key, eviction.uid) is None or eviction.key in self._sent:
                continue
            self._sent[eviction.key] = (eviction.uid, math.inf)
            sent[eviction.key] = eviction.uid
            preemptor = tuple(preempting.get(eviction.preemptor, ()))
            self._put(partial(self._evict, eviction, preemptor))
        if sent:
            disrupted = self._disrupted(evictions).items()
            self._disrupting.update((key, group) for key, group in disrupted if key in sent)
        for key, uid in sent.items():
            self.cache.assume_evicted(key, uid)
        for nomination in nominations:
            task = self._current(nomination.key, nomination.uid)
            written = (nomination.uid, nomination.node)
            if task is None or task.node_name is not None or _shown(task) == nomination.node:
                continue
            if self._nominated.get(nomination.key) == written:
                continue
            self._nominated[nomination.key] = written
            self.cache.assume_nominated(nomination.key, nomination.uid, nomination.node)
            self._next[nomination.key] = nomination
            if nomination.key not in self._nominating:
                self._nominating.add(nomination.key)
                self._put(partial(self._nominate_next, nomination.key))

    def _disrupted(self, evictions: Sequence[Eviction]) -> dict[str, PodGroup]:
        """Victim key -> its Kubernetes PodGroup, for groups these evictions leave with
        fewer running members than they need: those are preempted, not just trimmed."""
        taken: dict[str, set[str]] = {}
        groups: dict[str, PodGroup] = {}
        for eviction in evictions:
            task = self.cache.tasks.get(eviction.key)
            ref = task.group if task is not None else None
            group = self.cache.pod_groups.get(ref.key) if ref is not None else None
            if group is not None and group.api_version == NATIVE_API:
                taken.setdefault(group.key, set()).add(eviction.key)
                groups[group.key] = group
        if not taken:
            return {}
        running: dict[str, int] = dict.fromkeys(taken, 0)
        for key, task in self.cache.tasks.items():
            group_key = task.group.key if task.group is not None else None
            if group_key in running and _holds_node(task) and key not in taken[group_key]:
                running[group_key] += 1
        return {
            victim: groups[group_key]
            for group_key, victims in taken.items()
            if running[group_key] < max(groups[group_key].min_member, 1)
            for victim in victims
        }

    def _current(self, key: str, uid: str) -> Task | None:
        """The pod as the cache shows it, if it is still the one decided about and is
        not being deleted already."""
        task = self.cache.tasks.get(key)
        if task is None or task.uid != uid or task.deleting:
            return None
        return task

    def _forget_settled(self, now: float) -> None:
        """Victims the watch shows deleting or gone, or whose refusal has expired, and
        nominations the watch shows written or whose pods are gone."""
        self._sent = {
            key: (uid, until)
            for key, (uid, until) in self._sent.items()
            if until > now and self._current(key, uid) is not None
        }
        self._nominated = {
            key: (uid, node)
            for key, (uid, node) in self._nominated.items()
            if (task := self._current(key, uid)) is not None and _shown(task) != node
        }

    def _put(self, work: Work) -> None:
        self._unsettled += 1
        self.idle.clear()
        self._queue.put_nowait(work)

    async def run(self) -> None:
        await run_workers(self.concurrency, self._work)

    async def _work(self) -> None:
        while True:
            work = await self._queue.get()
            try:
                await work()
            finally:
                self._unsettled -= 1
                if not self._unsettled:
                    self.idle.set()

    async def _send(self, request: Work, *, moot: Callable[[], bool] = lambda: False) -> None:
        """One request, retried while it fails transiently; each attempt is sent only
        while the lease is ours and given up before it may not be, and only while what
        it is for is still to do (`moot`)."""

        async def attempt() -> None:
            if moot():
                raise _Moot
            async with fenced(self.valid_for):
                await request()

        await with_retries(attempt, seconds=self.retry_seconds)

    # Victims.

    async def _evict(self, eviction: Eviction, preemptor: tuple[str, ...]) -> None:
        """Evict one victim; `preemptor` holds the keys of the pods nominated for the
        job it is evicted for. Once marked (a victim past its budget) it is deleted
        even if they were bound meanwhile, so that the condition does not lie."""
        group = self._disrupting.pop(eviction.key, None)
        moot = partial(self._placed, preemptor)
        try:
            if eviction.budget:
                await self._send(partial(self._mark, eviction), moot=moot)
                await self._send(partial(self._delete, eviction))
            else:
                await self._send(partial(self._post_eviction, eviction), moot=moot)
        except _Moot:
            self._sent.pop(eviction.key, None)
            self.cache.spare(eviction.key)
            log.info("%s: not evicted: %s was placed meanwhile", eviction.key, eviction.preemptor)
            return
        except Fenced:
            self._sent.pop(eviction.key, None)
            self.cache.spare(eviction.key)
            PREEMPTION_FAILURES.labels("fenced").inc()
            log.warning("%s: not evicted: %s", eviction.key, LEASE_LOST)
            return
        except _Refused as refused:
            self._refused(eviction, refused)
            return
        except ApiError as error:
            if error.status in (404, 409):
                log.info("%s: not evicted, it is gone already: %s", eviction.key, error.message)
            else:
                self._failed(eviction, str(error))
            return
        except TRANSPORT_ERRORS as error:
            self._failed(eviction, repr(error))
            return
        PREEMPTION_VICTIMS.labels(eviction.action).inc()
        log.info(
            "%s: %s on %s for %s", eviction.key, eviction.action, eviction.node, eviction.preemptor
        )
        self.status.event(
            pod_ref(eviction.key, eviction.uid),
            "Normal",
            "Preempted",
            _note(eviction),
            action="Preempting",
        )
        if group is not None:
            kind = "podgroup" if eviction.preemptor in self.cache.pod_groups else "pod"
            self.status.group_disrupted(group, kind)
        if not eviction.budget:
            await self._relabel(eviction)

    async def _mark(self, eviction: Eviction) -> None:
        """The DisruptionTarget condition, kube-scheduler's words; the uid in the patch
        makes the API server refuse it for a pod of the same name recreated since."""
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_REASON,
            "message": disruption_message(self.scheduler_name),
            "lastTransitionTime": rfc3339(time.time()),
        }
        body = {"metadata": {"uid": eviction.uid}, "status": {"conditions": [condition]}}
        await self.api.patch(
            f"{_pod_path(eviction)}/status", body, content_type=STRATEGIC_MERGE_PATCH
        )

    async def _post_eviction(self, eviction: Eviction) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": eviction.name, "namespace": eviction.namespace},
            "deleteOptions": {"preconditions": {"uid": eviction.uid}},
        }
        try:
            await self.api.post(f"{_pod_path(eviction)}/eviction", body)
        except ApiError as error:
            if error.status == 429 and BUDGET_CAUSE in error.causes:
                raise _Refused(error) from error
            raise

    async def _delete(self, eviction: Eviction) -> None:
        """DELETE with the uid as precondition and no grace period: the pod's applies."""
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": eviction.uid},
        }
        await self.api.request("DELETE", _pod_path(eviction), body)

    async def _relabel(self, eviction: Eviction) -> None:
        """After an eviction: the condition the API server set, in kube-scheduler's
        words. Best effort: the pod may be gone already, and it is marked either way."""
        try:
            await self._send(partial(self._mark, eviction))
        except Fenced:
            API_WRITES.labels("disruption_target", "fenced").inc()
        except (ApiError, *TRANSPORT_ERRORS) as error:
            gone = isinstance(error, ApiError) and error.status == 404
            if not gone:
                log.warning(
                    "%s: evicted, but its condition still says so in the API server's words: %s",
                    eviction.key,
                    error,
                )
            API_WRITES.labels("disruption_target", "gone" if gone else "failed").inc()
        else:
            API_WRITES.labels("disruption_target", "ok").inc()

    def _placed(self, keys: tuple[str, ...]) -> bool:
        """Whether the pods of these keys (a preemptor's nominated pods) are all bound
        or assumed bound."""
        tasks = self.cache.tasks
        return bool(keys) and all(
            (task := tasks.get(key)) is not None and task.node_name is not None for key in keys
        )

    def _refused(self, eviction: Eviction, refused: _Refused) -> None:
        PREEMPTION_FAILURES.labels("refused").inc()
        self.cache.spare(eviction.key)
        self._sent[eviction.key] = (eviction.uid, time.monotonic() + self.refused_seconds)
        message = f"not evicted for {eviction.preemptor}: {refused}"
        log.warning("%s: %s", eviction.key, message)
        self.status.event(
            pod_ref(eviction.key, eviction.uid),
            "Warning",
            "EvictionRefused",
            message,
            action="Preempting",
        )

    def _failed(self, eviction: Eviction, why: str) -> None:
        PREEMPTION_FAILURES.labels("error").inc()
        self.cache.spare(eviction.key)
        self._sent.pop(eviction.key, None)
        log.error("%s: could not be evicted for %s: %s", eviction.key, eviction.preemptor, why)

    # Preemptors.

    async def _nominate_next(self, key: str) -> None:
        """Write the newest nomination decided for the pod; one decided meanwhile is
        queued after it."""
        try:
            await self._nominate(self._next.pop(key))
        finally:
            if key in self._next:
                self._put(partial(self._nominate_next, key))
            else:
                self._nominating.discard(key)

    def _unwritten(self, nomination: Nomination) -> None:
        """A nomination not written: the pod shows what the watch does again, unless a
        newer one is queued, which then holds it."""
        if nomination.key in self._next:
            return
        self._nominated.pop(nomination.key, None)
        self.cache.unnominate(nomination.key)

    async def _nominate(self, nomination: Nomination) -> None:
        body = {
            "metadata": {"uid": nomination.uid},
            "status": {"nominatedNodeName": nomination.node or None},
        }
        path = f"/api/v1/namespaces/{nomination.namespace}/pods/{nomination.name}/status"
        try:
            await self._send(
                partial(self.api.patch, path, body), moot=partial(self._placed, (nomination.key,))
            )
        except _Moot:
            self._unwritten(nomination)
            log.info("%s: not nominated: it was bound meanwhile", nomination.key)
            return
        except Fenced:
            self._unwritten(nomination)
            API_WRITES.labels("nomination", "fenced").inc()
            return
        except (ApiError, *TRANSPORT_ERRORS) as error:
            self._unwritten(nomination)
            gone = isinstance(error, ApiError) and error.status == 404
            if not gone:
                log.error("%s: nominated node not written: %s", nomination.key, error)
            API_WRITES.labels("nomination", "gone" if gone else "failed").inc()
            return
        API_WRITES.labels("nomination", "ok").inc()


def _holds_node(task: Task) -> bool:
    """A member running or bound, not on its way out."""
    return task.node_name is not None and not task.deleting and task.phase in ("Pending", "Running")


def _shown(task: Task) -> str:
    """The nominated node the pod shows, "" for none."""
    return task.nominated_node or ""


def _pod_path(eviction: Eviction) -> str:
    return f"/api/v1/namespaces/{eviction.namespace}/pods/{eviction.name}"


def _note(eviction: Eviction) -> str:
    """The event's note: the session's sentence, and why a pod was deleted rather than
    evicted when it was."""
    if not eviction.budget:
        return eviction.message
    return (
        f"{eviction.message}; deleted rather than evicted: PodDisruptionBudget "
        f"{eviction.budget} allows no more disruptions, so the Eviction API would refuse it"
    )
