"""Throughput of the scheduling core alone: a synthetic cluster through one session.

Usage: python -m bench.core [--nodes 5000] [--pods 20000] [--seed 1] [--anti-affinity]
    [--zone-spread DoNotSchedule|ScheduleAnyway] [--placeable] [--caught-up K]
    [--topology hard|soft] [--rack-size 40] [--config FILE]
       python -m bench.core --dra [--nodes 1000] [--gangs 100] [--repeat 7] [--seed 1]
    [--dra-kind plain|match|first-available]
Prints one JSON object. Nodes are a mix of CPU and 8-GPU machines; pods come in gangs
of 1 to 32 members sharing one shape (plus a CPU launcher for GPU gangs), sized so
that most, but not all, fit. With --anti-affinity every pod keeps away from the other
members of its gang with a required pod anti-affinity term on kubernetes.io/hostname.
With --zone-spread nodes are spread over 10 zones and every pod spreads its gang over
them with a topology spread constraint (maxSkew 1) on topology.kubernetes.io/zone.
With --placeable every pod fits, so the figure is the cost of placing, not of finding
out that a gang cannot be placed: gangs of 1 to 32 in six shapes, a quarter of the jobs
on GPUs (1, 2 or 4 cards) and the rest on CPU nodes only (a node selector), asking
about half the cluster's CPU and three quarters of its cards at 20,000 pods on 5,000
nodes.
With --topology nodes are grouped in racks of --rack-size nodes (a node label, the one
configured topology tier) and every gang asks for one rack (networkTopology, hard or
soft, highestTierAllowed 1): the cost of placing gangs domain by domain.
--config runs the session with that configuration instead of the default one (its
topology tiers replaced by the rack label with --topology).
With --caught-up K the first session's binds are assumed, then K sessions follow, each
for one more pod (every other one a gang of 8 instead) on the cluster now holding them,
with the snapshot kept as the operator keeps it (cache/keeper.py), and the jobs a
session could place nowhere set aside as the operator sets them aside: their median and
slowest snapshot and session times are what a cluster that has caught up pays per
arrival, and `caught_up_jobs_set_aside` how many waiting jobs they skipped.
With --dra the workload is the one of DRA's throughput target instead: --nodes nodes
(1,000 unless given) of 8 GPUs and --gangs gangs of 8 pods asking 1 to 8 GPUs a pod, as
ResourceClaims and as `nvidia.com/gpu`, in --repeat interleaved rounds (bench/dra.py
says how): pods decided per CPU second of each, median and min..max, and their ratios;
--dra-kind asks the GPUs with a matchAttribute constraint or firstAvailable instead of
one plain request, which sends every claim through the exact allocator.
"""

import argparse
import json
import random
import resource
import statistics
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import SnapshotKeeper, take_snapshot
from batchsched.config.load import SchedulerConfig, read_config
from batchsched.framework.session import Timings
from batchsched.framework.topology import LabelTier
from batchsched.model.decisions import Decisions
from batchsched.scheduler import run_session

from bench import dra

SCHEDULER = "batch-scheduler"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ZONES = 10
RACK = "topology.kubernetes.io/rack"
CPU_SHAPES = [("1", "2Gi"), ("2", "4Gi"), ("4", "16Gi"), ("500m", "1Gi")]
GPU_SHAPES = [(1, "8", "32Gi"), (2, "16", "64Gi"), (4, "32", "128Gi"), (8, "64", "256Gi")]
# The --placeable workload's shapes: CPU ones as CPU nodes hold them (4 GiB a core),
# GPU ones at 8 cores and 64 GiB a card, which an 8-card node holds 8 cards of.
PLACEABLE_CPU_SHAPES = [("2", "8Gi"), ("4", "16Gi"), ("16", "64Gi")]
PLACEABLE_GPU_SHAPES = [(1, "8", "64Gi"), (2, "16", "128Gi"), (4, "32", "256Gi")]
PLACEABLE_GPU_JOBS = 0.25


