"""A preemption in flight, between the session that decided it and the watch showing
it: the sessions that run meanwhile hold the room for the preemptor rather than choose
more victims for it, and what is still queued once the preemptor is bound is dropped.

The cluster is examples/preemption.yaml's: two 4-CPU nodes, the low-priority gang
`nightly` (minMember 4) running six 1-CPU pods, the high-priority gang `train`
(minMember 4, four 1-CPU pods) arriving."""

import asyncio
import copy
import time

from batchsched.cache.cluster import ClusterCache
from batchsched.config.load import default_config
from batchsched.k8s.binder import Binder
from batchsched.k8s.client import JSON
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.watch import PODS, WATCHED, Watch
from batchsched.model.decisions import Eviction, Nomination

from .recording_api import RecordingApi, watch_over
from tests.support.objects import at, node, pod, pod_group, priority_class

GROUPS = next(w for w in WATCHED if w.kind == "PodGroup")  # ours come first
KINDS = {w.kind: w for w in WATCHED if w.kind != "PodGroup"}
NIGHTLY_NODES = ["node-a"] * 4 + ["node-b"] * 2


def member(name: str, group: str, priority: str, node_name: str | None) -> JSON:
    """A member created, as in the example, with the rest of its gang: `nightly` two
    minutes ago, `train` now (sessions run on the wall clock)."""
    now = time.time() - at(0)
    obj = pod(
        name,
        {"cpu": "1", "memory": "1Gi"},
        namespace="default",
        group=group,
        node_name=node_name,
        phase="Running" if node_name else "Pending",
        created=int(now) - (0 if node_name is None else 120),
        spec={"priorityClassName": priority},
    )
    obj["metadata"]["uid"] = f"uid-{name}"
    return obj


def cluster(watch: Watch) -> dict[str, JSON]:
    """The example's objects, applied as the watch shows them; the pods by name."""
    for obj in (
        node("node-a", cpu="4", memory="16Gi"),
        node("node-b", cpu="4", memory="16Gi"),
        priority_class("low", 100),
        priority_class("high", 1000),
    ):
        watch.apply(KINDS[obj["kind"]], obj)
    pods = {}
    for name, size, priority, where in (
        ("nightly", 6, "low", NIGHTLY_NODES),
        ("train", 4, "high", [None] * 4),
    ):
        created = member(name, name, priority, where[0])["metadata"]["creationTimestamp"]
        group = pod_group(name, 4, namespace="default", priorityClassName=priority)
        group["metadata"]["creationTimestamp"] = created
        watch.apply(GROUPS, group)
        for i in range(size):
            pods[f"{name}-{i}"] = member(f"{name}-{i}", name, priority, where[i])
            watch.apply(PODS, pods[f"{name}-{i}"])
    return pods


def session_loop(api: RecordingApi) -> SessionLoop:
    watch = watch_over(api)
    binder = Binder(api, watch, valid_for=unbounded, idle=watch.status.binds_idle)
    evictor = Evictor(api, watch, scheduler_name="batch-scheduler", valid_for=unbounded)
    return SessionLoop(default_config(), watch, binder, evictor=evictor, leading=lambda: True)


async def carried_out(evictor: Evictor) -> None:
    """Run the evictor until what it was handed is settled."""
    runner = asyncio.create_task(evictor.run())
    await asyncio.wait_for(evictor.idle.wait(), 30)
    runner.cancel()


def evicted(api: RecordingApi) -> list[str]:
    return [path.split("/")[-2] for m, path, _ in api.requests if path.endswith("/eviction")]


def nominated(api: RecordingApi) -> list[tuple[str, object]]:
    return [
        (path.split("/")[-2], body["status"]["nominatedNodeName"])
        for m, path, body in api.requests
        if m == "PATCH" and "nominatedNodeName" in body.get("status", {})
    ]


async def test_a_session_before_the_watch_shows_a_preemption_chooses_no_more_victims() -> None:
    """The order seen on the real control plane: one victim shows as being deleted,
    the other victim and the nominations do not yet, and a session runs. Taking the
    gang for one still without room, it chose the rest of `nightly` as victims."""
    api = RecordingApi()
    loop = session_loop(api)
    pods = cluster(loop.watch)
    await loop.session()
    await carried_out(loop.evictor)
    first = evicted(api)
    assert len(first) == 2 and len(nominated(api)) == 4
    assert not api.sent("POST", "/binding")

    deleting = copy.deepcopy(pods[first[0]])
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:02:01Z"
    loop.watch.apply(PODS, deleting)
    await loop.session()
    await carried_out(loop.evictor)
    assert evicted(api) == first
    assert len(nominated(api)) == 4
    assert not api.sent("POST", "/binding")


