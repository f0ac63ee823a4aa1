"""Watching the cluster with kopf: every event becomes a trimmed object in the ClusterCache.

Additions and changes arrive through index handlers: kopf runs those during its initial
listing and holds every other handler until all listings are indexed. So the first call
of an event handler means the cache has seen the whole cluster (`Watch.synced`).
Deletions arrive through event handlers, since kopf does not call index handlers for
them. Index and event handlers write nothing to the objects they see: no annotations,
finalizers or status (DESIGN section 7). All handlers are coroutines: kopf would run
plain functions in a thread pool, and the cache is not thread-safe.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from batchsched.api.errors import InvalidObject
from batchsched.api.groups import GROUP, POD_GROUP_APIS, VERSION
from batchsched.api.meta import describe
from batchsched.cache.cluster import ClusterCache
from batchsched.k8s.status import ObjectRef, StatusWriter, object_ref
from batchsched.k8s.trim import (
    JSON,
    trim_node,
    trim_pod,
    trim_pod_group,
    trim_priority_class,
    trim_queue,
)
from batchsched.metrics import INVALID_OBJECTS

log = logging.getLogger(__name__)

OUR_POD_GROUPS = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Watched:
    group: str
    version: str
    plural: str
    trim: Callable[[Mapping[str, Any]], JSON]

    @property
    def id(self) -> str:
        return f"{self.plural}.{self.group or 'core'}/{self.version}"


WATCHED = (
    Watched("", "v1", "pods", trim_pod),
    Watched("", "v1", "nodes", trim_node),
    Watched("scheduling.k8s.io", "v1", "priorityclasses", trim_priority_class),
    Watched(GROUP, VERSION, "queues", trim_queue),
    # Ours and the foreign kinds; kopf starts watching each once its CRD exists.
    *(
        Watched(api.rpartition("/")[0], api.rpartition("/")[2], "podgroups", trim_pod_group)
        for api in POD_GROUP_APIS
    ),
)


class Changes:
    """Counts changes a session could act on, so the loop can skip ticks without any."""

    def __init__(self) -> None:
        self._count = 0
        self._taken = -1

    def note(self) -> None:
        self._count += 1

    def take(self) -> bool:
        """Whether anything changed since the last call."""
        changed = self._count != self._taken
        self._taken = self._count
        return changed


class Watch:
    def __init__(self, cache: ClusterCache, status: StatusWriter) -> None:
        self.cache = cache
        self.status = status
        self.changes = Changes()
        self.synced = asyncio.Event()
        # (kind, key) -> hash of the trimmed object last applied: unchanged updates stop here.
        self._fingerprints: dict[tuple[str, str], int] = {}
        # (kind, key) -> the object and why it cannot be used, for the leader to report.
        # Pods are not listed: their errors become their pending reasons.
        self.invalid: dict[tuple[str, str], tuple[ObjectRef, str]] = {}
        self._logged: dict[tuple[str, str], str] = {}

    def register(self, registry: kopf.OperatorRegistry) -> None:
        for w in WATCHED:
            index = kopf.index(
                group=w.group, version=w.version, plural=w.plural, id=w.id, registry=registry
            )
            index(self._indexer(w))
            on_event = kopf.on.event(
                group=w.group, version=w.version, plural=w.plural, id=w.id, registry=registry
            )
            on_event(self._eventer(w))

    def _indexer(self, watched: Watched) -> Callable[..., Any]:
        async def apply(body: kopf.Body, **_: Any) -> None:
            self.apply(watched.trim(body), raw=body)

        return apply

    def _eventer(self, watched: Watched) -> Callable[..., Any]:
        async def on_event(type: str | None, body: kopf.Body, **_: Any) -> None:
            self.synced.set()
            if type == "DELETED":
                self.delete(watched.trim(body))

        return on_event

    def apply(self, obj: JSON, *, raw: Mapping[str, Any]) -> None:
        """Record an added or changed object; `raw` is the whole object, for its status."""
        kind, key = _identify(obj)
        self._observe(kind, key, obj, raw)
        fingerprint = hash(repr(obj))
        if self._fingerprints.get((kind, key)) == fingerprint:
            return
        self._fingerprints[(kind, key)] = fingerprint
        self.changes.note()
        try:
            self.cache.apply(obj)
        except InvalidObject as error:
            self._report(kind, key, obj, str(error))
        else:
            self.invalid.pop((kind, key), None)
            self._logged.pop((kind, key), None)

    def delete(self, obj: JSON) -> None:
        kind, key = _identify(obj)
        self._fingerprints.pop((kind, key), None)
        self.invalid.pop((kind, key), None)
        self._logged.pop((kind, key), None)
        self.status.forget(kind, key)
        self.changes.note()
        self.cache.apply(obj, deleted=True)

    def _observe(self, kind: str, key: str, obj: JSON, raw: Mapping[str, Any]) -> None:
        """Tell the status writer what the object shows now, so it rewrites only changes."""
        status = raw.get("status") or {}
        if kind == "Pod":
            message = next(
                (
                    c.get("message")
                    for c in status.get("conditions") or []
                    if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                ),
                None,
            )
            self.status.observe(kind, key, message)
        elif kind == "Queue" or (kind == "PodGroup" and obj["apiVersion"] == OUR_POD_GROUPS):
            self.status.observe(kind, key, dict(status) or None)

    def _report(self, kind: str, key: str, obj: JSON, message: str) -> None:
        """Log and count an unusable object once per distinct problem."""
        if kind != "Pod":
            self.invalid[(kind, key)] = (object_ref(obj), message)
        if self._logged.get((kind, key)) != message:
            self._logged[(kind, key)] = message
            INVALID_OBJECTS.labels(kind).inc()
            log.warning("%s cannot be used: %s", describe(obj), message)


def _identify(obj: JSON) -> tuple[str, str]:
    meta = obj["metadata"]
    kind = str(obj["kind"])
    namespace = meta.get("namespace")
    return kind, f"{namespace}/{meta['name']}" if namespace else str(meta["name"])
