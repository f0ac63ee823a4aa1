"""Random scenarios for checking batchsched's gangs of Kubernetes' own API
(`scheduling.k8s.io/v1alpha2` PodGroups, pods naming one in `spec.schedulingGroup`)
against kube-scheduler's GangScheduling plugin.

A scenario is a few nodes, some pods already bound (members of a gang among them), and
a sequence of steps, each creating a PodGroup, some pods or a node: gangs (`minCount`)
and basic groups, groups whose pods come before them, in several batches, fewer than
`minCount`, more than fit, mixed with a pod of a scheduler nobody serves; pods naming a
group that never comes; lone pods beside them. bench/gang_parity.py runs the steps through
both schedulers, one after the other on each side, and reads after each step, per
group, how many of its pods are bound and the PodGroupScheduled condition. Everything
here is pure, so the generator and the comparison can be tested without a control plane.

Each side runs the scenario on nodes of its own (the same nodes, named apart and
labelled with the side, which every pod selects), so both run at once on one API
server without taking each other's room.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import yaml

from batchsched.api.nativegroups import NATIVE_API
from batchsched.config.load import default_config
from batchsched.sim.simulator import simulate

from bench.parity_scenarios import BATCHSCHED, KUBE_SCHEDULER
from tests.support.kube import JSON
from tests.support.objects import member, native_pod_group, node, pod, stamp

# What a 1.36 control plane needs to serve the API (docs/development.md), and what
# kube-scheduler needs on top to gang-schedule with it.
GATES = {"GenericWorkload": True}
SCHEDULER_GATES = {**GATES, "GangScheduling": True}
RUNTIME_CONFIG = {NATIVE_API: True}
# The kube-scheduler condition on a PodGroup once a scheduling cycle has decided it.
SCHEDULED = "PodGroupScheduled"
SIDE_LABEL = "gangconf.batchsched.io/side"
# A resource no node has: the barrier pod asks for it, so every scheduler answers it
# at once with PodScheduled=False, having seen whatever was created before it.
BARRIER_RESOURCE = "gangconf.batchsched.io/barrier"
BARRIER = "barrier"
# Stands for the side's own scheduler name in the scenario's pods.
OWN = "<own>"
# A scheduler name nobody serves, for a pod mixed into a group.
UNSERVED = "unserved-scheduler"
# Lone pods (no group) are compared together, under this name.
LONE = ""
CPUS = ("500m", "1", "1500m", "2")
# The share of scenarios whose pods all ask for the same CPU.
UNIFORM_SHARE = 0.75
# Seconds between steps in a case file, and between the objects of a step: the run
# creates a step's objects one after the other, and the operator may decide between two
# of them (a gang's new members placed before a pod of another scheduler joins it), so
# the simulator is given them in that order, a session apart, not all at one time.
STEP_SECONDS = 20
OBJECT_SECONDS = 1


@dataclass(frozen=True)
class Side:
    """Who schedules one copy of a scenario."""

    name: str
    scheduler: str


KUBE = Side("kube", KUBE_SCHEDULER)
OURS = Side("batchsched", BATCHSCHED)


@dataclass(frozen=True)
class Group:
    """A group the scenario's pods name: its minCount (None: basic policy), and whether
    its PodGroup is ever created."""

    name: str
    min_count: int | None
    created: bool = True
    # One of its pods names a scheduler nobody serves.
    mixed: bool = False

    @property
    def policy(self) -> str:
        return "basic" if self.min_count is None else f"gang minCount {self.min_count}"

    def scheduled(self, bound: int) -> bool:
        """Scheduled as kube-scheduler means it: at least minCount pods bound, for a
        basic group one."""
        return self.created and bound >= (self.min_count or 1)


@dataclass(frozen=True)
class Scenario:
    """Side-neutral objects: `for_side` gives each side's copy."""

    index: int
    nodes: tuple[JSON, ...]
    bound: tuple[JSON, ...]
    steps: tuple[tuple[JSON, ...], ...]
    groups: tuple[Group, ...]
    # Every pod asks for the same CPU (see `generate`).
    uniform: bool = True

    def namespace(self, side: Side) -> str:
        return f"g{self.index}-{side.name}"

    def for_side(self, obj: JSON, side: Side) -> JSON:
        """The object as `side` creates it: in its namespace, on its nodes, pods naming its
        scheduler and selecting its nodes."""
        found = copy.deepcopy(obj)
        meta = found["metadata"]
        prefix = self.namespace(side)
        if found["kind"] == "Node":
            meta["name"] = f"{prefix}-{meta['name']}"
            meta["labels"] = {**meta["labels"], SIDE_LABEL: prefix}
            meta["labels"]["kubernetes.io/hostname"] = meta["name"]
            return found
        meta["namespace"] = prefix
        if found["kind"] == "Pod":
            spec = found["spec"]
            if spec["schedulerName"] == OWN:
                spec["schedulerName"] = side.scheduler
            spec["nodeSelector"] = {SIDE_LABEL: prefix}
            if "nodeName" in spec:
                spec["nodeName"] = f"{prefix}-{spec['nodeName']}"
        return found

    def case_objects(self, side: Side, steps: int | None = None) -> list[JSON]:
        """The scenario (its first `steps` steps, or all) as one input for `batchsched
        simulate`: each step created STEP_SECONDS after the one before and each of its
        objects OBJECT_SECONDS after the one before, so that they are replayed in the
        order the run creates them."""
        namespace: JSON = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace(side)},
        }
        found = [namespace]
        batches = [(*self.nodes, *self.bound), *self.steps[:steps]]
        for when, batch in enumerate(batches):
            # The first batch is there from the start, as the run creates it before any step.
            apart = OBJECT_SECONDS if when else 0
            for at, obj in enumerate(batch):
                copied = self.for_side(obj, side)
                copied["metadata"]["creationTimestamp"] = stamp(when * STEP_SECONDS + at * apart)
                found.append(copied)
        return found


