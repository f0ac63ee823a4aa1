"""Conformance of batchsched's native gangs with kube-scheduler's, on random scenarios.

The gangs are Kubernetes' own (scheduling.k8s.io/v1alpha2 PodGroups), and kube-scheduler
schedules them with its GangScheduling plugin.

Usage: python -m bench.gang_parity [--scenarios 500] [--seed 1] [--first 0] [--out gang-cases]
                                   [--only INDEX | --indices I...] [--settle 1.5] [--parallel 8]
Needs KUBEBUILDER_ASSETS holding etcd, kube-apiserver and kube-scheduler:
    bash hack/envtest.sh && export KUBEBUILDER_ASSETS=$(bash hack/kube-scheduler.sh)
Prints one JSON object; see docs/conformance.md.

One control plane serves `scheduling.k8s.io/v1alpha2` (feature gate GenericWorkload);
kube-scheduler v1.36.3 runs on it with GenericWorkload and GangScheduling, and
`batchsched run` beside it. Each scenario (bench/gang_scenarios.py generates it from the
seed and its index, so `--only` replays one) runs on both at once, each on nodes of its
own: step by step, each step's objects created, then a barrier pod that nobody can place;
once its scheduler has answered the barrier, and nothing in the namespace has changed
for --settle seconds, the step's state is read. A disagreement is run again with a
longer --settle and kept (written to --out as a case `batchsched simulate -f` reads)
only if it repeats.

batchsched is asked first whether it schedules such a gang at all: until it reads the
native kinds, it refuses their pods, and the run reports its side as refused, with its
message, and runs kube-scheduler's alone.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from batchsched.api.nativegroups import NATIVE_API

from bench.cluster import REPO, free_port
from bench.e2e import start_operator
from bench.gang_scenarios import (
    GATES,
    KUBE,
    OURS,
    OWN,
    RUNTIME_CONFIG,
    SCHEDULED,
    SCHEDULER_GATES,
    Finding,
    Group,
    Run,
    Scenario,
    Side,
    State,
    barrier,
    bound_before,
    case_yaml,
    disagreement,
    generate,
    native_group,
    per_group,
    read_state,
    simulated,
    violations,
)
from bench.parity import (
    SCHEDULER_BINARY,
    create_node,
    each_scenario,
    report,
    scenario_indices,
    scenario_parser,
    scenario_rng,
)
from bench.parity_scenarios import KUBE_SCHEDULER
from tests.support import ControlPlane, ControlPlaneError, Kube, component_binary, find_assets
from tests.support.kube import JSON, condition
from tests.support.objects import load_manifests, member, node

# kube-scheduler scores nodes as batchsched's default does (binpack is MostAllocated
# over CPU and memory, and nothing balances): with its own default (LeastAllocated and
# BalancedAllocation) it spreads where we pack, and pods of different sizes then leave
# different room for later gangs, which says nothing of gang semantics.
KUBE_SCORING: JSON = {
    "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
    "pluginConfig": [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                }
            },
        }
    ],
}
# A pod that failed waits out a backoff (1 s, doubling up to 10 s by default) before a
# change retries it; one second at most, so that a step need not wait ten for a gang
# that fits once a node comes. It changes when kube-scheduler retries, not what it decides.
SCHEDULER_CONFIG: JSON = {
    "percentageOfNodesToScore": 100,
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 1,
    "profiles": [{"schedulerName": KUBE_SCHEDULER, **KUBE_SCORING}],
}
# Causes of a disagreement: a group with a pod naming a scheduler nobody serves is
# refused whole by batchsched, while kube-scheduler does not see that pod.
MIXED = "mixed scheduler names"
# Or a gang whose minCount members were bound before its PodGroup came, and which
# only differs by its condition: batchsched writes PodGroupScheduled=True once it sees
# them, kube-scheduler writes nothing until a cycle of its own for the group, and False
# when members that come later do not fit.
STARTED_BEFORE = "gang started before its PodGroup"
# Or in a scenario whose pods ask for different CPUs, where the two schedulers' node
# scoring leaves different room for later pods (gang_scenarios.generate).
SIZES = "pods of different sizes"
# Or a node that comes while several groups wait, and as many pods bound on both
# sides after it, but of other groups: batchsched gives the room to the group that came
# first (its queue orders jobs by priority, then creation), kube-scheduler to another.
LATE_ROOM = "room that comes, given to another waiting group"
# The causes docs/conformance.md explains, where batchsched's answer is kept.
EXPLAINED = (MIXED, STARTED_BEFORE, LATE_ROOM)
UNKNOWN = "other"
# How much longer than --settle a disagreement is given when it is run again: several
# backoffs of kube-scheduler's (parity's factor, 10, would take minutes a scenario).
CONFIRM_FACTOR = 3
# The longest either scheduler may take to answer a barrier, or to go quiet after it:
# on a busy machine a session of batchsched's takes seconds, and a step holds several.
STEP_TIMEOUT = 180.0
# The longest batchsched run may take to fill its cache: on a busy machine, minutes.
SYNC_TIMEOUT = 300.0
# Each poll reads a namespace's pods and PodGroups over new connections: often enough
# for a barrier's answer, seldom enough to leave the API server to the schedulers.
POLL_SECONDS = 0.2
QUIET_POLL_SECONDS = 0.5
PODGROUPS = f"/apis/{NATIVE_API}/namespaces/{{}}/podgroups"


class SideRunner:
    """Runs scenarios for one side on the control plane and reads its scheduler's answers."""

    def __init__(self, kube: Kube, side: Side, alive: Callable[[], None]) -> None:
        self.kube = kube
        self.side = side
        # Raises when the side's scheduler is gone, so that a wait does not outlast it.
        self.alive = alive

    def run(self, scenario: Scenario, *, settle: float) -> Run:
        try:
            return self.play(scenario, settle=settle)
        finally:
            self.teardown(scenario)

    def play(self, scenario: Scenario, *, settle: float) -> Run:
        """The scenario's steps, each with the state it left; its objects stay."""
        namespace = scenario.namespace(self.side)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        self.kube.post("/api/v1/namespaces", body).expect(201, 409)
        for obj in scenario.nodes:
            create_node(self.kube, scenario.for_side(obj, self.side))
        for obj in scenario.bound:
            self._create(scenario.for_side(obj, self.side))
        states = []
        for index, step in enumerate(scenario.steps):
            for obj in step:
                found = scenario.for_side(obj, self.side)
                if found["kind"] == "Node":
                    create_node(self.kube, found)
                else:
                    self._create(found)
            states.append(self._settle(scenario, index, settle))
        return Run(tuple(states))

    def _create(self, obj: JSON) -> None:
        meta = obj["metadata"]
        path = PODGROUPS if obj["kind"] == "PodGroup" else "/api/v1/namespaces/{}/pods"
        self.kube.post(path.format(meta["namespace"]), obj).expect(201)

    def _settle(self, scenario: Scenario, step: int, settle: float) -> State:
        """The namespace once the scheduler has answered the step's barrier and nothing
        has changed for `settle` seconds."""
        namespace = scenario.namespace(self.side)
        fence = barrier(scenario, self.side, step)
        self._create(fence)
        path = f"/api/v1/namespaces/{namespace}/pods/{fence['metadata']['name']}"
        deadline = time.monotonic() + STEP_TIMEOUT
        while not condition(self.kube.get(path).expect(200), "PodScheduled"):
            self._check(deadline, f"{self.side.name} never answered {path}", POLL_SECONDS)
        seen, since = self._read(namespace), time.monotonic()
        while time.monotonic() - since < settle:
            what = f"{namespace} kept changing for {STEP_TIMEOUT:g}s"
            self._check(deadline, what, QUIET_POLL_SECONDS)
            now = self._read(namespace)
            if now != seen:
                seen, since = now, time.monotonic()
        self.kube.delete(path, grace_period_seconds=0).expect(200)
        return read_state(*seen)

    def _check(self, deadline: float, what: str, pause: float) -> None:
        self.alive()
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(pause)

    def _read(self, namespace: str) -> tuple[list[JSON], list[JSON]]:
        """The namespace's pods and PodGroups, as far as either scheduler changes them."""
        pods = self.kube.get(f"/api/v1/namespaces/{namespace}/pods").expect(200)["items"]
        groups = self.kube.get(PODGROUPS.format(namespace)).expect(200)["items"]
        return (
            [_decided(p, "PodScheduled") for p in pods],
            [_decided(g, SCHEDULED) for g in groups],
        )

    def teardown(self, scenario: Scenario) -> None:
        namespace = scenario.namespace(self.side)
        self.kube.delete(f"/api/v1/namespaces/{namespace}/pods", grace_period_seconds=0).expect(200)
        # The protection finalizer stays until a controller (not running here) sees the
        # group's pods terminal; without it, a delete removes the group at once.
        for group in self.kube.get(PODGROUPS.format(namespace)).expect(200)["items"]:
            path = f"{PODGROUPS.format(namespace)}/{group['metadata']['name']}"
            self.kube.patch(path, {"metadata": {"finalizers": None}}).expect(200, 404)
            self.kube.delete(path).expect(200, 404)
        for obj in (*scenario.nodes, *(o for s in scenario.steps for o in s)):
            if obj["kind"] == "Node":
                name = scenario.for_side(obj, self.side)["metadata"]["name"]
                self.kube.delete(f"/api/v1/nodes/{name}").expect(200, 404)


