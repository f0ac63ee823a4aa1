"""GPU allocation of the shipped policies on every openb pod list, by the FGD paper's method.

Usage: python -m bench.replay [--traces default,cpu050,...|PATH.csv,...] [--seeds 42-51]
                              [--workers 2] [--trace-dir ../shared/data/openb] [--nodes CSV]
                              [--no-leave-one-out]
       python -m bench.replay --derive-spec 0.33 --out DIR [--from gpuspec10]
       python -m bench.replay --derive-share 0.8 --out DIR [--from default]
Prints one JSON object: every run (trace, policy, seed) with its allocation at 100 % and
130 % of arrived GPU demand and its replay time, then per trace and policy the means
over the seeds beside the paper's published figures (docs/benchmarks.md); the same
summary goes to stderr as a table.

Leave-one-out: the fragmentation policy derives what it scores by from the task mix it
sees, and a replay holds every pod it will place pending from the start, so the plain
runs score by the replayed arrivals' whole mix, as the paper's FGD does. Its
leave-one-out runs start from the mix of the other lists (GpuFragmentation.assume) and
count the replayed list's pods only as they are tried, one by one in arrival order, so
a figure owes nothing to pods that have not arrived yet, as for a scheduler in a cluster.

--derive-spec and --derive-share write a pod list like openb's gpuspec or gpushare
families, which shared/ holds only one of each, into DIR (never into the trace): GPU
pods drawn at random are given a gpu_spec, or a whole single card turned into a share,
both drawn from the source list's own distribution, until the given fraction of GPU
pods has one. Replays of those lists test the policy on workloads it was not built on.
"""

import argparse
import csv
import json
import random
import sys
import time
from collections import Counter
from functools import cache
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from batchsched.api.gpu import CARD_MILLI
from batchsched.api.pods import task_from_pod
from batchsched.config.load import SchedulerConfig, read_config
from batchsched.plugins.fragmentation import TaskClass, task_class
from batchsched.plugins.gpufragmentation import GpuFragmentation
from batchsched.sim import openb
from batchsched.sim.replay import replay

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "config"
# Where the trace lives beside a checkout of this repository, and its files' names.
TRACE_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openb"
NODE_LIST = "openb_node_list_gpu_node.csv"
POD_LISTS = ("default", "cpu050", "gpushare40", "multigpu20", "gpuspec10")
POLICIES = {"binpack": "binpack.yaml", "gpu-fragmentation": "gpu-fragmentation.yaml"}
# The paper's means over seeds 42-51: BestFit stands against binpack, FGD against ours.
PAPER_AT_130 = {
    "default": {"binpack": 93.08, "gpu-fragmentation": 95.39},
    "cpu050": {"binpack": 93.79, "gpu-fragmentation": 95.21},
    "gpushare40": {"binpack": 91.69, "gpu-fragmentation": 94.15},
    "multigpu20": {"binpack": 93.93, "gpu-fragmentation": 95.65},
    "gpuspec10": {"binpack": 93.30, "gpu-fragmentation": 94.95},
}
PAPER_AT_100 = {"default": {"binpack": 92.9, "gpu-fragmentation": 95.2}}


# Where a run's pods come from: (node list, pod list, name shown).
Source = tuple[str, str, str]
LOO = "gpu-fragmentation, leave-one-out"


