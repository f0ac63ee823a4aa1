"""Events aggregated as client-go's tools/events aggregates them, and rate-limited."""

from typing import Any

from batchsched.k8s.client import ApiError, Requests
from batchsched.k8s.events import (
    FINISH_SECONDS,
    SERIES_WRITE_SECONDS,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    EventRecorder,
    Write,
)

from .recording_api import RecordingApi

POD = {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Sent:
    """Writes queued by the recorder, sent when the test says, newest per target."""

    def __init__(self) -> None:
        self.queued: dict[tuple[str, str], Write] = {}

    def __call__(self, target: tuple[str, str], write: Write) -> None:
        self.queued.pop(target, None)
        self.queued[target] = write

    async def send(self) -> None:
        queued, self.queued = self.queued, {}
        for write in queued.values():
            await write()


def recorder(api: Requests, queue: Sent, clock: Clock) -> EventRecorder:
    return EventRecorder(api, queue, controller="batch-scheduler", instance="i", clock=clock)


async def test_repeats_with_other_notes_join_one_event_whose_series_is_written_sparingly() -> None:
    api, queue, clock = RecordingApi(), Sent(), Clock()
    events = recorder(api, queue, clock)
    events.record(POD, "Warning", "FailedScheduling", "0/3 nodes are available", "Scheduling")
    await queue.send()
    [created] = api.sent("POST", "/namespaces/ns/events")
    assert "series" not in created
    assert created["regarding"] == POD

    clock.now += 1
    events.record(POD, "Warning", "FailedScheduling", "0/4 nodes are available", "Scheduling")
    await queue.send()
    # The second starts the series at once; the note stays (the API server refuses
    # to change it).
    [patch] = api.sent("PATCH", f"/events/{created['metadata']['name']}")
    assert patch["series"]["count"] == 2
    assert "note" not in patch

    for n in range(5, 40):
        clock.now += 1
        events.record(POD, "Warning", "FailedScheduling", f"0/{n} nodes", "Scheduling")
    await queue.send()
    assert len(api.sent("PATCH")) == 1, "repeats within a minute are counted, not written"

    clock.now += SERIES_WRITE_SECONDS
    events.flush()
    await queue.send()
    assert api.sent("PATCH")[-1]["series"]["count"] == 37
    assert len(api.sent("POST")) == 1


async def test_a_series_ends_with_its_final_count_and_a_later_repeat_is_a_new_event() -> None:
    api, queue, clock = RecordingApi(), Sent(), Clock()
    events = recorder(api, queue, clock)
    for _ in range(3):
        events.record(POD, "Warning", "FailedScheduling", "waiting", "Scheduling")
        await queue.send()
    assert [p["series"]["count"] for p in api.sent("PATCH")] == [2]
    clock.now += FINISH_SECONDS
    events.flush()
    await queue.send()
    assert [p["series"]["count"] for p in api.sent("PATCH")] == [2, 3]
    events.record(POD, "Warning", "FailedScheduling", "waiting", "Scheduling")
    await queue.send()
    assert len(api.sent("POST")) == 2


async def test_events_differing_by_reason_type_or_object_are_apart() -> None:
    api, queue, clock = RecordingApi(), Sent(), Clock()
    events = recorder(api, queue, clock)
    events.record(POD, "Warning", "FailedScheduling", "waiting", "Scheduling")
    events.record(POD, "Normal", "Scheduled", "assigned", "Binding")
    events.record({**POD, "uid": "u2"}, "Warning", "FailedScheduling", "waiting", "Scheduling")
    await queue.send()
    assert len(api.sent("POST")) == 3
    assert api.sent("PATCH") == []


async def test_new_events_about_one_object_are_rate_limited_as_the_spam_filter_does() -> None:
    api, queue, clock = RecordingApi(), Sent(), Clock()
    events = recorder(api, queue, clock)
    for n in range(SPAM_BURST + 5):
        events.record(POD, "Warning", f"Reason{n}", "x", "Scheduling")
    await queue.send()
    assert len(api.sent("POST")) == SPAM_BURST
    clock.now += SPAM_REFILL_SECONDS
    events.record(POD, "Warning", "Later", "x", "Scheduling")
    events.record(POD, "Warning", "Later2", "x", "Scheduling")
    await queue.send()
    assert len(api.sent("POST")) == SPAM_BURST + 1


async def test_a_series_whose_event_expired_is_created_again() -> None:
    def answer(method: str, path: str, body: Any) -> dict[str, Any]:
        if method == "PATCH":
            raise ApiError(method, path, 404, {"reason": "NotFound"})
        return {}

    api, queue, clock = RecordingApi(answer), Sent(), Clock()
    events = recorder(api, queue, clock)
    events.record(POD, "Warning", "FailedScheduling", "a", "Scheduling")
    await queue.send()
    events.record(POD, "Warning", "FailedScheduling", "b", "Scheduling")
    await queue.send()
    first, again = api.sent("POST")
    assert "series" not in first
    assert (again["note"], again["series"]["count"]) == ("a", 2)