def _decided(obj: JSON, kind: str) -> JSON:
    """What read_state and the quiet check look at: the spec, and the one condition
    (which carries no times, as a rewrite of the same answer changes nothing)."""
    found = condition(obj, kind)
    status = {"conditions": [{"type": kind, "status": found["status"]}]} if found else {}
    return {"metadata": {"name": obj["metadata"]["name"]}, "spec": obj["spec"], "status": status}


def probe_scenario() -> Scenario:
    """One basic group of one pod on an empty node, which any gang scheduler places."""
    group = Group("probe", None)
    first = member("probe-0", group.name, {"cpu": "100m"}, scheduler=OWN)
    return Scenario(-1, (node("n0", cpu="1"),), (), ((native_group(group), first),), (group,))


def refusal(runner: SideRunner) -> str | None:
    """None when the side's scheduler places the probe's pod; otherwise what it told
    the pod (its PodScheduled message)."""
    probe = probe_scenario()
    path = f"/api/v1/namespaces/{probe.namespace(runner.side)}/pods/probe-0"
    try:
        runner.play(probe, settle=1.0)
        found = runner.kube.get(path).expect(200)
    finally:
        runner.teardown(probe)
    if found["spec"].get("nodeName"):
        return None
    return str((condition(found, "PodScheduled") or {}).get("message", "not placed"))


