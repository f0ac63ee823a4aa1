"""The softWait clock kept on a gang's group object: the leader writes it when a session
starts it and takes it off once the gang holds its minimum; a replica that starts
leading (a restart, a failover) takes it back for its first session. The real API
server's side is tests/integration/test_soft_wait_restart.py."""

import asyncio
import gc
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from batchsched.api.objects import PodGroup
from batchsched.api.spanclock import OWNER_ANNOTATION, SINCE_ANNOTATION
from batchsched.config.load import load_config
from batchsched.k8s.binder import Binder
from batchsched.k8s.events import rfc3339
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.watch import PODS, WATCHED, Watch
from batchsched.model.decisions import SpanClock

from .recording_api import RecordingApi, settle, watch_over
from tests.support.objects import Obj, gang, node, pod

NODES = next(w for w in WATCHED if w.kind == "Node")
GROUPS = next(w for w in WATCHED if w.kind == "PodGroup")  # ours come first
RACK = "topology.kubernetes.io/rack"
SOFT_WAIT = 3600.0
CONFIG = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}], softWait: 1h}}"
GROUP_PATH = "/apis/scheduling.batchsched.io/v1alpha1/namespaces/default/podgroups/g"


def soft_gang(annotations: dict[str, str] | None = None, *, uid: str = "uid-g") -> list[Obj]:
    """Gang default/g of two 1-CPU pods asking softly for a rack, its PodGroup's uid
    `uid`, its object annotated with `annotations`."""
    group, *members = gang("g", 2, requests={"cpu": "1"}, namespace="default")
    group["spec"]["networkTopology"] = {"mode": "soft"}
    group["metadata"]["uid"] = uid
    if annotations is not None:
        group["metadata"]["annotations"] = annotations
    for i, member in enumerate(members):
        member["metadata"]["uid"] = f"uid-{i}"
    return [group, *members]


def cluster(api: RecordingApi, objects: list[Obj]) -> Watch:
    """Racks r1 and r2 of two 1-CPU nodes, one of each busy (the gang of two fits no
    rack but could start across both), and `objects`."""
    watch = watch_over(api)
    for name in ("r1-0", "r1-1", "r2-0", "r2-1"):
        watch.apply(NODES, node(name, cpu="1", labels={RACK: name[:2]}))
    for rack in ("r1", "r2"):
        busy = pod(
            f"busy-{rack}", requests={"cpu": "1"}, namespace="default", node_name=f"{rack}-1"
        )
        watch.apply(PODS, busy)
    for obj in objects:
        watch.apply(GROUPS if obj["kind"] == "PodGroup" else PODS, obj)
    return watch


def operator(watch: Watch, api: RecordingApi, leading: Callable[[], bool]) -> SessionLoop:
    config = replace(load_config(CONFIG), schedule_period=0.01)
    binder = Binder(api, watch, valid_for=unbounded, idle=watch.status.binds_idle)
    evictor = Evictor(api, watch, scheduler_name="batch-scheduler", valid_for=unbounded)
    return SessionLoop(config, watch, binder, evictor=evictor, leading=leading)


async def run_until(loop: SessionLoop, done: Callable[[], bool]) -> None:
    """Run the loop (as `batchsched run` does, from its cache's sync) until `done`."""
    for watched in WATCHED:
        loop.watch.listed(watched)
    runner = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(30):
            while not done():
                await asyncio.sleep(0.001)
    finally:
        runner.cancel()
        gc.enable()


def clock_writes(api: RecordingApi) -> list[Any]:
    """The metadata of every PATCH of the group object itself (not its status)."""
    return [
        body["metadata"]
        for method, path, body in api.requests
        if method == "PATCH" and path == GROUP_PATH
    ]


def nodes_of(loop: SessionLoop) -> set[str | None]:
    return {loop.cache.tasks[f"default/g-{i}"].node_name for i in range(2)}


