"""Events as kube-scheduler's recorder (client-go's tools/events) writes them.

An event is keyed, as client-go keys it, by its type, action, reason and the object it
is about (its uid included); the note is not part of the key. The first occurrence
creates an Event object. A repeat within `FINISH_SECONDS` of the last one joins it: the
second starts its `series` (count 2) and is written at once, as client-go does; later
repeats raise the count and are written at most every `SERIES_WRITE_SECONDS`, and the
final count once the series ends (no repeat for `FINISH_SECONDS`). The note is the
first occurrence's, as client-go keeps it: the API server refuses to change an event's
note. What a pod waits for now is in its PodScheduled condition.

On top of that, new Event objects about one object are rate-limited as the core/v1
recorder's spam filter limits them (a burst of `SPAM_BURST`, then one per
`SPAM_REFILL_SECONDS`), so a flood of distinct events cannot become a storm either.
"""

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from batchsched.k8s.client import JSON, STRATEGIC_MERGE_PATCH, ApiError, Requests
from batchsched.metrics import EVENTS_DROPPED

# client-go's finishTime: a series with no repeat for this long has ended.
FINISH_SECONDS = 6 * 60.0
# How often a series' count is written while it grows (client-go waits for the end, or
# 30 minutes; a user watching `kubectl describe` sees a count at most this old).
SERIES_WRITE_SECONDS = 60.0
# client-go's tools/record spam filter: 25 events at once per object, then one per 5 min.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
# The API server's limit on an event's note.
NOTE_LIMIT = 1024

ObjectRef = dict[str, str]
EventKey = tuple[str, str, str, tuple[tuple[str, str], ...]]
Write = Callable[[], Awaitable[object]]
# Queue a write: its target (one per Event object) and what sends it.
Enqueue = Callable[[tuple[str, str], Write], None]


def rfc3339(seconds: float, *, micro: bool = False) -> str:
    stamp = datetime.fromtimestamp(seconds, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Event:
    """One Event object: what it says and how much of its series was written."""

    name: str
    namespace: str
    body: JSON
    first: float
    last: float
    count: int = 1
    # The count the API server has (0: not created yet), and when it was last written.
    written: int = 0
    written_at: float = 0.0
    # One write at a time per object: a create still in flight would turn a patch into 404.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class EventRecorder:
    def __init__(
        self,
        api: Requests,
        enqueue: Enqueue,
        *,
        controller: str,
        instance: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.enqueue = enqueue
        self.controller = controller
        self.instance = instance
        self.clock = clock
        self._events: dict[EventKey, _Event] = {}
        self._buckets: dict[tuple[tuple[str, str], ...], _Bucket] = {}
        self._serial = itertools.count()

    def record(self, regarding: ObjectRef, type: str, reason: str, note: str, action: str) -> None:
        now = self.clock()
        ref = tuple(sorted(regarding.items()))
        key = (type, action, reason, ref)
        event = self._events.get(key)
        if event is not None and now - event.last < FINISH_SECONDS:
            event.count += 1
            event.last = now
            # The second occurrence starts the series at once, as client-go does.
            if event.count == 2 or now - event.written_at >= SERIES_WRITE_SECONDS:
                self._write(event)
            return
        if not self._allowed(ref, now):
            EVENTS_DROPPED.labels(reason).inc()
            return
        namespace = regarding.get("namespace", "default")
        name = f"{regarding['name']}.{int(now * 1e9):x}{next(self._serial):x}"
        body: JSON = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": rfc3339(now, micro=True),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "type": type,
            "note": note[:NOTE_LIMIT],
            "regarding": regarding,
        }
        event = _Event(name=name, namespace=namespace, body=body, first=now, last=now)
        self._events[key] = event
        self._write(event)

    def flush(self) -> None:
        """Write the counts of series that grew and are due, and the final count of those
        that ended; forget ended events and refilled buckets."""
        now = self.clock()
        for key, event in list(self._events.items()):
            ended = now - event.last >= FINISH_SECONDS
            if event.count > event.written and (
                ended or now - event.written_at >= SERIES_WRITE_SECONDS
            ):
                self._write(event, final=ended)
            if ended:
                del self._events[key]
        full = SPAM_BURST * SPAM_REFILL_SECONDS
        for ref, bucket in list(self._buckets.items()):
            if now - bucket.at >= full:
                del self._buckets[ref]

    def _allowed(self, ref: tuple[tuple[str, str], ...], now: float) -> bool:
        bucket = self._buckets.get(ref)
        if bucket is None:
            bucket = self._buckets[ref] = _Bucket(tokens=SPAM_BURST, at=now)
        bucket.tokens = min(SPAM_BURST, bucket.tokens + (now - bucket.at) / SPAM_REFILL_SECONDS)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _write(self, event: _Event, *, final: bool = False) -> None:
        event.written_at = self.clock()
        target = ("Event", f"{event.namespace}/{event.name}")
        self.enqueue(target, partial(self._send, event, final=final))

    async def _send(self, event: _Event, *, final: bool) -> object:
        """Create the event, or patch its series; what is sent is its state when sent.
        A series whose event expired (the API server keeps events an hour) is created
        again, but not for its final count alone."""
        async with event.lock:
            count = event.count
            if count <= event.written:
                return None
            path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events"
            series = self._series(event)
            reply: object
            if event.written:
                patch = {"series": series}
                try:
                    reply = await self.api.patch(
                        f"{path}/{event.name}", patch, content_type=STRATEGIC_MERGE_PATCH
                    )
                except ApiError as error:
                    if error.status != 404 or final:
                        raise
                    reply = await self.api.post(path, {**event.body, "series": series})
            else:
                body = {**event.body, "series": series} if count > 1 else event.body
                reply = await self.api.post(path, body)
            event.written = count
            return reply

    def _series(self, event: _Event) -> JSON:
        return {"count": event.count, "lastObservedTime": rfc3339(event.last, micro=True)}
