"""What the evictor sends for preemption's decisions, and how it takes the answers:
the victims' condition, eviction or deletion and event, the preemptors' nominated
nodes, budgets refusing, pods gone, errors, fencing and how many requests at once."""

import asyncio
import copy
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from batchsched.api.nativegroups import NATIVE_API
from batchsched.k8s.client import JSON, ApiError
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.watch import PODS, WATCHED, Watch
from batchsched.model.decisions import Eviction, EvictionAction, Nomination

from .recording_api import RecordingApi, settle, watch_over
from tests.support.objects import member, native_pod_group, pod

MESSAGE = "preempted by default/high on n1: job default/high has priority 1000, this pod 0"
TOO_MANY = {
    "reason": "TooManyRequests",
    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
    "details": {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget keep needs 2 healthy pods and has 2 currently",
            }
        ]
    },
}


def victim(
    name: str = "low-0", *, budget: str = "", action: EvictionAction = "preempt"
) -> Eviction:
    return Eviction(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        node="n1",
        action=action,
        preemptor="default/high",
        message=MESSAGE,
        budget=budget,
    )


def nomination(name: str = "high-0", node: str = "n1") -> Nomination:
    return Nomination("default", name, f"uid-{name}", node, "default/high")


def running(
    watch: Watch, name: str, *, nominated: str | None = None, pending: bool = False
) -> JSON:
    """The pod as the watch shows it: running on n1, or `pending` (so when nominated)."""
    pending = pending or nominated is not None
    obj = pod(name, requests={"cpu": "1"}, node_name=None if pending else "n1", namespace="default")
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["status"] = {"phase": "Pending" if pending else "Running"}
    if nominated:
        obj["status"]["nominatedNodeName"] = nominated
    watch.apply(PODS, obj)
    return obj


def evictor_over(api: RecordingApi, **options: Any) -> tuple[Evictor, Watch]:
    watch = watch_over(api)
    for name in ("low-0", "low-1", "low-2"):
        running(watch, name)
    running(watch, "high-0", pending=True)
    options.setdefault("valid_for", unbounded)
    return Evictor(api, watch, scheduler_name="batch-scheduler", **options), watch


async def carry_out(
    evictor: Evictor,
    evictions: list[Eviction],
    nominations: list[Nomination] | None = None,
) -> None:
    """Submit one session's decisions and run the evictor until they are settled."""
    runner = asyncio.create_task(evictor.run())
    evictor.submit(evictions, nominations or [])
    await asyncio.wait_for(evictor.idle.wait(), 30)
    runner.cancel()


