"""SnapshotKeeper: a snapshot kept up to date equals one taken whole, after any changes."""

import contextlib
import random
from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.placement import Placement
from batchsched.api.pods import OUR_QUEUE_KEY
from batchsched.api.spanclock import OWNER_ANNOTATION, SINCE_ANNOTATION
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import SnapshotKeeper, take_snapshot
from batchsched.config.load import default_config, load_config
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import JobInfo, Snapshot
from batchsched.scheduler import run_session

from tests.support.objects import (
    SCHEDULER,
    Obj,
    at,
    cache_of,
    native_pod_group,
    node,
    pod,
    pod_group,
    priority_class,
    queue,
    span_starts,
)


def namespace_object(name: str, *, queue: str) -> Obj:
    """A Namespace whose pods go to `queue` (batchsched's namespace annotation)."""
    annotations = {OUR_QUEUE_KEY: queue}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "annotations": annotations},
    }


NODES = [f"n{i}" for i in range(6)]
GROUPS = [f"g{i}" for i in range(5)]
# Kubernetes' own PodGroups, which pods name by spec.schedulingGroup.
NATIVE_GROUPS = ["k0", "k1", "g0"]
REQUESTS: list[dict[str, Any]] = [
    {"cpu": "1", "memory": "1Gi"},
    {"cpu": "2", "nvidia.com/gpu": "1"},
    {"nvidia.com/gpumem": "1000", "nvidia.com/gpu": "1"},
    {},  # no requests: scores count a default beyond them (score_extra)
    {"cpu": "1", "example.com/rare": "1"},  # a resource name that comes and goes
]


def plain(snapshot: Snapshot) -> dict[str, Any]:
    """What a snapshot says, without the order pods and jobs happened to be counted in."""
    return {
        "resources": snapshot.resources,
        "nodes": [n.name for n in snapshot.nodes],
        "allocatable": snapshot.allocatable.tolist(),
        "used": snapshot.used.tolist(),
        "ports": snapshot.port_users,
        "placed": sorted((row, task.key) for row, task in snapshot.placed),
        "affine": sorted((row, task.key) for row, task in snapshot.placed_affine),
        "gpu": None if snapshot.gpu_used is None else snapshot.gpu_used.tolist(),
        "gpu_unnamed": sorted(snapshot.gpu_unnamed),
        "extra": None if snapshot.score_extra is None else snapshot.score_extra.tolist(),
        "queues": sorted(snapshot.queues),
        "rejected_queues": snapshot.rejected_queues,
        "jobs": {key: plain_job(job) for key, job in snapshot.jobs.items()},
        "held_back": snapshot.held_back,
    }


def plain_job(job: JobInfo) -> dict[str, Any]:
    fields = {name: getattr(job, name) for name in JobInfo.__slots__}
    fields["allocated"] = job.allocated.tolist()
    fields["hosts"] = sorted(job.hosts)
    fields["pending"] = sorted(
        (
            t.key,
            t.vec.tolist(),
            t.priority,
            t.error,
            t.gpu,
            t.reserved,
            t.nominated,
            t.preempts,
        )
        for t in job.pending
    )
    return fields


