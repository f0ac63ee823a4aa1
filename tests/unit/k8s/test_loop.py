"""The session loop's hand-off from a session to the binder: decisions are sent only
while the pods and nodes they were made for are still there as they were."""

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from batchsched.config.load import default_config, load_config
from batchsched.k8s import loop as session_loop
from batchsched.k8s import watch as watch_module
from batchsched.k8s.binder import Binder
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.forked import run_forked
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.watch import PODS, WATCHED
from batchsched.model.decisions import Binding, Deallocation

from .recording_api import RecordingApi, WaitedFor, settle, watch_over
from tests.support.objects import gang, node, pod, pod_group

NODES = next(w for w in WATCHED if w.kind == "Node")
GROUPS = next(w for w in WATCHED if w.kind == "PodGroup")  # ours come first


def setup() -> tuple[SessionLoop, RecordingApi]:
    api = RecordingApi()
    watch = watch_over(api)
    watch.apply(NODES, node("n1", cpu="4"))
    for i, obj in enumerate(gang("g", 2, requests={"cpu": "1"}, namespace="default")):
        obj["metadata"]["uid"] = f"uid-{i}"
        watch.apply(PODS if obj["kind"] == "Pod" else GROUPS, obj)
    binder = Binder(api, watch, valid_for=unbounded, idle=watch.status.binds_idle)
    evictor = Evictor(api, watch, scheduler_name="batch-scheduler", valid_for=unbounded)
    return SessionLoop(default_config(), watch, binder, evictor=evictor, leading=lambda: True), api


