"""The session loop: the only place decisions are made.

It starts once the watch has seen the whole cluster and runs sessions only while this
replica leads. It is one coroutine, so two sessions never overlap.

A session starts as soon as something it would act on arrives (watch.py says what
wakes it: a pod of ours to place, room freed, a node), not at the next
`schedulePeriod`: a lone pod waits for one session, not for a tick. A burst is let
gather first: the session starts once no such event has come for `burstWindow`, or
`BURST_WINDOWS_AT_MOST` windows after the first, so thousands of pods created at once
still go in a few sessions; and events that arrive while a session runs are taken by
the next one, which starts when it ends. Other changes (another scheduler's pending
pods, queues, storage) are acted on at the next periodic tick, every `schedulePeriod`.

Each session's snapshot is taken in the event loop from the last one and what changed
since (cache/keeper.py), which costs the changes, not the cluster. The session then runs
in a forked child process at a lower CPU priority (forked.py says why), so a long session
(tens of thousands of pods) does not stall watches, binds in flight or the lease; one
with a few pods to place on a small cluster costs less than the fork and runs in the
event loop itself. Each job's bindings come back to the event loop the moment the
session commits them and go to the binder at once, so the API server is binding the
first gangs while later ones are still being placed. The victims a session chose to
preempt, and the nodes it holds for their preemptors, go to the evictor once it ends.
Before a job's bindings are assumed they are checked against the cache as it is by
then: if a member was deleted, recreated or bound meanwhile, or its node is gone, none
of the job is bound and the next session looks again.

A tick on which nothing the core reads has changed skips the session: an idle cluster
costs a counter increment per period. Pods left pending are looked at again every
`revisit_seconds` even so, because some reasons change with time alone (schedule
timeouts, starvation). Jobs a session could place nowhere are set aside by the keeper
until something could place them or their own time comes (a timeout, the starvation
threshold); every `RETRY_ALL_SECONDS` a session tries them all again.

Python's cyclic collector is kept out of the way of startup: listing a large cluster
builds hundreds of thousands of long-lived objects, and every full collection would
walk them all again, pausing the loop before the first bind.
It is paused until the first tick after the cache is synced (the first session, on the
leader), then the cache as it stands is frozen out of its reach. Nearly all of that
data is freed by reference counting alone. If the cache cannot sync (say RBAC forbids
listing a kind), the collector comes back after `SYNC_GRACE_SECONDS` anyway, so the
retrying informers do not pile up cycles for ever.
"""

import asyncio
import contextlib
import gc
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

from prometheus_client import Gauge

from batchsched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, ResourceList, to_base_units
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import SnapshotKeeper
from batchsched.config.load import SchedulerConfig
from batchsched.framework.devices import DeviceMemo
from batchsched.framework.session import Timings
from batchsched.k8s.binder import Binder
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.forked import run_forked
from batchsched.k8s.usage import Usage, summarize
from batchsched.k8s.watch import Watch
from batchsched.metrics import (
    ACTION_DURATION,
    CLUSTER_ALLOCATABLE,
    CLUSTER_ALLOCATED,
    NOMINATED_PODS,
    PENDING_GROUPS,
    PENDING_PODS,
    PLUGIN_DURATION,
    QUEUE_ALLOCATED,
    QUEUE_DESERVED,
    SCHEDULE_ATTEMPTS,
    SESSION_DURATION,
    SESSION_PEAK_RSS,
    SESSIONS,
)
from batchsched.model.decisions import Binding, Deallocation, Decisions
from batchsched.model.reasons import SESSION, Code, Reason
from batchsched.model.snapshot import Snapshot
from batchsched.scheduler import run_session

log = logging.getLogger(__name__)