class Cluster:
    """A cache under random changes of every kind the keeper follows; with `native`,
    Kubernetes' own PodGroups and pods naming them by spec.schedulingGroup too."""

    def __init__(self, rng: random.Random, *, native: bool = False) -> None:
        self.rng = rng
        self.native = native
        self.cache = ClusterCache()
        self.now = 100.0
        for name in NODES[:4]:
            self.cache.apply(node(name, extra={"nvidia.com/gpu": "4", "pods": "110"}))
        self.keeper = SnapshotKeeper(self.cache, scheduler_names={SCHEDULER})
        for _ in range(80):
            self.apply(self.new_pod())

    def apply(self, obj: Obj, *, deleted: bool = False) -> None:
        with contextlib.suppress(InvalidObject):
            self.cache.apply(obj, deleted=deleted)

    def new_pod(self, name: str | None = None) -> Obj:
        rng = self.rng
        spec: dict[str, Any] = {}
        if rng.random() < 0.2:
            spec["priorityClassName"] = rng.choice(["high", "low", "missing"])
        if rng.random() < 0.1:
            spec["containers"] = [
                {"name": "main", "ports": [{"containerPort": 80, "hostPort": 8080}]}
            ]
        if rng.random() < 0.1:
            term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        labels = {"queue": "q"} if rng.random() < 0.1 else None
        group = rng.choice([*GROUPS, None, None])
        annotations = None
        if self.native and rng.random() < 0.2:
            spec["schedulingGroup"] = {"podGroupName": rng.choice(NATIVE_GROUPS)}
            group = None
            if rng.random() < 0.3:
                # Members of one group may name different queues, which it waits on.
                annotations = {OUR_QUEUE_KEY: rng.choice(["q", "default"])}
        return pod(
            name or f"p{rng.randrange(200)}",
            requests=rng.choice(REQUESTS),
            group=group,
            annotations=annotations,
            node_name=rng.choice([None, None, *NODES]),
            phase=rng.choice([None, "Running", "Succeeded"]),
            scheduler=rng.choice([SCHEDULER, SCHEDULER, "other"]),
            labels=labels,
            created=rng.uniform(0, 100),
            spec=spec,
        )

    def change(self) -> None:
        rng, cache = self.rng, self.cache
        pods = sorted(cache.tasks)
        step = rng.randrange(14)
        if step < 4 or not pods:
            self.apply(self.new_pod())
        elif step == 4:
            self.apply(self.new_pod(rng.choice(pods).split("/")[1]), deleted=True)
        elif step == 5:
            cache.assume(rng.choice(pods), rng.choice(NODES), gpu_index=(rng.randrange(4),))
        elif step == 6:
            cache.forget(rng.choice(pods))
        elif step == 7:
            cache.refuse(rng.choice(pods), "forbidden", now=self.now)
        elif step == 8:
            key = rng.choice(pods)
            cache.assume(key, rng.choice(NODES))
            members = {key.split("/")[1]: (rng.choice(NODES), "")}
            cache.confirm(key, placement=Placement(at=self.now, members=members))
        elif step == 9:
            if self.native and rng.random() < 0.3:
                minimum = rng.choice([None, 1, 2, 3])
                group = native_pod_group(rng.choice(NATIVE_GROUPS), minimum)
            else:
                group = pod_group(rng.choice(GROUPS), rng.randint(1, 4), minResources={"cpu": "1"})
                group["status"] = {"phase": rng.choice(["Pending", "Inqueue", "Running"])}
            self.apply(group, deleted=rng.random() < 0.2)
        elif step == 10:
            labels = {"zone": rng.choice("ab")}
            self.apply(node(rng.choice(NODES), labels=labels), deleted=rng.random() < 0.3)
            if rng.random() < 0.3:
                self.apply(namespace_object("default", queue=rng.choice(["q", "default"])))
        elif step == 11:
            self.apply(queue("q", weight=rng.randint(1, 2)), deleted=rng.random() < 0.3)
        elif step == 12:
            self.apply(priority_class(rng.choice(["high", "low"]), rng.randrange(1000)))
        else:
            self.now += rng.choice([0.5, 5.0])


@pytest.mark.parametrize("native", [False, True], ids=["peers", "native"])
@pytest.mark.parametrize("seed", range(12))
def test_a_kept_snapshot_equals_one_taken_whole_after_any_changes(seed: int, native: bool) -> None:
    cluster = Cluster(random.Random(seed), native=native)
    for _ in range(60):
        for _ in range(cluster.rng.randint(1, 4)):
            cluster.change()
        # What arrived since the last snapshot is new to both (cache/jobs.py reads it).
        seen = cluster.keeper.seen
        kept = cluster.keeper.take(now=cluster.now)
        whole = take_snapshot(
            cluster.cache, now=cluster.now, scheduler_names={SCHEDULER}, seen=seen
        )
        assert plain(kept) == plain(whole)
    # Most snapshots followed their changes rather than being taken whole again.
    assert cluster.keeper.whole < 30


def bound(decisions: Decisions) -> list[tuple[object, ...]]:
    return sorted((b.key, b.node, b.gpu_index) for b in decisions.bindings)


def evicted(decisions: Decisions) -> set[tuple[str, str]]:
    return {(e.key, e.preemptor) for e in decisions.evictions}


