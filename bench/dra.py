"""Throughput of the scheduling core on GPUs asked through DRA against the same GPUs
asked as extended resources.

Usage: python -m bench.dra [--nodes 1000] [--gangs 100] [--size 8] [--repeat 7] [--seed 1]
    [--kind plain|match|first-available]
(also `python -m bench.core --dra [--dra-kind KIND]`, which runs this comparison). Prints
one JSON object.
Every node has 8 GPUs: published by a driver as one ResourceSlice per node (DRA), or as 8
`nvidia.com/gpu` in its allocatable (extended). Gangs of `size` pods ask 1 to 8 GPUs a
pod (one count per gang): through a ResourceClaim per pod (made from one template, as
the resource-claim controller makes them) whose class selects the driver's GPUs, or
through `nvidia.com/gpu` requests.

`--kind` says how a claim asks for its GPUs: `plain`, one `exactly` request; `match`,
that request with a matchAttribute constraint on the GPUs' model; `first-available`,
firstAvailable of the same count of B200s (which no node has) then of any GPU. Every
GPU is an H100, so the three place alike; but counting free devices settles only a plain
claim, and the others go through the exact allocator: the figure is its cost.

Each of `repeat` rounds runs, in an order that alternates from round to round, one
session per variant on its snapshot: extended; DRA `cold`, as the first session after
the scheduler starts (a new CEL evaluator, so the device inventory is built and every
selector evaluated); and DRA `warm`, as every later session on unchanged slices (the
inventory and CEL results kept). Figures are pods decided per CPU second (median and
min..max over rounds) and, per round, each DRA rate over that round's extended rate.
"""

import argparse
import gc
import json
import random
import statistics
import time
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig, default_config
from batchsched.framework.devices import DeviceMemo
from batchsched.model.snapshot import Snapshot
from batchsched.scheduler import open_session, run_actions

SCHEDULER = "batch-scheduler"
DRIVER = "gpu.example.com"
GPUS = 8
KINDS = ("plain", "match", "first-available")


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


def claim_devices(cards: int, kind: str) -> dict[str, Any]:
    """spec.devices of a claim for `cards` GPUs asked the `kind` way (the module says)."""
    exactly = {"deviceClassName": "gpu", "count": cards}
    if kind == "first-available":
        model = {"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'B200'"}}
        alternatives = [
            {"name": "b200", **exactly, "selectors": [model]},
            {"name": "any", **exactly},
        ]
        return {"requests": [{"name": "gpu", "firstAvailable": alternatives}]}
    found: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if kind == "match":
        found["constraints"] = [{"requests": ["gpu"], "matchAttribute": f"{DRIVER}/model"}]
    return found


def workload(
    gangs: int, size: int, rng: random.Random, *, dra: bool, kind: str = "plain"
) -> list[dict[str, Any]]:
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
                        "spec": {"devices": claim_devices(cards, kind)},
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


def snapshot_of(objects: list[dict[str, Any]], config: SchedulerConfig) -> Snapshot:
    cache = ClusterCache()
    for obj in objects:
        cache.apply(obj)
    return take_snapshot(cache, now=1.0, scheduler_names=config.scheduler_names)


def session_seconds(
    snapshot: Snapshot, config: SchedulerConfig, devices: DeviceMemo | None
) -> tuple[float, int]:
    """CPU seconds of one session (the machine the bench runs on may be shared), and
    how many pods it bound."""
    gc.collect()
    started = time.process_time()
    decisions = run_actions(open_session(snapshot, config, devices=devices), config.actions)
    return time.process_time() - started, len(decisions.bindings)


def compare(
    nodes_count: int, gangs: int, size: int, repeat: int, seed: int, kind: str = "plain"
) -> dict[str, Any]:
    """The comparison the module describes, as one JSON-ready dict."""
    config = default_config()
    snapshots = {}
    for variant, dra in (("extended", False), ("dra", True)):
        rng = random.Random(seed)
        objects = nodes(nodes_count, dra=dra) + workload(gangs, size, rng, dra=dra, kind=kind)
        snapshots[variant] = snapshot_of(objects, config)
    pods = sum(len(job.pending) for job in snapshots["extended"].jobs.values())
    warm = DeviceMemo()
    # The warm variant's first session fills the inventory and CEL results it keeps.
    session_seconds(snapshots["dra"], config, warm)
    runs: dict[str, tuple[Snapshot, DeviceMemo | None]] = {
        "extended": (snapshots["extended"], None),
        "dra_cold": (snapshots["dra"], None),
        "dra_warm": (snapshots["dra"], warm),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    bound: dict[str, int] = {}
    for round_index in range(repeat):
        order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in order:
            snapshot, devices = runs[name]
            # Cold: nothing kept (None: the session builds the inventory afresh).
            elapsed, bound[name] = session_seconds(snapshot, config, devices)
            seconds[name].append(elapsed)
    result: dict[str, Any] = {"pods": pods}
    for name, taken in seconds.items():
        result[name] = {"bound": bound[name], **_spread([pods / s for s in taken])}
    for name in ("dra_cold", "dra_warm"):
        ratios = [e / d for e, d in zip(seconds["extended"], seconds[name], strict=True)]
        result[f"{name}_over_extended"] = _spread(ratios, digits=3)
    return result


def _spread(values: list[float], digits: int = 1) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=100)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kind", choices=KINDS, default="plain", help="how claims ask")
    args = parser.parse_args()
    found = compare(args.nodes, args.gangs, args.size, args.repeat, args.seed, args.kind)
    print(json.dumps({**vars(args), **found}))


if __name__ == "__main__":
    main()
