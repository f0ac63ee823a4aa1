"""`batchsched run`: the scheduler on a real cluster.

One asyncio program: an informer per watched kind feeds the cache; beside them run the
session loop (each session in a forked child process), the binder, the evictor (the
victims preemption chose), the status writer and, with leader election, the lease. If
any of them fails, all stop and the error ends the process: a scheduler that silently
stopped scheduling would be worse than one that restarts. The error is raised as itself,
not inside the task group's ExceptionGroup, for the command to end with one line saying
why (`exit_reason`). SIGTERM and SIGINT stop it cleanly, handing the lease over.

Why not kopf, the usual Python choice for watching: it runs every watch event
through a per-object worker and its handler machinery, and its index readiness, the one
way it tells that a listing is complete, grows with the square of the listed objects.
The informers here cost a fraction of that per event and know exactly when each list
is complete (docs/benchmarks.md has the measurement).
"""

import asyncio
import contextlib
import logging
import os
import signal
import socket
import traceback
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.cache.cluster import ClusterCache
from batchsched.config.load import SchedulerConfig
from batchsched.k8s.binder import Binder
from batchsched.k8s.client import TRANSPORT_ERRORS, Api, ApiError
from batchsched.k8s.credentials import load_credentials, service_account_dir
from batchsched.k8s.endpoints import BindAddress, MetricsAuth, serve
from batchsched.k8s.evictor import Evictor
from batchsched.k8s.fence import unbounded
from batchsched.k8s.informer import Informer
from batchsched.k8s.leader import LeaderElection, LeadershipLost
from batchsched.k8s.loop import SessionLoop
from batchsched.k8s.status import StatusWriter
from batchsched.k8s.volcano_queues import VOLCANO_SCHEDULER, create_volcano_queues
from batchsched.k8s.watch import WATCHED, Watch
from batchsched.metrics import LEADER

log = logging.getLogger(__name__)


# client-go jitters each retry by up to this factor of the retry period.
RETRY_JITTER = 1.2


@dataclass(frozen=True)
class LeaderTiming:
    """kube-scheduler's leader-election timings, checked as client-go checks them.

    The holder must give up (renew deadline) before a standby may take over (lease
    duration), and must get several tries (retry period) within its deadline; otherwise
    two replicas could schedule at once. The Lease stores its duration in whole seconds.
    """

    lease_seconds: int = 15
    renew_seconds: float = 10.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.retry_seconds <= 0:
            raise InvalidObject(
                f"--leader-elect-retry-period: {self.retry_seconds:g}s must be positive"
            )
        if self.renew_seconds <= RETRY_JITTER * self.retry_seconds:
            raise InvalidObject(
                f"--leader-elect-renew-deadline: {self.renew_seconds:g}s must be longer "
                f"than {RETRY_JITTER:g} x --leader-elect-retry-period ({self.retry_seconds:g}s)"
            )
        if self.lease_seconds <= self.renew_seconds:
            raise InvalidObject(
                f"--leader-elect-lease-duration: {self.lease_seconds:g}s must be longer "
                f"than --leader-elect-renew-deadline ({self.renew_seconds:g}s)"
            )


@dataclass(frozen=True, kw_only=True)
class Options:
    kubeconfig: str | None
    config: SchedulerConfig
    # None: no /metrics, /livez, /healthz or /readyz.
    metrics_address: BindAddress | None
    metrics_auth: bool = False
    leader_elect: bool = False
    leader_timing: LeaderTiming = LeaderTiming()
    # Whether the PodGroups and Queues of the schedulers we stand in for get their
    # status written (--peer-status): on by default, as their own scheduler is gone.
    write_peer_status: bool = True


class Stopped(Exception):
    """A stop signal arrived; raised to wind down every task."""


class CannotServe(Exception):
    """The metrics and probe server could not listen where it was told to."""


