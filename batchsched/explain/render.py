"""An Explanation as text for people (cause and remedy on lines 2 and 3) or as JSON
for tools (stable keys; quantities in base units, cpu in cores, as `simulate -o json`)."""

from collections.abc import Mapping
from typing import Any

from batchsched.api.resources import CPU, format_amount
from batchsched.explain.analysis import Explanation, QueueView


def to_text(found: Explanation) -> str:
    lines = [found.summary, f"cause: {found.cause}", f"remedy: {found.remedy}"]
    if found.reason and found.reason != found.cause:
        lines.append(f"scheduler says: {found.reason}")
    group = found.group
    if group is not None and group.gang:
        origin = f" ({group.origin})" if group.origin else ""
        lines.append(
            f"group {group.key}{origin}: phase {group.phase}, minMember {group.min_member}: "
            f"{group.bound} bound, {group.pending} pending, {group.missing} missing"
        )
    if found.refusals:
        lines.append(f"nodes refused ({found.nodes} in the cluster), by filter and reason:")
        width = max(len(r.filter) for r in found.refusals)
        for refusal in found.refusals:
            lines.append(f"  {refusal.filter:<{width}}  {refusal.count:>6}  {refusal.reason}")
        for name, nodes in found.examples.items():
            lines.append(f"  {name:<{width}}  e.g. {', '.join(nodes)}")
    if found.queue is not None:
        lines.append(_queue_line(found.queue))
    if found.scores:
        lines.append("scores for its shape (weighted, per plugin):")
        for score in found.scores:
            own = " (its node)" if score.node == found.node else ""
            parts = ", ".join(f"{name} {value}" for name, value in score.plugins.items())
            lines.append(f"  {score.node}{own}: {score.total} = {parts}")
    if found.waiting:
        lines.append("waiting jobs:")
        lines += [f"  {key}: {reason}" for key, reason in found.waiting.items()]
    return "\n".join(lines)


def _queue_line(queue: QueueView) -> str:
    def shown(amounts: Mapping[str, int]) -> str:
        return ", ".join(f"{name} {format_amount(name, v)}" for name, v in sorted(amounts.items()))

    parts = [
        f"weight {queue.weight}",
        f"deserved {shown(queue.deserved) or '-'}",
        f"guarantee {shown(queue.guarantee) or '-'}",
        f"capability {shown(queue.capability) or 'unlimited'}",
        f"in use {shown(queue.allocated) or 'nothing'}",
    ]
    return f"queue {queue.name}: " + "; ".join(parts)


def to_json(found: Explanation) -> dict[str, Any]:
    target = found.target
    group = found.group
    queue = found.queue
    return {
        "target": {"kind": target.kind, "namespace": target.namespace, "name": target.name},
        "found": found.found,
        "summary": found.summary,
        "cause": found.cause,
        "remedy": found.remedy,
        "reason": found.reason,
        "group": None
        if group is None
        else {
            "key": group.key,
            "gang": group.gang,
            "phase": group.phase,
            "minMember": group.min_member,
            "bound": group.bound,
            "pending": group.pending,
            "missing": group.missing,
            "queue": group.queue,
            **({"origin": group.origin} if group.origin else {}),
        },
        "queue": None
        if queue is None
        else {
            "name": queue.name,
            "weight": queue.weight,
            "deserved": _plain(queue.deserved),
            "guarantee": _plain(queue.guarantee),
            "capability": _plain(queue.capability),
            "allocated": _plain(queue.allocated),
            "jobsPending": queue.jobs_pending,
            "jobsRunning": queue.jobs_running,
        },
        "nodes": {
            "total": found.nodes,
            "refused": [
                {"filter": r.filter, "reason": r.reason, "count": r.count} for r in found.refusals
            ],
            "examples": found.examples,
        },
        "node": found.node,
        "scores": [{"node": s.node, "total": s.total, "plugins": s.plugins} for s in found.scores],
        "waiting": [{"job": key, "reason": reason} for key, reason in found.waiting.items()],
    }


def _plain(amounts: Mapping[str, int]) -> dict[str, float]:
    return {name: v / 1000 if name == CPU else v for name, v in sorted(amounts.items())}
