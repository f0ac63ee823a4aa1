"""The rack workload of the placement-quality benches, and the measures taken of a run.

A cluster of spines, each over racks of 8-GPU nodes, described twice, as a user of
either scheduler would: node labels (`topology.kubernetes.io/rack`, `.../spine`) and
Volcano HyperNodes (a tier-1 `rack` per rack selecting its nodes by that label, a
tier-2 `spine` per spine naming its racks). Gangs of 1 to 16 pods asking 1 to 8 GPUs a
pod arrive at random (a Poisson process) and run for a random time; the arrival rate
is set so that the GPU-seconds asked are `load` times what the cluster holds over the
arrivals. Every gang is a Volcano PodGroup (minMember its size) in a Volcano Queue, its
pods joined by Volcano's annotation, so both schedulers read the same objects.

A gang of 2 or more pods asks one of three ways (`Ask`): nothing (today's placement),
`networkTopology` soft (no tier limit, as Volcano's guide writes it), or hard with
`highestTierAllowed` the lowest tier whose domains are big enough for it (1, a rack,
when its GPUs fit in one; else 2, a spine). Big enough is counted in GPUs alone: every
pod's CPU and memory are sized so that a node's GPUs, not its CPU, run out first.

`measure` turns where and when each pod ran into the figures the benches report; the
rest is what the topology benches' command lines share: the workload's arguments, the
runs in worker processes, a figure's spread over seeds and the JSON report.
"""

import argparse
import enum
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from multiprocessing import Pool
from typing import Any, TypeVar

from batchsched.api.groups import VOLCANO_API, parse_duration
from batchsched.api.resources import GPU
from batchsched.sim.simulator import DURATION_ANNOTATION

from tests.support.objects import hypernode, hypernode_member, node, pod, pod_group

RACK_LABEL = "topology.kubernetes.io/rack"
SPINE_LABEL = "topology.kubernetes.io/spine"
VOLCANO_GROUP_KEY = "scheduling.k8s.io/group-name"
# Volcano's Queues: `bench` under `root`, as bench/e2e.py writes them.
QUEUES = ("root", "bench")
GPUS_PER_NODE = 8
NODE_CPU = 96
NODE_MEMORY_GI = 768
# Per GPU a pod asks: a node's GPUs run out before its CPU and memory.
CPU_PER_GPU = 8
MEMORY_GI_PER_GPU = 64
# (pods, GPUs per pod) -> weight: mostly whole-node workers, some small jobs, as in
# the multi-node training mixes the issue is about.
SHAPES: Mapping[tuple[int, int], float] = {
    (1, 1): 6,
    (1, 2): 3,
    (1, 4): 3,
    (1, 8): 4,
    (2, 1): 2,
    (2, 4): 4,
    (2, 8): 8,
    (4, 2): 3,
    (4, 4): 4,
    (4, 8): 10,
    (8, 4): 3,
    (8, 8): 8,
    (16, 8): 3,
}
MEAN_DURATION = 3600.0
Item = TypeVar("Item")
Summary = TypeVar("Summary")


class Ask(enum.StrEnum):
    OFF = "off"
    SOFT = "soft"
    HARD = "hard"


@dataclass(frozen=True)
class Cluster:
    spines: int = 2
    racks_per_spine: int = 4
    nodes_per_rack: int = 8

    @property
    def rack_gpus(self) -> int:
        return self.nodes_per_rack * GPUS_PER_NODE

    @property
    def gpus(self) -> int:
        return self.spines * self.racks_per_spine * self.rack_gpus

    def rack(self, spine: int, rack: int) -> str:
        return f"s{spine}-r{rack}"

    def racks(self) -> Iterable[tuple[int, str]]:
        for s in range(self.spines):
            for r in range(self.racks_per_spine):
                yield s, self.rack(s, r)

    def report(self) -> dict[str, int]:
        """The cluster as a bench's report gives it."""
        return {
            "spines": self.spines,
            "racks_per_spine": self.racks_per_spine,
            "nodes_per_rack": self.nodes_per_rack,
            "gpus": self.gpus,
        }


