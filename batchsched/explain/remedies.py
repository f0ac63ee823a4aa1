"""What would let a pod or gang fit: the node constraints no node meets, and which
running jobs would free room enough on which nodes.

Each function returns a cause and a remedy, one line each, or None when it does not
apply, so analysis.py can try them in turn.
"""

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from batchsched.api.objects import BLOCKING_EFFECTS, Node, Taint, Task
from batchsched.api.resources import PODS, format_amount
from batchsched.api.selectors import node_matches
from batchsched.explain.session import Ran
from batchsched.model.arrays import IntArray
from batchsched.model.snapshot import JobInfo, TaskInfo

Finding = tuple[str, str]
# Running jobs tried, most helpful first, before saying more would have to finish.
MOST_JOBS = 3


def some(names: Sequence[str], *, shown: int = 3) -> str:
    """A few names, then how many more: a line stays readable on a large cluster."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def shape(ran: Ran, vec: IntArray) -> str:
    """A request in people's units, pod slots left out: `4 nvidia.com/gpu, 8 cpu`."""
    resources = ran.snapshot.resources
    parts = [
        f"{format_amount(resources[c], int(vec[c]))} {resources[c]}"
        for c in np.flatnonzero(vec)
        if resources[c] != PODS
    ]
    # Extended resources first: they are what is scarce when a pod asks for them.
    parts.sort(key=lambda part: part.split(" ")[1] in ("cpu", "memory", "ephemeral-storage"))
    return ", ".join(parts) or "nothing"


def job_label(task: Task) -> str:
    return f"job {task.group.key}" if task.group is not None else f"pod {task.key}"


def constraints(ran: Ran, task: TaskInfo) -> Finding | None:
    """Why no node takes pods with these constraints at all, whatever runs there."""
    pod = task.pod.constraints
    nodes = ran.snapshot.nodes
    if not nodes:
        return ("the cluster has no nodes", "add nodes, or check --kubeconfig names the cluster")
    if ran.session.allowed(pod).any():
        return None
    for key, value in pod.node_selector:
        if not any(n.labels.get(key) == value for n in nodes):
            values = sorted({n.labels[key] for n in nodes if key in n.labels})
            where = (
                f"nodes have {key}={', '.join(values[:5])}"
                if values
                else f"no node has the label {key}"
            )
            return (
                f"nodeSelector {key}={value} matches no node",
                f"{where}: fix the pod's nodeSelector, or label a node: "
                f"kubectl label node NODE {key}={value}",
            )
    selected = [n for n in nodes if all(n.labels.get(k) == v for k, v in pod.node_selector)]
    if not selected:
        pairs = ", ".join(f"{k}={v}" for k, v in pod.node_selector)
        return (
            f"nodeSelector {pairs} matches no node (each matches some, none all)",
            "label a node with all of them, or drop one from the pod's nodeSelector",
        )
    taints = _untolerated(ran, task, selected)
    if taints:
        (taint, tainted), *others = taints
        shown = f"{taint.key}={taint.value}" if taint.value else taint.key
        also = f" (and {len(others)} other taint(s))" if others else ""
        names = [n.name for n in tainted]
        value = f"value: {taint.value}, " if taint.value else ""
        operator = "Equal" if taint.value else "Exists"
        return (
            f"untolerated taint {shown}:{taint.effect} on node(s) {some(names)}{also}",
            f"add a toleration to the pod ({{key: {taint.key}, operator: {operator}, "
            f"{value}effect: {taint.effect}}}), or remove the taint: "
            f"kubectl taint nodes {names[0]} {shown}:{taint.effect}-",
        )
    if pod.affinity:
        return (
            "required node affinity matches no node",
            "relax spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, "
            "or label nodes to match it",
        )
    return (
        "every node it may use is cordoned or not ready",
        "uncordon a node (kubectl uncordon NODE) or wait for nodes to become Ready",
    )


def _untolerated(ran: Ran, task: TaskInfo, nodes: list[Node]) -> list[tuple[Taint, list[Node]]]:
    """Blocking taints the pod does not tolerate, each with its nodes, most nodes first."""
    tolerations = task.pod.constraints.tolerations
    found: dict[Taint, list[Node]] = defaultdict(list)
    for node in nodes:
        for taint in node.taints:
            if taint.effect in BLOCKING_EFFECTS and not any(
                t.tolerates(taint) for t in tolerations
            ):
                found[taint].append(node)
                break
    return sorted(found.items(), key=lambda item: (-len(item[1]), item[0].key))