def generate(rng: random.Random, index: int) -> Scenario:
    """Ranges are narrow so that room often runs out: about as many gangs wait as start.

    In most scenarios every pod asks for the same CPU, so that each node holds a number
    of pods and whether a gang fits depends on how many places are left, not on which
    nodes earlier pods were put on: the two schedulers score nodes differently
    (kube-scheduler spreads by default), which is not what this run compares. The
    others mix sizes, within groups too.
    """
    uniform = rng.random() < UNIFORM_SHARE
    one = _cpu(rng)

    def cpu() -> str:
        return one if uniform else _cpu(rng)

    nodes = tuple(_node(rng, f"n{i}") for i in range(rng.randint(2, 5)))
    names = [n["metadata"]["name"] for n in nodes]
    groups: list[Group] = []
    bound: list[JSON] = []
    sequences: list[list[tuple[JSON, ...]]] = []
    for g in range(rng.randint(1, 4)):
        group, pods, members = _group(rng, f"pg{g}", names, cpu)
        groups.append(group)
        bound.extend(members)
        sequences.append(_group_steps(rng, group, pods))
    if rng.random() < 0.4:
        lone = [_pod(f"lone-{i}", None, cpu()) for i in range(rng.randint(1, 3))]
        sequences.append([tuple(lone)])
    steps = _interleave(rng, sequences)
    if rng.random() < 0.2:
        # Room that comes late: a gang that could not start may start now.
        steps.insert(rng.randint(1, len(steps)), (_node(rng, f"n{len(nodes)}"),))
    return Scenario(index, nodes, tuple(bound), tuple(steps), tuple(groups), uniform)


def _node(rng: random.Random, name: str) -> JSON:
    pods = rng.choice(("110", "110", "110", "2"))
    return node(name, cpu=rng.choice(("2", "4", "4")), memory="16Gi", extra={"pods": pods})


def _cpu(rng: random.Random) -> str:
    return rng.choice(CPUS)


def _pod(
    name: str,
    group: str | None,
    cpu: str,
    *,
    scheduler: str = OWN,
    node_name: str | None = None,
) -> JSON:
    requests = {"cpu": cpu}
    if group is None:
        return pod(name, requests, scheduler=scheduler, node_name=node_name)
    return member(name, group, requests, scheduler=scheduler, node_name=node_name)


def _group(
    rng: random.Random, name: str, nodes: list[str], cpu: Callable[[], str]
) -> tuple[Group, list[JSON], list[JSON]]:
    """A group, its pods to create in steps, and the members already bound."""
    min_count = None if rng.random() < 0.3 else rng.randint(1, 6)
    group = Group(name, min_count, created=rng.random() > 0.08, mixed=rng.random() < 0.1)
    size = max(1, (min_count or rng.randint(1, 4)) + rng.randint(-2, 2))
    pods = [_pod(f"{name}-{i}", name, cpu()) for i in range(size)]
    if group.mixed:
        other = _pod(f"{name}-{size}", name, cpu(), scheduler=UNSERVED)
        pods.insert(rng.randrange(len(pods) + 1), other)
    members = []
    if min_count is not None and rng.random() < 0.2:
        # Members bound before the scenario (by spec.nodeName, as a scheduler that
        # started them earlier left them): they count towards minCount.
        for i in range(rng.randint(1, 2)):
            at = rng.choice(nodes)
            members.append(_pod(f"{name}-bound-{i}", name, cpu(), node_name=at))
    return group, pods, members


