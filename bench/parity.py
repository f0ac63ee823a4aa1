"""Conformance of batchsched's constraint filters with kube-scheduler, on random scenarios.

Usage: python -m bench.parity [--scenarios 500] [--seed 1] [--out parity-cases]
                              [--only INDEX] [--settle 0.2]
Needs KUBEBUILDER_ASSETS holding etcd, kube-apiserver and kube-scheduler:
    bash hack/envtest.sh && export KUBEBUILDER_ASSETS=$(bash hack/kube-scheduler.sh)
Prints one JSON object; see docs/conformance.md.

Each scenario (bench/parity_scenarios.py generates it from the seed and its index,
so `--only` replays one) is decided by batchsched's simulator, then created on a real
control plane where kube-scheduler decides it: the nodes, the storage objects, the
pods already bound (by spec.nodeName) and the incoming pod. When batchsched places the
pod, the pod is first created pinned to batchsched's node, and a pod kube-scheduler
binds there settles both questions; otherwise, or when it refuses, the pod is created
free. The scenario's objects are deleted before the next one. A disagreement is run
again with a longer wait for kube-scheduler's informers, and is kept (written to --out
as a case `batchsched simulate -f` reads) only if it repeats.
"""

import argparse
import json
import random
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from bench.parity_scenarios import (
    KUBE_SCHEDULER,
    SELECTED_NODE,
    Answer,
    Ours,
    Scenario,
    Theirs,
    batchsched_verdict,
    case_yaml,
    disagreement,
    generate,
    kube_verdict,
    probe_scenario,
)
from tests.support import (
    ControlPlane,
    ControlPlaneError,
    Kube,
    component_binary,
    find_assets,
)
from tests.support.kube import JSON, condition

SCHEDULER_BINARY = "kube-scheduler"
# kube-scheduler's own configuration: every node is scored (the pinned question needs
# no score, but the free answer is then the best node, as batchsched would pick it).
SCHEDULER_CONFIG: JSON = {
    "percentageOfNodesToScore": 100,
    "profiles": [{"schedulerName": KUBE_SCHEDULER}],
}
DECISION_TIMEOUT = 30.0
T = TypeVar("T")
# How much longer than --settle a disagreement is given when it is run again.
CONFIRM_FACTOR = 10


def scenario_rng(seed: int, index: int) -> random.Random:
    """Each scenario's own generator, so that one can be replayed without the rest."""
    return random.Random(f"{seed}/{index}")


