"""The session loop's hand-off from a session to the binder: decisions are sent only
while the pods and nodes they were made for are still there as they were."""

import asyncio
import gc
from collections.abc import Sequence

import pytest
from prometheus_client import REGISTRY

from batchsched.framework.config import default_config
from batchsched.framework.decisions import Binding
from batchsched.k8s import loop as session_loop
from batchsched.k8s.binder import Binder
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.leader import unbounded
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.watch import PODS, WATCHED

from ..builders import gang, node
from .recording_api import RecordingApi, settle, watch_over

NODES = next(w for w in WATCHED if w.kind == "Node")
GROUPS = next(w for w in WATCHED if w.kind == "PodGroup")  # ours come first


def setup() -> tuple[SessionLoop, RecordingApi]:
    api = RecordingApi()
    watch = watch_over(api)
    watch.apply(NODES, node("n1", cpu="4"))
    for i, obj in enumerate(gang("g", 2, requests={"cpu": "1"})):
        obj["metadata"]["uid"] = f"uid-{i}"
        watch.apply(PODS if obj["kind"] == "Pod" else GROUPS, obj)
    binder = Binder(api, watch, valid_for=unbounded, idle=watch.status.binds_idle)
    evictor = Evictor(api, watch, scheduler_name="batch-scheduler", valid_for=unbounded)
    return SessionLoop(default_config(), watch, binder, evictor=evictor, leading=lambda: True), api


def binding(member: int, *, node: str = "n1") -> Binding:
    return Binding(
        namespace="default", name=f"g-{member}", uid=f"uid-{member + 1}", node=node, job="g"
    )


async def test_a_session_assumes_and_sends_every_binding() -> None:
    loop, api = setup()
    runner = asyncio.create_task(loop.binder.run())
    await loop.session()
    await asyncio.wait_for(loop.binder.idle.wait(), 5)
    runner.cancel()
    assert sorted(p["metadata"]["name"] for p in api.sent("POST", "/binding")) == ["g-0", "g-1"]
    assert loop.cache.tasks["default/g-0"].node_name == "n1"


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
    await settle(loop.status, api)
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
        await asyncio.sleep(0.1)
        assert gc.isenabled()
        assert not runner.done(), "still waiting for the cache"
    finally:
        runner.cancel()
        gc.enable()