def fits(free: IntArray, vec: IntArray) -> IntArray:
    """How many pods of request `vec` fit in each row of `free`."""
    wanted = vec > 0
    if not wanted.any():
        return np.full(len(free), np.iinfo(np.int64).max // 2, dtype=np.int64)
    counts = (np.maximum(free[:, wanted], 0) // vec[wanted]).min(axis=1)
    return np.asarray(counts, dtype=np.int64)


def room(ran: Ran, job: JobInfo, task: TaskInfo, wanted: int) -> Finding | None:
    """When the nodes the pod may use are too full for the `wanted` members of its
    shape: which running jobs, once finished, free enough, and on which nodes."""
    session, snapshot = ran.session, ran.snapshot
    rows = np.flatnonzero(session.allowed(task.pod.constraints))
    now = fits(session.free[rows], task.vec)
    have = int(np.minimum(now, wanted).sum())
    if have >= wanted:
        return None
    need = shape(ran, task.vec)
    what = (
        f"needs one node with {need} free"
        if wanted == 1
        else f"needs room for {wanted} members at once, each {need}"
    )
    named = narrowing(ran, task)
    if named:
        limits, one = " and ".join(named), len(named) == 1
        where = f"the {len(rows)} of {len(snapshot.nodes)} nodes its {limits} " + (
            "leaves it" if one else "leave it"
        )
        admitted = f" that its {limits} " + ("admits" if one else "admit")
        relax = ", relax it," if one else ", relax them,"
    else:
        where, admitted, relax = f"the {len(rows)} node(s) it may use", "", ""
    cause = f"{what}; {have} fit(s) now on {where}"
    empty = fits(snapshot.allocatable[rows], task.vec)
    holds = int(np.minimum(empty, wanted).sum())
    if holds < wanted:
        largest = shape(ran, snapshot.allocatable[rows].max(axis=0, initial=0) * (task.vec > 0))
        return (
            cause,
            f"even empty, the nodes it may use hold {int(empty.sum())} (largest: {largest}): "
            f"add {_nodes(wanted - holds)} with {need} allocatable{admitted}{relax} "
            "or ask for less",
        )
    # Nodes with just its request free, one member each, that would let it run now.
    lacking = wanted - have
    position = {int(row): i for i, row in enumerate(rows)}
    freed: dict[str, dict[int, IntArray]] = defaultdict(dict)
    for row, pod in snapshot.placed:
        at = position.get(row)
        if at is None or (pod.group is not None and pod.group.key == job.key):
            continue
        if empty[at] <= now[at]:
            continue  # that node could not take more of this shape if it drained
        label = job_label(pod)
        vec = ran.vector(pod.request)
        held = freed[label].get(at)
        freed[label][at] = vec if held is None else held + vec
    free = session.free[rows].copy()
    chosen: list[str] = []
    candidates = {
        label: (np.fromiter(by.keys(), dtype=np.int64), np.array(list(by.values())))
        for label, by in freed.items()
    }
    count = now.copy()
    while have < wanted and candidates and len(chosen) < MOST_JOBS:
        best: tuple[int, int, str] | None = None
        for label, (spots, add) in candidates.items():
            gain = int((fits(free[spots] + add, task.vec) - count[spots]).sum())
            rank = (min(gain, wanted - have), -len(spots), label)
            if gain > 0 and (best is None or rank[:2] > best[:2]):
                best = rank
        if best is None:
            break
        label = best[2]
        spots, add = candidates.pop(label)
        free[spots] += add
        count = fits(free, task.vec)
        have = int(np.minimum(count, wanted).sum())
        chosen.append(label)
    if have < wanted:
        busy = [snapshot.nodes[int(r)].name for r in rows[np.argsort(-(empty - now))]]
        return (
            cause,
            f"more than {MOST_JOBS} running jobs must finish first (on nodes "
            f"{some(busy)}); or add {_nodes(lacking)} with {need} free{admitted}",
        )
    opened = [snapshot.nodes[int(rows[i])].name for i in np.flatnonzero(count > now)]
    jobs = " and ".join(chosen) if len(chosen) < 3 else ", ".join(chosen)
    verb = "finishes" if len(chosen) == 1 else "finish"
    return cause, f"node(s) {some(opened)} qualify once {jobs} {verb}"


def narrowing(ran: Ran, task: TaskInfo) -> list[str]:
    """The pod's constraints that each rule out some node of the cluster, named with
    their keys (`nodeSelector pool=a`, `untolerated taint gpu:NoSchedule`); none when it
    may use every node."""
    pod = task.pod.constraints
    nodes = ran.snapshot.nodes
    named = [
        f"nodeSelector {key}={value}"
        for key, value in pod.node_selector
        if any(n.labels.get(key) != value for n in nodes)
    ]
    if pod.affinity and not all(node_matches(n, pod.affinity) for n in nodes):
        terms = " or ".join(
            "(" + ", ".join(f"{r.key} {r.operator} [{', '.join(r.values)}]" for r in term) + ")"
            for term in pod.affinity
        )
        named.append(f"required node affinity {terms}")
    for taint, _ in _untolerated(ran, task, list(nodes)):
        shown = f"{taint.key}={taint.value}" if taint.value else taint.key
        named.append(f"untolerated taint {shown}:{taint.effect}")
    # Only where they keep it out: a pod may tolerate their taints.
    allowed = ran.session.allowed(pod)
    if any((n.unschedulable or not n.ready) and not allowed[i] for i, n in enumerate(nodes)):
        named.append("cordoned or not-ready nodes")
    return named


def _nodes(count: int) -> str:
    return "1 node" if count == 1 else f"{count} nodes"


def holders(ran: Ran, rows: Sequence[int], *, besides: str) -> list[str]:
    """The running jobs on these nodes, most pods first, `besides` left out."""
    wanted = set(rows)
    counted: Counter[str] = Counter(
        job_label(pod)
        for row, pod in ran.snapshot.placed
        if row in wanted and not (pod.group is not None and pod.group.key == besides)
    )
    return [label for label, _ in counted.most_common()]