@dataclass(frozen=True)
class Gang:
    name: str
    pods: int
    gpus_per_pod: int
    # Seconds from the first arrival.
    arrival: float
    duration: float

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def member(self, index: int) -> str:
        return f"{self.name}-{index}"


def gangs(cluster: Cluster, count: int, load: float, rng: random.Random) -> list[Gang]:
    """`count` gangs of the shapes above that fit the cluster, arriving so that they ask
    `load` times its GPU-seconds over the arrivals."""
    fitting = {s: w for s, w in SHAPES.items() if s[0] * s[1] <= cluster.gpus}
    shapes = rng.choices(list(fitting), weights=list(fitting.values()), k=count)
    # Exponential run times, floored at a minute (a job that starts does some work).
    durations = [max(60.0, rng.expovariate(1 / MEAN_DURATION)) for _ in shapes]
    asked = sum(p * g * d for (p, g), d in zip(shapes, durations, strict=True))
    # GPU-seconds per second the arrivals bring, over the cluster's GPUs, is the load.
    rate = load * cluster.gpus * count / asked
    arrival = 0.0
    out = []
    for index, ((pods, per_pod), duration) in enumerate(zip(shapes, durations, strict=True)):
        out.append(Gang(f"g{index:04d}", pods, per_pod, round(arrival, 1), round(duration)))
        arrival += rng.expovariate(rate)
    return out


def tier_for(cluster: Cluster, gang: Gang) -> int:
    """The lowest tier whose domains hold the gang's GPUs: 1 a rack, 2 a spine, 3 none."""
    if gang.gpus <= cluster.rack_gpus:
        return 1
    return 2 if gang.gpus <= cluster.rack_gpus * cluster.racks_per_spine else 3


def network_topology(cluster: Cluster, gang: Gang, ask: Ask) -> dict[str, Any] | None:
    tier = tier_for(cluster, gang)
    if ask is Ask.OFF or gang.pods == 1 or tier > 2:
        return None
    if ask is Ask.SOFT:
        # Volcano's guide: highestTierAllowed is not needed with soft; the lowest tier
        # that holds the gang, else the next, else anywhere.
        return {"mode": str(ask)}
    return {"mode": str(ask), "highestTierAllowed": tier}


def nodes(cluster: Cluster) -> list[dict[str, Any]]:
    out = []
    for spine, rack in cluster.racks():
        for n in range(cluster.nodes_per_rack):
            labels = {RACK_LABEL: rack, SPINE_LABEL: f"s{spine}"}
            extra = {GPU: str(GPUS_PER_NODE)}
            memory = f"{NODE_MEMORY_GI}Gi"
            out.append(
                node(f"{rack}-n{n}", cpu=str(NODE_CPU), memory=memory, extra=extra, labels=labels)
            )
    return out


