"""The cluster to explain, in a ClusterCache: simulator YAML, or a live cluster read
the way the operator reads it (the same kinds, trimming and parsing), listed once per
kind with no watch, as a snapshot is all one explanation needs."""

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from batchsched.api.errors import InvalidObject
from batchsched.cache.cluster import ClusterCache
from batchsched.config.load import SchedulerConfig
from batchsched.sim.loader import load_files
from batchsched.sim.simulator import simulate

if TYPE_CHECKING:
    from batchsched.k8s.client import Api


@dataclass(kw_only=True)
class Cluster:
    cache: ClusterCache
    # The clock sessions see: wall time on a cluster, simulated time for YAML.
    now: float
    # Objects that could not be read, said once on stderr.
    warnings: list[str] = field(default_factory=list)


def from_files(paths: Sequence[str], config: SchedulerConfig) -> Cluster:
    """The input as `batchsched simulate` leaves it: scheduled until nothing changes,
    so that what is explained is what still waits after the scheduler did all it could."""
    loaded = load_files(paths)
    result = simulate(loaded.objects, config)
    return Cluster(
        cache=result.cache, now=result.snapshot.now, warnings=[*loaded.warnings, *result.errors]
    )


def from_cluster(kubeconfig: str | None) -> Cluster:
    """Every watched kind listed once (in pages, concurrently), trimmed and applied as
    the operator's informers apply them; a kind whose CRD is not installed is empty."""
    return asyncio.run(_list_all(kubeconfig))


async def _list_all(kubeconfig: str | None) -> Cluster:
    # The operator's modules, imported only when a cluster is read.
    from batchsched.k8s.client import Api
    from batchsched.k8s.credentials import load_credentials
    from batchsched.k8s.watch import WATCHED

    api = Api(load_credentials(kubeconfig))
    try:
        listed = await asyncio.gather(*(_items(api, watched.path) for watched in WATCHED))
    finally:
        await api.close()
    cluster = Cluster(cache=ClusterCache(), now=time.time())
    for watched, items in zip(WATCHED, listed, strict=True):
        for raw in items:
            try:
                cluster.cache.apply(watched.trim(raw))
            except InvalidObject as error:
                cluster.warnings.append(str(error))
    # The softWait clocks the groups' objects keep, as the operator's next session takes them.
    cluster.cache.restore_clocks(cluster.now)
    return cluster


async def _items(api: "Api", path: str) -> list[dict[str, Any]]:
    from batchsched.k8s.client import ApiError
    from batchsched.k8s.pages import read_pages

    items: list[dict[str, Any]] = []
    try:
        async with contextlib.aclosing(read_pages(api, path)) as pages:
            async for page in pages:
                items.extend(page.get("items") or [])
    except ApiError as error:
        # A kind whose CRD is not installed (the peers' PodGroups) has no objects.
        if error.status != 404 or items:
            raise
    return items
