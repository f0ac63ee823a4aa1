"""Placement quality of topology-aware gang placement, in the simulator.

Usage: python -m bench.topology_quality [--spines 2] [--racks-per-spine 4]
           [--nodes-per-rack 8] [--gangs 400] [--load 1.0] [--seeds 1-5]
           [--asks off,soft,hard] [--workers 2] [--config examples/config/binpack.yaml]
           [--soft-wait 30m] [--deadline-factor 0]
Prints one JSON object: every run (ask, seed) with its figures (bench/topology_workload.py
says what each means), then per ask the median, min and max over the seeds, and per
seed the difference to today's placement (ask `off`) in GPU allocation. A table goes to
stderr.

Each seed draws one workload (bench/topology_workload.py: gangs of 1 to 16 pods of 1
to 8 GPUs arriving at random and running for a random time), run three ways through
`batchsched simulate`'s simulator with the same scheduler configuration: no gang asks
for a domain (today), every gang of 2 or more pods asks `networkTopology` soft, or hard
with `highestTierAllowed` the lowest tier (rack, else spine) that holds its GPUs. The
configuration's `topology.softWait` is set to `--soft-wait` (0: a soft ask spans
domains at once, as Volcano's and Kueue's do).
With `--deadline-factor F` (1 or more) every pod states `activeDeadlineSeconds` F times
its run time, so room held for a starving gang can be lent to pods sure to end before it
would be ready (backfill, README: starvation); 0 (the default) states none.
The domains come from the HyperNodes (rack over the nodes' rack label, spine over its
racks), as Volcano users describe them. The figures are taken over the arrivals' span.
"""

import argparse
import dataclasses
import random
import time
from pathlib import Path
from typing import Any

from batchsched.config.load import read_config
from batchsched.sim.simulator import simulate

from bench.replay import seeds
from bench.topology_workload import (
    Ask,
    Cluster,
    Gang,
    Run,
    add_workload_arguments,
    cell,
    cluster_objects,
    cluster_of,
    gang_objects,
    gangs,
    measure,
    run_pooled,
    soft_wait_of,
    spread,
)

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "config" / "binpack.yaml"
# When the simulated cluster's clock starts (any fixed instant will do).
EPOCH = 1_700_000_000.0
SHOWN = ("one_rack_share", "mean_racks", "gpu_allocation", "gangs_per_hour", "wait_p50", "wait_p90")


def simulate_run(
    cluster: Cluster,
    workload: list[Gang],
    ask: Ask,
    config_path: str,
    soft_wait: float,
    deadline_factor: float,
) -> tuple[Run, float]:
    """The workload through the simulator; where and when each pod ran, and the CPU
    seconds its sessions took."""
    config = dataclasses.replace(read_config(config_path), topology_soft_wait=soft_wait)
    objects = cluster_objects(cluster)
    for gang in workload:
        objects += gang_objects(
            cluster,
            gang,
            ask,
            scheduler=config.scheduler_name,
            created=EPOCH + gang.arrival,
            duration=True,
            deadline_factor=deadline_factor,
        )
    sim = simulate(objects, config)
    tasks = sim.cache.tasks
    placed = {tasks[key].name: str(tasks[key].node_name) for key in sim.bound_at}
    started = {tasks[key].name: at for key, at in sim.bound_at.items()}
    ended = {tasks[key].name: sim.finished_at.get(key) for key in sim.bound_at}
    # The simulator counts from the first arrival, which is the workload's 0.
    until = max(g.arrival for g in workload)
    return Run(placed, started, ended, until), sim.elapsed_seconds


def one(job: tuple[Cluster, int, int, float, Ask, str, float, float]) -> dict[str, Any]:
    cluster, seed, count, load, ask, config, soft_wait, deadline_factor = job
    workload = gangs(cluster, count, load, random.Random(seed))
    started = time.perf_counter()
    run, session_seconds = simulate_run(cluster, workload, ask, config, soft_wait, deadline_factor)
    return {
        "ask": str(ask),
        "seed": seed,
        **measure(cluster, workload, run),
        "session_seconds": round(session_seconds, 2),
        "elapsed_seconds": round(time.perf_counter() - started, 2),
    }


