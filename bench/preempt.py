"""Cost of a preempting session: a full cluster, and pending work that must evict to run.

Usage: python -m bench.preempt [--nodes 5000] [--repeat 5] [--high-gangs 10]
    [--gang-size 8] [--high-pods 20] [--reclaim-gangs 5]
Prints one JSON object. The issue's target: at 5,000 nodes and 20,000 running pods a
preempting session decides in under 1 s.

Every node (32 CPUs, 128 GiB) holds four running 8-CPU pods of ours, bound (nodeName
set, phase Running) and of low priority: gangs of 8 (two nodes each, half of them
with minMember 6 so that two members may go alone) and lone pods, split between the
queues `prod` and `research`. A third queue, `dev`, of equal weight, runs nothing: it
is below its share. Pending are `--high-gangs` high-priority gangs of `--gang-size`
in prod and `--high-pods` high-priority lone pods in research, which only preempt can
place, and `--reclaim-gangs` gangs of 4 in dev, which only reclaim can place.

The cluster is built once through ClusterCache.apply; then, `--repeat` times, a
snapshot is taken and one session run on it, each timed on its own (the session does
not change the cache, so every repeat decides the same). Reported: median and min/max
of each, the actions' median seconds, what the session decided, and peak RSS.
"""

import argparse
import json
import resource
import statistics
import time
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.framework.session import Timings
from batchsched.model.decisions import Decisions
from batchsched.scheduler import run_session

SCHEDULER = "batch-scheduler"
NAMESPACE = "bench"
PODS_PER_NODE = 4
# One pod's request: PODS_PER_NODE of them fill a node exactly.
POD_REQUEST = {"cpu": "8", "memory": "32Gi"}
NODE_ALLOCATABLE = {"cpu": "32", "memory": "128Gi", "pods": "110"}
RUNNING_GANG = 8
RECLAIM_GANG = 4
# Of the running pods, the share in gangs; the rest run alone.
GANG_SHARE = 0.5
RUNNING_QUEUES = ("prod", "research")
IDLE_QUEUE = "dev"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": OUR_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }


def node(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": NODE_ALLOCATABLE},
    }


def group(name: str, min_member: int, queue_name: str, priority: str) -> dict[str, Any]:
    return {
        "apiVersion": OUR_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": min_member, "queue": queue_name, "priorityClassName": priority},
    }


def pod(
    name: str,
    *,
    priority: str,
    queue_name: str,
    group_name: str | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    annotations = {"scheduling.batchsched.io/queue-name": queue_name}
    if group_name is not None:
        annotations["scheduling.batchsched.io/group-name"] = group_name
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "priorityClassName": priority,
        "containers": [{"name": "main", "resources": {"requests": POD_REQUEST}}],
    }
    obj: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": spec,
    }
    if node_name is not None:
        spec["nodeName"] = node_name
        obj["status"] = {"phase": "Running"}
    return obj


def running(nodes: int) -> list[dict[str, Any]]:
    """PODS_PER_NODE low-priority pods on every node: gangs first, then lone pods,
    alternating between the running queues."""
    slots = [f"node-{i:05d}" for i in range(nodes) for _ in range(PODS_PER_NODE)]
    gangs = int(len(slots) * GANG_SHARE) // RUNNING_GANG
    objects: list[dict[str, Any]] = []
    for g in range(gangs):
        name = f"low-gang-{g:05d}"
        queue_name = RUNNING_QUEUES[g % len(RUNNING_QUEUES)]
        min_member = RUNNING_GANG - 2 if g % 2 else RUNNING_GANG
        objects.append(group(name, min_member, queue_name, "low"))
        for i in range(RUNNING_GANG):
            where = slots[g * RUNNING_GANG + i]
            objects.append(
                pod(
                    f"{name}-{i}",
                    priority="low",
                    queue_name=queue_name,
                    group_name=name,
                    node_name=where,
                )
            )
    for index, where in enumerate(slots[gangs * RUNNING_GANG :]):
        queue_name = RUNNING_QUEUES[index % len(RUNNING_QUEUES)]
        objects.append(
            pod(f"low-pod-{index:05d}", priority="low", queue_name=queue_name, node_name=where)
        )
    return objects


