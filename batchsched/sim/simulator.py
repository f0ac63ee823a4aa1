"""Running sessions on an in-memory cluster until nothing more can be placed.

Bound pods are marked Running at once, standing in for the kubelet, and PodGroup phases
are written back, just as the operator's status writer would do. The claims a binding
settles are bound at once, standing in for the PersistentVolume controller and the
provisioner: to the volume chosen for them, or to a new one made for the chosen node
(reachable from the nodes sharing its values of the class's allowedTopologies keys).
"""

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from batchsched.api.errors import InvalidObject
from batchsched.api.objects import Requirement
from batchsched.api.volumes import ClaimRef, NodeTerms, Volume
from batchsched.cache.cluster import ClusterCache
from batchsched.cache.snapshot import Snapshot, take_snapshot
from batchsched.framework.config import SchedulerConfig, run_session
from batchsched.framework.decisions import ClaimBinding, Decisions

# A guard against a plugin that keeps binding forever; real inputs settle far sooner.
MAX_SESSIONS = 10_000


@dataclass
class Simulation:
    cache: ClusterCache
    snapshot: Snapshot
    decisions: Decisions
    sessions: int
    elapsed_seconds: float
    errors: list[str] = field(default_factory=list)


def simulate(objects: Iterable[dict[str, Any]], config: SchedulerConfig) -> Simulation:
    cache = ClusterCache()
    errors: list[str] = []
    for obj in objects:
        try:
            cache.apply(obj)
        except InvalidObject as error:
            errors.append(str(error))
    # A malformed PodGroup is kept so that its pods can wait with its error; say it here too.
    errors += [group.error for group in cache.pod_groups.values() if group.error]
    now = max((t.creation for t in cache.tasks.values()), default=0.0)
    elapsed = 0.0
    sessions = 0
    while True:
        started = time.perf_counter()
        snapshot = take_snapshot(cache, now=now, scheduler_name=config.scheduler_name)
        decisions = run_session(snapshot, config)
        elapsed += time.perf_counter() - started
        sessions += 1
        for binding in decisions.bindings:
            for claim in binding.claims:
                _settle(cache, claim)
            cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
            cache.tasks[binding.key].phase = "Running"
        for status in decisions.jobs.values():
            group = cache.pod_groups.get(status.key)
            if group is not None:
                group.phase = status.phase
        if not decisions.bindings or sessions >= MAX_SESSIONS:
            break
        now += config.schedule_period
    final = take_snapshot(cache, now=now, scheduler_name=config.scheduler_name)
    return Simulation(
        cache=cache,
        snapshot=final,
        decisions=decisions,
        sessions=sessions,
        elapsed_seconds=elapsed,
        errors=errors,
    )


def _settle(cache: ClusterCache, binding: ClaimBinding) -> None:
    claim = cache.claims[binding.key]
    if claim.bound:
        return
    name = binding.volume or f"pvc-{claim.uid or claim.key.replace('/', '-')}"
    if not binding.volume:
        found = cache.storage_classes[claim.storage_class]
        labels = cache.nodes[binding.node].labels
        keys = {r.key for term in found.allowed_topologies for r in term}
        cache.volumes[name] = Volume(
            name=name,
            storage_class=claim.storage_class,
            capacity=claim.request,
            access_modes=claim.access_modes,
            block=claim.block,
            node_affinity=_reach(keys, labels),
            csi=(found.provisioner, name),
        )
    cache.volumes[name] = dataclasses.replace(
        cache.volumes[name], claim=ClaimRef(claim.namespace, claim.name, claim.uid)
    )
    cache.claims[binding.key] = dataclasses.replace(
        claim, volume_name=name, bind_completed=True, selected_node=binding.node
    )


def _reach(keys: set[str], labels: dict[str, str]) -> NodeTerms | None:
    """Where a volume provisioned on a node with these labels can be used."""
    term = tuple(Requirement(key, "In", (labels[key],)) for key in sorted(keys) if key in labels)
    return (term,) if term else None