async def test_the_leader_keeps_a_started_clock_on_the_group_until_the_gang_is_placed() -> None:
    """The session that starts the gang's softWait has the clock written on its PodGroup
    (when, to the microsecond, and for which object), once: not again while the object
    shows it. Placed in a rack once one has room, the next session's snapshot shows it
    holding its minimum and the clock is taken off."""
    api = RecordingApi()
    watch = cluster(api, soft_gang())
    loop = operator(watch, api, lambda: True)
    await loop.session()
    await settle(watch.status)
    started = loop.cache.span_clocks["default/g"]
    assert started.owner == "uid-g"
    kept = {SINCE_ANNOTATION: rfc3339(started.since, micro=True), OWNER_ANNOTATION: "uid-g"}
    assert clock_writes(api) == [{"uid": "uid-g", "annotations": kept}]
    # The watch shows the write; later sessions leave it.
    watch.apply(GROUPS, soft_gang(kept)[0])
    await loop.session()
    await settle(watch.status)
    assert len(clock_writes(api)) == 1
    watch.delete(PODS, "default/busy-r1")
    await loop.session()
    assert nodes_of(loop) == {"r1-0", "r1-1"}
    await loop.session()
    # The binds sent are never answered here: status need not wait for them.
    watch.status.defer_seconds = 0.0
    await settle(watch.status)
    gone = {SINCE_ANNOTATION: None, OWNER_ANNOTATION: None}
    assert clock_writes(api)[1:] == [{"uid": "uid-g", "annotations": gone}]


async def test_a_restarted_operator_counts_the_soft_wait_from_the_clock_its_group_keeps() -> None:
    """The clock the group keeps started an hour and a second ago: a new operator's first
    session takes it back, so the gang's softWait is over and it starts across racks
    at once (counted from the restart, it would wait another hour)."""
    since = time.time() - SOFT_WAIT - 1
    kept = {SINCE_ANNOTATION: rfc3339(since, micro=True), OWNER_ANNOTATION: "uid-g"}
    api = RecordingApi()
    loop = operator(cluster(api, soft_gang(kept)), api, lambda: True)
    await run_until(loop, lambda: None not in nodes_of(loop))
    assert nodes_of(loop) == {"r1-0", "r2-0"}


async def test_a_restarted_operator_waits_out_the_rest_of_the_kept_soft_wait() -> None:
    """The clock started ten minutes ago: the first session waits the 50 minutes left,
    keeps the clock as it was (nothing to write) and says so."""
    since = time.time() - 600
    kept = {SINCE_ANNOTATION: rfc3339(since, micro=True), OWNER_ANNOTATION: "uid-g"}
    api = RecordingApi()
    watch = cluster(api, soft_gang(kept))
    loop = operator(watch, api, lambda: True)
    await run_until(loop, lambda: "default/g" in loop.cache.span_clocks)
    await settle(watch.status)
    assert loop.cache.span_clocks["default/g"].since == pytest.approx(since, abs=1e-6)
    assert nodes_of(loop) == {None}
    assert clock_writes(api) == []
    told = [body for method, path, body in api.requests if path.endswith("pods/g-0/status")]
    message = told[-1]["status"]["conditions"][0]["message"]
    left = re.search(r"and waits (\d+)s more for one before spanning domains", message)
    assert left is not None and 2900 < int(left[1]) <= 3000, message


async def test_a_replica_that_starts_leading_takes_the_clock_the_last_leader_kept() -> None:
    """A standby writes nothing. Its memory holds no clock, or one of its own last term:
    when it starts leading, the clock the group shows (written by the leader before it)
    is the one its first session counts from."""
    api = RecordingApi()
    watch = cluster(api, soft_gang())
    leads = [False]
    loop = operator(watch, api, lambda: leads[0])
    loop.cache.span_clocks = {"default/g": SpanClock(time.time(), "uid-g")}
    since = time.time() - SOFT_WAIT - 1
    kept = {SINCE_ANNOTATION: rfc3339(since, micro=True), OWNER_ANNOTATION: "uid-g"}
    watch.apply(GROUPS, soft_gang(kept)[0])
    for watched in WATCHED:
        watch.listed(watched)
    runner = asyncio.create_task(loop.run())
    try:
        await asyncio.sleep(0.05)
        # Standing by, it decides and writes nothing.
        assert nodes_of(loop) == {None}
        assert api.requests == []
        leads[0] = True
        async with asyncio.timeout(30):
            while None in nodes_of(loop):
                await asyncio.sleep(0.001)
    finally:
        runner.cancel()
        gc.enable()
    assert nodes_of(loop) == {"r1-0", "r2-0"}