def binding(member: int, *, node: str = "n1") -> Binding:
    return Binding(
        namespace="default", name=f"g-{member}", uid=f"uid-{member + 1}", node=node, job="g"
    )


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The sessions run in a forked child, as they are."""
    forked: list[object] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        forked.append(args)
        return await run_forked(*args, **kwargs)

    monkeypatch.setattr(session_loop, "run_forked", counted)
    return forked


@pytest.mark.parametrize("small", [True, False], ids=["in the event loop", "forked"])
async def test_a_session_assumes_and_sends_every_binding(
    monkeypatch: pytest.MonkeyPatch, forks: list[object], small: bool
) -> None:
    if not small:
        monkeypatch.setattr(session_loop, "INLINE_CLUSTER_OBJECTS", 0)
    loop, api = setup()
    runner = asyncio.create_task(loop.binder.run())
    await loop.session()
    await asyncio.wait_for(loop.binder.idle.wait(), 30)
    runner.cancel()
    assert sorted(p["metadata"]["name"] for p in api.sent("POST", "/binding")) == ["g-0", "g-1"]
    assert loop.cache.tasks["default/g-0"].node_name == "n1"
    assert len(forks) == (0 if small else 1)


async def test_jobs_set_aside_are_not_tried_and_leave_a_session_small(
    forks: list[object],
) -> None:
    loop, _ = setup()
    for i in range(session_loop.INLINE_PENDING_PODS + 1):
        loop.watch.apply(PODS, pod(f"huge-{i}", requests={"cpu": "64"}, namespace="default"))
    runner = asyncio.create_task(loop.binder.run())
    await loop.session()
    assert len(forks) == 1
    loop.watch.apply(PODS, pod("small", requests={"cpu": "1"}, namespace="default"))
    await loop.session()
    await asyncio.wait_for(loop.binder.idle.wait(), 30)
    runner.cancel()
    # The huge pods were set aside: the second session placed the small pod alone, in
    # the event loop, and said of them what the first did.
    assert len(forks) == 1
    assert loop.cache.tasks["default/small"].node_name == "n1"
    assert len(loop.keeper.take(now=time.time()).set_aside) == session_loop.INLINE_PENDING_PODS + 1


@pytest.mark.parametrize(
    "change",
    ["recreated", "deleted", "bound elsewhere", "node removed"],
)
async def test_a_job_whose_pods_or_node_changed_during_the_session_is_not_sent(
    change: str,
) -> None:
    loop, _ = setup()
    cache = loop.cache
    if change == "recreated":
        cache.tasks["default/g-1"].uid = "uid-new"
    elif change == "deleted":
        del cache.tasks["default/g-1"]
    elif change == "bound elsewhere":
        cache.tasks["default/g-1"].node_name = "n2"
    else:
        del cache.nodes["n1"]
    loop.watch.changes.take()
    loop._accept([binding(0), binding(1)])
    assert loop.binder.idle.is_set(), "nothing was queued"
    assert cache.tasks["default/g-0"].node_name is None, "no member is assumed"
    assert loop.watch.changes.take(), "the next session looks again"


def scheduled_attempts() -> float:
    sample = REGISTRY.get_sample_value(
        "batchsched_schedule_attempts_total", {"result": "scheduled"}
    )
    return sample or 0.0


async def test_a_job_dropped_at_hand_off_is_not_reported_as_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, api = setup()
    accept = loop._accept

    def recreated_meanwhile(bindings: Sequence[Binding]) -> None:
        loop.cache.tasks["default/g-1"].uid = "uid-new"
        accept(bindings)

    monkeypatch.setattr(loop, "_accept", recreated_meanwhile)
    before = scheduled_attempts()
    await loop.session()
    await settle(loop.status)
    assert scheduled_attempts() == before
    assert not api.sent("PATCH", "/podgroups/"), "the next session writes the group's status"
    assert not api.sent("POST", "/binding")


async def test_a_job_sent_at_hand_off_counts_as_scheduled() -> None:
    loop, _ = setup()
    before = scheduled_attempts()
    await loop.session()
    assert scheduled_attempts() == before + 2


async def test_the_collector_comes_back_if_the_cache_never_syncs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, _ = setup()
    monkeypatch.setattr(session_loop, "SYNC_GRACE_SECONDS", 0.01)
    runner = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(30):
            while not gc.isenabled():
                await asyncio.sleep(0.001)
        assert not runner.done(), "still waiting for the cache"
    finally:
        runner.cancel()
        gc.enable()


NOT_READY = "node.kubernetes.io/not-ready"
# A period no test waits for: only an urgent change can start a session meanwhile.
LONG_PERIOD = 600.0


@pytest.fixture
async def running() -> AsyncIterator[tuple[SessionLoop, list[float]]]:
    """A leading loop past its first session, with `session` replaced by a recorder of
    when each one started; the burst window is 20 ms. The watch's urgent event counts
    its waiters, so a test can tell when the loop has gone back to waiting for one."""
    loop, _ = setup()
    loop.config = replace(loop.config, schedule_period=LONG_PERIOD, burst_window=0.02)
    loop.watch.changes.urgent = WaitedFor()
    started: list[float] = []

    async def session() -> None:
        started.append(time.monotonic())

    loop.session = session  # type: ignore[method-assign]
    for watched in WATCHED:
        loop.watch.listed(watched)
    runner = asyncio.create_task(loop.run())
    try:
        await sessions(started, 1)
        yield loop, started
    finally:
        runner.cancel()
        gc.enable()


async def sessions(started: list[float], count: int) -> None:
    """Wait until `count` sessions have started; fails after 30 s, which is far sooner
    than the period, so a session started by the periodic tick fails it too."""
    async with asyncio.timeout(30):
        while len(started) < count:
            await asyncio.sleep(0.001)


async def no_session_after(loop: SessionLoop, started: list[float], count: int) -> None:
    """The loop has nothing urgent pending and waits for something urgent (or the
    period): whatever came before now has been let through or held back, and no session
    beyond the first `count` started for it."""
    changes = loop.watch.changes
    urgent = changes.urgent
    assert isinstance(urgent, WaitedFor)
    async with asyncio.timeout(30):
        while changes.first_urgent is not None or not urgent.waiting:
            await asyncio.sleep(0.001)
    assert len(started) == count


@pytest.mark.parametrize(
    "change",
    [
        "a pending pod of ours",
        "a new PodGroup",
        "a node",
        "a node made ready",
        "a bound pod finished",
        "a bound pod of another scheduler deleted",
        "its scheduling gates removed",
    ],
)
async def test_a_change_a_session_acts_on_starts_one_within_the_burst_window(
    running: tuple[SessionLoop, list[float]], change: str
) -> None:
    loop, started = running
    watch = loop.watch
    other = pod(
        "other", scheduler="default-scheduler", node_name="n1", phase="Running", namespace="default"
    )
    gated = pod("gated", spec={"schedulingGates": [{"name": "wait"}]}, namespace="default")
    watch.apply(PODS, other)
    watch.apply(PODS, gated)
    watch.apply(NODES, node("new", taints=[{"key": NOT_READY, "effect": "NoSchedule"}]))
    await no_session_after(loop, started, 1)
    if change == "a pending pod of ours":
        watch.apply(PODS, pod("new", namespace="default"))
    elif change == "a new PodGroup":
        watch.apply(GROUPS, pod_group("h", 2, namespace="default"))
    elif change == "a node":
        watch.apply(NODES, node("n2", ready=True))
    elif change == "a node made ready":
        watch.apply(NODES, node("new"))
    elif change == "a bound pod finished":
        watch.apply(PODS, {**other, "status": {"phase": "Succeeded"}})
    elif change == "a bound pod of another scheduler deleted":
        watch.delete(PODS, "default/other")
    else:
        watch.apply(PODS, pod("gated", namespace="default"))
    await sessions(started, 2)


@pytest.mark.parametrize(
    "change",
    [
        "another scheduler's pending pod",
        "a pod starting to run",
        "a group's status",
        "a node not ready yet",
        "a node cordoned",
    ],
)
async def test_a_change_no_session_acts_on_at_once_waits_for_the_period(
    running: tuple[SessionLoop, list[float]], change: str
) -> None:
    loop, started = running
    watch = loop.watch
    if change == "another scheduler's pending pod":
        watch.apply(PODS, pod("theirs", scheduler="default-scheduler", namespace="default"))
    elif change == "a pod starting to run":
        bound = pod("g-0", group="g", node_name="n1", phase="Pending", namespace="default")
        watch.apply(PODS, bound)
        await no_session_after(loop, started, 1)
        watch.apply(PODS, {**bound, "status": {"phase": "Running"}})
    elif change == "a group's status":
        watch.apply(
            GROUPS, {**pod_group("g", 2, namespace="default"), "status": {"phase": "Running"}}
        )
    elif change == "a node not ready yet":
        watch.apply(NODES, node("n2", ready=False))
    else:
        watch.apply(NODES, node("n1", cpu="4", unschedulable=True))
    await no_session_after(loop, started, 1)
    assert loop.watch.changes.take(), "the next tick runs a session for it"


class Clock:
    """The monotonic clock of the loop and of the watch that stamps changes, moved only
    by the test: a burst's gaps are then the ones the test means, which a busy machine,
    pausing the test between two arrivals, cannot stretch past the burst window."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = time.monotonic()
        clock = SimpleNamespace(
            monotonic=lambda: self.now, time=time.time, perf_counter=time.perf_counter
        )
        monkeypatch.setattr(session_loop, "time", clock)
        monkeypatch.setattr(watch_module, "time", clock)