class Sides:
    """Both sides of the run; batchsched's is None once it has refused the probe."""

    def __init__(self, kube: SideRunner, ours: SideRunner, parallel: int) -> None:
        self.kube = kube
        self.ours: SideRunner | None = ours
        self.refused: str | None = None
        self.pool = ThreadPoolExecutor(parallel)

    def probe(self) -> None:
        problem = refusal(self.kube)
        if problem is not None:
            raise ControlPlaneError(f"kube-scheduler does not place a native gang: {problem}")
        assert self.ours is not None
        self.refused = refusal(self.ours)
        if self.refused is not None:
            self.ours = None

    def decide(self, scenario: Scenario, settle: float) -> tuple[Run, Run]:
        """Both sides at once, each on its own nodes."""
        kube = self.pool.submit(self.kube.run, scenario, settle=settle)
        ours = (
            Run(refused=self.refused)
            if self.ours is None
            else self.ours.run(scenario, settle=settle)
        )
        return kube.result(), ours


def operator_check(process: subprocess.Popen[bytes], log: Path) -> Callable[[], None]:
    def alive() -> None:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise ControlPlaneError(f"batchsched run exited ({process.returncode}):\n{tail}")

    return alive


def wait_synced(log: Path, alive: Callable[[], None], timeout: float) -> None:
    """Until `batchsched run` logs that its cache is synced (its log at `log`); raises
    when it exits or takes longer than `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while "cache synced" not in log.read_text(errors="replace"):
        alive()
        if time.monotonic() > deadline:
            raise ControlPlaneError("batchsched run did not sync its cache in time")
        time.sleep(POLL_SECONDS)


def settled_parser(
    description: str, *, out: str, decided: str, parallel: int
) -> argparse.ArgumentParser:
    """The arguments of a run against kube-scheduler with SCHEDULER_CONFIG: --settle
    outlasts its backoff, so a namespace that quiet has had its retry; `decided` says
    what --settle waits for, `parallel` is how many scenarios run at once by default."""
    parser = scenario_parser(
        description,
        out=out,
        settle=1.5,
        settle_help=f"seconds nothing may change in a namespace before {decided} "
        "(longer than kube-scheduler's backoff, 1 s here)",
    )
    parser.add_argument("--parallel", type=int, default=parallel, help="scenarios run at once")
    return parser


def start_plane(assets: Path) -> ControlPlane:
    """A control plane serving Kubernetes' own gangs, and our CRDs for the operator."""
    crds = load_manifests(REPO / "crds")
    return ControlPlane.start(assets, crds=crds, feature_gates=GATES, runtime_config=RUNTIME_CONFIG)