async def test_a_gang_that_has_waited_days_evicts_only_what_min_member_spares() -> None:
    """train's PodGroup created three days ago: past the starvation threshold, room is
    held for it, which is its own to preempt into. The operator's session evicts two of
    nightly, as the simulator's does (tests/sim/test_preemption.py), not all six."""
    api = RecordingApi()
    loop = session_loop(api)
    cluster(loop.watch)
    days_ago = time.time() - at(0) - 3 * 86400
    group = pod_group("train", 4, namespace="default", created=days_ago, priorityClassName="high")
    loop.watch.apply(GROUPS, group)
    await loop.session()
    await carried_out(loop.evictor)
    assert len(evicted(api)) == 2 and len(nominated(api)) == 4


def handed_over(evictor: Evictor) -> None:
    """A session's decision: nightly-4 evicted for train, whose train-0 is nominated."""
    evictor.submit(
        [
            Eviction(
                namespace="default",
                name="nightly-4",
                uid="uid-nightly-4",
                node="node-b",
                action="preempt",
                preemptor="default/train",
                message="preempted by gang default/train",
            )
        ],
        [Nomination("default", "train-0", "uid-train-0", "node-b", "default/train")],
    )


async def test_writes_still_queued_once_the_preemptor_is_bound_are_dropped() -> None:
    api = RecordingApi()
    loop = session_loop(api)
    cluster(loop.watch)
    cache = loop.cache
    handed_over(loop.evictor)
    assert cache.evicting == {"default/nightly-4": "uid-nightly-4"}
    assert cache.tasks["default/train-0"].nominated_node == "node-b"
    # A session binds train before the evictor's workers get to the writes.
    cache.assume("default/train-0", "node-b")
    await carried_out(loop.evictor)
    assert evicted(api) == [] and nominated(api) == []
    # nightly-4 was not evicted: it runs on, as a victim any later session may choose.
    assert not cache.tasks["default/nightly-4"].deleting
    assert "default/nightly-4" not in cache.evicting


def fresh_cache() -> tuple[ClusterCache, dict[str, JSON]]:
    watch = watch_over(RecordingApi())
    return watch.cache, cluster(watch)


def test_an_assumed_eviction_and_nomination_outlive_older_updates_until_shown() -> None:
    cache, pods = fresh_cache()
    cache.assume_evicted("default/nightly-4", "uid-nightly-4")
    cache.assume_nominated("default/train-0", "uid-train-0", "node-b")
    # Updates from before the writes (a status written meanwhile) keep them.
    cache.apply(pods["nightly-4"])
    cache.apply(pods["train-0"])
    assert cache.tasks["default/nightly-4"].deleting
    assert cache.tasks["default/train-0"].nominated_node == "node-b"
    # Shown by the watch: the cache holds the pods as the watch does.
    deleting = copy.deepcopy(pods["nightly-4"])
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:02:01Z"
    cache.apply(deleting)
    shown = copy.deepcopy(pods["train-0"])
    shown["status"]["nominatedNodeName"] = "node-b"
    cache.apply(shown)
    assert cache.evicting == {} and cache.nominating == {}
    assert cache.tasks["default/nightly-4"].deleting
    assert cache.tasks["default/train-0"].nominated_node == "node-b"


def test_an_eviction_or_nomination_not_made_shows_the_pod_as_the_watch_does() -> None:
    cache, pods = fresh_cache()
    cache.assume_evicted("default/nightly-4", "uid-nightly-4")
    cache.assume_nominated("default/train-0", "uid-train-0", "node-b")
    cache.spare("default/nightly-4")
    cache.unnominate("default/train-0")
    assert not cache.tasks["default/nightly-4"].deleting
    assert cache.tasks["default/train-0"].nominated_node is None
    # A pod made again under the name is another pod: nothing assumed of the old one.
    cache.assume_evicted("default/nightly-5", "uid-nightly-5")
    again = copy.deepcopy(pods["nightly-5"])
    again["metadata"]["uid"] = "uid-nightly-5-again"
    cache.apply(again)
    assert not cache.tasks["default/nightly-5"].deleting
    assert cache.evicting == {}
