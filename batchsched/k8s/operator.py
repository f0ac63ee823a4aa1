"""`batchsched run`: the scheduler on a real cluster, as a kopf operator.

kopf watches and feeds the cache (handlers.py); next to it run the session loop, the
binder, the status writer and, with leader election, the lease. They are started before
kopf, which then leaves them alone, and stopped after it returns. If any of them fails,
kopf is stopped and the error ends the process: a scheduler that silently stopped
scheduling would be worse than one that restarts.
"""

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf

from batchsched.cache.cluster import ClusterCache
from batchsched.framework.config import SchedulerConfig
from batchsched.k8s.binder import Binder
from batchsched.k8s.client import Api, connection_info, load_configuration
from batchsched.k8s.endpoints import serve
from batchsched.k8s.handlers import Watch
from batchsched.k8s.leader import LeaderElection
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.status import StatusWriter
from batchsched.metrics import LEADER

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# Objects per page of kopf's initial listing: bounds the memory a large cluster costs.
LIST_CHUNK = 2000


@dataclass(frozen=True)
class Options:
    kubeconfig: str | None
    config: SchedulerConfig
    metrics_port: int
    leader_elect: bool


def lease_namespace() -> str:
    """The pod's own namespace (downward API or service account), else `default`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SERVICE_ACCOUNT_NAMESPACE.exists():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return "default"


def quiet_kopf() -> None:
    """kopf logs every handler call at INFO: one line per watch event is too many."""
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Events are ours to write (status.py); kopf would post one per handler message.
    settings.posting.enabled = False
    settings.watching.chunk_size = LIST_CHUNK
    return settings


async def run(options: Options) -> None:
    configuration = load_configuration(options.kubeconfig)
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    scheduler_name = options.config.scheduler_name
    quiet_kopf()
    async with contextlib.AsyncExitStack() as cleanup:
        api = Api(configuration)
        cleanup.push_async_callback(api.close)
        leader = None
        if options.leader_elect:
            namespace = lease_namespace()
            leader = LeaderElection(
                api, namespace=namespace, name=scheduler_name, identity=identity
            )
            cleanup.push_async_callback(leader.release)
        leading = leader.leading if leader else lambda: True
        status = StatusWriter(api, scheduler_name=scheduler_name, instance=identity)
        watch = Watch(ClusterCache(), status)
        binder = Binder(api, watch, leading=leading)
        loop = SessionLoop(options.config, watch, binder, leading=leading)
        if options.metrics_port:
            server = await serve(options.metrics_port, ready=watch.synced.is_set)
            cleanup.push_async_callback(server.cleanup)
        registry = kopf.OperatorRegistry()
        watch.register(registry)

        @kopf.on.login(registry=registry)
        async def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(configuration)

        LEADER.set(0 if leader else 1)
        jobs = [loop.run(), binder.run(), status.run(), *([leader.run()] if leader else [])]
        log.info("starting as %s (scheduler %s)", identity, scheduler_name)
        await _run_beside_kopf(jobs, registry)


async def _run_beside_kopf(
    jobs: list[Coroutine[Any, Any, None]], registry: kopf.OperatorRegistry
) -> None:
    """Run `jobs` while kopf runs; the first failure among them stops kopf and is raised."""
    stop = asyncio.Event()
    failures: list[BaseException] = []
    tasks = [asyncio.create_task(job) for job in jobs]
    for task in tasks:
        task.add_done_callback(lambda done: _stop_on_failure(done, failures, stop))
    try:
        await kopf.operator(
            registry=registry,
            settings=kopf_settings(),
            standalone=True,
            clusterwide=True,
            stop_flag=stop,
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if failures:
        raise failures[0]


def _stop_on_failure(
    task: "asyncio.Task[None]", failures: list[BaseException], stop: asyncio.Event
) -> None:
    if task.cancelled():
        return
    error = task.exception() or RuntimeError(f"{task.get_coro()} returned, which it never should")
    log.error("stopping: %r", error)
    failures.append(error)
    stop.set()