async def test_a_burst_of_pods_goes_in_one_session(
    running: tuple[SessionLoop, list[float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    loop, started = running
    clock = Clock(monkeypatch)
    window = loop.config.burst_window
    for i in range(20):
        loop.watch.apply(PODS, pod(f"burst-{i}", namespace="default"))
        clock.now += window / 2
        await asyncio.sleep(0.001)
    clock.now += window
    await sessions(started, 2)
    await no_session_after(loop, started, 2)


async def test_a_steady_stream_is_not_held_back_past_the_longest_wait(
    running: tuple[SessionLoop, list[float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    loop, started = running
    clock = Clock(monkeypatch)
    loop.config = replace(loop.config, burst_window=0.005)
    longest = 0.005 * session_loop.BURST_WINDOWS_AT_MOST
    streamed = clock.now
    i = 0
    while clock.now - streamed < 10 * longest:
        loop.watch.apply(PODS, pod(f"stream-{i}", namespace="default"))
        i += 1
        clock.now += 0.001
        await asyncio.sleep(0.001)
    assert len(started) > 2, "sessions ran while the stream went on"
    assert len(started) < i / 5, "and each took many pods"


async def test_a_gang_starts_a_session_once_its_members_are_all_there(
    running: tuple[SessionLoop, list[float]],
) -> None:
    loop, started = running
    loop.watch.apply(GROUPS, pod_group("h", 3, namespace="default"))
    await sessions(started, 2)
    for i in range(2):
        loop.watch.apply(PODS, pod(f"h-{i}", group="h", namespace="default"))
    await no_session_after(loop, started, 2)
    loop.watch.apply(PODS, pod("h-2", group="h", namespace="default"))
    await sessions(started, 3)


async def test_deallocations_decided_while_a_batch_is_written_are_written_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, _ = setup()
    written: list[list[str]] = []
    landed = asyncio.Event()

    async def deallocate(batch: Sequence[Deallocation]) -> None:
        written.append([d.claim for d in batch])
        if len(written) == 1:
            await landed.wait()

    monkeypatch.setattr(loop.binder.devices, "deallocate", deallocate)

    def decided(claim: str) -> Deallocation:
        return Deallocation("default", claim, f"uid-{claim}", "default/g-0", "uid-0", ())

    loop._deallocate([decided("c0")])
    await asyncio.sleep(0)
    # Two sessions decide while the first batch is on its way: both wait for it.
    loop._deallocate([decided("c1")])
    loop._deallocate([decided("c2"), decided("c1")])
    landed.set()
    assert loop._releasing is not None
    await asyncio.wait_for(loop._releasing, 30)
    assert written == [["c0"], ["c1", "c2"]]


async def test_a_soft_gang_keeps_its_soft_wait_clock_across_sessions_until_placed() -> None:
    """Racks r1 and r2 of two 1-CPU nodes have one free each: the soft gang of two fits
    no rack but could start across both, so the session starts its softWait, which the
    cache keeps and the next session's snapshot gives back; once placed, it is
    forgotten when a snapshot shows its members on nodes."""
    rack = "topology.kubernetes.io/rack"
    api = RecordingApi()
    watch = watch_over(api)
    for name in ("r1-0", "r1-1", "r2-0", "r2-1"):
        watch.apply(NODES, node(name, cpu="1", labels={rack: name[:2]}))
    hog = pod("hog", requests={"cpu": "1"}, namespace="default", node_name="r1-1")
    watch.apply(PODS, hog)
    watch.apply(PODS, pod("hog-2", requests={"cpu": "1"}, namespace="default", node_name="r2-1"))
    group, *members = gang("g", 2, requests={"cpu": "1"}, namespace="default")
    group["spec"]["networkTopology"] = {"mode": "soft"}
    watch.apply(GROUPS, group)
    for i, member in enumerate(members):
        member["metadata"]["uid"] = f"uid-{i}"
        watch.apply(PODS, member)
    config = load_config(f"topology: {{tiers: [{{name: rack, nodeLabel: {rack}}}], softWait: 1h}}")
    binder = Binder(api, watch, valid_for=unbounded, idle=watch.status.binds_idle)
    evictor = Evictor(api, watch, scheduler_name="batch-scheduler", valid_for=unbounded)
    loop = SessionLoop(config, watch, binder, evictor=evictor, leading=lambda: True)
    await loop.session()
    started = loop.cache.span_clocks["default/g"]
    assert loop.cache.tasks["default/g-0"].node_name is None
    kept = loop.keeper.take(now=time.time(), retry_all=True).jobs["default/g"]
    assert kept.span_since == started.since
    await loop.session()
    assert loop.cache.span_clocks == {"default/g": started}
    # Room for it in one rack: placed there, its clock is kept until the next session's
    # snapshot shows its members on nodes (a bind may fail), then forgotten.
    watch.delete(PODS, watch.apply(PODS, hog))
    await loop.session()
    assert {loop.cache.tasks[f"default/g-{i}"].node_name for i in range(2)} == {"r1-0", "r1-1"}
    assert loop.cache.span_clocks == {"default/g": started}
    await loop.session()
    assert loop.cache.span_clocks == {}