def counted(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def events(api: RecordingApi) -> list[JSON]:
    return list(api.sent("POST", "/events"))


async def test_a_victim_is_evicted_then_marked_and_told_why() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    before = counted("batchsched_preemption_victims_total", action="reclaim")
    await carry_out(evictor, [victim(action="reclaim")])
    await settle(watch.status)
    methods = [(m, path.rsplit("/", 1)[1]) for m, path, _ in api.requests if "/events" not in path]
    assert methods == [("POST", "eviction"), ("PATCH", "status")]
    [eviction] = api.sent("POST", "/eviction")
    assert eviction["kind"] == "Eviction" and eviction["apiVersion"] == "policy/v1"
    # The pod's own grace period applies: none is given.
    assert eviction["deleteOptions"] == {"preconditions": {"uid": "uid-low-0"}}
    [patch] = api.sent("PATCH", "/pods/low-0/status")
    assert patch["metadata"] == {"uid": "uid-low-0"}
    [condition] = patch["status"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "batch-scheduler: preempting to accommodate a higher priority pod",
    }
    [event] = events(api)
    assert (event["type"], event["reason"], event["note"]) == ("Normal", "Preempted", MESSAGE)
    assert event["regarding"]["name"] == "low-0" and event["regarding"]["uid"] == "uid-low-0"
    assert counted("batchsched_preemption_victims_total", action="reclaim") == before + 1


async def test_a_victim_past_its_budget_is_marked_then_deleted_and_the_event_says_so() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    await carry_out(evictor, [victim(budget="default/keep")])
    await settle(watch.status)
    methods = [(m, path.rsplit("/", 1)[1]) for m, path, _ in api.requests if "/events" not in path]
    assert methods == [("PATCH", "status"), ("DELETE", "low-0")]
    assert not api.sent("POST", "/eviction")
    [options] = api.sent("DELETE", "/pods/low-0")
    assert options["preconditions"] == {"uid": "uid-low-0"}
    assert "gracePeriodSeconds" not in options
    [event] = events(api)
    assert event["note"].startswith(MESSAGE)
    assert "deleted rather than evicted" in event["note"] and "default/keep" in event["note"]


@pytest.mark.parametrize("status", [404, 409])
async def test_a_victim_gone_already_is_neither_counted_nor_reported(status: int) -> None:
    def gone(method: str, path: str, body: Any) -> JSON:
        raise ApiError(method, path, status, {"message": "not there"})

    api = RecordingApi(answer=gone)
    evictor, watch = evictor_over(api)
    victims = counted("batchsched_preemption_victims_total", action="preempt")
    failures = counted("batchsched_preemption_failures_total", reason="error")
    await carry_out(evictor, [victim()])
    await settle(watch.status)
    assert len(api.requests) == 1
    assert counted("batchsched_preemption_victims_total", action="preempt") == victims
    assert counted("batchsched_preemption_failures_total", reason="error") == failures


async def test_a_budget_refusing_leaves_the_pod_with_a_warning_naming_the_budget() -> None:
    def refuse(method: str, path: str, body: Any) -> JSON:
        if path.endswith("/eviction"):
            raise ApiError(method, path, 429, TOO_MANY)
        return {}

    api = RecordingApi(answer=refuse)
    evictor, watch = evictor_over(api)
    refused = counted("batchsched_preemption_failures_total", reason="refused")
    await carry_out(evictor, [victim()])
    # Refused at once, not retried as a throttled request would be.
    assert len(api.sent("POST", "/eviction")) == 1
    assert not api.sent("PATCH")
    await settle(watch.status)
    [event] = events(api)
    assert (event["type"], event["reason"]) == ("Warning", "EvictionRefused")
    assert "The disruption budget keep needs 2 healthy pods" in event["note"]
    assert "default/high" in event["note"]
    assert counted("batchsched_preemption_failures_total", reason="refused") == refused + 1
    # The next session choosing it again does not send it again at once.
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 1


async def test_a_refused_victim_is_tried_again_once_its_pause_is_over() -> None:
    def refuse(method: str, path: str, body: Any) -> JSON:
        raise ApiError(method, path, 429, TOO_MANY)

    api = RecordingApi(answer=refuse)
    evictor, _ = evictor_over(api, refused_seconds=0.0)
    await carry_out(evictor, [victim()])
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 2


async def test_a_throttled_eviction_is_retried() -> None:
    answers = iter([ApiError("POST", "", 429, {"message": "slow down"})])

    def throttle(method: str, path: str, body: Any) -> JSON:
        error = next(answers, None)
        if error is not None:
            raise error
        return {}

    api = RecordingApi(answer=throttle)
    evictor, _ = evictor_over(api)
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 2
    assert len(api.sent("PATCH", "/status")) == 1


async def test_an_error_is_logged_naming_the_pod_and_the_next_session_may_try_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(method: str, path: str, body: Any) -> JSON:
        raise ApiError(method, path, 500, {"message": "etcd is unhappy"})

    api = RecordingApi(answer=broken)
    evictor, _ = evictor_over(api, retry_seconds=0.0)
    failures = counted("batchsched_preemption_failures_total", reason="error")
    with caplog.at_level(logging.ERROR, logger="batchsched.k8s.evictor"):
        await carry_out(evictor, [victim("low-1")])
    assert "default/low-1" in caplog.text and "etcd is unhappy" in caplog.text
    assert counted("batchsched_preemption_failures_total", reason="error") == failures + 1
    await carry_out(evictor, [victim("low-1")])
    assert len(api.sent("POST", "/eviction")) == 2


async def test_a_replica_that_cannot_prove_its_lease_sends_nothing() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api, valid_for=lambda: 0.0)
    fenced = counted("batchsched_preemption_failures_total", reason="fenced")
    await carry_out(
        evictor, [victim("low-0"), victim("low-1", budget="default/keep")], [nomination()]
    )
    await settle(watch.status)
    assert api.requests == []
    assert counted("batchsched_preemption_failures_total", reason="fenced") == fenced + 2


