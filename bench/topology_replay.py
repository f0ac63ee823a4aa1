"""Placement quality on the openb trace with racks assigned, by the FGD paper's replay.

Usage: python -m bench.topology_replay [--trace default] [--seeds 42-46]
           [--gang-window 0,60] [--max-gang 16] [--nodes-per-rack 8] [--racks-per-spine 4]
           [--asks untiered,off,soft,hard] [--inflate 1.3] [--workers 2]
           [--trace-dir ../shared/data/openb] [--config examples/config/binpack.yaml]
Prints one JSON object: every run (gang window, ask, seed) with its figures, then per
window and ask the median, min and max over the seeds, and per seed the difference to
`off` in GPU allocation. A table goes to stderr.

Racks: the trace's GPU nodes, stably ordered by GPU model (file order within a model),
are cut into racks of `--nodes-per-rack` consecutive nodes of one model and those into
spines of `--racks-per-spine` consecutive racks of one model (a model's last rack or
spine may be short), labelled `topology.kubernetes.io/rack` and `.../spine`, the
configuration's two tiers. A rack holds one GPU model, as racks are bought.

Gangs: the trace records pods, not jobs. Pods of one shape (CPU, memory, GPUs, share of
a card, models allowed) created at most `--gang-window` seconds after the previous pod
of that shape joined its gang form one gang, up to `--max-gang` pods: window 0 joins
only same-second twins (86 gangs of 2-3 GPU pods in the default list), 60 s also the
pods a job submits over a minute. A gang is our PodGroup with minMember its size.

Replay: as bench/replay.py (sim/replay.py), but by job: the jobs (gangs and lone pods)
are shuffled with the seed and drawn again with replacement until their GPU requests
reach `--inflate` times the cluster's GPUs; each arrives once in that order, is placed
whole or not at all (allocate's gang placement, actions/gang_placement.py, in one
session), and never leaves. Asks: `untiered`, no tiers configured (the scheduler as it
was before topology); `off`, tiers configured and no gang asks; `soft`, every gang asks
`networkTopology: {mode: soft}`; `hard`, `highestTierName: rack` when some rack of a
model it may use could hold it, else `spine` when some spine could, else nothing.

Figures: `one_rack_share`, of the placed gangs some rack could hold, the share placed
in one rack; `mean_racks`, racks a placed gang spans; `gpu_allocation_at_100` and
`_final`, GPUs placed over the cluster's when arrivals reach 100 % of its GPUs and at
the end; `gangs_placed` and `pods_placed`, shares of those arrived; `jobs_per_second`,
jobs decided per second of replay (the scheduler's throughput on this method), and
`cpu_seconds` the replay's CPU time (on shared cores, steadier than its wall time).
"""

import argparse
import csv
import dataclasses
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from batchsched.actions.gang_placement import eligible, place_job
from batchsched.api.gpu import CARD_MILLI, GPU_MODEL_LABEL, gpu_demand
from batchsched.api.objects import Node
from batchsched.api.pods import OUR_GROUP_KEY, ShapeMemo, task_from_pod
from batchsched.api.resources import CPU
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig, read_config
from batchsched.framework.topology import LabelTier
from batchsched.scheduler import open_session
from batchsched.sim import openb

from bench.replay import TRACE_DIR, seeds
from bench.topology_workload import RACK_LABEL, SPINE_LABEL, cell, rack_of, run_pooled, spread
from tests.support.objects import pod_group

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "config" / "binpack.yaml"
ASKS = ("untiered", "off", "soft", "hard")
# When the replayed jobs were created: arrival i at EPOCH + i seconds, so the session
# takes them in arrival order.
EPOCH = 1_700_000_000.0
SHOWN = (
    "one_rack_share",
    "mean_racks",
    "gpu_allocation_at_100",
    "gpu_allocation_final",
    "gangs_placed",
    "jobs_per_second",
)


def racked(nodes: list[dict[str, Any]], per_rack: int, per_spine: int) -> list[dict[str, Any]]:
    """The nodes labelled with their rack and spine (the module's rule)."""
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in nodes:
        by_model[node["metadata"]["labels"].get(GPU_MODEL_LABEL, "none")].append(node)
    out = []
    for model in sorted(by_model):
        for i, node in enumerate(by_model[model]):
            rack = i // per_rack
            labels = {RACK_LABEL: f"{model}-r{rack}", SPINE_LABEL: f"{model}-s{rack // per_spine}"}
            meta = node["metadata"]
            out.append({**node, "metadata": {**meta, "labels": {**meta["labels"], **labels}}})
    return out