def _group_steps(rng: random.Random, group: Group, pods: list[JSON]) -> list[tuple[JSON, ...]]:
    """The group's pods in one to three batches; its PodGroup first, or among them."""
    cuts = sorted(rng.sample(range(1, len(pods)), min(len(pods) - 1, rng.randint(0, 2))))
    bounds = [0, *cuts, len(pods)]
    steps = [tuple(pods[a:b]) for a, b in itertools.pairwise(bounds)]
    if group.created:
        at = 0 if rng.random() < 0.7 else rng.randint(1, len(steps))
        steps.insert(at, (native_group(group),))
    return steps


def native_group(group: Group) -> JSON:
    return native_pod_group(group.name, group.min_count)


def _interleave(
    rng: random.Random, sequences: list[list[tuple[JSON, ...]]]
) -> list[tuple[JSON, ...]]:
    """The sequences merged at random, each in its own order."""
    queues = [list(s) for s in sequences if s]
    merged = []
    while queues:
        chosen = rng.choice(queues)
        merged.append(chosen.pop(0))
        if not chosen:
            queues.remove(chosen)
    return merged


def barrier(scenario: Scenario, side: Side, step: int) -> JSON:
    """A lone pod nobody can place, created after a step's objects: once its scheduler
    has said so, it has seen the step."""
    found = pod(f"{BARRIER}-{step}", scheduler=OWN)
    resources = {"requests": {BARRIER_RESOURCE: "1"}, "limits": {BARRIER_RESOURCE: "1"}}
    found["spec"]["containers"][0]["resources"] = resources
    return scenario.for_side(found, side)


# What a side did, read after each step.


@dataclass(frozen=True)
class GroupState:
    """One group after a step: its pods bound (scenario pods only) and the
    PodGroupScheduled condition's status (None: not written)."""

    bound: int
    condition: str | None


State = dict[str, GroupState]


def read_state(pods: Iterable[Mapping[str, object]], groups: Iterable[JSON]) -> State:
    """Per group name (LONE for pods without one), from a namespace's pods and PodGroups."""
    conditions = {}
    for group in groups:
        for condition in (group.get("status") or {}).get("conditions") or []:
            if condition["type"] == SCHEDULED:
                conditions[group["metadata"]["name"]] = condition["status"]
    bound: dict[str, int] = {}
    for obj in pods:
        spec: JSON = obj["spec"]  # type: ignore[assignment]
        meta: JSON = obj["metadata"]  # type: ignore[assignment]
        if meta["name"].startswith(BARRIER):
            continue
        name = group_of(obj)
        bound[name] = bound.get(name, 0) + bool(spec.get("nodeName"))
    return {name: GroupState(count, conditions.get(name)) for name, count in sorted(bound.items())}


@dataclass(frozen=True)
class Run:
    """A side's states after each step; `refused` when its scheduler refused the
    scenario's pods outright (the message it gave them)."""

    states: tuple[State, ...] = ()
    refused: str | None = None