async def test_the_lease_lost_after_the_condition_stops_the_deletion() -> None:
    valid = iter([5.0])
    api = RecordingApi()
    evictor, _ = evictor_over(api, valid_for=lambda: next(valid, 0.0))
    await carry_out(evictor, [victim(budget="default/keep")])
    assert [m for m, _, _ in api.requests] == ["PATCH"]


async def test_a_victim_fenced_is_sent_again_once_the_lease_is_regained() -> None:
    lease = 0.0
    api = RecordingApi()
    evictor, _ = evictor_over(api, valid_for=lambda: lease)
    await carry_out(evictor, [victim()])
    assert api.requests == []
    # No session ran while the lease was lost; leading again, the same decision is sent.
    lease = 5.0
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 1


async def test_a_victim_is_sent_once_until_the_watch_shows_it_deleting() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    await carry_out(evictor, [victim()])
    # A session that ran before the watch saw the eviction chooses it again.
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 1
    # Deleting, then recreated under the same name: the new pod is another victim.
    obj = running(watch, "low-0")
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    watch.apply(PODS, obj)
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 1
    watch.delete(PODS, "default/low-0")
    recreated = copy.deepcopy(obj)
    del recreated["metadata"]["deletionTimestamp"]
    watch.apply(PODS, recreated)
    await carry_out(evictor, [victim()])
    assert len(api.sent("POST", "/eviction")) == 2


async def test_victims_the_cluster_changed_under_are_not_sent() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    watch.delete(PODS, "default/low-0")
    other = running(watch, "low-1")
    other["metadata"]["uid"] = "a-new-pod"
    watch.apply(PODS, other)
    await carry_out(evictor, [victim("low-0"), victim("low-1")])
    assert api.requests == []


async def test_evictions_run_concurrently_up_to_the_limit() -> None:
    in_flight = 0
    most = 0

    class SlowApi(RecordingApi):
        async def request(
            self, method: str, path: str, body: object = None, *, content_type: str = ""
        ) -> JSON:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.02)
            in_flight -= 1
            return await super().request(method, path, body)

    api = SlowApi()
    evictor, watch = evictor_over(api, concurrency=2)
    for name in ("low-3", "low-4"):
        running(watch, name)
    await carry_out(evictor, [victim(f"low-{i}") for i in range(5)])
    assert len(api.sent("POST", "/eviction")) == 5
    assert most == 2


async def test_a_preemptor_gets_its_nominated_node_and_a_stale_one_is_cleared() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    running(watch, "high-1", nominated="n2")
    await carry_out(evictor, [], [nomination("high-0", "n1"), nomination("high-1", "")])
    written = {path.split("/")[-2]: body for m, path, body in api.requests if m == "PATCH"}
    assert written == {
        "high-0": {"metadata": {"uid": "uid-high-0"}, "status": {"nominatedNodeName": "n1"}},
        "high-1": {"metadata": {"uid": "uid-high-1"}, "status": {"nominatedNodeName": None}},
    }


async def test_a_nomination_is_written_once_and_not_when_the_pod_shows_it() -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    running(watch, "high-1", nominated="n1")
    await carry_out(evictor, [], [nomination("high-0"), nomination("high-1")])
    await carry_out(evictor, [], [nomination("high-0")])
    assert [path.split("/")[-2] for _, path, _ in api.requests] == ["high-0"]
    # Once the watch shows it, another node is written again.
    running(watch, "high-0", nominated="n1")
    await carry_out(evictor, [], [nomination("high-0", "n3")])
    assert len(api.requests) == 2


