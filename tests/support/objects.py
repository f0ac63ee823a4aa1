"""Kubernetes objects as the plain dicts a watch or a YAML file gives, and one call from
a list of them to a session's decisions.

The same manifests serve the pure core (ClusterCache -> take_snapshot -> run_session,
with no I/O) and a real API server. There is no kubelet there, so a Node is what a
kubelet would register: Ready, its hostname label, the allocatable resources given.
"""

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.api.hypernodes import HYPERNODE_API
from batchsched.api.nativegroups import NATIVE_API
from batchsched.api.pods import OUR_GROUP_KEY
from batchsched.api.yamlload import load_all
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import SchedulerConfig, default_config, load_config
from batchsched.model.decisions import Decisions, SpanClock
from batchsched.model.snapshot import Snapshot, TaskInfo
from batchsched.scheduler import run_session

Obj = dict[str, Any]
Quantities = Mapping[str, str | int]

SCHEDULER = "batch-scheduler"
HOSTNAME = "kubernetes.io/hostname"
# What a kubelet reports when its --max-pods is left at its default.
MAX_PODS = "110"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def load_manifests(*paths: Path) -> list[Obj]:
    """Every YAML document in the given files and directories (``*.yaml``, by name)."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    docs: list[Obj] = []
    for file in files:
        docs.extend(doc for doc in load_all(file.read_text()) if doc)
    return docs


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
    ready: bool | None = True,
) -> Obj:
    """A Node as its kubelet registers it; `extra` adds resources or overrides the
    defaults (cpu, memory, pods); `ready` None leaves out the conditions (the core reads
    that as Ready)."""
    meta = _metadata(name, None, None)
    meta["labels"] = {HOSTNAME: name, **(labels or {})}
    resources = {"pods": MAX_PODS, "cpu": cpu, "memory": memory, **(extra or {})}
    status: Obj = {"capacity": dict(resources), "allocatable": resources}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": str(ready)}]
    spec: Obj = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def pod(
    name: str,
    requests: Quantities | None = None,
    *,
    namespace: str | None = None,
    group: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    created: float | None = None,
    scheduler: str = SCHEDULER,
    spec: Mapping[str, Any] | None = None,
) -> Obj:
    """A one-container Pod; `group` names a PodGroup through our own annotation. Without
    `namespace` it is the core's "default", or the one the API server is asked to create
    it in."""
    meta = _metadata(name, namespace, created)
    notes = dict(annotations or {})
    if group is not None:
        notes[OUR_GROUP_KEY] = group
    if notes:
        meta["annotations"] = notes
    if labels:
        meta["labels"] = dict(labels)
    container: Obj = {"name": "main", "image": PAUSE_IMAGE}
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
    namespace: str | None = None,
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
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    requests: Quantities,
    namespace: str | None = None,
    **spec: Any,
) -> list[Obj]:
    """A PodGroup and `size` pods `name-0`.. naming it, all with the same requests."""
    group = pod_group(name, size if min_member is None else min_member, namespace=namespace, **spec)
    members = (
        pod(f"{name}-{i}", requests=requests, group=name, namespace=namespace) for i in range(size)
    )
    return [group, *members]


def native_pod_group(
    name: str,
    min_count: int | None,
    *,
    namespace: str | None = None,
    created: float | None = None,
    **spec: Any,
) -> Obj:
    """A PodGroup of Kubernetes' own API: a gang of `min_count`, or basic when None;
    extra keyword arguments go into its spec."""
    policy: Obj = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": NATIVE_API,
        "kind": "PodGroup",
        "metadata": _metadata(name, namespace, created),
        "spec": {"schedulingPolicy": policy, **spec},
    }


def member(name: str, group: str, requests: Quantities | None = None, **options: Any) -> Obj:
    """A pod naming PodGroup `group` by spec.schedulingGroup, as the Job controller
    writes it; `options` are pod()'s."""
    spec = {"schedulingGroup": {"podGroupName": group}, **options.pop("spec", {})}
    return pod(name, requests, spec=spec, **options)


def hypernode(name: str, tier: int, members: Iterable[Obj], tier_name: str = "") -> Obj:
    """A Volcano HyperNode of `tier` with the members given (see `hypernode_member`)."""
    spec: Obj = {"tier": tier, "members": list(members)}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": HYPERNODE_API,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def hypernode_member(kind: str, **selector: Any) -> Obj:
    """A HyperNode member: `kind` Node or HyperNode, selected by `exactMatch={"name": n}`,
    `regexMatch={"pattern": p}` or `labelMatch={...}`."""
    return {"type": kind, "selector": selector}


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Quantities | None = None,
    state: str = "Open",
    parent: str | None = None,
) -> Obj:
    spec: Obj = {"weight": weight, "state": state}
    if capability is not None:
        spec["capability"] = dict(capability)
    if parent is not None:
        spec["parent"] = parent
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
    span_clocks: Mapping[str, SpanClock | float] | None = None,
) -> Snapshot:
    """A snapshot taken at `now`, by default when the newest pod was created (as the
    simulator does), so that no job has waited long enough to starve, by a scheduler
    serving the scheduler names `serving`; `span_clocks` are the softWait clocks an
    earlier session started (Decisions.span_clocks, or a time: started then for the job
    the objects make under that key)."""
    cache = cache_of(objects)
    cache.span_clocks = clocks_of(cache, span_clocks or {})
    if now is None:
        now = max((t.creation for t in cache.tasks.values()), default=0.0)
    return take_snapshot(cache, now=now, scheduler_names=serving)