UNITS = {CPU: "core", MEMORY: "byte", EPHEMERAL_STORAGE: "byte"}
# How long after the first of a burst of events its session starts at the latest, in
# burst windows: a steady stream of pods gets a session every 100 ms by default.
BURST_WINDOWS_AT_MOST = 20
# A session with at most this many pods to place, on a cluster of at most this many
# nodes and placed pods together, runs in the event loop rather than a forked child.
INLINE_PENDING_PODS = 16
INLINE_CLUSTER_OBJECTS = 5000
# Every job set aside is tried again this often whatever happened, as kube-scheduler
# moves pods back from its unschedulable queue after podMaxInUnschedulablePodsDuration:
# a net for what may place a job without waking it. Trying them all costs a session as
# long as the backlog.
RETRY_ALL_SECONDS = 300.0
# Listing even 50,000 pods takes seconds: a cache not synced by then is waiting on the
# cluster (permissions, an unreachable API server), not on parsing.
SYNC_GRACE_SECONDS = 60.0


class SessionLoop:
    def __init__(
        self,
        config: SchedulerConfig,
        watch: Watch,
        binder: Binder,
        *,
        evictor: Evictor,
        leading: Callable[[], bool],
        revisit_seconds: float = 10.0,
    ) -> None:
        self.config = config
        self.watch = watch
        self.cache: ClusterCache = watch.cache
        self.status = watch.status
        self.binder = binder
        self.evictor = evictor
        self.leading = leading
        self.revisit_seconds = revisit_seconds
        self.keeper = SnapshotKeeper(self.cache, scheduler_names=config.scheduler_names)
        # The CEL results and device inventory kept from session to session (a forked
        # session's own additions end with it).
        self.devices = DeviceMemo()
        self._last: float | None = None
        # When every job set aside was last tried again (monotonic).
        self._retried = -math.inf
        self._waiting = False
        self._peak_rss = 0
        # Pods the running session has decided so far.
        self._decided = 0
        # Jobs of the running session that _accept did not send.
        self._dropped: set[str] = set()
        self._sweep: asyncio.Task[None] | None = None
        self._releasing: asyncio.Task[None] | None = None
        # Claim key -> the deallocation decided for it, to write once the batch being
        # written is done.
        self._deallocations: dict[str, Deallocation] = {}

    async def run(self) -> None:
        """Runs sessions until cancelled; started before the informers' first pages."""
        gc.disable()
        try:
            async with asyncio.timeout(SYNC_GRACE_SECONDS):
                await self.watch.synced.wait()
        except TimeoutError:
            log.warning("cache not synced after %gs; still waiting", SYNC_GRACE_SECONDS)
            gc.enable()
            await self.watch.synced.wait()
        log.info(
            "cache synced: %d nodes, %d pods; scheduling every %gs",
            len(self.cache.nodes),
            len(self.cache.tasks),
            self.config.schedule_period,
        )
        tick = time.monotonic()
        while True:
            started = time.monotonic()
            if self.leading():
                if self._last is None:
                    # This replica's first session, or its first since it led last: the
                    # softWait clocks its memory holds, and those it wrote, are none or
                    # stale.
                    self.cache.restore_clocks(time.time())
                    self.status.forget_clocks()
                if self._due(started):
                    self._last = started
                    await self.session()
                else:
                    SESSIONS.labels("idle").inc()
            else:
                # What changed meanwhile is read in full when this replica leads.
                self.watch.changes.take()
                self._last = None
            if not gc.isenabled():
                # After the first tick, leading or standing by.
                gc.freeze()
                gc.enable()
            if time.monotonic() >= tick:
                tick = started + self.config.schedule_period
            await self._until_due(tick)

    async def _until_due(self, tick: float) -> None:
        """Wait for the periodic `tick` or, sooner, for an urgent change and the rest of
        its burst."""
        changes = self.watch.changes
        window = self.config.burst_window
        while True:
            now = time.monotonic()
            first = changes.first_urgent
            if first is not None:
                due = min(changes.last_urgent + window, first + window * BURST_WINDOWS_AT_MOST)
                if due <= now:
                    return
                await asyncio.sleep(due - now)
            elif now >= tick:
                return
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(tick - now):
                        await changes.urgent.wait()

    def _due(self, now: float) -> bool:
        changed = self.watch.changes.take()
        if self._last is None or changed:
            return True
        return self._waiting and now - self._last >= self.revisit_seconds

    async def session(self) -> None:
        started = time.perf_counter()
        self._dropped.clear()
        self._decided = 0
        with self.binder.deciding():
            now = time.monotonic()
            retry_all = now - self._retried >= RETRY_ALL_SECONDS
            if retry_all:
                self._retried = now
            snapshot = self.keeper.take(now=time.time(), retry_all=retry_all)
            if _small(snapshot):
                decisions, usage, timings = _decide(
                    snapshot, self.config, self.devices, self._accept
                )
            else:
                finished = await run_forked(
                    partial(_decide, snapshot, self.config, self.devices),
                    on_message=self._accept,
                )
                decisions, usage, timings = finished.result
                self._peak_rss = max(self._peak_rss, finished.peak_rss_bytes)
                SESSION_PEAK_RSS.set(self._peak_rss)
        self._publish(decisions, usage, timings)
        self.keeper.set_aside(decisions.unplaced)
        self.cache.span_clocks = decisions.span_clocks
        jobs = snapshot.jobs
        self.status.clocks(
            decisions.span_clocks,
            self.cache.pod_groups,
            self.cache.stored_clock_keys,
            lambda key: (job := jobs.get(key)) is not None and job.served,
        )
        if snapshot.held_back:
            # Groups decided as they stood before a pod mixed them: refused at once.
            self.watch.changes.note(urgent=True)
        self.evictor.submit(decisions.evictions, decisions.nominations)
        self._delete_leftovers()
        self._deallocate(decisions.deallocations)
        seconds = time.perf_counter() - started
        SESSION_DURATION.observe(seconds)
        SESSIONS.labels("ran").inc()
        if self._decided:
            log.info(
                "session: %d pods to bind, %d pending, %.0f ms",
                self._decided,
                len(decisions.pending) + decisions.waiting_set_aside,
                seconds * 1000,
            )

    def _delete_leftovers(self) -> None:
        """Delete, in the background and one sweep at a time, the claims made for the
        extended resources of pods that wait, left by an earlier attempt (a leader lost
        before the Binding): those pods wait until they are gone, as in kube-scheduler."""
        if self._sweep is not None and not self._sweep.done():
            return
        leftovers = self.binder.devices.leftovers(self.config.scheduler_names)
        self._sweep = (
            asyncio.create_task(self.binder.devices.delete(leftovers)) if leftovers else None
        )

    def _deallocate(self, deallocations: list[Deallocation]) -> None:
        """Clear, in the background, the claims the session decided to deallocate for
        pods no node took (kube-scheduler's PostFilter), as the simulator does. While an
        earlier batch is being written, this one's wait and go after it: their pods
        may not come back to a session before a device changes. The newest decision
        for a claim stands; each is checked against the claim when written."""
        self._deallocations.update((d.key, d) for d in deallocations)
        if not self._deallocations or (self._releasing is not None and not self._releasing.done()):
            return
        self._releasing = asyncio.create_task(self._write_deallocations())

    async def _write_deallocations(self) -> None:
        while self._deallocations:
            batch = list(self._deallocations.values())
            self._deallocations.clear()
            await self.binder.devices.deallocate(batch)

    def _accept(self, bindings: Sequence[Binding]) -> None:
        """Assume and send one job's bindings, unless the cluster moved under them."""
        self._decided += len(bindings)
        tasks, nodes = self.cache.tasks, self.cache.nodes
        for binding in bindings:
            task = tasks.get(binding.key)
            if task is None or task.uid != binding.uid or task.node_name is not None:
                stale = f"{binding.key} changed while the session ran"
            elif binding.node not in nodes:
                stale = f"node {binding.node} was removed while the session ran"
            else:
                continue
            log.info("not binding %s: %s", binding.job, stale)
            self._dropped.add(binding.job)
            self.watch.changes.note(urgent=True)
            return
        for binding in bindings:
            self.cache.assume(
                binding.key, binding.node, gpu_index=binding.gpu_index, devices=binding.devices
            )
        SCHEDULE_ATTEMPTS.labels("scheduled").inc(len(bindings))
        self.binder.submit(bindings)

    def _publish(self, decisions: Decisions, usage: Usage, timings: Timings) -> None:
        """Pod conditions, group and queue status, and metrics for one session."""
        pending = {**decisions.pending, **self._rejected()}
        self._waiting = bool(pending) or bool(decisions.waiting_set_aside)
        self.status.pods(pending, self.cache.tasks)
        # A dropped job's status would claim a placement never sent; the next session,
        # which runs at once, writes it.
        jobs = {key: job for key, job in decisions.jobs.items() if key not in self._dropped}
        # The core counts a placed job as scheduled; one whose claims are still being
        # bound has no pod bound yet, and its status says so.
        for key, wait in self.binder.waiting.items():
            if key in jobs:
                jobs[key] = wait.status(jobs[key])
        self.status.groups(jobs, self.cache.pod_groups)
        self.status.queues(usage.queues, self.cache.queues)
        self.status.invalid(self.watch.invalid)
        _record(timings, decisions, pending, usage)

    def _rejected(self) -> dict[str, Reason]:
        """Our pods the cache could not parse: their error is their pending reason."""
        served = self.config.scheduler_names
        return {
            key: Reason(Code.INVALID, SESSION, message)
            for key, (scheduler, message) in self.cache.rejected_pods.items()
            if scheduler in served
        }