# The target: this share of the rack-fitting gangs in one rack, with GPU
# allocation at most this many points under today's on the same workload.
TARGET_SHARE = 95.0
TARGET_POINTS = 1.0


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per ask, each figure's median and range over the seeds; and per seed, the GPU
    allocation and one-rack share against today's (`off`) on the same workload, with
    the target checked: the share pooled over the seeds (every rack-fitting gang
    counted once), and the seeds that meet it (share and allocation both)."""
    asks = list(dict.fromkeys(r["ask"] for r in runs))
    figures = [k for k in runs[0] if k not in ("ask", "seed")]
    per_ask = {
        ask: {f: spread(r[f] for r in runs if r["ask"] == ask) for f in figures} for ask in asks
    }
    today = {r["seed"]: r for r in runs if r["ask"] == Ask.OFF}
    against: dict[str, Any] = {}
    for ask in asks:
        if ask == Ask.OFF or not today:
            continue
        mine = [r for r in runs if r["ask"] == ask and r["seed"] in today]
        points = {r["seed"]: r["gpu_allocation"] - today[r["seed"]]["gpu_allocation"] for r in mine}
        fitting = sum(r["rack_fitting_multi_pod_gangs"] for r in mine)
        # The gangs in one rack, counted back from each seed's share.
        in_one = sum(
            round((r["one_rack_share"] or 0) * r["rack_fitting_multi_pod_gangs"] / 100)
            for r in mine
        )
        against[ask] = {
            "gpu_allocation_points": spread(points.values()),
            "pooled_one_rack_share": round(100 * in_one / fitting, 2) if fitting else None,
            "seeds_meeting_target": sorted(
                r["seed"]
                for r in mine
                if r["one_rack_share"] is not None
                and r["one_rack_share"] >= TARGET_SHARE
                and points[r["seed"]] >= -TARGET_POINTS
            ),
            "seeds": len(mine),
            "wait_p50_seconds": spread(
                r["wait_p50"] - today[r["seed"]]["wait_p50"]
                for r in mine
                if r["wait_p50"] is not None
            ),
        }
    return {"per_ask": per_ask, "against_today": against}


def table(summary: dict[str, Any]) -> str:
    lines = [f"{'ASK':<6}" + "".join(f"{f:>26}" for f in SHOWN)]
    for ask, figures in summary["per_ask"].items():
        lines.append(f"{ask:<6}" + "".join(f"{cell(figures[f]):>26}" for f in SHOWN))
    for ask, diff in summary["against_today"].items():
        lines.append(f"{ask} - off, GPU allocation points: {cell(diff['gpu_allocation_points'])}")
        lines.append(
            f"{ask}: one-rack share pooled {diff['pooled_one_rack_share']}; seeds at "
            f"{TARGET_SHARE:g} % and within {TARGET_POINTS:g} point of off: "
            f"{len(diff['seeds_meeting_target'])} of {diff['seeds']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, racks_per_spine=4, nodes_per_rack=8, gangs=400, seeds="1-5")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--soft-wait", default="30m", help="topology.softWait; 0: none")
    parser.add_argument(
        "--deadline-factor",
        type=float,
        default=0.0,
        help="activeDeadlineSeconds on each pod, this many times its run time (1 or more); 0: none",
    )
    args = parser.parse_args()
    if args.deadline_factor and args.deadline_factor < 1:
        parser.error("--deadline-factor: 0, or 1 or more (a pod must be able to finish)")
    soft_wait = soft_wait_of(args.soft_wait)
    cluster = cluster_of(args)
    asks = [Ask(a) for a in args.asks.split(",")]
    jobs = [
        (cluster, seed, args.gangs, args.load, ask, args.config, soft_wait, args.deadline_factor)
        for seed in seeds(args.seeds)
        for ask in asks
    ]
    settings = {
        "cluster": cluster.report(),
        "gangs": args.gangs,
        "load": args.load,
        "config": args.config,
        "soft_wait_seconds": soft_wait,
        "deadline_factor": args.deadline_factor,
    }
    run_pooled(one, jobs, workers=args.workers, summarise=summarise, table=table, settings=settings)


if __name__ == "__main__":
    main()