def rack_of(nodes: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Node name -> its rack label."""
    return {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in nodes}


def hypernodes(cluster: Cluster) -> list[dict[str, Any]]:
    out = []
    for _, rack in cluster.racks():
        by_label = hypernode_member("Node", labelMatch={"matchLabels": {RACK_LABEL: rack}})
        out.append(hypernode(rack, 1, [by_label], "rack"))
    for s in range(cluster.spines):
        racks = [cluster.rack(s, r) for r in range(cluster.racks_per_spine)]
        members = [hypernode_member("HyperNode", exactMatch={"name": r}) for r in racks]
        out.append(hypernode(f"s{s}", 2, members, "spine"))
    return out


def queues() -> list[dict[str, Any]]:
    return [
        {"apiVersion": VOLCANO_API, "kind": "Queue", "metadata": {"name": name}, "spec": {}}
        for name in QUEUES
    ]


def cluster_objects(cluster: Cluster) -> list[dict[str, Any]]:
    """The cluster as its objects: nodes, HyperNodes and Volcano Queues, in that order."""
    return [*nodes(cluster), *hypernodes(cluster), *queues()]


def gang_objects(
    cluster: Cluster,
    gang: Gang,
    ask: Ask,
    *,
    scheduler: str,
    namespace: str | None = None,
    created: float | None = None,
    duration: bool = False,
    deadline_factor: float = 0.0,
) -> list[dict[str, Any]]:
    """The gang's PodGroup and pods; `duration` adds the simulator's run time, a
    `deadline_factor` (1 or more; 0: none) an `activeDeadlineSeconds` that many times the
    run time on each pod, as a user states a time limit above what the job needs."""
    spec: dict[str, Any] = {"queue": QUEUES[-1]}
    topology = network_topology(cluster, gang, ask)
    if topology is not None:
        spec["networkTopology"] = topology
    group = pod_group(
        gang.name,
        gang.pods,
        namespace=namespace,
        api_version=VOLCANO_API,
        created=created,
        **spec,
    )
    if duration:
        group["metadata"]["annotations"] = {DURATION_ANNOTATION: f"{gang.duration}s"}
    requests = {
        "cpu": str(CPU_PER_GPU * gang.gpus_per_pod),
        "memory": f"{MEMORY_GI_PER_GPU * gang.gpus_per_pod}Gi",
        GPU: str(gang.gpus_per_pod),
    }
    members = [
        pod(
            gang.member(i),
            requests,
            namespace=namespace,
            annotations={VOLCANO_GROUP_KEY: gang.name},
            created=created,
            scheduler=scheduler,
        )
        for i in range(gang.pods)
    ]
    for member in members:
        # The API server wants the limit of an extended resource, equal to its request.
        member["spec"]["containers"][0]["resources"]["limits"] = {GPU: requests[GPU]}
        if deadline_factor:
            member["spec"]["activeDeadlineSeconds"] = math.ceil(deadline_factor * gang.duration)
    return [group, *members]


@dataclass(frozen=True)
class Run:
    """Where and when each pod of a run went: pod name -> node, start, end (None: still
    running at the end), and each gang's arrival."""

    nodes: Mapping[str, str]
    started: Mapping[str, float]
    ended: Mapping[str, float | None]
    # Seconds the run covers: the measures are taken over [0, until].
    until: float


def measure(cluster: Cluster, workload: list[Gang], run: Run) -> dict[str, Any]:
    """The placement-quality figures of one run.

    - `one_rack_share`: of the gangs of 2 or more pods whose GPUs fit in one rack and that
      started, the share whose pods all ran in one rack (the issue's target);
      `one_spine_share` likewise for the gangs bigger than a rack.
    - `mean_racks`: racks a started gang of 2 or more pods spans, on average.
    - `gpu_allocation`: GPUs held by running pods over the cluster's, time-weighted
      over `run.until` (the arrivals' span, in the benches).
    - `gangs_per_hour`: gangs started per hour over that span; `gpu_hours_done`: GPU-hours
      of work run in it.
    - waits: seconds from a gang's arrival to its last member's start, of started gangs.
    """
    racks = rack_of(nodes(cluster))
    started_gangs = [g for g in workload if all(g.member(i) in run.nodes for i in range(g.pods))]
    spans = {g.name: {racks[run.nodes[g.member(i)]] for i in range(g.pods)} for g in started_gangs}
    multi = [g for g in started_gangs if g.pods > 1]
    rack_fit = [g for g in multi if tier_for(cluster, g) == 1]
    spine_fit = [g for g in multi if tier_for(cluster, g) == 2]
    spine_of = {rack: rack.split("-")[0] for rack in racks.values()}
    waits = [
        max(run.started[g.member(i)] for i in range(g.pods)) - g.arrival for g in started_gangs
    ]
    held = 0.0
    for g in started_gangs:
        for i in range(g.pods):
            start = run.started[g.member(i)]
            end = run.ended[g.member(i)]
            stop = run.until if end is None else min(end, run.until)
            held += max(0.0, stop - start) * g.gpus_per_pod
    hours = run.until / 3600
    return {
        "gangs": len(workload),
        "gangs_started": len(started_gangs),
        "rack_fitting_multi_pod_gangs": len(rack_fit),
        "one_rack_share": _share([len(spans[g.name]) == 1 for g in rack_fit]),
        "one_spine_share": _share(
            [len({spine_of[r] for r in spans[g.name]}) == 1 for g in spine_fit]
        ),
        "mean_racks": _mean([len(spans[g.name]) for g in multi]),
        "mean_racks_rack_fitting": _mean([len(spans[g.name]) for g in rack_fit]),
        "gpu_allocation": round(100 * held / (cluster.gpus * run.until), 2) if run.until else None,
        "gangs_per_hour": round(
            sum(1 for g in started_gangs if _started_by(g, run) <= run.until) / hours, 2
        )
        if hours
        else None,
        "gpu_hours_done": round(held / 3600, 1),
        "wait_mean": _mean(waits, 1),
        "wait_p50": _quantile(waits, 0.5),
        "wait_p90": _quantile(waits, 0.9),
    }


def _started_by(gang: Gang, run: Run) -> float:
    return max(run.started[gang.member(i)] for i in range(gang.pods))


def _share(flags: list[bool]) -> float | None:
    return round(100 * sum(flags) / len(flags), 2) if flags else None


def _mean(values: list[float] | list[int], digits: int = 3) -> float | None:
    return round(statistics.fmean(values), digits) if values else None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.floor(q * len(ordered)))], 1)


