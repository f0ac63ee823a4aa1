"""Cost of counting, per domain, the running jobs that must end for a starving gang
(batchsched/framework/drain.py), on a large cluster.

Usage: python -m bench.drain [--nodes 5000] [--per-domain 20] [--pods 40000]
           [--jobs 4000] [--repeat 5] [--seed 0]
Prints one JSON object: per gang size (4 and 16 whole-node members), milliseconds of
one count over every domain of the tier and over 16 of them (as many as the scheduler
counts, CANDIDATE_DOMAINS; here the first 16, the cost being alike), median and
min/max over the repeats. The cluster is full: pods of 1 to 7 CPUs drawn at random,
each of a random job, on nodes of 20 CPUs and 110 pods (drawn past what a node holds;
free room is clipped at none); members ask 16 CPUs.
"""

import argparse
import json
import statistics
import time

import numpy as np

from batchsched.framework.drain import Running, jobs_to_end
from batchsched.framework.topology import CANDIDATE_DOMAINS

# Columns: CPU (milli), memory, pod count, a GPU; what each node holds.
ALLOCATABLE = np.array([20_000, 0, 110, 0], dtype=np.int64)
MEMBER = np.array([16_000, 0, 1, 0], dtype=np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--per-domain", type=int, default=20)
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = rng.integers(0, args.nodes, args.pods)
    vecs = np.zeros((args.pods, ALLOCATABLE.size), dtype=np.int64)
    vecs[:, 0] = rng.integers(1, 8, args.pods) * 1000
    vecs[:, 2] = 1
    running = Running(
        rows=rows,
        jobs=rng.integers(0, args.jobs, args.pods),
        vecs=vecs,
        keys={f"job-{i}": i for i in range(args.jobs)},
        positions={},
    )
    used = np.zeros((args.nodes, ALLOCATABLE.size), dtype=np.int64)
    np.add.at(used, rows, vecs)
    free = np.maximum(ALLOCATABLE - used, 0)
    binned = np.arange(args.nodes) // args.per_domain
    domains = int(binned.max()) + 1
    report: dict[str, object] = {
        "nodes": args.nodes,
        "domains": domains,
        "pods": args.pods,
        "jobs": args.jobs,
    }
    for members in (4, 16):
        shapes = [(MEMBER, members)]
        for label, candidates in (
            ("every_domain", np.arange(domains)),
            ("counted", np.arange(min(CANDIDATE_DOMAINS, domains))),
        ):
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                jobs_to_end(running, free, binned, candidates, shapes, ())
                times.append(1000 * (time.perf_counter() - started))
            report[f"members_{members}_{label}_ms"] = {
                "median": round(statistics.median(times), 1),
                "min": round(min(times), 1),
                "max": round(max(times), 1),
            }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