def node(
    index: int, rng: random.Random, *, zoned: bool = False, rack_size: int = 0
) -> dict[str, Any]:
    gpu = rng.random() < 0.4
    allocatable = (
        {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8", "pods": "110"}
        if gpu
        else {"cpu": "64", "memory": "256Gi", "pods": "110"}
    )
    labels = {"gpu": str(gpu).lower(), HOSTNAME: f"node-{index:05d}"}
    if zoned:
        labels[ZONE] = f"zone-{index % ZONES}"
    if rack_size:
        labels[RACK] = f"rack-{index // rack_size:04d}"
    return {
        "kind": "Node",
        "metadata": {"name": f"node-{index:05d}", "labels": labels},
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str,
    group: str,
    requests: dict[str, Any],
    *,
    apart: bool,
    spread: str | None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    selector = {"matchLabels": {"job": group}}
    if apart:
        term = {"labelSelector": selector, "topologyKey": HOSTNAME}
        required = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        spec["affinity"] = {"podAntiAffinity": required}
    if spread:
        constraint = {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": spread,
            "labelSelector": selector,
        }
        spec["topologySpreadConstraints"] = [constraint]
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "labels": {"job": group},
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
    }


def _jobs(pods: int, rng: random.Random) -> Iterator[tuple[str, int]]:
    """Gangs of 1 to 32 until there are `pods` pods: each one's name and size, the size
    drawn just before the gang is yielded (so that each gang's own draws follow it)."""
    made = 0
    job = 0
    while made < pods:
        size = min(rng.randint(1, 32), pods - made)
        yield f"job-{job:05d}", size
        made += size
        job += 1


def workload(
    pods: int, rng: random.Random, *, apart: bool = False, spread: str | None = None
) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for group, size in _jobs(pods, rng):
        members: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            gpus, cpu, memory = rng.choice(GPU_SHAPES)
            shape = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus}
            if size > 1:
                launcher = {"cpu": "1", "memory": "2Gi"}
                members.append(
                    pod(f"{group}-launcher", group, launcher, apart=apart, spread=spread)
                )
        else:
            cpu, memory = rng.choice(CPU_SHAPES)
            shape = {"cpu": cpu, "memory": memory}
        members += [
            pod(f"{group}-{i}", group, shape, apart=apart, spread=spread)
            for i in range(size - len(members))
        ]
        objects += [pod_group(group, size), *members]
    return objects


def placeable_workload(pods: int, rng: random.Random) -> list[dict[str, Any]]:
    """Gangs that all fit (the module says how); CPU jobs kept off the GPU nodes, whose
    cores the GPU jobs need beside their cards."""
    objects: list[dict[str, Any]] = []
    for group, size in _jobs(pods, rng):
        on: dict[str, str] | None = None
        if rng.random() < PLACEABLE_GPU_JOBS:
            gpus, cpu, memory = rng.choice(PLACEABLE_GPU_SHAPES)
            shape: dict[str, Any] = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus}
        else:
            cpu, memory = rng.choice(PLACEABLE_CPU_SHAPES)
            shape, on = {"cpu": cpu, "memory": memory}, {"gpu": "false"}
        members = [
            pod(f"{group}-{i}", group, shape, apart=False, spread=None, node_selector=on)
            for i in range(size)
        ]
        objects += [pod_group(group, size), *members]
    return objects