def spread(values: Iterable[float | None]) -> dict[str, float] | None:
    """Median, min and max over seeds (None where a seed had nothing to measure)."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {
        "median": round(statistics.median(known), 3),
        "min": round(min(known), 3),
        "max": round(max(known), 3),
    }


def cell(value: dict[str, float] | None) -> str:
    """A `spread` as a table shows it: median (min-max)."""
    if value is None:
        return "-"
    return f"{value['median']:g} ({value['min']:g}-{value['max']:g})"


def add_workload_arguments(
    parser: argparse.ArgumentParser,
    *,
    racks_per_spine: int,
    nodes_per_rack: int,
    gangs: int,
    seeds: str,
) -> None:
    """The cluster, the workload drawn on it (per seed) and the asks run."""
    parser.add_argument("--spines", type=int, default=2)
    parser.add_argument("--racks-per-spine", type=int, default=racks_per_spine)
    parser.add_argument("--nodes-per-rack", type=int, default=nodes_per_rack)
    parser.add_argument("--gangs", type=int, default=gangs)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--seeds", default=seeds, help="a range 1-5 or a list 1,2")
    parser.add_argument("--asks", default=",".join(Ask))


def soft_wait_of(text: str) -> float:
    """`--soft-wait`'s seconds: a duration, or 0 for none."""
    return 0.0 if text in ("0", "0s") else parse_duration(text, where="--soft-wait")


def cluster_of(args: argparse.Namespace) -> Cluster:
    return Cluster(args.spines, args.racks_per_spine, args.nodes_per_rack)


def run_pooled(
    one: Callable[[Item], dict[str, Any]],
    jobs: list[Item],
    *,
    workers: int,
    summarise: Callable[[list[dict[str, Any]]], Summary],
    table: Callable[[Summary], str],
    settings: Mapping[str, Any],
) -> None:
    """`one` on every job in `workers` processes, the table of their summary on stderr,
    and the report (`print_report`) on stdout."""
    started = time.perf_counter()
    with Pool(workers) as pool:
        runs = pool.map(one, jobs, chunksize=1)
    summary = summarise(runs)
    print(table(summary), file=sys.stderr)
    print_report(settings, summary, runs, started)


def print_report(settings: Mapping[str, Any], summary: Any, runs: Any, started: float) -> None:
    """The bench's JSON: its settings, the summary over seeds, every run, and the seconds
    since `started` (a `time.perf_counter()`)."""
    report = {
        **settings,
        "summary": summary,
        "runs": runs,
        "elapsed_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2))
