"""What the end-to-end benches share: a control plane's nodes and namespaces made in
bulk, a watch timing when pods are bound, the CPUs the control plane runs on, and the
client a run talks to it through.

`bench/e2e.py` and `bench/latency.py` import it; run them as modules from the
repository root (`python -m bench.e2e`), so that `bench` and `tests.support` resolve.
"""

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from batchsched.k8s.client import Api
from batchsched.k8s.credentials import load_credentials

from tests.support import ControlPlane
from tests.support.objects import node

REPO = Path(__file__).resolve().parents[1]
SCHEDULER = "batch-scheduler"
POD_REQUESTS = {"cpu": "1", "memory": "1Gi"}
NODE_ALLOCATABLE = {"cpu": "32", "memory": "128Gi", "pods": "110"}
CREATE_CONCURRENCY = 32
# Longer than any phase waits for its first event; a silent watch is then a broken one.
WATCH_SILENCE_SECONDS = 600.0
T = TypeVar("T")


async def bounded(
    concurrency: int, call: Callable[[T], Awaitable[Any]], items: Iterable[T]
) -> None:
    """`call(item)` for every item, `concurrency` at a time. That many workers take the
    items in turn: a task per item, made up front, cost ~0.9 s of the event loop at
    50,000 items (~0.08 s at 5,000), which the raw phase's clock counted against the
    ceiling."""
    remaining = iter(items)

    async def worker() -> None:
        for item in remaining:
            await call(item)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def create_nodes(api: Api, count: int) -> list[str]:
    names = [f"node-{i:05d}" for i in range(count)]

    async def create(name: str) -> None:
        await api.post("/api/v1/nodes", node(name, extra=NODE_ALLOCATABLE))
        # No node lifecycle controller runs here to lift the not-ready taint the API
        # server puts on new nodes.
        await api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})

    await bounded(CREATE_CONCURRENCY, create, names)
    return names


async def create_namespace(api: Api, name: str) -> None:
    await api.post("/api/v1/namespaces", {"metadata": {"name": name}})


async def watch_bound(
    api: Api,
    namespace: str,
    bound: dict[str, float],
    *,
    expected: int | None = None,
    done: asyncio.Event | None = None,
) -> None:
    """Record when each pod is first seen with a node; `done` is set once `expected`
    are (without them, it records until cancelled).

    The API server drops a watcher that falls behind (this process is busy binding in
    the raw phase), so the watch resumes from the last version seen.
    """
    listed = await api.get(f"/api/v1/namespaces/{namespace}/pods?limit=1")
    version = listed["metadata"]["resourceVersion"]
    while True:
        params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"}
        path = f"/api/v1/namespaces/{namespace}/pods?{urlencode(params)}"
        async with api.stream(path, silence=WATCH_SILENCE_SECONDS) as reply:
            async for line in reply.lines():
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch failed: {obj}")
                version = obj["metadata"]["resourceVersion"]
                name = obj["metadata"].get("name")
                if event["type"] != "BOOKMARK" and obj["spec"].get("nodeName"):
                    bound.setdefault(name, time.monotonic())
                    if done is not None and expected is not None and len(bound) >= expected:
                        done.set()
                        return


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def control_plane_cpus(chosen: set[int] | None) -> set[int]:
    """The CPUs to give the control plane: as chosen, else the first if there are more."""
    if chosen is not None:
        return chosen
    allowed = sorted(os.sched_getaffinity(0))
    return {allowed[0]} if len(allowed) > 1 else set()


def pin(control_plane: list[int], cpus: set[int]) -> None:
    """The control plane's processes (every thread) on `cpus`, this one on the rest; the
    processes it starts from now on inherit that."""
    allowed = os.sched_getaffinity(0)
    rest = allowed - cpus
    if not cpus <= allowed or not rest:
        raise SystemExit(
            f"--control-plane-cpus: {sorted(cpus)} must be some of {sorted(allowed)}, "
            "leaving at least one for the rest"
        )
    for pid in control_plane:
        for thread in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(thread), cpus)
    os.sched_setaffinity(0, rest)


def add_cpus_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--control-plane-cpus",
        type=cpu_set,
        metavar="0[,1...]|shared",
        help="CPUs for the API server and etcd, the rest for everything else (default: "
        "the first CPU if there are more); shared: every process on every CPU",
    )


@contextlib.asynccontextmanager
async def plane_api(plane: ControlPlane, cpus: set[int], operator_log: Path) -> AsyncIterator[Api]:
    """A client of the control plane, once its processes are pinned to `cpus` (none: left
    where they are). A run that fails writes the operator log's tail to stderr first: the
    error alone seldom says why the operator fell behind or stopped."""
    if cpus:
        pin(plane.pids, cpus)
    api = Api(load_credentials(str(plane.kubeconfig)), connections=256, timeout=120)
    try:
        yield api
    except Exception:
        if operator_log.exists():
            sys.stderr.write(operator_log.read_text()[-5000:])
        raise
    finally:
        await api.close()


def cpu_set(text: str) -> set[int]:
    if text == "shared":
        return set()
    try:
        return {int(cpu) for cpu in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of CPU numbers: {text!r}") from None