def exit_reason(error: BaseException) -> str:
    """The one line `batchsched run` ends with when `error` stopped it.

    Failures the scheduler expects say what happened in their own words; anything else
    is a bug, and the line names where it was raised so a crash loop can be told apart
    from another without a traceback.
    """
    if isinstance(error, LeadershipLost):
        return f"lost the leader lease, exiting to start over: {error}"
    if isinstance(error, CannotServe | ApiError):
        return str(error)
    if isinstance(error, TRANSPORT_ERRORS):
        return f"the API server cannot be reached: {str(error) or type(error).__name__}"
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"stopped by an unexpected error{where}: {type(error).__name__}: {error}"


def lease_namespace() -> str:
    """The pod's own namespace (downward API or service account), else `default`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    mounted = service_account_dir() / "namespace"
    if mounted.exists():
        return mounted.read_text().strip()
    return "default"


async def run(options: Options) -> None:
    credentials = load_credentials(options.kubeconfig)
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    scheduler_name = options.config.scheduler_name
    async with contextlib.AsyncExitStack() as cleanup:
        api = Api(credentials)
        cleanup.push_async_callback(api.close)
        # Here rather than at the first request, so that credentials an exec plugin
        # cannot give stop the command before any task starts.
        await api.open()
        leader = None
        if options.leader_elect:
            timing = options.leader_timing
            leader = LeaderElection(
                api,
                namespace=lease_namespace(),
                name=scheduler_name,
                identity=identity,
                lease_seconds=timing.lease_seconds,
                renew_seconds=timing.renew_seconds,
                retry_seconds=timing.retry_seconds,
            )
            cleanup.push_async_callback(leader.release)
        # Every writer asks the lease itself before each request (fencing).
        valid_for = leader.valid_for if leader else unbounded
        binds_idle = asyncio.Event()
        binds_idle.set()
        cache = ClusterCache()
        status = StatusWriter(
            api,
            scheduler_name=scheduler_name,
            instance=identity,
            binds_idle=binds_idle,
            valid_for=valid_for,
            write_peers=options.write_peer_status,
            queue_apis=cache.queue_apis,
        )
        watch = Watch(cache, status, scheduler_names=options.config.scheduler_names)
        binder = Binder(api, watch, valid_for=valid_for, idle=binds_idle)
        evictor = Evictor(api, watch, scheduler_name=scheduler_name, valid_for=valid_for)
        loop = SessionLoop(
            options.config, watch, binder, evictor=evictor, leading=lambda: valid_for() > 0
        )
        address = options.metrics_address
        if address is not None:
            auth = MetricsAuth(api) if options.metrics_auth else None
            try:
                server = await serve(
                    address.port, host=address.host, ready=watch.synced.is_set, auth=auth
                )
            except OSError as error:
                # aiohttp's own message repeats the address; the errno's says it plainly.
                reason = os.strerror(error.errno) if error.errno else str(error)
                raise CannotServe(f"cannot serve metrics on {address}: {reason}") from error
            cleanup.push_async_callback(server.close)
        LEADER.set(0 if leader else 1)
        stands_in_for_volcano = VOLCANO_SCHEDULER in options.config.scheduler_names
        jobs = [
            loop.run(),
            binder.run(),
            evictor.run(),
            status.run(),
            *(Informer(api, watched, watch).run() for watched in WATCHED),
            *([leader.run()] if leader else []),
            *([create_volcano_queues(api)] if stands_in_for_volcano else []),
        ]
        log.info("starting as %s (scheduler %s)", identity, scheduler_name)
        await _run_until_stopped(jobs)
        log.info("stopped")


async def _run_until_stopped(jobs: list[Coroutine[Any, Any, None]]) -> None:
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)

    async def stopper() -> None:
        await stop.wait()
        log.info("stop signal received")
        raise Stopped

    try:
        async with asyncio.TaskGroup() as tasks:
            for job in [stopper(), *jobs]:
                tasks.create_task(job)
    except BaseExceptionGroup as group:
        _, failed = group.split(Stopped)
        if failed is not None:
            # The first failure stopped the others; any later one is a consequence.
            raise _first(failed) from None


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first