def pending(high_gangs: int, gang_size: int, high_pods: int, reclaim_gangs: int) -> list[Any]:
    objects: list[dict[str, Any]] = []
    for g in range(high_gangs):
        name = f"high-gang-{g:03d}"
        objects.append(group(name, gang_size, "prod", "high"))
        objects += [
            pod(f"{name}-{i}", priority="high", queue_name="prod", group_name=name)
            for i in range(gang_size)
        ]
    objects += [
        pod(f"high-pod-{i:03d}", priority="high", queue_name="research") for i in range(high_pods)
    ]
    for g in range(reclaim_gangs):
        name = f"dev-gang-{g:03d}"
        objects.append(group(name, RECLAIM_GANG, IDLE_QUEUE, "low"))
        objects += [
            pod(f"{name}-{i}", priority="low", queue_name=IDLE_QUEUE, group_name=name)
            for i in range(RECLAIM_GANG)
        ]
    return objects


def spread(samples: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(samples), 4),
        "min": round(min(samples), 4),
        "max": round(max(samples), 4),
    }


def counts(decisions: Decisions) -> dict[str, int]:
    by_action = {"preempt": 0, "reclaim": 0}
    for eviction in decisions.evictions:
        by_action[eviction.action] += 1
    return {
        "bindings": len(decisions.bindings),
        "evicted_preempt": by_action["preempt"],
        "evicted_reclaim": by_action["reclaim"],
        "evicted_past_budget": sum(1 for e in decisions.evictions if e.budget),
        "nominations": sum(1 for n in decisions.nominations if n.node),
        "pending": len(decisions.pending),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--high-gangs", type=int, default=10)
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--high-pods", type=int, default=20)
    parser.add_argument("--reclaim-gangs", type=int, default=5)
    args = parser.parse_args()
    if args.nodes < 1 or args.repeat < 1:
        parser.error("--nodes and --repeat must be at least 1")
    objects: list[dict[str, Any]] = [priority_class("low", 100), priority_class("high", 1000)]
    objects += [queue(name) for name in (*RUNNING_QUEUES, IDLE_QUEUE)]
    objects += [node(i) for i in range(args.nodes)]
    objects += running(args.nodes)
    objects += pending(args.high_gangs, args.gang_size, args.high_pods, args.reclaim_gangs)

    started = time.perf_counter()
    cache = ClusterCache()
    for obj in objects:
        cache.apply(obj)
    ingest_seconds = time.perf_counter() - started
    config = default_config()
    snapshot_seconds: list[float] = []
    session_seconds: list[float] = []
    actions: dict[str, list[float]] = {}
    decided: list[dict[str, int]] = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
        snapped = time.perf_counter()
        timings = Timings()
        decisions = run_session(snapshot, config, timings=timings)
        finished = time.perf_counter()
        snapshot_seconds.append(snapped - started)
        session_seconds.append(finished - snapped)
        for action, seconds in timings.actions.items():
            actions.setdefault(action, []).append(seconds)
        decided.append(counts(decisions))
    running_pods = sum(1 for t in cache.tasks.values() if t.node_name)
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "running_pods": running_pods,
                "pending_pods": len(cache.tasks) - running_pods,
                "repeat": args.repeat,
                "ingest_seconds": round(ingest_seconds, 3),
                "snapshot_seconds": spread(snapshot_seconds),
                "session_seconds": spread(session_seconds),
                "action_seconds": {
                    action: round(statistics.median(samples), 4)
                    for action, samples in actions.items()
                },
                **decided[0],
                # Every repeat decides alike from the same cache; False would be a bug.
                "repeats_agree": all(d == decided[0] for d in decided),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


if __name__ == "__main__":
    main()