class KubeSide:
    """Creates scenarios on the control plane and reads kube-scheduler's decisions."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def setup(self, scenario: Scenario, *, settle: float) -> None:
        for namespace in scenario.namespaces:
            self.kube.post("/api/v1/namespaces", namespace).expect(201, 409)
        for node in scenario.nodes:
            create_node(self.kube, node)
        for obj in scenario.storage:
            self.kube.create(obj)
            # The API server ignores both on create: a claim's status goes through
            # /status, and a claim is put in deletion by deleting it (its finalizer holds it).
            if "status" in obj:
                self.kube.patch(f"{self._path(obj)}/status", {"status": obj["status"]}).expect(200)
            if "deletionTimestamp" in obj["metadata"]:
                self.kube.delete(self._path(obj)).expect(200)
        for pod in scenario.existing:
            self.kube.post(_pods(pod), pod).expect(201)
        # kube-scheduler learns of these through its informers, a moment later.
        time.sleep(settle)

    def ask(self, scenario: Scenario, pin: str | None) -> Answer:
        pod = scenario.pod(KUBE_SCHEDULER, pin=pin)
        self.kube.post(_pods(pod), pod).expect(201)
        path = f"{_pods(pod)}/{pod['metadata']['name']}"
        waiting = scenario.waiting_claims()
        deadline = time.monotonic() + DECISION_TIMEOUT
        while time.monotonic() < deadline:
            found = self.kube.get(path).expect(200)
            node = found["spec"].get("nodeName")
            if node:
                return Answer(node)
            scheduled = condition(found, "PodScheduled")
            if scheduled is not None and scheduled["reason"] == "Unschedulable":
                self.kube.delete(path, grace_period_seconds=0).expect(200, 404)
                return Answer(None, scheduled.get("message", ""))
            if waiting:
                decided = self._claims_decided(pod, waiting, pin)
                if decided is not None:
                    return decided
            time.sleep(0.02)
        raise TimeoutError(f"kube-scheduler decided nothing about {path} in {DECISION_TIMEOUT}s")

    def _claims_decided(self, pod: JSON, waiting: list[str], pin: str | None) -> Answer | None:
        """Where kube-scheduler placed a pod whose claims wait for it, once it has written
        that down for every one of them in PreBind: a volume it binds gets a claimRef with
        the claim's uid, a claim to provision names the node (selected-node). The node is
        the pinned one, or the selected one; with neither, only the volumes say where."""
        namespace = pod["metadata"]["namespace"]
        volumes = {}
        node = pin
        uids = {}
        for name in waiting:
            claim = self.kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}")
            meta = claim.expect(200)["metadata"]
            selected = (meta.get("annotations") or {}).get(SELECTED_NODE)
            if selected:
                volumes[name] = ""
                node = node or selected
            uids[meta["uid"]] = name
        for volume in self.kube.get("/api/v1/persistentvolumes").expect(200)["items"]:
            bound = uids.get((volume["spec"].get("claimRef") or {}).get("uid"))
            if bound is not None:
                volumes[bound] = volume["metadata"]["name"]
                node = node or f"a node volume {volumes[bound]} reaches"
        if node is None or len(volumes) < len(waiting):
            return None
        return Answer(node, volumes=tuple((name, volumes[name]) for name in waiting))

    def teardown(self, scenario: Scenario) -> None:
        for namespace in scenario.namespaces:
            path = f"/api/v1/namespaces/{namespace['metadata']['name']}/pods"
            self.kube.delete(path, grace_period_seconds=0).expect(200)
        for obj in reversed(scenario.storage):
            path = self._path(obj)
            # Claims and volumes carry protection finalizers that no controller here
            # takes off; without them, a delete removes the object at once.
            if obj["kind"] in ("PersistentVolumeClaim", "PersistentVolume"):
                self.kube.patch(path, {"metadata": {"finalizers": None}}).expect(200, 404)
            self.kube.delete(path, grace_period_seconds=0).expect(200, 404)
        for node in scenario.nodes:
            self.kube.delete(f"/api/v1/nodes/{node['metadata']['name']}").expect(200)

    def _path(self, obj: JSON) -> str:
        meta = obj["metadata"]
        return self.kube.resource_for(obj["apiVersion"], obj["kind"]).path(
            meta.get("namespace"), meta["name"]
        )

    def decide(self, scenario: Scenario, *, settle: float) -> tuple[Ours, Theirs]:
        ours = batchsched_verdict(scenario)
        self.setup(scenario, settle=settle)
        try:
            return ours, kube_verdict(ours, lambda pin: self.ask(scenario, pin))
        finally:
            self.teardown(scenario)


def create_node(kube: Kube, node: JSON) -> None:
    """Create a Ready node, as its kubelet and the node lifecycle controller would leave it."""
    kube.post("/api/v1/nodes", node).expect(201)
    # Created nodes keep no status: Ready and allocatable go through /status.
    path = f"/api/v1/nodes/{node['metadata']['name']}"
    kube.patch(f"{path}/status", {"status": node["status"]}).expect(200)
    # The TaintNodesByCondition admission plugin gives a new node the not-ready
    # taint, which no node lifecycle controller here would take off.
    taints = node.get("spec", {}).get("taints")
    kube.patch(path, {"spec": {"taints": taints}}).expect(200)


def _pods(pod: JSON) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"


def wait_until_scheduling(side: KubeSide) -> None:
    """Place one pod, so that the run starts once kube-scheduler's informers are synced."""
    probe = probe_scenario()
    side.setup(probe, settle=0)
    try:
        answer = side.ask(probe, None)
    finally:
        side.teardown(probe)
    if answer.node is None:
        raise ControlPlaneError(f"kube-scheduler cannot place a plain pod: {answer.message}")