async def test_a_nomination_decided_while_one_is_on_its_way_lands_last() -> None:
    held = asyncio.Event()

    class HoldingApi(RecordingApi):
        """Holds the first write in flight until the test lets it land."""

        async def request(
            self, method: str, path: str, body: object = None, *, content_type: str = ""
        ) -> JSON:
            first = not self.requests
            self.requests.append((method, path, body))
            if first:
                await held.wait()
            return self.answer(method, path, body)

    api = HoldingApi()
    evictor, watch = evictor_over(api)
    runner = asyncio.create_task(evictor.run())
    evictor.submit([], [nomination("high-0", "n1")])
    async with asyncio.timeout(30):
        while not api.requests:
            await asyncio.sleep(0)
    # Two later sessions decide again while the first write is on its way: the newer
    # replaces the older still queued, and it is sent once the first has landed.
    evictor.submit([], [nomination("high-0", "n2")])
    evictor.submit([], [nomination("high-0", "n3")])
    for _ in range(5):
        await asyncio.sleep(0)
    held.set()
    await asyncio.wait_for(evictor.idle.wait(), 30)
    runner.cancel()
    landed = [body["status"]["nominatedNodeName"] for _, _, body in api.requests]
    assert landed == ["n1", "n3"]
    # The watch shows the first write: the cache keeps the one that landed last.
    running(watch, "high-0", nominated="n1")
    assert watch.cache.tasks["default/high-0"].nominated_node == "n3"


def native_members(watch: Watch, min_count: int | None, names: list[str]) -> None:
    """A Kubernetes PodGroup "g" of minCount `min_count`, its members running on n1."""
    group = native_pod_group("g", min_count, namespace="default")
    watch.apply(next(w for w in WATCHED if w.api_version == NATIVE_API), group)
    for name in names:
        obj = member(name, "g", {"cpu": "1"}, node_name="n1", namespace="default")
        obj["metadata"]["uid"] = f"uid-{name}"
        obj["status"] = {"phase": "Running"}
        watch.apply(PODS, obj)


GROUP_STATUS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/g/status"


@pytest.mark.parametrize(
    ("min_count", "evicted", "disrupted"),
    [
        # Taking the gang below minCount preempts it; taking its spare members does not.
        (2, ["m0", "m1"], True),
        (2, ["m2"], False),
        (3, ["m2"], True),
        # A basic group is preempted once none of it runs.
        (None, ["m0", "m1"], False),
        (None, ["m0", "m1", "m2"], True),
    ],
)
async def test_a_native_group_preempted_below_what_it_needs_is_a_disruption_target(
    min_count: int | None, evicted: list[str], disrupted: bool
) -> None:
    api = RecordingApi()
    evictor, watch = evictor_over(api)
    native_members(watch, min_count, ["m0", "m1", "m2"])
    await carry_out(evictor, [victim(name) for name in evicted])
    await settle(watch.status)
    patches = api.sent("PATCH", GROUP_STATUS)
    assert bool(patches) == disrupted
    for patch in patches:
        [condition] = patch["status"]["conditions"]
        assert (condition["type"], condition["reason"], condition["message"]) == (
            "DisruptionTarget",
            "PreemptionByScheduler",
            "batch-scheduler: preempting to accommodate a higher priority pod",
        )


async def test_a_native_group_is_not_marked_when_its_eviction_is_refused() -> None:
    api = RecordingApi(answer=lambda method, path, body: _refuse(method, path))
    evictor, watch = evictor_over(api)
    native_members(watch, 2, ["m0", "m1"])
    await carry_out(evictor, [victim("m0"), victim("m1")])
    await settle(watch.status)
    assert api.sent("PATCH", GROUP_STATUS) == []


def _refuse(method: str, path: str) -> JSON:
    if path.endswith("/eviction"):
        raise ApiError(method, path, 429, TOO_MANY)
    return {}