@pytest.mark.parametrize(
    ("annotations", "why"),
    [
        ({SINCE_ANNOTATION: "yesterday", OWNER_ANNOTATION: "uid-g"}, "is not an RFC 3339 time"),
        ({SINCE_ANNOTATION: "2026-11-29T05:30:00", OWNER_ANNOTATION: "uid-g"}, "RFC 3339"),
        ({SINCE_ANNOTATION: "2026-13-29T05:30:00Z", OWNER_ANNOTATION: "uid-g"}, "RFC 3339"),
        ({SINCE_ANNOTATION: "2020-01-01T00:00:00Z", OWNER_ANNOTATION: "uid-old"}, "uid-old"),
        ({SINCE_ANNOTATION: "2020-01-01T00:00:00Z"}, "not this object (uid 'uid-g')"),
    ],
    ids=["not a time", "no zone", "no such month", "another object's", "no owner"],
)
async def test_a_clock_that_cannot_be_used_is_logged_once_and_the_gang_starts_its_own(
    caplog: pytest.LogCaptureFixture, annotations: dict[str, str], why: str
) -> None:
    """The value is ignored with one line naming the group and the value, however often
    the group is seen again; the gang is scheduled as one with no clock (its softWait
    starts now) and the leader writes its own clock over the value."""
    api = RecordingApi()
    with caplog.at_level(logging.WARNING, logger="batchsched.cache.cluster"):
        watch = cluster(api, soft_gang(annotations))
        watch.apply(GROUPS, {**soft_gang(annotations)[0], "status": {"phase": "Inqueue"}})
        loop = operator(watch, api, lambda: True)
        before = time.time()
        await run_until(loop, lambda: "default/g" in loop.cache.span_clocks)
    lines = [r.getMessage() for r in caplog.records if "PodGroup default/g" in r.getMessage()]
    value = repr(annotations[SINCE_ANNOTATION])
    assert len(lines) == 1, lines
    assert f"annotation {SINCE_ANNOTATION}={value}" in lines[0] and why in lines[0]
    assert loop.cache.span_clocks["default/g"].since >= before
    await settle(watch.status)
    since = rfc3339(loop.cache.span_clocks["default/g"].since, micro=True)
    kept = {SINCE_ANNOTATION: since, OWNER_ANNOTATION: "uid-g"}
    assert clock_writes(api) == [{"uid": "uid-g", "annotations": kept}]


def groups_of(api_version: str, annotations: dict[str, str] | None = None) -> dict[str, PodGroup]:
    stored = None if annotations is None else (annotations[SINCE_ANNOTATION], "uid-g")
    group = PodGroup(
        namespace="ns", name="g", min_member=2, creation=0, api_version=api_version, uid="uid-g"
    )
    group.stored_clock = stored
    return {"ns/g": group}


def clock_writer(api: RecordingApi, *, write_peers: bool = True) -> StatusWriter:
    idle = asyncio.Event()
    idle.set()
    return StatusWriter(
        api,
        scheduler_name="batch-scheduler",
        instance="i",
        binds_idle=idle,
        write_peers=write_peers,
    )


@pytest.mark.parametrize(
    "api_version",
    [
        "scheduling.batchsched.io/v1alpha1",
        "scheduling.volcano.sh/v1beta1",
        "scheduling.x-k8s.io/v1alpha1",
        "scheduling.sigs.k8s.io/v1alpha1",
        "scheduling.k8s.io/v1alpha2",
    ],
)
async def test_every_kind_of_group_keeps_the_clock_on_its_object(api_version: str) -> None:
    """Ours, the peers' and Kubernetes' own: a merge patch of the object's annotations
    (never its status subresource), guarded by its uid."""
    api = RecordingApi()
    status = clock_writer(api)
    status.clocks(
        {"ns/g": SpanClock(1000.5, "uid-g")}, groups_of(api_version), (), lambda key: True
    )
    await settle(status)
    path = f"/apis/{api_version}/namespaces/ns/podgroups/g"
    kept = {SINCE_ANNOTATION: "1970-01-01T00:16:40.500000Z", OWNER_ANNOTATION: "uid-g"}
    assert api.requests == [("PATCH", path, {"metadata": {"uid": "uid-g", "annotations": kept}})]