@dataclass(frozen=True)
class Job:
    """Pods of the trace replayed as one job: a lone pod, or a gang."""

    name: str
    pods: tuple[dict[str, Any], ...]
    # Per pod: CPU in millicores, GPU in milli of a card; the models it may use (empty:
    # any).
    cpu: int
    gpu: int
    models: frozenset[str]

    def key(self) -> str:
        """Its key in the snapshot (model/snapshot.py's job_key)."""
        name = f"{openb.NAMESPACE}/{self.name}"
        return name if len(self.pods) > 1 else f"pod:{name}-0"


def jobs_of(trace: Path, scheduler: str, window: int, max_gang: int) -> list[Job]:
    """The trace's pods joined into gangs by the module's rule, in creation order."""
    pods = {p["metadata"]["name"]: p for p in openb.read_pods(trace, scheduler_name=scheduler)}
    with open(trace, newline="") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda r: (int(r["creation_time"]), r["name"]))
    columns = (*openb.POD_COLUMNS[1:], "gpu_spec")
    open_gangs: dict[tuple[str, ...], tuple[int, list[dict[str, str]]]] = {}
    groups: list[list[dict[str, str]]] = []
    for row in rows:
        shape = tuple(row.get(c) or "" for c in columns)
        created = int(row["creation_time"])
        last = open_gangs.get(shape)
        if last is not None and created - last[0] <= window and len(last[1]) < max_gang:
            last[1].append(row)
            open_gangs[shape] = (created, last[1])
        else:
            groups.append([row])
            open_gangs[shape] = (created, groups[-1])
    shapes = ShapeMemo()
    out = []
    for members in groups:
        first = pods[members[0]["name"]]
        request = task_from_pod(first, shapes=shapes).request
        out.append(
            Job(
                name=members[0]["name"],
                pods=tuple(pods[r["name"]] for r in members),
                cpu=request.get(CPU, 0),
                gpu=gpu_demand(request).total,
                models=frozenset(m for m in (members[0].get("gpu_spec") or "").split("|") if m),
            )
        )
    return out


@dataclass(frozen=True)
class Domains:
    """Per rack and per spine: its GPU model, CPU millicores and GPU milli."""

    racks: dict[str, tuple[str, int, int]]
    spines: dict[str, tuple[str, int, int]]

    def fits(self, job: Job, tier: str) -> bool:
        domains = self.racks if tier == "rack" else self.spines
        size = len(job.pods)
        return any(
            (not job.models or model in job.models)
            and size * job.cpu <= cpu
            and size * job.gpu <= gpu
            for model, cpu, gpu in domains.values()
        )


def domains_of(nodes: Iterable[Node]) -> Domains:
    tiers: dict[str, dict[str, tuple[str, int, int]]] = {RACK_LABEL: {}, SPINE_LABEL: {}}
    for node in nodes:
        model = node.labels.get(GPU_MODEL_LABEL, "none")
        cpu, gpu = node.allocatable.get(CPU, 0), CARD_MILLI * node.gpu_cards
        for label, found in tiers.items():
            _, had_cpu, had_gpu = found.get(node.labels[label], (model, 0, 0))
            found[node.labels[label]] = (model, had_cpu + cpu, had_gpu + gpu)
    return Domains(tiers[RACK_LABEL], tiers[SPINE_LABEL])


def arrivals(jobs: list[Job], *, seed: int, inflate: float, capacity: int) -> list[Job]:
    """The jobs shuffled, then drawn with replacement up to `inflate` x capacity in GPU
    (sim/replay.py's arrivals, by job)."""
    rng = np.random.default_rng(seed)
    order = [jobs[i] for i in rng.permutation(len(jobs))]
    requested = sum(len(j.pods) * j.gpu for j in jobs)
    copies = 0
    while any(j.gpu for j in jobs) and requested < inflate * capacity:
        pick = jobs[int(rng.integers(len(jobs)))]
        copies += 1
        order.append(dataclasses.replace(pick, name=f"{pick.name}-copy{copies}"))
        requested += len(pick.pods) * pick.gpu
    return order