def pod_group(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": OUR_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"minMember": size},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, help="5,000; 1,000 with --dra")
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--anti-affinity",
        action="store_true",
        help="every pod has required anti-affinity on hostname against its gang",
    )
    parser.add_argument(
        "--zone-spread",
        choices=["DoNotSchedule", "ScheduleAnyway"],
        help="every pod spreads its gang over 10 zones with maxSkew 1",
    )
    parser.add_argument(
        "--placeable", action="store_true", help="a workload in which every pod fits"
    )
    parser.add_argument(
        "--caught-up", type=int, default=0, metavar="K", help="sessions for arrivals after"
    )
    parser.add_argument("--topology", choices=["hard", "soft"], help="every gang asks for one rack")
    parser.add_argument("--rack-size", type=int, default=40, help="nodes per rack")
    parser.add_argument("--config", help="a configuration file instead of the default one")
    parser.add_argument("--dra", action="store_true", help="DRA's target: claims vs extended")
    parser.add_argument("--gangs", type=int, default=100, help="with --dra: gangs of 8")
    parser.add_argument("--repeat", type=int, default=7, help="with --dra: rounds")
    parser.add_argument(
        "--dra-kind", choices=dra.KINDS, default="plain", help="with --dra: how claims ask"
    )
    args = parser.parse_args()
    if args.dra:
        nodes = args.nodes or 1000
        found = dra.compare(nodes, args.gangs, 8, args.repeat, args.seed, args.dra_kind)
        shown = {"nodes": nodes, "gangs": args.gangs, "size": 8, "kind": args.dra_kind}
        print(json.dumps({**shown, **found}))
        return
    args.nodes = args.nodes or 5000
    if args.placeable and (args.anti_affinity or args.zone_spread):
        parser.error("--placeable takes neither --anti-affinity nor --zone-spread")
    rng = random.Random(args.seed)
    racks = args.rack_size if args.topology else 0
    zoned = args.zone_spread is not None
    objects = [node(i, rng, zoned=zoned, rack_size=racks) for i in range(args.nodes)]
    if args.placeable:
        objects += placeable_workload(args.pods, rng)
    else:
        objects += workload(args.pods, rng, apart=args.anti_affinity, spread=args.zone_spread)
    config = read_config(args.config)
    if args.topology:
        config = replace(config, topology_tiers=(LabelTier("rack", RACK),))
        ask = {"mode": args.topology, "highestTierAllowed": 1}
        for obj in objects:
            if obj["kind"] == "PodGroup":
                obj["spec"]["networkTopology"] = ask

    started = time.perf_counter()
    cache = ClusterCache()
    for obj in objects:
        cache.apply(obj)
    ingested = time.perf_counter()
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    snapped, cpu_snapped = time.perf_counter(), time.process_time()
    timings = Timings()
    decisions = run_session(snapshot, config, timings=timings)
    finished, cpu_finished = time.perf_counter(), time.process_time()

    session_seconds = finished - snapped
    decided = len(decisions.bindings) + len(decisions.pending)
    caught_up = arrivals(cache, decisions, args.caught_up, config) if args.caught_up else {}
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": args.pods,
                "anti_affinity": args.anti_affinity,
                "zone_spread": args.zone_spread,
                "placeable": args.placeable,
                "topology": args.topology,
                "groups": sum(1 for o in objects if o["kind"] == "PodGroup"),
                "bound": len(decisions.bindings),
                "pending": len(decisions.pending),
                "ingest_seconds": round(ingested - started, 3),
                "snapshot_seconds": round(snapped - ingested, 3),
                "seconds": round(session_seconds, 3),
                # On shared cores the session's CPU time is steadier than its wall time.
                "cpu_seconds": round(cpu_finished - cpu_snapped, 3),
                "pods_per_second": round(decided / session_seconds),
                "action_seconds": {a: round(t, 3) for a, t in timings.actions.items()},
                **caught_up,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


def arrivals(
    cache: ClusterCache, first: Decisions, sessions: int, config: SchedulerConfig
) -> dict[str, Any]:
    """Sessions for pods arriving one job at a time once `first` is bound (the module
    says which): their snapshot and session seconds, median and slowest."""
    for binding in first.bindings:
        cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
    keeper = SnapshotKeeper(cache, scheduler_names={SCHEDULER})
    whole_started = time.perf_counter()
    keeper.take(now=0.0)
    whole = time.perf_counter() - whole_started
    keeper.set_aside(first.unplaced)
    snapshots: list[float] = []
    runs: list[float] = []
    set_aside: list[int] = []
    for index in range(sessions):
        size = 8 if index % 2 else 1
        name = f"arrival-{index:04d}"
        objects = [pod_group(name, size)] if size > 1 else []
        shape = {"cpu": "1", "memory": "2Gi"}
        objects += [pod(f"{name}-{i}", name, shape, apart=False, spread=None) for i in range(size)]
        if size == 1:
            del objects[0]["metadata"]["annotations"]
        for obj in objects:
            cache.apply(obj)
        started = time.perf_counter()
        snapshot = keeper.take(now=float(index + 1))
        taken = time.perf_counter()
        decisions = run_session(snapshot, config)
        runs.append(time.perf_counter() - taken)
        snapshots.append(taken - started)
        set_aside.append(len(snapshot.set_aside))
        keeper.set_aside(decisions.unplaced)
        for binding in decisions.bindings:
            cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
    return {
        "whole_snapshot_seconds": round(whole, 3),
        "caught_up_sessions": sessions,
        "caught_up_snapshot_seconds": _spread(snapshots),
        "caught_up_session_seconds": _spread(runs),
        "caught_up_snapshots_taken_whole": keeper.whole - 1,
        "caught_up_jobs_set_aside": statistics.median(set_aside),
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "max": round(max(values), 4)}


if __name__ == "__main__":
    main()