def simulated(scenario: Scenario) -> Run:
    """batchsched's simulator on the scenario, as batchsched's side runs it: the state
    after each step is the simulation's end on the steps so far."""
    config = default_config()
    states = []
    for steps in range(1, len(scenario.steps) + 1):
        objects = scenario.case_objects(OURS, steps)
        tasks = simulate(objects, config).cache.tasks
        pods = []
        for obj in objects:
            if obj["kind"] == "Pod":
                task = tasks.get(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
                pods.append({**obj, "spec": {**obj["spec"], "nodeName": task and task.node_name}})
        states.append(read_state(pods, []))
    return Run(tuple(states))


@dataclass(frozen=True)
class Finding:
    """The first difference between two runs: the group (LONE for lone pods) and what."""

    group: str
    text: str
    # Both had as many of the group's pods bound: only the condition differs.
    bound_alike: bool = False
    # The step after which they differ, and whether both had as many pods bound in all.
    step: int = 0
    total_alike: bool = False

    def __str__(self) -> str:
        return self.text


def disagreement(
    scenario: Scenario,
    kube: Run,
    ours: Run,
    names: tuple[str, str] = ("kube-scheduler", "batchsched"),
) -> Finding | None:
    """The first difference after a step, in a sentence; None when they agree. Groups
    are compared by pods bound; the condition only when both wrote one. `names` are
    the two runs' in the sentence."""
    policies = {g.name: g for g in scenario.groups}
    for step, (theirs, mine) in enumerate(zip(kube.states, ours.states, strict=True)):
        for name in sorted(set(theirs) | set(mine)):
            a = theirs.get(name, GroupState(0, None))
            b = mine.get(name, GroupState(0, None))
            both_wrote = a.condition is not None and b.condition is not None
            if a.bound == b.bound and (not both_wrote or a.condition == b.condition):
                continue
            group = policies.get(name)
            what = f"group {name} ({_describe(group)})" if name != LONE else "lone pods"
            text = (
                f"after step {step}, {what}: {names[0]} bound {_state(a)}, {names[1]} {_state(b)}"
            )
            total_alike = _total(theirs) == _total(mine)
            return Finding(name, text, a.bound == b.bound, step, total_alike)
    return None


def _total(state: State) -> int:
    return sum(group.bound for group in state.values())


def violations(scenario: Scenario, run: Run) -> list[str]:
    """What gang semantics rule out, whichever scheduler ran: after a step, a group
    never created with more pods bound than before, a gang with more bound than before
    but fewer than minCount, a group with fewer bound than before."""
    found = []
    earlier = {g.name: bound_before(scenario, g) for g in scenario.groups}
    for step, state in enumerate(run.states):
        for group in scenario.groups:
            bound = state.get(group.name, GroupState(0, None)).bound
            was = earlier[group.name]
            where = f"after step {step}, group {group.name} ({_describe(group)})"
            short = group.min_count is not None and bound < group.min_count
            if bound < was or (bound > was and (short or not group.created)):
                found.append(f"{where}: {bound} bound, {was} before")
            earlier[group.name] = bound
    return found


def bound_before(scenario: Scenario, group: Group) -> int:
    """The group's members bound when the scenario starts."""
    return sum(group_of(p) == group.name for p in scenario.bound)


def group_of(obj: Mapping[str, object]) -> str:
    """The group a pod names, LONE for none."""
    spec: JSON = obj["spec"]  # type: ignore[assignment]
    return str((spec.get("schedulingGroup") or {}).get("podGroupName", LONE))


def _describe(group: Group | None) -> str:
    if group is None:
        return "unknown"
    said = group.policy if group.created else f"{group.policy}, never created"
    return f"{said}, a pod of a scheduler nobody serves" if group.mixed else said


def _state(state: GroupState) -> str:
    condition = f", {SCHEDULED}={state.condition}" if state.condition is not None else ""
    return f"{state.bound}{condition}"


def per_group(scenario: Scenario, run: Run) -> dict[str, dict[str, object]]:
    """The last state, per group: whether it is scheduled, and its pods bound."""
    last = run.states[-1] if run.states else {}
    found: dict[str, dict[str, object]] = {}
    for group in scenario.groups:
        state = last.get(group.name, GroupState(0, None))
        found[group.name] = {"scheduled": group.scheduled(state.bound), "bound": state.bound}
    return found


def case_yaml(scenario: Scenario, *, seed: int, finding: str, kube: Run, ours: Run) -> str:
    """The scenario, as batchsched's side creates it, for `batchsched simulate -f`; the
    header says what each side did after each step."""
    header = [
        f"# Scenario {scenario.index} of bench/gang_parity.py --seed {seed}.",
        f"# {finding}",
        f"# Pods ask for {'the same CPU' if scenario.uniform else 'different CPUs'}.",
        "# After each step (objects created at the same time form a step), per group:",
        f"#   kube-scheduler: {_steps(kube)}",
        f"#   batchsched:     {_steps(ours)}",
    ]
    body = yaml.safe_dump_all(scenario.case_objects(OURS), sort_keys=False)
    return "\n".join(header) + "\n" + body


def _steps(run: Run) -> str:
    if run.refused is not None:
        return f"refused: {run.refused}"
    shown = (
        "{" + ", ".join(f"{name or 'lone'}: {_state(s)}" for name, s in state.items()) + "}"
        for state in run.states
    )
    return " | ".join(shown)