async def test_a_clock_is_left_where_it_is_not_ours_to_keep() -> None:
    """A peer's group with --peer-status=skip gets none; a group whose object shows a
    clock and whose job this scheduler does not serve keeps it (another scheduler's);
    a clock of an object made again under the name is not written on the new one."""
    api = RecordingApi()
    volcano = "scheduling.volcano.sh/v1beta1"
    clock = {"ns/g": SpanClock(1000.0, "uid-g")}
    clock_writer(api, write_peers=False).clocks(clock, groups_of(volcano), (), lambda key: True)
    stored = groups_of("scheduling.batchsched.io/v1alpha1", {SINCE_ANNOTATION: "x"})
    status = clock_writer(api)
    status.clocks({}, stored, ["ns/g"], lambda key: False)
    status.clocks({"ns/g": SpanClock(1000.0, "uid-old")}, groups_of(volcano), (), lambda key: True)
    await settle(status)
    assert api.requests == []


async def test_a_clock_is_not_sent_to_an_object_made_again_before_it_went_out() -> None:
    """Queued behind binds, the write finds the group made again under its name (a new
    uid): the old gang's clock is not the new one's, and nothing is sent."""
    api = RecordingApi()
    status = clock_writer(api)
    groups = groups_of("scheduling.batchsched.io/v1alpha1")
    status.clocks({"ns/g": SpanClock(1000.0, "uid-g")}, groups, (), lambda key: True)
    groups["ns/g"] = replace(groups["ns/g"], uid="uid-new")
    await settle(status)
    assert api.requests == []


OURS = "scheduling.batchsched.io/v1alpha1"
PATH = f"/apis/{OURS}/namespaces/ns/podgroups/g"
MINE = {SINCE_ANNOTATION: "1970-01-01T00:16:40.500000Z", OWNER_ANNOTATION: "uid-g"}
GONE = {SINCE_ANNOTATION: None, OWNER_ANNOTATION: None}


def patch(annotations: Mapping[str, str | None]) -> tuple[str, str, Any]:
    return ("PATCH", PATH, {"metadata": {"uid": "uid-g", "annotations": annotations}})


async def test_a_clock_another_leader_wrote_is_taken_off_once_the_gang_holds_its_minimum() -> None:
    """This replica's memory of what it wrote does not hide what another leader wrote
    meanwhile: left on the object, the next start would take it back as the gang's and
    span it at once."""
    api = RecordingApi()
    status = clock_writer(api)
    # Its first term: it starts the gang's clock, then takes it off once it is placed.
    status.clocks({"ns/g": SpanClock(1000.5, "uid-g")}, groups_of(OURS), (), lambda key: True)
    await settle(status)
    status.clocks({}, groups_of(OURS, MINE), ["ns/g"], lambda key: True)
    await settle(status)
    assert api.requests == [patch(MINE), patch(GONE)]
    # Another leader meanwhile: the gang lost a member and waited, and it wrote a clock
    # of its own. This replica leads again while the gang holds its minimum.
    theirs = {SINCE_ANNOTATION: "1970-01-01T01:00:00.000000Z", OWNER_ANNOTATION: "uid-g"}
    status.clocks({}, groups_of(OURS, theirs), ["ns/g"], lambda key: True)
    await settle(status)
    assert api.requests[2:] == [patch(GONE)]


@pytest.mark.parametrize("wrote", [True, False], ids=["written here", "taken back at start"])
async def test_an_edited_clock_is_replaced_at_the_leaders_next_session(wrote: bool) -> None:
    """The annotations are the scheduler's (docs/topology.md): the leader makes the
    object show its clock, whether it wrote it itself or took it back at its start."""
    api = RecordingApi()
    status = clock_writer(api)
    clock = {"ns/g": SpanClock(1000.5, "uid-g")}
    status.clocks(clock, groups_of(OURS, None if wrote else MINE), (), lambda key: True)
    await settle(status)
    assert api.requests == ([patch(MINE)] if wrote else [])
    status.clocks(clock, groups_of(OURS, MINE), ["ns/g"], lambda key: True)
    await settle(status)
    edited = {SINCE_ANNOTATION: "1970-01-01T00:00:00.000000Z", OWNER_ANNOTATION: "uid-g"}
    status.clocks(clock, groups_of(OURS, edited), ["ns/g"], lambda key: True)
    await settle(status)
    assert api.requests[1 if wrote else 0 :] == [patch(MINE)]