def network_topology(job: Job, ask: str, domains: Domains) -> dict[str, Any] | None:
    if ask in ("untiered", "off") or len(job.pods) < 2:
        return None
    if ask == "soft":
        return {"mode": "soft"}
    for tier in ("rack", "spine"):
        if domains.fits(job, tier):
            return {"mode": "hard", "highestTierName": tier}
    return None


def objects_of(job: Job, index: int, ask: str, domains: Domains) -> list[dict[str, Any]]:
    """The job's objects as it arrives `index`-th: its pods renamed after it, and for a
    gang our PodGroup naming them."""
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH + index))
    out: list[dict[str, Any]] = []
    notes = {}
    if len(job.pods) > 1:
        spec: dict[str, Any] = {}
        topology = network_topology(job, ask, domains)
        if topology is not None:
            spec["networkTopology"] = topology
        group = pod_group(job.name, len(job.pods), namespace=openb.NAMESPACE, **spec)
        group["metadata"]["creationTimestamp"] = created
        out.append(group)
        notes = {OUR_GROUP_KEY: job.name}
    for i, pod in enumerate(job.pods):
        meta = {
            **pod["metadata"],
            "name": f"{job.name}-{i}",
            "creationTimestamp": created,
            "annotations": notes,
        }
        out.append({**pod, "metadata": meta})
    return out


def replay(
    nodes: list[dict[str, Any]],
    jobs: list[Job],
    config: SchedulerConfig,
    ask: str,
    *,
    seed: int,
    inflate: float,
) -> dict[str, Any]:
    cache = ClusterCache()
    for node in nodes:
        cache.apply(node)
    domains = domains_of(cache.nodes.values())
    capacity = CARD_MILLI * sum(n.gpu_cards for n in cache.nodes.values())
    order = arrivals(jobs, seed=seed, inflate=inflate, capacity=capacity)
    for index, job in enumerate(order):
        for obj in objects_of(job, index, ask, domains):
            cache.apply(obj)
    started, cpu_started = time.perf_counter(), time.process_time()
    snapshot = take_snapshot(cache, now=EPOCH + len(order), scheduler_names=config.scheduler_names)
    if ask == "untiered":
        config = dataclasses.replace(config, topology_tiers=())
    session = open_session(snapshot, dataclasses.replace(config, starvation_seconds=None))
    arrived = placed_gpu = 0
    at_100: float | None = None
    gangs = placed_gangs = pods = placed_pods = 0
    for job in order:
        info = snapshot.jobs[job.key()]
        placed = eligible(session, info) and place_job(session, info, info.pending)
        demand = len(job.pods) * job.gpu
        arrived += demand
        placed_gpu += demand if placed else 0
        if at_100 is None and arrived >= capacity:
            at_100 = round(100 * placed_gpu / capacity, 3)
        pods += len(job.pods)
        placed_pods += len(job.pods) if placed else 0
        if len(job.pods) > 1:
            gangs += 1
            placed_gangs += placed
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    racks = rack_of(nodes)
    spans: dict[str, set[str]] = defaultdict(set)
    for binding in session.decisions.bindings:
        spans[binding.job].add(racks[binding.node])
    by_key = {j.key(): j for j in order if len(j.pods) > 1}
    placed_spans = {key: len(spans[key]) for key in by_key if key in spans}
    fitting = [n for key, n in placed_spans.items() if domains.fits(by_key[key], "rack")]
    return {
        "ask": ask,
        "seed": seed,
        "gangs": gangs,
        "rack_fitting_gangs_placed": len(fitting),
        "one_rack_share": round(100 * fitting.count(1) / len(fitting), 2) if fitting else None,
        "mean_racks": round(float(np.mean(list(placed_spans.values()))), 3)
        if placed_spans
        else None,
        "gpu_allocation_at_100": at_100,
        "gpu_allocation_final": round(100 * placed_gpu / capacity, 3),
        "gangs_placed": round(100 * placed_gangs / gangs, 2) if gangs else None,
        "pods_placed": round(100 * placed_pods / pods, 2),
        "jobs_per_second": round(len(order) / elapsed, 1),
        "elapsed_seconds": round(elapsed, 2),
        "cpu_seconds": round(cpu, 2),
    }


