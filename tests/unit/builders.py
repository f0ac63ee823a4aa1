"""Kubernetes objects as the plain dicts a watch or a YAML file gives, and one call from
a list of them to a session's decisions.

Tests describe a cluster with these builders and assert on what the pure core decides:
ClusterCache -> take_snapshot -> run_session, with no I/O.
"""

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig, default_config, load_config
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import Snapshot, TaskInfo
from batchsched.scheduler import run_session

Obj = dict[str, Any]
Quantities = Mapping[str, str | int]

SCHEDULER = "batch-scheduler"
OUR_API = "scheduling.batchsched.io/v1alpha1"
OUR_GROUP_KEY = "scheduling.batchsched.io/group-name"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def stamp(seconds: float) -> str:
    """A creationTimestamp `seconds` after EPOCH."""
    return (EPOCH + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def at(seconds: float) -> float:
    """The epoch time the core reads from stamp(seconds)."""
    return (EPOCH + timedelta(seconds=seconds)).timestamp()


def _metadata(name: str, namespace: str | None, created: float | None) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if created is not None:
        meta["creationTimestamp"] = stamp(created)
    return meta


def node(
    name: str,
    *,
    cpu: str | int = "8",
    memory: str = "32Gi",
    extra: Quantities | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool | None = None,
) -> Obj:
    """A Node; `ready` None leaves out the conditions (the simulator reads that as Ready)."""
    meta = _metadata(name, None, None)
    if labels:
        meta["labels"] = dict(labels)
    status: Obj = {"allocatable": {"cpu": cpu, "memory": memory, **(extra or {})}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": str(ready)}]
    spec: Obj = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def pod(
    name: str,
    *,
    requests: Quantities | None = None,
    namespace: str = "default",
    group: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    created: float | None = None,
    scheduler: str = SCHEDULER,
    spec: Mapping[str, Any] | None = None,
) -> Obj:
    """A one-container Pod; `group` names a PodGroup through our own annotation."""
    meta = _metadata(name, namespace, created)
    notes = dict(annotations or {})
    if group is not None:
        notes[OUR_GROUP_KEY] = group
    if notes:
        meta["annotations"] = notes
    if labels:
        meta["labels"] = dict(labels)
    container: Obj = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    body: Obj = {"schedulerName": scheduler, "containers": [container], **(spec or {})}
    if node_name is not None:
        body["nodeName"] = node_name
    obj: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def pod_group(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    api_version: str = OUR_API,
    created: float | None = None,
    **spec: Any,
) -> Obj:
    """A PodGroup; extra keyword arguments (queue, minResources, ...) go into its spec."""
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": _metadata(name, namespace, created),
        "spec": {"minMember": min_member, **spec},
    }


def gang(
    name: str, size: int, *, min_member: int | None = None, requests: Quantities, **spec: Any
) -> list[Obj]:
    """A PodGroup and `size` pods `name-0`.. naming it, all with the same requests."""
    return [
        pod_group(name, size if min_member is None else min_member, **spec),
        *(pod(f"{name}-{i}", requests=requests, group=name) for i in range(size)),
    ]


def queue(
    name: str, *, weight: int = 1, capability: Quantities | None = None, state: str = "Open"
) -> Obj:
    spec: Obj = {"weight": weight, "state": state}
    if capability is not None:
        spec["capability"] = dict(capability)
    return {"apiVersion": OUR_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def priority_class(name: str, value: int, *, global_default: bool = False) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def cache_of(objects: Iterable[Mapping[str, Any]]) -> ClusterCache:
    cache = ClusterCache()
    for obj in objects:
        cache.apply(obj)
    return cache


def snapshot_of(
    objects: Iterable[Mapping[str, Any]],
    *,
    now: float | None = None,
    serving: Collection[str] = (SCHEDULER,),
) -> Snapshot:
    """A snapshot taken at `now`, by default when the newest pod was created (as the
    simulator does), so that no job has waited long enough to starve, by a scheduler
    serving the scheduler names `serving`."""
    cache = cache_of(objects)
    if now is None:
        now = max((t.creation for t in cache.tasks.values()), default=0.0)
    return take_snapshot(cache, now=now, scheduler_names=serving)


def config_of(config: SchedulerConfig | str | None) -> SchedulerConfig:
    if config is None:
        return default_config()
    if isinstance(config, str):
        return load_config(config)
    return config


def decide(
    objects: Iterable[Mapping[str, Any]],
    config: SchedulerConfig | str | None = None,
    *,
    now: float | None = None,
    serving: Collection[str] = (SCHEDULER,),
) -> Decisions:
    """One session over the given objects."""
    return run_session(snapshot_of(objects, now=now, serving=serving), config_of(config))


def placements(decisions: Decisions) -> dict[str, str]:
    """Pod "ns/name" -> node, for every binding the session decided."""
    return {b.key: b.node for b in decisions.bindings}


def pending_task(snapshot: Snapshot, pod_key: str) -> TaskInfo:
    """The TaskInfo of a pending pod of ours, wherever its job is."""
    for job in snapshot.jobs.values():
        for task in job.pending:
            if task.key == pod_key:
                return task
    raise KeyError(pod_key)