async def test_a_clock_write_the_watch_has_not_shown_yet_is_not_sent_again() -> None:
    """Until the object shows the write, it is taken as shown: not sent again by the
    next session, and taken off again if that session drops the clock."""
    api = RecordingApi()
    status = clock_writer(api)
    clock = {"ns/g": SpanClock(1000.5, "uid-g")}
    for _ in range(2):
        status.clocks(clock, groups_of(OURS), (), lambda key: True)
        await settle(status)
    assert api.requests == [patch(MINE)]
    status.clocks({}, groups_of(OURS), (), lambda key: True)
    await settle(status)
    assert api.requests == [patch(MINE), patch(GONE)]


async def test_a_replica_leading_again_decides_on_what_the_object_shows() -> None:
    """What it wrote in its last term is forgotten when it leads again: another leader
    took the clock off meanwhile, and there is nothing left to take off."""
    api = RecordingApi()
    status = clock_writer(api)
    status.clocks({"ns/g": SpanClock(1000.5, "uid-g")}, groups_of(OURS), (), lambda key: True)
    await settle(status)
    status.forget_clocks()
    status.clocks({}, groups_of(OURS), (), lambda key: True)
    await settle(status)
    assert api.requests == [patch(MINE)]


async def test_a_clock_later_than_now_counts_from_the_start_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A time in the future (an edit, or a leader whose clock ran ahead) would stretch
    the wait past softWait: the replica that starts leading counts from its start, says
    so in one line naming the group and the value, and writes that clock over it."""
    ahead = rfc3339(time.time() + 2 * SOFT_WAIT, micro=True)
    kept = {SINCE_ANNOTATION: ahead, OWNER_ANNOTATION: "uid-g"}
    api = RecordingApi()
    with caplog.at_level(logging.WARNING, logger="batchsched.cache.cluster"):
        watch = cluster(api, soft_gang(kept))
        loop = operator(watch, api, lambda: True)
        before = time.time()
        await run_until(loop, lambda: "default/g" in loop.cache.span_clocks)
        after = time.time()
    since = loop.cache.span_clocks["default/g"].since
    assert before <= since <= after
    lines = [r.getMessage() for r in caplog.records if "PodGroup default/g" in r.getMessage()]
    assert lines == [
        f"PodGroup default/g annotation {SINCE_ANNOTATION}={ahead!r} is later than now: "
        "its softWait counts from now"
    ]
    await settle(watch.status)
    counted = {SINCE_ANNOTATION: rfc3339(since, micro=True), OWNER_ANNOTATION: "uid-g"}
    assert clock_writes(api) == [{"uid": "uid-g", "annotations": counted}]
    assert nodes_of(loop) == {None}


async def test_a_replica_that_leads_again_forgets_the_clocks_it_wrote() -> None:
    """It wrote the gang's clock, lost the lease, and another leader placed the gang and
    took the clock off: leading again, its first session has nothing to take off."""
    api = RecordingApi()
    watch = cluster(api, soft_gang())
    leads = [True]
    loop = operator(watch, api, lambda: leads[0])
    await run_until(loop, lambda: "default/g" in loop.cache.span_clocks)
    await settle(watch.status)
    assert len(clock_writes(api)) == 1
    leads[0] = False
    watch.delete(PODS, "default/busy-r1")
    group, *members = soft_gang()
    watch.apply(GROUPS, group)
    for i, member in enumerate(members):
        member["spec"]["nodeName"] = f"r1-{i}"
        watch.apply(PODS, member)

    def in_term() -> bool:
        return loop._last is not None

    runner = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(30):
            while in_term():
                await asyncio.sleep(0.001)
            leads[0] = True
            while not in_term():
                await asyncio.sleep(0.001)
    finally:
        runner.cancel()
        gc.enable()
    await settle(watch.status)
    assert loop.cache.span_clocks == {}
    assert len(clock_writes(api)) == 1, clock_writes(api)


async def test_a_clock_taken_off_by_hand_after_the_watch_showed_it_is_written_again() -> None:
    """Once the watch shows the leader's write, the object decides: the annotations
    taken off by hand (back to what the object showed before the write) are written
    again at the next session, as any other edit."""
    api = RecordingApi()
    watch = cluster(api, soft_gang())
    loop = operator(watch, api, lambda: True)
    await loop.session()
    await settle(watch.status)
    [written] = clock_writes(api)
    watch.apply(GROUPS, soft_gang(written["annotations"])[0])
    watch.apply(GROUPS, soft_gang()[0])
    await loop.session()
    await settle(watch.status)
    assert clock_writes(api) == [written, written]
