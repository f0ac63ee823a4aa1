"""Throughput of the scheduling core on GPUs asked through DRA against the same GPUs
asked as extended resources.

Usage: python -m bench.dra [--nodes 1000] [--gangs 100] [--size 8] [--repeat 3] [--seed 1]
Prints one JSON object. Every node has 8 GPUs: published by a driver as one
ResourceSlice per node (DRA), or as 8 `nvidia.com/gpu` in its allocatable (extended).
Gangs of `size` pods ask 1 to 8 GPUs a pod (one count per gang): through a ResourceClaim
per pod (made from one template, as the resource-claim controller makes them) whose
class selects the driver's GPUs, or through `nvidia.com/gpu` requests. Each variant runs
one session `repeat` times on its snapshot; the figures are pods decided per CPU second
(median and spread) and their ratio.
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
from batchsched.scheduler import run_session

SCHEDULER = "batch-scheduler"
DRIVER = "gpu.example.com"
GPUS = 8


def nodes(count: int, *, dra: bool) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for i in range(count):
        name = f"node-{i:05d}"
        allocatable = {"cpu": "128", "memory": "1Ti", "pods": "110"}
        if not dra:
            allocatable["nvidia.com/gpu"] = str(GPUS)
        found.append(
            {
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": allocatable},
            }
        )
        if dra:
            devices = [
                {
                    "name": f"gpu-{g}",
                    "attributes": {"index": {"int": g}, "model": {"string": "H100"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for g in range(GPUS)
            ]
            found.append(
                {
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-gpus"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices,
                    },
                }
            )
    return found


def workload(gangs: int, size: int, rng: random.Random, *, dra: bool) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    if dra:
        objects.append(
            {
                "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
            }
        )
    for g in range(gangs):
        cards = rng.randint(1, GPUS)
        name = f"gang-{g:04d}"
        objects.append(
            {
                "apiVersion": OUR_API,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minMember": size},
            }
        )
        for m in range(size):
            pod_name = f"{name}-{m}"
            requests: dict[str, str] = {"cpu": "1", "memory": "1Gi"}
            spec: dict[str, Any] = {"schedulerName": SCHEDULER}
            status: dict[str, Any] = {}
            if dra:
                claim = f"{pod_name}-gpus-x0000"
                spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
                status["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": claim}]
                objects.append(
                    {
                        "kind": "ResourceClaim",
                        "metadata": {
                            "name": claim,
                            "namespace": "default",
                            "ownerReferences": [{"uid": pod_name, "controller": True}],
                        },
                        "spec": {
                            "devices": {
                                "requests": [
                                    {
                                        "name": "gpu",
                                        "exactly": {"deviceClassName": "gpu", "count": cards},
                                    }
                                ]
                            }
                        },
                    }
                )
            else:
                requests["nvidia.com/gpu"] = str(cards)
            spec["containers"] = [{"name": "main", "resources": {"requests": requests}}]
            objects.append(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name,
                        "namespace": "default",
                        "uid": pod_name,
                        "annotations": {"scheduling.batchsched.io/group-name": name},
                    },
                    "spec": spec,
                    "status": status,
                }
            )
    return objects


def run(objects: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    cache = ClusterCache()
    for obj in objects:
        cache.apply(obj)
    config = default_config()
    snapshot = take_snapshot(cache, now=1.0, scheduler_names=config.scheduler_names)
    pods = sum(len(job.pending) for job in snapshot.jobs.values())
    seconds = []
    bound = 0
    for _ in range(repeat):
        # CPU time: the machine the bench runs on may be shared.
        started = time.process_time()
        decisions = run_session(snapshot, config)
        seconds.append(time.process_time() - started)
        bound = len(decisions.bindings)
    rates = [pods / s for s in seconds]
    return {
        "pods": pods,
        "bound": bound,
        "seconds": [round(s, 3) for s in seconds],
        "pods_per_second": round(statistics.median(rates), 1),
        "spread": [round(min(rates), 1), round(max(rates), 1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=100)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    results = {}
    for variant, dra in (("extended", False), ("dra", True)):
        rng = random.Random(args.seed)
        objects = nodes(args.nodes, dra=dra) + workload(args.gangs, args.size, rng, dra=dra)
        results[variant] = run(objects, args.repeat)
    ratio = results["dra"]["pods_per_second"] / results["extended"]["pods_per_second"]
    print(json.dumps({**vars(args), **results, "dra_over_extended": round(ratio, 3)}))


if __name__ == "__main__":
    main()
