"""GPU allocation of the shipped policies on every openb pod list, by the FGD paper's method.

Usage: python bench/replay.py [--traces default,cpu050,...] [--seeds 42-51] [--workers 2]
                              [--trace-dir ../shared/data/openb]
Prints one JSON object: every run (trace, policy, seed) with its allocation at 100 % and
130 % of arrived GPU demand and its replay time, then per trace and policy the means
over the seeds beside the paper's published figures (DESIGN section 8).
"""

import argparse
import json
import time
from functools import cache
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from batchsched.cli import read_config
from batchsched.sim import openb
from batchsched.sim.replay import replay

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "config"
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


@cache
def _trace(trace_dir: str, trace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each worker reads a trace once; replays never change what they are given."""
    config = read_config(str(CONFIGS / POLICIES["binpack"]))
    nodes = openb.read_nodes(Path(trace_dir) / openb.NODE_LIST)
    pods = openb.read_pods(
        Path(trace_dir) / f"openb_pod_list_{trace}.csv", scheduler_name=config.scheduler_name
    )
    return nodes, pods


def run(job: tuple[str, str, str, int]) -> dict[str, Any]:
    trace_dir, trace, policy, seed = job
    nodes, pods = _trace(trace_dir, trace)
    config = read_config(str(CONFIGS / POLICIES[policy]))
    result = replay(nodes, pods, config, seed=seed, inflate=1.3)
    at_100 = result.at_100
    return {
        "trace": trace,
        "policy": policy,
        "seed": seed,
        "at_100": at_100.allocated_gpu_pct if at_100 else None,
        "at_130": result.curve[-1].allocated_gpu_pct,
        "fragmented_at_100": at_100.fragmented_gpu_pct if at_100 else None,
        "elapsed_seconds": round(result.elapsed_seconds, 2),
    }


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for trace in dict.fromkeys(r["trace"] for r in runs):
        for policy in POLICIES:
            mine = [r for r in runs if r["trace"] == trace and r["policy"] == policy]
            if not mine:
                continue
            at_100 = round(sum(r["at_100"] for r in mine) / len(mine), 2)
            at_130 = round(sum(r["at_130"] for r in mine) / len(mine), 2)
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
                    "meets_paper": (paper_100 is None or at_100 >= paper_100)
                    and (paper_130 is None or at_130 >= paper_130),
                    "max_elapsed_seconds": max(r["elapsed_seconds"] for r in mine),
                }
            )
    return rows


def seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(openb.POD_LISTS))
    parser.add_argument("--seeds", default="42-51", help="a range 42-51 or a list 42,43")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trace-dir", default=str(openb.TRACE_DIR))
    args = parser.parse_args()
    jobs = [
        (args.trace_dir, trace, policy, seed)
        for trace in args.traces.split(",")
        for policy in POLICIES
        for seed in seeds(args.seeds)
    ]
    started = time.perf_counter()
    with Pool(args.workers) as pool:
        runs = pool.map(run, jobs, chunksize=1)
    report = {
        "summary": summarise(runs),
        "runs": runs,
        "elapsed_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