@pytest.mark.parametrize("native", [False, True], ids=["peers", "native"])
@pytest.mark.parametrize("seed", range(12))
def test_skipping_the_jobs_set_aside_changes_no_binding(seed: int, native: bool) -> None:
    """After any changes, time passing among them, a session on the kept snapshot,
    which skips the jobs set aside, binds what one on a snapshot taken whole decides."""
    cluster = Cluster(random.Random(seed), native=native)
    rng = cluster.rng
    # Room for some of the pods to come, which they fill and deletions free.
    for name in ("m0", "m1"):
        cluster.apply(node(name, cpu="6", extra={"nvidia.com/gpu": "2"}))
    config = default_config()
    skipped = 0
    for step in range(80):
        # Mostly pods arriving, which wake nothing, and pods leaving the room they
        # filled, between changes of every kind.
        roll = rng.random()
        on_room = sorted(k for k, t in cluster.cache.tasks.items() if t.node_name in ("m0", "m1"))
        if roll < 0.5:
            spec = {"priorityClassName": rng.choice(["high", "low"])} if rng.random() < 0.3 else {}
            requests = rng.choice([{"cpu": "1"}, {"cpu": "2"}, {"cpu": "1", "nvidia.com/gpu": "1"}])
            # Created apart: victims created at the same time are told apart by the
            # order the snapshot lists them in, which a kept one need not share.
            created = cluster.now + step / 1000
            cluster.apply(pod(f"new-{step}", requests=requests, created=created, spec=spec))
        elif roll < 0.65 and on_room:
            cluster.apply(cluster.new_pod(rng.choice(on_room).split("/")[1]), deleted=True)
        else:
            cluster.change()
        seen = cluster.keeper.seen
        kept = cluster.keeper.take(now=cluster.now)
        whole = take_snapshot(
            cluster.cache, now=cluster.now, scheduler_names={SCHEDULER}, seen=seen
        )
        skipped += len(kept.set_aside)
        ours = run_session(kept, config)
        theirs = run_session(whole, config)
        assert bound(ours) == bound(theirs)
        # A job set aside after failing to preempt is not woken when another starts
        # preempting (say its refusal ended), though the two together may find victims
        # that it alone did not: it is tried again once those victims are gone. So a
        # preemption may come a session later, never one that would not be made.
        assert evicted(ours) <= evicted(theirs)
        # As the operator carries the session out: binds assumed, victims gone.
        cluster.keeper.set_aside(ours.unplaced)
        for binding in ours.bindings:
            cluster.cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
        for eviction in ours.evictions:
            cluster.apply(pod(eviction.name), deleted=True)
    assert skipped


def test_a_pod_bound_rebuilds_only_its_own_job() -> None:
    cluster = Cluster(random.Random(1))
    before = cluster.keeper.take(now=cluster.now)
    whole = cluster.keeper.whole
    key = next(k for k, t in cluster.cache.tasks.items() if t.node_name is None and t.group)
    cluster.cache.assume(key, "n0")
    after = cluster.keeper.take(now=cluster.now)
    assert cluster.keeper.whole == whole
    own = after.job_of(cluster.cache.tasks[key])
    assert own is not None and own is not before.job_of(cluster.cache.tasks[key])
    others = [k for k in after.jobs if k != own.key]
    assert others and all(after.jobs[k] is before.jobs[k] for k in others)


@pytest.mark.parametrize(
    ("change", "whole"),
    [
        (queue("default", weight=2), True),
        (queue("default"), False),  # written again as it was (its status, say)
        (node("n0", extra={"nvidia.com/gpu": "4", "pods": "110"}), False),
        (node("n0", labels={"zone": "a"}, extra={"nvidia.com/gpu": "4", "pods": "110"}), False),
        (node("n9"), False),  # rows move: n9 sorts after n0..n5
        (node("a0"), False),  # every row moves
        (namespace_object("default", queue="q"), False),
        (pod("fresh", requests={"example.com/new": "1"}), True),
        (pod("fresh", requests={"cpu": "1"}), False),
    ],
)
def test_what_takes_the_snapshot_whole_again(change: Obj, whole: bool) -> None:
    cluster = Cluster(random.Random(2))
    cluster.apply(queue("default"))
    cluster.keeper.take(now=cluster.now)
    taken = cluster.keeper.whole
    cluster.apply(change)
    kept = cluster.keeper.take(now=cluster.now)
    assert cluster.keeper.whole == taken + whole
    assert plain(kept) == plain(
        take_snapshot(cluster.cache, now=cluster.now, scheduler_names={SCHEDULER})
    )