def run(args: argparse.Namespace) -> JSON:
    assets = find_assets()
    binary = component_binary(assets, SCHEDULER_BINARY)
    started = time.monotonic()
    out = Path(args.out)
    indices = scenario_indices(args)
    agreed = checks = checks_passed = not_repeated = 0
    cases: list[str] = []
    with ControlPlane.start(assets) as plane:
        plane.start_scheduler(binary, SCHEDULER_CONFIG)
        side = KubeSide(plane.kube())
        wait_until_scheduling(side)
        for index in indices:
            scenario = generate(scenario_rng(args.seed, index), index)
            ours, theirs = side.decide(scenario, settle=args.settle)
            if disagreement(ours, theirs) is not None:
                ours, theirs = side.decide(scenario, settle=args.settle * CONFIRM_FACTOR)
                not_repeated += disagreement(ours, theirs) is None
            agreed += (ours.node is not None) == theirs.feasible
            finding = disagreement(ours, theirs)
            if ours.node is not None and theirs.feasible:
                checks += 1
                checks_passed += finding is None
            if finding is not None:
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"seed{args.seed}-scenario{index}.yaml"
                path.write_text(case_yaml(scenario, seed=args.seed, finding=finding))
                cases.append(str(path))
                print(f"scenario {index}: {finding} -> {path}", file=sys.stderr)
    total = len(indices)
    return {
        "scenarios": total,
        "seed": args.seed,
        "feasibility_agreement_pct": round(100 * agreed / total, 2) if total else None,
        # Pods both placed, and of those, the ones kube-scheduler also binds to
        # batchsched's node, giving the claims that wait for the pod the same volumes.
        "placement_checks": checks,
        "placement_checks_passed": checks_passed,
        "disagreements": len(cases),
        "cases": cases,
        # Disagreements that did not repeat with a longer wait: kube-scheduler had not
        # yet seen the whole scenario. Many of them mean --settle is too short.
        "not_repeated": not_repeated,
        "elapsed_seconds": round(time.monotonic() - started, 1),
    }


@dataclass(frozen=True)
class Scenarios(Generic[T]):
    """What a run of scenarios gave: the results of those done, the scenarios left out
    because a step was not answered in time (and why), and whether Ctrl-C or SIGTERM
    ended the run early."""

    results: list[T]
    timed_out: list[str]
    interrupted: bool


def each_scenario(
    pool: ThreadPoolExecutor, work: Callable[[int], T], indices: list[int]
) -> Scenarios[T]:
    """`work` on every scenario index, in `pool`, with progress on stderr. On Ctrl-C or
    SIGTERM the scenarios under way finish, the others are dropped, and the results
    cover those done."""
    # A run in the background ignores Ctrl-C: SIGTERM ends it as Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    futures = [pool.submit(work, index) for index in indices]
    results: list[T] = []
    timed_out: list[str] = []
    try:
        for done in as_completed(futures):
            try:
                results.append(done.result())
            except TimeoutError as error:
                # On a busy machine one step may outlast its timeout: that scenario is
                # left out, by name, rather than ending the run and its report.
                timed_out.append(str(error))
            print(f"{len(results)}/{len(indices)} scenarios", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        return Scenarios(results, timed_out, interrupted=True)
    return Scenarios(results, timed_out, interrupted=False)


def scenario_parser(
    description: str, *, out: str, settle: float, settle_help: str
) -> argparse.ArgumentParser:
    """The arguments of a conformance run of random scenarios."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--scenarios", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="index of the first scenario, so that a run can be split in parts: a scenario "
        "is the same whichever part runs it",
    )
    parser.add_argument("--out", default=out, help="where disagreements are written")
    parser.add_argument("--only", type=int, help="run this scenario index alone")
    parser.add_argument(
        "--indices", type=int, nargs="+", help="run these scenario indices (what a part left out)"
    )
    parser.add_argument("--settle", type=float, default=settle, help=settle_help)
    return parser


def scenario_indices(args: argparse.Namespace) -> list[int]:
    """The scenarios a run's arguments ask for: --only, --indices, or --scenarios from
    --first."""
    if args.only is not None:
        return [args.only]
    if args.indices is not None:
        return list(args.indices)
    return list(range(args.first, args.first + args.scenarios))


def report(name: str, run: Callable[[argparse.Namespace], JSON], args: argparse.Namespace) -> None:
    """Print the run's JSON, or exit with why the control plane could not run it."""
    try:
        print(json.dumps(run(args), indent=2))
    except ControlPlaneError as error:
        sys.exit(f"{name}: {error}")


def main() -> None:
    parser = scenario_parser(
        __doc__.splitlines()[0],
        out="parity-cases",
        settle=0.2,
        settle_help="seconds kube-scheduler is given to see a scenario's objects",
    )
    report("parity", run, parser.parse_args())


if __name__ == "__main__":
    main()
