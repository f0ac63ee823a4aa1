"""Creation-to-bound latency of `batchsched run` under steady arrival, measured the way
kube-scheduler's scheduling SLI is: per pod, and per gang until its last member is bound.

Usage: python -m bench.latency [--nodes 1000] [--load-pods 0] [--rate 20] [--seconds 60]
                               [--sizes 1,16] [--rounds 1] [--operator-source DIR]
                               [--control-plane-cpus 0|shared]
Needs KUBEBUILDER_ASSETS (see hack/envtest.sh). Prints one JSON object.

1. A fresh etcd + kube-apiserver (on a CPU of its own, as bench/e2e.py says why) and N
   Ready nodes, already holding `--load-pods` running pods bound by no scheduler (the
   load a busy cluster carries: the scheduler lists and counts them; no kubelet runs
   them, so they stay bound and Pending).
2. The operator starts as a user starts it (from `--operator-source`, a checkout of
   another version, to compare versions on the same bench); arrivals begin once it is
   ready and has run its first session.
3. For `--seconds`, jobs arrive at `--rate` pods per second on average, on a fixed
   schedule: each job's size is drawn from `--sizes` (1 is a lone pod; any other size a
   gang with its PodGroup), and the next job comes size/rate seconds later. A gang's
   PodGroup is created first, then its pods all at once, as a job controller does.
4. A watch records when each pod is first seen bound. A pod's latency runs from when
   its create call returned (client clock) to then; a gang's from when the last of its
   creates returned to when the last of its pods was seen bound. Percentiles are
   nearest-rank. `kept_pods_per_second` is the pods bound while arrivals went on,
   over their time: it equals the rate when the scheduler keeps up.
Each round uses a namespace of its own on the same control plane and operator, and its
pods are deleted after it, so rounds are repeats on equal terms; the JSON gives each
round's figures and their spread.
"""

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from batchsched.api.groups import OUR_API
from batchsched.k8s.client import JSON, Api, with_retries

from bench.cluster import (
    CREATE_CONCURRENCY,
    POD_REQUESTS,
    REPO,
    SCHEDULER,
    add_cpus_argument,
    bounded,
    control_plane_cpus,
    create_namespace,
    create_nodes,
    free_port,
    plane_api,
    watch_bound,
)
from tests.support import ControlPlane, find_assets
from tests.support.objects import load_manifests, pod, pod_group

GROUP_ANNOTATION = "scheduling.batchsched.io/group-name"
LOAD_NAMESPACE = "load"
# Arrivals that find the scheduler this far behind their schedule stop the round: it is
# not keeping up, and the figures would measure the bench's queue.
BEHIND_SECONDS = 30.0


def percentiles(values: Sequence[float]) -> JSON:
    """p50/p90/p99 (nearest rank), min and max, in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}

    def rank(p: float) -> float:
        return ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)]

    return {
        "count": len(ordered),
        **{f"p{p}_ms": round(rank(p) * 1000, 1) for p in (50, 90, 99)},
        "min_ms": round(ordered[0] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def hold_load(api: Api, nodes: list[str], pods: int) -> None:
    """`pods` running pods spread over the nodes, bound by no scheduler."""
    await create_namespace(api, LOAD_NAMESPACE)

    async def create(index: int) -> None:
        manifest = pod(f"load-{index:06d}", POD_REQUESTS, scheduler="no-scheduler")
        manifest["spec"]["nodeName"] = nodes[index % len(nodes)]
        await api.post(f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods", manifest)

    await bounded(CREATE_CONCURRENCY, create, range(pods))


def start_operator(
    kubeconfig: Path, log: Path, port: int, source: Path | None
) -> subprocess.Popen[bytes]:
    """`batchsched run`, from `source` (a checkout) if given, else this one."""
    command = [str(Path(sys.executable).parent / "batchsched"), "run"]
    command += ["--kubeconfig", str(kubeconfig), f"--metrics-port={port}"]
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=source or REPO
        )


def sessions_ran(port: int) -> float:
    """The operator's sessions so far, 0 while it does not serve its metrics yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return 0.0
    name = 'batchsched_sessions_total{outcome="ran"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def until_scheduling(process: subprocess.Popen[bytes], port: int) -> None:
    """Until the operator has run its first session (its cache is synced and it leads)."""
    while await asyncio.to_thread(sessions_ran, port) < 1:
        if process.poll() is not None:
            raise RuntimeError(f"the operator exited with code {process.returncode}")
        await asyncio.sleep(0.2)


async def arrive(api: Api, namespace: str, name: str, size: int, created: dict[str, float]) -> None:
    """One job: a lone pod, or a gang's PodGroup and then its pods all at once."""
    names = [name] if size == 1 else [f"{name}-{i}" for i in range(size)]
    if size > 1:
        path = f"/apis/{OUR_API}/namespaces/{namespace}/podgroups"
        await api.post(path, pod_group(name, size))

    async def create(pod_name: str) -> None:
        notes = {GROUP_ANNOTATION: name} if size > 1 else None
        manifest = pod(pod_name, POD_REQUESTS, scheduler=SCHEDULER, annotations=notes)
        await api.post(f"/api/v1/namespaces/{namespace}/pods", manifest)
        created[pod_name] = time.monotonic()

    await asyncio.gather(*(create(pod_name) for pod_name in names))