def test_a_refusal_that_ends_with_time_alone_is_seen() -> None:
    cluster = Cluster(random.Random(3))
    first = cluster.keeper.take(now=cluster.now)
    key = next(t.key for j in first.jobs.values() for t in j.pending if not t.error)
    cluster.cache.refuse(key, "namespace is being terminated", now=cluster.now)
    refused = cluster.keeper.take(now=cluster.now)
    assert any(t.error for j in refused.jobs.values() for t in j.pending if t.key == key)
    later = cluster.keeper.take(now=cluster.now + 2.0)
    assert not any(t.error for j in later.jobs.values() for t in j.pending if t.key == key)


def priority(value: int) -> dict[str, Any]:
    return {"priority": value}


@pytest.mark.parametrize(
    ("change", "woken"),
    [
        # Another pod to place, or one bound that no waiting job may evict: nothing
        # that could place it.
        (pod("later", requests={"cpu": "1"}, spec=priority(100)), False),
        (pod("beside", requests={"cpu": "1"}, node_name="n1", spec=priority(100)), False),
        # A pod bound that the waiting job (priority 100) may preempt.
        (pod("low", requests={"cpu": "1"}, node_name="n1", spec=priority(1)), True),
        # Room freed, or maybe: a pod gone from its node, a pod deleted, a node.
        (pod("full", requests={"cpu": "2"}, node_name="n1", phase="Succeeded"), True),
        (node("n2"), True),
        # The job itself.
        (pod("waiting", requests={"cpu": "1"}, spec=priority(50)), True),
    ],
)
def test_what_tries_a_job_set_aside_again(change: Obj, woken: bool) -> None:
    cache = ClusterCache()
    cache.apply(node("n1", cpu="2"))
    cache.apply(pod("full", requests={"cpu": "2"}, node_name="n1", spec=priority(1000)))
    cache.apply(pod("waiting", requests={"cpu": "1"}, spec=priority(100)))
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    config = default_config()
    decisions = run_session(keeper.take(now=1.0), config)
    assert list(decisions.unplaced) == ["pod:default/waiting"]
    keeper.set_aside(decisions.unplaced)
    assert list(keeper.take(now=2.0).set_aside) == ["pod:default/waiting"]
    cache.apply(change)
    snapshot = keeper.take(now=3.0)
    assert ("pod:default/waiting" not in snapshot.set_aside) == woken
    if not woken:
        # Skipped: its reason was given, and is not written again.
        later = run_session(snapshot, config)
        assert "default/waiting" not in later.pending
        assert later.waiting_set_aside == 1
    assert not keeper.take(now=4.0, retry_all=True).set_aside


def test_jobs_placed_by_other_pods_are_not_set_aside() -> None:
    cache = ClusterCache()
    cache.apply(node("n1", cpu="2"))
    cache.apply(pod("full", requests={"cpu": "2"}, node_name="n1"))
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    cache.apply(pod("near-db", requests={"cpu": "1"}, spec={"affinity": affinity}))
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    decisions = run_session(keeper.take(now=1.0), default_config())
    assert "pod:default/near-db" in decisions.unplaced
    keeper.set_aside(decisions.unplaced)
    assert not keeper.take(now=2.0).set_aside


def test_a_job_set_aside_is_tried_again_when_its_schedule_timeout_passes() -> None:
    cache = ClusterCache()
    cache.apply(node("n1", cpu="1"))
    cache.apply(pod_group("g", 2, created=0, scheduleTimeoutSeconds=30))
    for i in (0, 1):
        cache.apply(pod(f"g-{i}", requests={"cpu": "1"}, group="g", created=0))
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    config = default_config()
    decisions = run_session(keeper.take(now=at(10)), config)
    assert decisions.unplaced["default/g"].until == at(30)
    keeper.set_aside(decisions.unplaced)
    before = run_session(keeper.take(now=at(29)), config)
    assert before.waiting_set_aside == 2
    # Its group says what it waits for, as when it was set aside.
    assert before.jobs["default/g"] == decisions.jobs["default/g"]
    # Its status says the timeout passed only if the gang is looked at again.
    late = keeper.take(now=at(31))
    assert not late.set_aside
    assert run_session(late, config).jobs["default/g"].condition is not None
    assert "still short of minMember after 30s" in run_session(late, config).pending["default/g-0"]