@contextlib.contextmanager
def schedulers(plane: ControlPlane, binary: Path, parallel: int) -> Iterator[Sides]:
    """kube-scheduler (the `binary`, with GangScheduling) and `batchsched run` on the
    plane, once each has answered the probe; the operator is stopped on leaving."""
    plane.start_scheduler(binary, SCHEDULER_CONFIG, feature_gates=SCHEDULER_GATES)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "operator.log"
        operator = start_operator(plane.kubeconfig, log, free_port())
        alive = operator_check(operator, log)
        kube = plane.kube()
        sides = Sides(SideRunner(kube, KUBE, lambda: None), SideRunner(kube, OURS, alive), parallel)
        try:
            # The probe's PodGroup comes through the operator's watch, not its first list.
            wait_synced(log, alive, SYNC_TIMEOUT)
            sides.probe()
            yield sides
        finally:
            sides.pool.shutdown()
            operator.terminate()
            operator.wait(30)


def run(args: argparse.Namespace) -> JSON:
    assets = find_assets()
    binary = component_binary(assets, SCHEDULER_BINARY)
    started = time.monotonic()
    indices = scenario_indices(args)
    with (
        start_plane(assets) as plane,
        schedulers(plane, binary, args.parallel) as sides,
        ThreadPoolExecutor(args.parallel) as pool,
    ):
        done = each_scenario(pool, partial(scenario_result, sides, args), indices)
    results = sorted(done.results, key=lambda r: r.scenario.index)
    found = summary(args, results, sides.refused, Path(args.out), time.monotonic() - started)
    return {**found, "timed_out": done.timed_out, "interrupted": done.interrupted}


@dataclass(frozen=True)
class Result:
    """A scenario's runs; `went_away` when a disagreement did not repeat."""

    scenario: Scenario
    kube: Run
    ours: Run
    simulator: Run
    went_away: bool = False


def scenario_result(sides: Sides, args: argparse.Namespace, index: int) -> Result:
    """One scenario on both sides, run again with a longer wait if they disagree, and
    in batchsched's simulator."""
    scenario = generate(scenario_rng(args.seed, index), index)
    kube, ours = sides.decide(scenario, args.settle)
    if ours.refused is not None:
        return Result(scenario, kube, ours, ours)
    sim = simulated(scenario)
    if disagreement(scenario, kube, ours) is None:
        return Result(scenario, kube, ours, sim)
    kube, ours = sides.decide(scenario, args.settle * CONFIRM_FACTOR)
    return Result(scenario, kube, ours, sim, went_away=disagreement(scenario, kube, ours) is None)


