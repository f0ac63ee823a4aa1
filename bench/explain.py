"""How long `batchsched explain` takes on a large cluster, once the cluster is read.

Usage: python -m bench.explain [--nodes 5000] [--pods 50000] [--repeats 5] [--seed 1]
Prints one JSON object. A synthetic cluster (40 % of nodes with 8 GPUs; gangs of 1 to
16 pods, a fifth of them asking for GPUs) is scheduled by one session first, its
bindings assumed, so most pods run and the rest wait as on a busy cluster. Each target
(a waiting gang, a running pod, the queue) is then explained `--repeats` times from the
ClusterCache: snapshot, one session without binding, analysis and rendering, which is
everything explain does after listing the cluster. Listing is the API server's part
and not measured here.
"""

import argparse
import json
import random
import statistics
import time
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.explain.analysis import explain
from batchsched.explain.render import to_text
from batchsched.explain.session import run_once
from batchsched.explain.target import Target
from batchsched.scheduler import run_session

SCHEDULER = "batch-scheduler"
NAMESPACE = "bench"


def nodes(count: int, rng: random.Random) -> list[dict[str, Any]]:
    made = []
    for i in range(count):
        gpu = rng.random() < 0.4
        allocatable = {"cpu": "96" if gpu else "64", "memory": "512Gi", "pods": "110"}
        if gpu:
            allocatable["nvidia.com/gpu"] = "8"
        made.append(
            {
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}"},
                "status": {"allocatable": allocatable},
            }
        )
    return made


def gangs(count: int, rng: random.Random) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    pods = job = 0
    while pods < count:
        size = min(rng.randint(1, 16), count - pods)
        name = f"job-{job:05d}"
        requests: dict[str, str] = {"cpu": str(rng.choice([1, 2, 4])), "memory": "4Gi"}
        if rng.random() < 0.2:
            requests["nvidia.com/gpu"] = str(rng.choice([1, 2, 4, 8]))
        made.append(
            {
                "apiVersion": OUR_API,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"minMember": size},
            }
        )
        made += [
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": NAMESPACE,
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": SCHEDULER,
                    "containers": [{"name": "main", "resources": {"requests": requests}}],
                },
            }
            for i in range(size)
        ]
        pods += size
        job += 1
    return made


def busy_cluster(node_count: int, pod_count: int, seed: int) -> ClusterCache:
    """The cluster after one session, its bindings assumed as the operator assumes them."""
    rng = random.Random(seed)
    cache = ClusterCache()
    for obj in nodes(node_count, rng) + gangs(pod_count, rng):
        cache.apply(obj)
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    for binding in run_session(snapshot, default_config()).bindings:
        cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cache = busy_cluster(args.nodes, args.pods, args.seed)
    config = default_config()
    bound = [t for t in cache.tasks.values() if t.node_name is not None]
    waiting = max(
        (t for t in cache.tasks.values() if t.node_name is None and t.group is not None),
        key=lambda t: t.request.get("nvidia.com/gpu", 0),
    )
    assert waiting.group is not None
    targets = {
        "pending_gang": Target(kind="pg", namespace=NAMESPACE, name=waiting.group.name),
        "running_pod": Target(kind="pod", namespace=NAMESPACE, name=bound[0].name),
        "queue": Target(kind="queue", namespace="", name="default"),
    }
    seconds: dict[str, dict[str, float]] = {}
    causes: dict[str, str] = {}
    for label, target in targets.items():
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            found = explain(run_once(cache, config, now=0.0), target)
            to_text(found)
            times.append(time.perf_counter() - started)
        causes[label] = found.cause
        seconds[label] = {
            "median": round(statistics.median(times), 3),
            "min": round(min(times), 3),
            "max": round(max(times), 3),
        }
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": args.pods,
                "bound": len(bound),
                "repeats": args.repeats,
                "seconds": seconds,
                "causes": causes,
            }
        )
    )


if __name__ == "__main__":
    main()