@cache
def _read(nodes_path: str, pods_path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each worker reads a list once; replays never change what they are given."""
    config = read_config(str(CONFIGS / POLICIES["binpack"]))
    nodes = openb.read_nodes(nodes_path)
    return nodes, openb.read_pods(pods_path, scheduler_name=config.scheduler_name)


@cache
def _mix(nodes_path: str, pods_paths: tuple[str, ...]) -> Counter[TaskClass]:
    """The task classes of the lists, each pod once, as the plugin would learn them."""
    return Counter(
        task_class(task_from_pod(pod)) for path in pods_paths for pod in _read(nodes_path, path)[1]
    )


def configure(policy: str, nodes_path: str, others: tuple[str, ...]) -> SchedulerConfig:
    """The policy's configuration; with `others`, the fragmentation policy starts from
    their mix and counts the replayed pods only as they are tried, never as the queue
    ahead, which in a replay is every pod still to arrive."""
    config = read_config(str(CONFIGS / POLICIES[policy]))
    if others:
        for tier in config.tiers:
            for plugin in tier:
                if isinstance(plugin, GpuFragmentation):
                    plugin.assume(_mix(nodes_path, others), lookahead=False)
    return config


def run(job: tuple[Source, str, int, tuple[str, ...]]) -> dict[str, Any]:
    """One replay; `others`, when given, are the pod lists the policy's mix is taken
    from instead of the replayed one."""
    (nodes_path, pods_path, trace), policy, seed, others = job
    nodes, pods = _read(nodes_path, pods_path)
    result = replay(nodes, pods, configure(policy, nodes_path, others), seed=seed, inflate=1.3)
    at_100 = result.at_100
    return {
        "trace": trace,
        "policy": LOO if others else policy,
        "seed": seed,
        "at_100": at_100.allocated_gpu_pct if at_100 else None,
        "at_130": result.curve[-1].allocated_gpu_pct,
        "fragmented_at_100": at_100.fragmented_gpu_pct if at_100 else None,
        "elapsed_seconds": round(result.elapsed_seconds, 2),
    }


def _mean(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return round(sum(values) / len(values), 2) if values else None


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for trace in dict.fromkeys(r["trace"] for r in runs):
        for policy in POLICIES:
            mine = [r for r in runs if r["trace"] == trace and r["policy"] == policy]
            if not mine:
                continue
            held_out = [
                r
                for r in runs
                if r["trace"] == trace and r["policy"] == LOO and policy == "gpu-fragmentation"
            ]
            at_100, at_130 = _mean(mine, "at_100"), _mean(mine, "at_130")
            paper_100 = PAPER_AT_100.get(trace, {}).get(policy)
            paper_130 = PAPER_AT_130.get(trace, {}).get(policy)
            rows.append(
                {
                    "trace": trace,
                    "policy": policy,
                    "seeds": len(mine),
                    "at_100": at_100,
                    "at_130": at_130,
                    "paper_at_100": paper_100,
                    "paper_at_130": paper_130,
                    "loo_at_100": _mean(held_out, "at_100") if held_out else None,
                    "loo_at_130": _mean(held_out, "at_130") if held_out else None,
                    "meets_paper": _meets(at_100, paper_100) and _meets(at_130, paper_130),
                    "max_elapsed_seconds": max(r["elapsed_seconds"] for r in mine + held_out),
                }
            )
    return rows


def _meets(value: float | None, paper: float | None) -> bool:
    return paper is None or (value is not None and value >= paper)


def table(summary: list[dict[str, Any]]) -> str:
    """The summary for people: means over the seeds, the paper's in brackets, and for the
    fragmentation policy the means when its mix came from the other lists only."""

    def cell(value: float | None, paper: float | None = None) -> str:
        shown = "-" if value is None else f"{value:.2f}"
        return f"{shown} ({paper:.2f})" if paper is not None else shown

    lines = [
        f"{'TRACE':<14}{'POLICY':<19}{'AT 100% (PAPER)':>17}{'AT 130% (PAPER)':>17}"
        f"{'LOO 100%':>10}{'LOO 130%':>10}  MEETS"
    ]
    for row in summary:
        lines.append(
            f"{row['trace']:<14}{row['policy']:<19}"
            f"{cell(row['at_100'], row['paper_at_100']):>17}"
            f"{cell(row['at_130'], row['paper_at_130']):>17}"
            f"{cell(row['loo_at_100']):>10}{cell(row['loo_at_130']):>10}"
            f"  {'yes' if row['meets_paper'] else 'NO'}"
        )
    return "\n".join(lines)


def seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def derive(
    rows: list[dict[str, str]], *, column: str, fraction: float, seed: int = 0
) -> list[dict[str, str]]:
    """`rows` with `fraction` of the GPU pods constrained to a model (column gpu_spec) or
    sharing a card (column gpu_milli), drawn from the values `rows` already has there."""
    rng = random.Random(seed)
    gpu = [r for r in rows if int(r["num_gpu"]) > 0]
    if column == "gpu_spec":
        has = [r for r in gpu if r.get("gpu_spec")]
        candidates = [r for r in gpu if not r.get("gpu_spec")]
    else:
        has = [r for r in gpu if int(r["gpu_milli"]) < CARD_MILLI]
        candidates = [
            r for r in gpu if int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) == CARD_MILLI
        ]
    if not has:
        raise SystemExit(f"the source list has no {column} values to draw from")
    values = [r[column] for r in has]
    wanted = max(round(fraction * len(gpu)) - len(has), 0)
    out = [dict(r) for r in rows]
    by_name = {r["name"]: r for r in out}
    for row in rng.sample(candidates, min(wanted, len(candidates))):
        by_name[row["name"]][column] = rng.choice(values)
    return out


def write_derived(args: argparse.Namespace) -> None:
    column, fraction = (
        ("gpu_spec", args.derive_spec)
        if args.derive_spec is not None
        else ("gpu_milli", args.derive_share)
    )
    source = Path(args.trace_dir) / f"openb_pod_list_{args.source}.csv"
    with open(source, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    if column not in fields:
        fields.append(column)
    name = f"{'gpuspec' if column == 'gpu_spec' else 'gpushare'}{round(fraction * 100)}x"
    target = Path(args.out) / f"openb_pod_list_{name}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(derive(rows, column=column, fraction=fraction))
    print(target)


def _source(trace_dir: str, nodes: str | None, trace: str) -> Source:
    """A pod list named as in the trace (default, gpuspec10) or by its path."""
    if trace.endswith(".csv"):
        path = Path(trace)
        name = path.stem.removeprefix("openb_pod_list_")
    else:
        path, name = Path(trace_dir) / f"openb_pod_list_{trace}.csv", trace
    return (nodes or str(Path(trace_dir) / NODE_LIST), str(path), name)


def _held_out(
    source: Source, sources: list[Source], policy: str, leave_one_out: bool
) -> list[tuple[str, ...]]:
    """Mixes to replay `source` with: its own (empty), and for the fragmentation policy
    the other lists' (their pod lists) unless left out."""
    if policy != "gpu-fragmentation" or not leave_one_out or len(sources) < 2:
        return [()]
    return [(), tuple(pods for _, pods, _ in sources if pods != source[1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(POD_LISTS))
    parser.add_argument("--seeds", default="42-51", help="a range 42-51 or a list 42,43")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trace-dir", default=str(TRACE_DIR))
    parser.add_argument("--nodes", help="the node list; default: the trace's GPU nodes")
    parser.add_argument(
        "--no-leave-one-out",
        dest="leave_one_out",
        action="store_false",
        help="skip the replays whose mix comes from the other lists",
    )
    derived = parser.add_mutually_exclusive_group()
    derived.add_argument("--derive-spec", type=float, help="write a list, do not replay")
    derived.add_argument("--derive-share", type=float, help="write a list, do not replay")
    parser.add_argument("--from", dest="source", help="the list to derive from")
    parser.add_argument("--out", default="/tmp/openb-derived")
    args = parser.parse_args()
    if args.derive_spec is not None or args.derive_share is not None:
        if args.source is None:
            args.source = "gpuspec10" if args.derive_spec is not None else "default"
        write_derived(args)
        return
    sources = [_source(args.trace_dir, args.nodes, trace) for trace in args.traces.split(",")]
    jobs = [
        (source, policy, seed, others)
        for source in sources
        for policy in POLICIES
        for others in _held_out(source, sources, policy, args.leave_one_out)
        for seed in seeds(args.seeds)
    ]
    started = time.perf_counter()
    with Pool(args.workers) as pool:
        runs = pool.map(run, jobs, chunksize=1)
    summary = summarise(runs)
    report = {
        "summary": summary,
        "runs": runs,
        "elapsed_seconds": round(time.perf_counter() - started, 1),
    }
    print(table(summary), file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