def clocks_of(
    cache: ClusterCache, started: Mapping[str, SpanClock | float]
) -> dict[str, SpanClock]:
    """The softWait clocks `started`, a time given as one an earlier session started for
    the job the cache holds under that key (of that job's owner)."""
    jobs = take_snapshot(cache, now=0.0, scheduler_names=(SCHEDULER,)).jobs
    return {
        key: clock if isinstance(clock, SpanClock) else SpanClock(clock, jobs[key].owner)
        for key, clock in started.items()
    }


def span_starts(decisions: Decisions) -> dict[str, float]:
    """Job key -> when its softWait started, of every clock the session kept."""
    return {key: clock.since for key, clock in decisions.span_clocks.items()}


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
    span_clocks: Mapping[str, SpanClock | float] | None = None,
) -> Decisions:
    """One session over the given objects."""
    snapshot = snapshot_of(objects, now=now, serving=serving, span_clocks=span_clocks)
    return run_session(snapshot, config_of(config))


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


# Dynamic Resource Allocation (resource.k8s.io/v1).

DRA_API = "resource.k8s.io/v1"


def device(
    name: str,
    *,
    attributes: Mapping[str, Mapping[str, Any]] | None = None,
    capacity: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    consumes: Mapping[str, Mapping[str, str]] | None = None,
    multiple: bool = False,
    policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> Obj:
    """A device of a ResourceSlice: attributes as the API writes them ({"int": 1}),
    capacity and counters consumed (per counter set) as quantities; `multiple` sets
    allowMultipleAllocations, `policies` a capacity's requestPolicy by name."""
    found: Obj = {"name": name}
    if attributes:
        found["attributes"] = {k: dict(v) for k, v in attributes.items()}
    if multiple:
        found["allowMultipleAllocations"] = True
    if capacity:
        found["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    for key, policy in (policies or {}).items():
        found["capacity"][key]["requestPolicy"] = dict(policy)
    if taints:
        found["taints"] = [dict(t) for t in taints]
    if consumes:
        found["consumesCounters"] = [
            {"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}}
            for s, c in consumes.items()
        ]
    return found


def resource_slice(
    name: str,
    *,
    driver: str,
    pool: str,
    devices: Iterable[Obj] = (),
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    all_nodes: bool = False,
    generation: int = 1,
    slice_count: int = 1,
    counters: Mapping[str, Mapping[str, str]] | None = None,
) -> Obj:
    """A ResourceSlice of `pool`, reaching one node, the nodes with the labels of
    `node_selector`, or all; with `counters` (per counter set), a slice of shared
    counters alone."""
    spec: Obj = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slice_count},
    }
    if counters is not None:
        spec["sharedCounters"] = [
            {"name": s, "counters": {k: {"value": v} for k, v in c.items()}}
            for s, c in counters.items()
        ]
    else:
        spec["devices"] = list(devices)
        if node_name is not None:
            spec["nodeName"] = node_name
        elif node_selector is not None:
            expressions = [
                {"key": k, "operator": "In", "values": [v]} for k, v in node_selector.items()
            ]
            spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        else:
            spec["allNodes"] = all_nodes
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def device_class(name: str, *selectors: str) -> Obj:
    return {
        "apiVersion": DRA_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def exactly(
    name: str,
    device_class_name: str,
    *,
    count: int | None = None,
    mode: str | None = None,
    selectors: Iterable[str] = (),
    admin: bool = False,
    tolerations: Iterable[Mapping[str, str]] = (),
    capacity: Mapping[str, str] | None = None,
) -> Obj:
    """A claim's request of one kind of device (`exactly`); `capacity` its
    capacity.requests (consumable capacity)."""
    request: Obj = {"deviceClassName": device_class_name}
    if count is not None:
        request["count"] = count
    if mode is not None:
        request["allocationMode"] = mode
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        request["adminAccess"] = True
    if tolerations:
        request["tolerations"] = [dict(t) for t in tolerations]
    if capacity is not None:
        request["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": request}


def first_available(name: str, *subrequests: Obj) -> Obj:
    """A request of the first of `subrequests` (built by `exactly`) that can be had."""
    return {
        "name": name,
        "firstAvailable": [{"name": s["name"], **s["exactly"]} for s in subrequests],
    }


def resource_claim(
    name: str,
    *requests: Obj,
    namespace: str | None = None,
    constraints: Iterable[Mapping[str, Any]] = (),
    status: Mapping[str, Any] | None = None,
    owner_uid: str | None = None,
) -> Obj:
    meta = _metadata(name, namespace, None)
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "", "uid": owner_uid, "controller": True}
        ]
    devices: Obj = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = [dict(c) for c in constraints]
    claim: Obj = {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": meta}
    claim["spec"] = {"devices": devices}
    if status is not None:
        claim["status"] = dict(status)
    return claim


def claim_template(name: str, *requests: Obj, namespace: str | None = None) -> Obj:
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": _metadata(name, namespace, None),
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }
