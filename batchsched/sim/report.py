"""The simulator's output: the `-o json` of README's "Simulating your own YAML", or a table."""

from typing import Any

from batchsched.api.nativegroups import NATIVE_API, native_origin
from batchsched.api.resources import format_amount, to_base_units
from batchsched.sim.simulator import Evicted, Simulation

# The evicting actions, as the summary counts them.
EVICTING_ACTIONS = {"preempt": "preempted", "reclaim": "reclaimed"}


def to_json(sim: Simulation) -> dict[str, Any]:
    served = sim.snapshot.scheduler_names
    ours = [t for t in sim.cache.tasks.values() if t.scheduler_name in served]
    pods: list[dict[str, Any]] = [
        {
            "namespace": t.namespace,
            "name": t.name,
            "node": t.node_name,
            "group": t.group.key if t.group else None,
            "reason": None if t.node_name else sim.decisions.pending.get(t.key, "not scheduled"),
            **_times(sim, t.key),
            **({"nominated_node": t.nominated_node} if t.nominated_node else {}),
            **({"deadline_exceeded": True} if t.key in sim.deadline_exceeded else {}),
        }
        for t in ours
    ]
    # Evicted pods are gone from the cluster; they are listed with why they lost their node.
    pods += [_evicted_pod(sim, e) for e in sim.evictions if e.scheduler_name in served]
    for key, (named, message) in sim.cache.rejected_pods.items():
        if named not in served:
            continue
        namespace, name = key.split("/", 1)
        pods.append(
            {"namespace": namespace, "name": name, "node": None, "group": None, "reason": message}
        )
    pods.sort(key=lambda p: (p["namespace"], p["name"]))
    snapshot = sim.snapshot
    nodes = []
    for row, node in enumerate(snapshot.nodes):
        shown = [
            (name, int(snapshot.allocatable[row, col]), int(snapshot.used[row, col]))
            for col, name in enumerate(snapshot.resources)
            if snapshot.allocatable[row, col] or snapshot.used[row, col]
        ]
        nodes.append(
            {
                "name": node.name,
                "allocatable": {name: to_base_units(name, a) for name, a, _ in shown},
                "requested": {name: to_base_units(name, u) for name, _, u in shown},
            }
        )
    groups = sorted(sim.decisions.jobs.values(), key=lambda s: s.key)
    return {
        "pods": pods,
        "podgroups": [
            {
                "namespace": s.namespace,
                "name": s.name,
                "phase": s.phase,
                "minMember": s.min_member,
                "scheduled": s.scheduled,
                **_native(sim, s.key),
            }
            for s in groups
        ],
        "nodes": nodes,
        "summary": {
            "pods": len(pods),
            "bound": sum(1 for p in pods if p["node"]),
            "sessions": sim.sessions,
            "elapsed_seconds": round(sim.elapsed_seconds, 6),
            "simulated_seconds": sim.end_seconds,
            **{
                counted: sum(1 for e in sim.evictions if e.eviction.action == action)
                for action, counted in EVICTING_ACTIONS.items()
            },
        },
        "evictions": [
            {
                "pod": e.eviction.key,
                "node": e.eviction.node,
                "action": e.eviction.action,
                "preemptor": e.eviction.preemptor,
                "message": e.eviction.message,
                "budget": e.eviction.budget or None,
                "at": e.at,
            }
            for e in sim.evictions
        ],
        "errors": sim.errors,
    }


def _native(sim: Simulation, key: str) -> dict[str, str]:
    """A Kubernetes PodGroup's API and where it comes from: its policy, and the Workload
    and controller that made it, when known."""
    group = sim.cache.pod_groups.get(key)
    if group is None or group.api_version != NATIVE_API:
        return {}
    return {"apiVersion": NATIVE_API, "origin": native_origin(group, sim.cache.workloads)}


def _evicted_pod(sim: Simulation, evicted: Evicted) -> dict[str, Any]:
    eviction = evicted.eviction
    return {
        "namespace": eviction.namespace,
        "name": eviction.name,
        "node": None,
        "group": evicted.group,
        "reason": eviction.message,
        **_times(sim, eviction.key),
        "evicted_at": evicted.at,
    }


def to_table(sim: Simulation) -> str:
    report = to_json(sim)
    sections: list[list[tuple[str, ...]]] = [[("POD", "NODE", "GROUP", "REASON")]]
    for pod in report["pods"]:
        sections[0].append(
            (
                f"{pod['namespace']}/{pod['name']}",
                pod["node"] or "<pending>",
                pod["group"] or "-",
                _state(pod),
            )
        )
    if report["podgroups"]:
        # Kubernetes' own PodGroups say what made them, in a column of their own.
        made = any("origin" in group for group in report["podgroups"])
        sections.append([("PODGROUP", "PHASE", "SCHEDULED/MIN", *(("POLICY",) if made else ()))])
        for group in report["podgroups"]:
            sections[-1].append(
                (
                    f"{group['namespace']}/{group['name']}",
                    group["phase"],
                    f"{group['scheduled']}/{group['minMember']}",
                    *((group.get("origin", "-"),) if made else ()),
                )
            )
    if report["evictions"]:
        sections.append([("EVICTED POD", "NODE", "ACTION", "AT", "FOR", "BUDGET EXCEEDED")])
        for evicted in report["evictions"]:
            sections[-1].append(
                (
                    evicted["pod"],
                    evicted["node"],
                    evicted["action"],
                    f"{evicted['at']:g}s",
                    evicted["preemptor"],
                    evicted["budget"] or "-",
                )
            )
    sections.append([("NODE", "REQUESTED/ALLOCATABLE")])
    for node in report["nodes"]:
        usage = ", ".join(
            f"{name} {_amount(name, node['requested'][name])}/{_amount(name, value)}"
            for name, value in node["allocatable"].items()
            if name != "pods"
        )
        sections[-1].append((node["name"], usage))
    summary = report["summary"]
    footer = (
        f"{summary['bound']}/{summary['pods']} pods bound in {summary['sessions']} sessions "
        f"over {summary['simulated_seconds']:g}s simulated "
        f"({summary['elapsed_seconds'] * 1000:.1f} ms scheduling)"
    )
    if report["evictions"]:
        footer += f"; {summary['preempted']} pods preempted, {summary['reclaimed']} reclaimed"
    return "\n\n".join([*(_columns(rows) for rows in sections), footer])


def _times(sim: Simulation, key: str) -> dict[str, float]:
    """When the simulator bound the pod and when it finished, in simulated seconds since
    the start: only those that happened, so pods that waited or came bound keep the
    fields they always had."""
    times = {"bound_at": sim.bound_at.get(key), "finished_at": sim.finished_at.get(key)}
    return {name: value for name, value in times.items() if value is not None}


def _state(pod: dict[str, Any]) -> str:
    """Why a pod waits, when it succeeded or ran out its activeDeadlineSeconds (a
    finished pod keeps the node it ran on), or when and why it was evicted."""
    if "evicted_at" in pod:
        return f"Evicted at {pod['evicted_at']:g}s: {pod['reason']}"
    if pod.get("deadline_exceeded"):
        return f"Failed at {pod['finished_at']:g}s: DeadlineExceeded"
    if "finished_at" in pod:
        return f"Succeeded at {pod['finished_at']:g}s"
    return str(pod["reason"] or "")


def _amount(name: str, value: float) -> str:
    return format_amount(name, round(value * 1000) if name == "cpu" else int(value))


def _columns(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