@dataclass(frozen=True)
class Spec:
    """One replay: the node list and pod list, the gang rule, the racks, the ask."""

    nodes: str
    trace: str
    window: int
    max_gang: int
    per_rack: int
    per_spine: int
    ask: str
    seed: int
    inflate: float
    config: str


def one(spec: Spec) -> dict[str, Any]:
    settings = read_config(spec.config)
    tiers = (LabelTier("rack", RACK_LABEL), LabelTier("spine", SPINE_LABEL))
    settings = dataclasses.replace(settings, topology_tiers=tiers)
    nodes = racked(openb.read_nodes(spec.nodes), spec.per_rack, spec.per_spine)
    found = jobs_of(Path(spec.trace), settings.scheduler_name, spec.window, spec.max_gang)
    result = replay(nodes, found, settings, spec.ask, seed=spec.seed, inflate=spec.inflate)
    return {"gang_window": spec.window, **result}


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per window and ask, each figure's median and range over the seeds, and the GPU
    allocation against `off` on the same arrivals, seed by seed."""
    rows = []
    figures = [k for k in runs[0] if k not in ("gang_window", "ask", "seed")]
    for window in dict.fromkeys(r["gang_window"] for r in runs):
        mine = [r for r in runs if r["gang_window"] == window]
        off = {r["seed"]: r for r in mine if r["ask"] == "off"}
        for ask in dict.fromkeys(r["ask"] for r in mine):
            these = [r for r in mine if r["ask"] == ask]
            row: dict[str, Any] = {"gang_window": window, "ask": ask}
            row.update((f, spread(r[f] for r in these)) for f in figures)
            row["allocation_vs_off_points"] = spread(
                r["gpu_allocation_at_100"] - off[r["seed"]]["gpu_allocation_at_100"]
                for r in these
                if r["seed"] in off and r["gpu_allocation_at_100"] is not None
            )
            rows.append(row)
    return rows


def table(summary: list[dict[str, Any]]) -> str:
    shown = (*SHOWN, "allocation_vs_off_points")
    lines = [f"{'WINDOW':<7}{'ASK':<9}" + "".join(f"{f:>26}" for f in shown)]
    for row in summary:
        lines.append(
            f"{row['gang_window']:<7}{row['ask']:<9}"
            + "".join(f"{cell(row[f]):>26}" for f in shown)
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="default", help="a pod list with creation times")
    parser.add_argument("--seeds", default="42-46", help="a range 42-46 or a list 42,43")
    parser.add_argument("--gang-window", default="0,60", help="seconds, one or a list")
    parser.add_argument("--max-gang", type=int, default=16)
    parser.add_argument("--nodes-per-rack", type=int, default=8)
    parser.add_argument("--racks-per-spine", type=int, default=4)
    parser.add_argument("--asks", default=",".join(ASKS))
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trace-dir", default=str(TRACE_DIR))
    parser.add_argument("--config", default=str(CONFIG))
    args = parser.parse_args()
    asks = args.asks.split(",")
    unknown = [a for a in asks if a not in ASKS]
    if unknown:
        parser.error(f"--asks: {', '.join(unknown)} not among {', '.join(ASKS)}")
    trace = Path(args.trace_dir) / f"openb_pod_list_{args.trace}.csv"
    nodes = str(Path(args.trace_dir) / "openb_node_list_gpu_node.csv")
    specs = [
        Spec(
            nodes=nodes,
            trace=str(trace),
            window=int(window),
            max_gang=args.max_gang,
            per_rack=args.nodes_per_rack,
            per_spine=args.racks_per_spine,
            ask=ask,
            seed=seed,
            inflate=args.inflate,
            config=args.config,
        )
        for window in args.gang_window.split(",")
        for seed in seeds(args.seeds)
        for ask in asks
    ]
    settings = {
        "trace": args.trace,
        "nodes_per_rack": args.nodes_per_rack,
        "racks_per_spine": args.racks_per_spine,
        "max_gang": args.max_gang,
        "inflate": args.inflate,
        "config": args.config,
    }
    run_pooled(
        one, specs, workers=args.workers, summarise=summarise, table=table, settings=settings
    )


if __name__ == "__main__":
    main()