async def round_of(api: Api, args: argparse.Namespace, index: int) -> JSON:
    namespace = f"latency-{index}"
    await create_namespace(api, namespace)
    rng = random.Random(index)
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    jobs: list[tuple[str, int]] = []
    watcher = asyncio.create_task(watch_bound(api, namespace, bound))
    await asyncio.sleep(1.0)  # the watch is established before the first arrival
    arrivals: set[asyncio.Task[None]] = set()
    started = time.monotonic()
    due = started
    while due - started < args.seconds:
        now = time.monotonic()
        if now - due > BEHIND_SECONDS:
            raise RuntimeError(f"arrivals fell {now - due:.0f}s behind their schedule")
        await asyncio.sleep(max(due - now, 0.0))
        size = rng.choice(args.sizes)
        name = f"job-{len(jobs):05d}"
        jobs.append((name, size))
        task = asyncio.create_task(arrive(api, namespace, name, size, created))
        arrivals.add(task)
        task.add_done_callback(arrivals.discard)
        due += size / args.rate
    arrived = time.monotonic()
    await asyncio.gather(*arrivals)
    offered = len(created)
    bound_in_time = sum(1 for at in bound.values() if at <= arrived)
    deadline = time.monotonic() + args.timeout
    while len(bound) < offered and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    pods: dict[int, list[float]] = {size: [] for _, size in jobs}
    gangs: dict[int, list[float]] = {size: [] for _, size in jobs if size > 1}
    for name, size in jobs:
        members = [name] if size == 1 else [f"{name}-{i}" for i in range(size)]
        if not all(m in bound for m in members):
            continue
        pods[size].extend(bound[m] - created[m] for m in members)
        if size > 1:
            gangs[size].append(max(bound[m] for m in members) - max(created[m] for m in members))
    result = {
        "offered_pods": offered,
        "left_unbound": offered - len(bound),
        "kept_pods_per_second": round(bound_in_time / (arrived - started), 1),
        "pod": {
            "all": percentiles([t for times in pods.values() for t in times]),
            **{f"in_job_of_{s}": percentiles(times) for s, times in sorted(pods.items()) if times},
        },
        "gang": {f"of_{s}": percentiles(times) for s, times in sorted(gangs.items())},
    }
    # Deleting tens of thousands may outlast the API server's request timeout (504)
    # while it goes on deleting: asked again until it answers.
    await with_retries(
        lambda: api.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods",
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
        ),
        seconds=600,
    )
    while (await api.get(f"/api/v1/namespaces/{namespace}/pods?limit=1"))["items"]:
        await asyncio.sleep(0.2)
    return result


async def run(args: argparse.Namespace) -> JSON:
    crds = load_manifests(REPO / "crds")
    plane = await asyncio.to_thread(ControlPlane.start, find_assets(), crds=crds)
    with plane, tempfile.TemporaryDirectory() as scratch:
        cpus = control_plane_cpus(args.control_plane_cpus)
        log = Path(scratch) / "operator.log"
        async with plane_api(plane, cpus, log) as api:
            nodes = await create_nodes(api, args.nodes)
            await hold_load(api, nodes, args.load_pods)
            port = free_port()
            operator = start_operator(plane.kubeconfig, log, port, args.operator_source)
            try:
                await asyncio.wait_for(until_scheduling(operator, port), args.timeout)
                rounds = [await round_of(api, args, index) for index in range(args.rounds)]
            finally:
                operator.send_signal(signal.SIGTERM)
                await asyncio.to_thread(operator.wait, 30)
    return {
        "nodes": args.nodes,
        "load_pods": args.load_pods,
        "rate_pods_per_second": args.rate,
        "seconds": args.seconds,
        "sizes": args.sizes,
        "operator_source": str(args.operator_source or REPO),
        "cpus": os.cpu_count(),
        "control_plane_cpus": sorted(cpus) or "shared",
        "rounds": rounds,
    }


def sizes(text: str) -> list[int]:
    try:
        chosen = [int(size) for size in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of job sizes: {text!r}") from None
    if not chosen or min(chosen) < 1:
        raise argparse.ArgumentTypeError(f"job sizes must be 1 or more: {text!r}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--load-pods", type=int, default=0, help="running pods before arrivals")
    parser.add_argument("--rate", type=float, default=20.0, help="pods arriving per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long arrivals go on")
    parser.add_argument(
        "--sizes", type=sizes, default=[1, 16], help="job sizes, drawn at random (1: a lone pod)"
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--operator-source", type=Path, default=None, help="a checkout whose operator to run"
    )
    add_cpus_argument(parser)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