def test_a_job_set_aside_is_tried_again_when_its_sla_waiting_time_passes() -> None:
    """Past its waiting time the sla plugin holds room for it: the operator must look at
    it again then, as the simulator does, though nothing else changes."""
    cache = ClusterCache()
    cache.apply(node("n1", cpu="1"))
    cache.apply(pod_group("g", 2, created=0))
    for i in (0, 1):
        cache.apply(pod(f"g-{i}", requests={"cpu": "1"}, group="g", created=0))
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    config = load_config(
        'starvationThreshold: "0"\ntiers:\n'
        "- plugins: [{name: priority}, {name: gang}, {name: sla, arguments: "
        "{sla-waiting-time: 45s}}]\n- plugins: [{name: predicates}, {name: proportion}]\n"
    )
    decisions = run_session(keeper.take(now=at(10)), config)
    assert decisions.unplaced["default/g"].until == at(45)


def soft_gang(created: float, uid: str) -> list[Obj]:
    """Gang g of two 4-CPU pods asking one rack (soft), its objects of uid `uid`-i
    (none when `uid` is empty: its creation tells it apart)."""
    objects = [pod_group("g", 2, created=created, networkTopology={"mode": "soft"})]
    objects += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=created) for i in range(2)]
    for i, obj in enumerate(objects):
        if uid:
            obj["metadata"]["uid"] = f"{uid}-{i}"
    return objects


@pytest.mark.parametrize("uids", [("old", "new"), ("", "")])
def test_a_gang_made_again_under_its_name_does_not_inherit_the_old_ones_soft_wait(
    uids: tuple[str, str],
) -> None:
    """The gang is deleted and made again (its job controller restarted it) after a
    session started its softWait: the clock that session kept is the old gang's, not
    the new one's, which starts its own."""
    config = load_config("topology: {tiers: [{name: rack, nodeLabel: rack}], softWait: 10m}")
    racks = [node(f"r{r}-{i}", cpu="4", labels={"rack": f"r{r}"}) for r in (1, 2) for i in (0, 1)]
    hogs = [pod(f"hog-{r}", {"cpu": "4"}, node_name=f"r{r}-0", scheduler="other") for r in (1, 2)]
    old, new = uids
    cache = cache_of([*racks, *hogs, *soft_gang(0, old)])
    first = run_session(take_snapshot(cache, now=at(100), scheduler_names=(SCHEDULER,)), config)
    assert span_starts(first) == {"default/g": at(100)}
    cache.span_clocks = first.span_clocks
    for obj in soft_gang(0, old):
        cache.apply(obj, deleted=True)
    for obj in soft_gang(1000, new):
        cache.apply(obj)
    snapshot = take_snapshot(cache, now=at(1001), scheduler_names=(SCHEDULER,))
    assert snapshot.jobs["default/g"].span_since is None
    # Its softWait starts now: it waits for a rack.
    second = run_session(snapshot, config)
    assert not second.bindings
    assert span_starts(second) == {"default/g": at(1001)}


def test_the_soft_wait_clock_a_group_keeps_is_not_a_change_of_the_group() -> None:
    """The leader's own write of the clock's annotations (api/spanclock.py) changes
    nothing a session reads: it does not take the gang's job back from those set aside
    nor build it again; restore_clocks alone reads it. A change of its spec does."""
    group, *_ = soft_gang(0, "g")
    cache = cache_of([group])
    keeper = SnapshotKeeper(cache, scheduler_names=(SCHEDULER,))
    keeper.take(now=at(1))
    assert cache.changes is not None
    group["metadata"]["annotations"] = {
        SINCE_ANNOTATION: "1970-01-01T00:00:30Z",
        OWNER_ANNOTATION: "g-0",
    }
    cache.apply(group)
    assert cache.changes.groups == set()
    cache.restore_clocks(at(1))
    assert {k: (c.since, c.owner) for k, c in cache.span_clocks.items()} == {
        "default/g": (30.0, "g-0")
    }
    group["spec"]["minMember"] = 1
    cache.apply(group)
    assert cache.changes.groups == {"default/g"}