def summary(
    args: argparse.Namespace, results: list[Result], refused: str | None, out: Path, seconds: float
) -> JSON:
    cases: list[str] = []
    causes: Counter[str] = Counter()
    apart: list[str] = []
    groups = agreed_groups = agreed = 0
    for r in results:
        theirs, mine = per_group(r.scenario, r.kube), per_group(r.scenario, r.ours)
        groups += len(theirs)
        if refused is not None:
            continue
        agreed_groups += sum(theirs[name] == mine[name] for name in theirs)
        between = disagreement(r.scenario, r.ours, r.simulator, ("batchsched run", "the simulator"))
        if between is not None:
            apart.append(f"scenario {r.scenario.index}: {between}")
        finding = disagreement(r.scenario, r.kube, r.ours)
        if finding is None:
            agreed += 1
            continue
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"seed{args.seed}-scenario{r.scenario.index}.yaml"
        path.write_text(
            case_yaml(r.scenario, seed=args.seed, finding=str(finding), kube=r.kube, ours=r.ours)
        )
        causes[cause(r.scenario, finding)] += 1
        cases.append(str(path))
        print(f"scenario {r.scenario.index}: {finding} -> {path}", file=sys.stderr)
    ran = refused is None
    return {
        "scenarios": len(results),
        "seed": args.seed,
        "first": args.first,
        "groups": groups,
        "steps": sum(len(r.scenario.steps) for r in results),
        "kube_scheduler": side([(r.scenario, r.kube) for r in results]),
        "batchsched": side([(r.scenario, r.ours) for r in results])
        if ran
        else {"ran": False, "refused": refused},
        # Scenarios whose every step left every group alike on both sides.
        "agreement_pct": round(100 * agreed / len(results), 2) if ran and results else None,
        # Groups alike at the end: scheduled or not, and as many pods bound.
        "group_agreement_pct": round(100 * agreed_groups / groups, 2) if ran and groups else None,
        "disagreements": len(cases),
        "disagreements_by_cause": dict(causes),
        "cases": cases,
        # Disagreements that did not repeat with a longer wait: a scheduler had not
        # answered yet. Many of them mean --settle is too short for the machine.
        "not_repeated": sum(r.went_away for r in results),
        # The operator and the simulator are one scheduler: where they part.
        "simulator_apart_from_operator": apart if ran else None,
        "elapsed_seconds": round(seconds, 1),
    }


def cause(scenario: Scenario, finding: Finding) -> str:
    """Why two runs part, where it is known (docs/conformance.md explains each)."""
    group = next((g for g in scenario.groups if g.name == finding.group), None)
    if group is not None and group.mixed:
        return MIXED
    if (
        group is not None
        and finding.bound_alike
        and group.min_count is not None
        and bound_before(scenario, group) >= group.min_count
    ):
        return STARTED_BEFORE
    came = scenario.steps[finding.step]
    if finding.total_alike and all(obj["kind"] == "Node" for obj in came):
        return LATE_ROOM
    return UNKNOWN if scenario.uniform else SIZES


def side(runs: list[tuple[Scenario, Run]]) -> JSON:
    """One side's groups scheduled and pods bound at the end, and what it left that
    no gang scheduler may (gang_scenarios.violations), by scenario."""
    scheduled = bound = 0
    broken: list[str] = []
    for scenario, run in runs:
        for group in per_group(scenario, run).values():
            scheduled += bool(group["scheduled"])
            bound += int(str(group["bound"]))
        broken.extend(f"scenario {scenario.index}: {v}" for v in violations(scenario, run))
    return {"ran": True, "groups_scheduled": scheduled, "pods_bound": bound, "violations": broken}


def main() -> None:
    parser = settled_parser(
        __doc__.splitlines()[0], out="gang-cases", decided="a step counts as decided", parallel=8
    )
    report("gang_parity", run, parser.parse_args())


if __name__ == "__main__":
    main()