def _small(snapshot: Snapshot) -> bool:
    """Whether the session is cheaper than the fork that would keep it off the event
    loop: few pods to place (jobs set aside are not tried) on a small cluster
    (docs/benchmarks.md has the costs). Its cost grows with the pods and nodes it looks
    at, a fork's with the cache's size."""
    if len(snapshot.nodes) + len(snapshot.placed) > INLINE_CLUSTER_OBJECTS:
        return False
    pending = 0
    set_aside = snapshot.set_aside
    for job in snapshot.jobs.values():
        if job.key not in set_aside:
            pending += len(job.pending)
            if pending > INLINE_PENDING_PODS:
                return False
    return True


def _decide(
    snapshot: Snapshot,
    config: SchedulerConfig,
    devices: DeviceMemo,
    commit: Callable[[Sequence[Binding]], None],
) -> tuple[Decisions, Usage, Timings]:
    """The session, in a forked child (the event loop goes on meanwhile) or, when small,
    in the event loop itself. The bindings reached the loop job by job (`commit`), so
    they do not travel again."""
    timings = Timings()
    decisions = run_session(snapshot, config, timings=timings, on_commit=commit, devices=devices)
    return replace(decisions, bindings=[]), summarize(snapshot, decisions), timings


def _record(
    timings: Timings, decisions: Decisions, pending: Mapping[str, Reason], usage: Usage
) -> None:
    for action, seconds in timings.actions.items():
        ACTION_DURATION.labels(action).observe(seconds)
    for plugin, seconds in timings.plugins.items():
        PLUGIN_DURATION.labels(plugin).observe(seconds)
    SCHEDULE_ATTEMPTS.labels("unschedulable").inc(len(pending))
    PENDING_PODS.set(len(pending) + decisions.waiting_set_aside)
    PENDING_GROUPS.set(usage.pending_groups)
    NOMINATED_PODS.set(usage.nominated)
    for gauge in (QUEUE_ALLOCATED, QUEUE_DESERVED):
        gauge.clear()
    for name, queue in usage.queues.items():
        _set(QUEUE_ALLOCATED, queue.allocated, name)
        _set(QUEUE_DESERVED, decisions.deserved.get(name, {}), name)
    _set(CLUSTER_ALLOCATABLE, usage.cluster_allocatable)
    _set(CLUSTER_ALLOCATED, usage.cluster_allocated)


def _set(gauge: Gauge, amounts: ResourceList, *queue: str) -> None:
    for resource, amount in amounts.items():
        unit = UNITS.get(resource, "integer")
        gauge.labels(*queue, resource, unit).set(to_base_units(resource, amount))
