"""Conformance of batchsched's DRA allocation with kube-scheduler's DynamicResources
plugin, on random scenarios.

Usage: python -m bench.dra_parity [--scenarios 500] [--seed 1] [--out dra-cases]
                                  [--only INDEX] [--settle 1.5] [--parallel 2] [--operator]
Needs KUBEBUILDER_ASSETS holding etcd, kube-apiserver, kube-scheduler and
kube-controller-manager:
    bash hack/envtest.sh && bash hack/kube-controller-manager.sh
    export KUBEBUILDER_ASSETS=$(bash hack/kube-scheduler.sh)
Prints one JSON object; see docs/conformance.md.

One control plane serves Kubernetes' PodGroups (GenericWorkload) beside
resource.k8s.io/v1; kube-controller-manager's resource-claim controller makes claims
from templates; kube-scheduler v1.36.3 runs with GangScheduling. Each scenario
(bench/dra_scenarios.py generates it from the seed and its index, so `--only` replays
one) is created twice, once per side, each on nodes and drivers of its own. The unit's
pods name kube-scheduler on one side; on the other, batchsched's side is either its
simulator deciding the objects read back from the API server once the controller has
made the pods' claims (the default), or `batchsched run` (`--operator`). A scheduler's
answer is read once it has answered a barrier pod and nothing has changed for --settle
seconds.

Per pod of the unit: placed or not; where both placed it on other nodes, each is asked
whether the other's answer is valid (the scenario again, each pod pinned to the node the
other chose, where it must get the same devices); the devices where both chose the same
node. A disagreement is run again with a longer wait and kept (written to --out as a
case `batchsched simulate -f` reads) only if it repeats.
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

from batchsched.api.dra import TAINT_RULE_API
from batchsched.config.load import default_config
from batchsched.sim.simulator import simulate

from bench.cluster import REPO, free_port
from bench.dra_scenarios import (
    SIDE_LABEL,
    Answer,
    PodAnswer,
    Result,
    Scenario,
    Verdict,
    case_yaml,
    compare,
    generate,
    valid_there,
)
from bench.e2e import start_operator
from bench.gang_parity import (
    POLL_SECONDS,
    SCHEDULER_CONFIG,
    operator_check,
    settled_parser,
    wait_synced,
)
from bench.gang_scenarios import (
    BARRIER,
    BARRIER_RESOURCE,
    GATES,
    KUBE,
    OURS,
    OWN,
    RUNTIME_CONFIG,
    SCHEDULER_GATES,
    Side,
)
from bench.parity import (
    SCHEDULER_BINARY,
    create_node,
    each_scenario,
    report,
    scenario_indices,
    scenario_rng,
)
from tests.support import ControlPlane, Kube, component_binary, find_assets
from tests.support.kube import JSON, condition
from tests.support.objects import load_manifests, pod

CONTROLLER_BINARY = "kube-controller-manager"
CONTROLLERS = ("resourceclaim-controller",)
DRA = "/apis/resource.k8s.io/v1"
PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{}/podgroups"
# How much longer than --settle a disagreement is given when it is run again.
CONFIRM_FACTOR = 3
# The longest the controller may take to make a pod's claims, or a scheduler to answer.
STEP_TIMEOUT = 60.0
# The gang run's control plane, serving DeviceTaintRules too (off by default in 1.36).
TAINT_RULES_GATE = {"DRADeviceTaintRules": True}
DRA_GATES = {**GATES, **TAINT_RULES_GATE}
DRA_SCHEDULER_GATES = {**SCHEDULER_GATES, **TAINT_RULES_GATE}
DRA_RUNTIME_CONFIG = {**RUNTIME_CONFIG, TAINT_RULE_API: True}
# Verdicts of a scenario.
SAME = "same"
ALTERNATIVES = "both valid"
DIFFERENT = "different"


class SideRunner:
    """Runs scenarios for one side on the control plane and reads its answers: from
    the API server, or (`simulated`) from batchsched's simulator on the objects read
    back from it."""

    def __init__(self, kube: Kube, side: Side, alive: Callable[[], None], simulated: bool) -> None:
        self.kube = kube
        self.side = side
        self.alive = alive
        self.simulated = simulated

    def run(self, scenario: Scenario, *, settle: float) -> Answer:
        try:
            self.create(scenario)
            if self.simulated:
                return self.simulate(scenario)
            self.settle(scenario, settle)
            return self.answer(scenario)
        finally:
            self.teardown(scenario)

    def create(self, scenario: Scenario) -> None:
        self.kube.post("/api/v1/namespaces", scenario.namespace_object(self.side)).expect(201, 409)
        for obj in scenario.cluster:
            found = scenario.for_side(obj, self.side)
            if found["kind"] == "Node":
                create_node(self.kube, found)
            else:
                self.kube.create(found)
        holders: dict[str, JSON] = {}
        for obj in scenario.existing:
            found = scenario.for_side(obj, self.side)
            if found["kind"] == "Pod":
                made = self.kube.create(found)
                claim = made["spec"]["resourceClaims"][0]["resourceClaimName"]
                holders[claim] = made
                continue
            status = found.pop("status")
            self.kube.create(found)
            holder = holders[found["metadata"]["name"]]["metadata"]
            status["allocation"]["allocationTimestamp"] = holder["creationTimestamp"]
            status["reservedFor"] = [
                {"resource": "pods", "name": holder["name"], "uid": holder["uid"]}
            ]
            path = self._path(found)
            self.kube.patch(f"{path}/status", {"status": status}).expect(200)
            self._delete_if_asked(scenario, found)
        for obj in scenario.unit:
            found = scenario.for_side(obj, self.side)
            self.kube.create(found)
            self._delete_if_asked(scenario, found)
        self._claims_made(scenario)

    def _delete_if_asked(self, scenario: Scenario, obj: JSON) -> None:
        """A claim the scenario deletes, at once: its finalizer keeps it, being deleted."""
        if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] in scenario.deleted:
            self.kube.delete(self._path(obj)).expect(200)

    def _claims_made(self, scenario: Scenario) -> None:
        """Until the resource-claim controller has made every claim of the unit's pods
        from their template (each pod's status names it)."""
        deadline = time.monotonic() + STEP_TIMEOUT
        for name in scenario.pods:
            path = f"/api/v1/namespaces/{scenario.namespace(self.side)}/pods/{name}"
            while True:
                found = self.kube.get(path).expect(200)
                if not _template_claims(found) or (found.get("status") or {}).get(
                    "resourceClaimStatuses"
                ):
                    break
                self._check(deadline, f"no claim was made for {path}")

    def _check(self, deadline: float, what: str) -> None:
        self.alive()
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(POLL_SECONDS)

    def settle(self, scenario: Scenario, settle: float) -> None:
        """Until the scheduler has answered a barrier pod created after the unit, and
        nothing in the namespace has changed for `settle` seconds."""
        namespace = scenario.namespace(self.side)
        fence = pod(BARRIER, scheduler=OWN)
        resources = {"requests": {BARRIER_RESOURCE: "1"}, "limits": {BARRIER_RESOURCE: "1"}}
        fence["spec"]["containers"][0]["resources"] = resources
        self.kube.create(scenario.for_side(fence, self.side))
        path = f"/api/v1/namespaces/{namespace}/pods/{BARRIER}"
        deadline = time.monotonic() + STEP_TIMEOUT
        while not condition(self.kube.get(path).expect(200), "PodScheduled"):
            self._check(deadline, f"{self.side.name} never answered {path}")
        seen, since = self._state(namespace), time.monotonic()
        while time.monotonic() - since < settle:
            self._check(deadline, f"{namespace} kept changing for {STEP_TIMEOUT:g}s")
            now = self._state(namespace)
            if now != seen:
                seen, since = now, time.monotonic()

    def _state(self, namespace: str) -> list[object]:
        pods = self.kube.get(f"/api/v1/namespaces/{namespace}/pods").expect(200)["items"]
        claims = self.kube.get(f"{DRA}/namespaces/{namespace}/resourceclaims").expect(200)
        return [
            *((p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods),
            *(
                (c["metadata"]["name"], (c.get("status") or {}).get("allocation"))
                for c in claims["items"]
            ),
        ]

    def answer(self, scenario: Scenario) -> Answer:
        """Per pod of the unit: its node and its claims' devices, read from the API."""
        namespace = scenario.namespace(self.side)
        found: Answer = {}
        for name in scenario.pods:
            obj = self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}").expect(200)
            node = obj["spec"].get("nodeName")
            message = str((condition(obj, "PodScheduled") or {}).get("message", ""))
            if not node:
                found[name] = PodAnswer(None, message=message)
                continue
            results: list[Result] = []
            for pod_claim, claim in _claim_names(obj).items():
                path = f"{DRA}/namespaces/{namespace}/resourceclaims/{claim}"
                allocation = (self.kube.get(path).expect(200).get("status") or {}).get(
                    "allocation"
                ) or {}
                for r in allocation.get("devices", {}).get("results", []):
                    results.append(self._result(scenario, pod_claim, r))
            found[name] = PodAnswer(
                scenario.neutral_node(self.side, node), tuple(sorted(results)), message
            )
        return found

    def _result(self, scenario: Scenario, pod_claim: str, r: JSON) -> Result:
        driver = scenario.neutral_driver(self.side, r["driver"])
        return (pod_claim, r["request"], driver, r["pool"], r["device"])

    def simulate(self, scenario: Scenario) -> Answer:
        """batchsched's simulator on this side's objects as the API server holds them."""
        objects = self.read_back(scenario)
        sim = simulate(objects, default_config())
        namespace = scenario.namespace(self.side)
        pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
        found: Answer = {}
        for name in scenario.pods:
            task = sim.cache.tasks[f"{namespace}/{name}"]
            if not task.node_name:
                found[name] = PodAnswer(None)
                continue
            results = []
            for pod_claim, claim in _claim_names(pods[name]).items():
                held = sim.cache.resource_claims[f"{namespace}/{claim}"].allocation
                for d in held.devices if held is not None else ():
                    r = {
                        "request": d.request,
                        "driver": d.driver,
                        "pool": d.pool,
                        "device": d.device,
                    }
                    results.append(self._result(scenario, pod_claim, r))
            found[name] = PodAnswer(
                scenario.neutral_node(self.side, task.node_name), tuple(sorted(results))
            )
        return found

    def read_back(self, scenario: Scenario) -> list[JSON]:
        """This side's namespace, nodes, classes and slices, and the namespace's pods,
        PodGroups, claims and templates, as listed."""
        namespace = scenario.namespace(self.side)
        domain = f".{scenario.domain(self.side)}"
        found: list[JSON] = [
            self.kube.get(f"/api/v1/namespaces/{namespace}").expect(200)
            | {"kind": "Namespace", "apiVersion": "v1"}
        ]
        nodes = self.kube.get("/api/v1/nodes", query={"labelSelector": f"{SIDE_LABEL}={namespace}"})
        found.extend(_items(nodes.expect(200), "v1", "Node"))
        for api, kind, plural in (
            ("resource.k8s.io/v1", "DeviceClass", "deviceclasses"),
            ("resource.k8s.io/v1", "ResourceSlice", "resourceslices"),
            (TAINT_RULE_API, "DeviceTaintRule", "devicetaintrules"),
        ):
            listed = _items(self.kube.get(f"/apis/{api}/{plural}").expect(200), api, kind)
            found.extend(o for o in listed if _of_domain(o, domain))
        for api, kind, path in (
            ("v1", "Pod", f"/api/v1/namespaces/{namespace}/pods"),
            ("scheduling.k8s.io/v1alpha2", "PodGroup", PODGROUPS.format(namespace)),
            ("resource.k8s.io/v1", "ResourceClaim", f"{DRA}/namespaces/{namespace}/resourceclaims"),
            (
                "resource.k8s.io/v1",
                "ResourceClaimTemplate",
                f"{DRA}/namespaces/{namespace}/resourceclaimtemplates",
            ),
        ):
            found.extend(_items(self.kube.get(path).expect(200), api, kind))
        return found

    def teardown(self, scenario: Scenario) -> None:
        namespace = scenario.namespace(self.side)
        self.kube.delete(f"/api/v1/namespaces/{namespace}/pods", grace_period_seconds=0).expect(200)
        for plural, base in (
            ("resourceclaims", f"{DRA}/namespaces/{namespace}"),
            ("resourceclaimtemplates", f"{DRA}/namespaces/{namespace}"),
            ("podgroups", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}"),
        ):
            for obj in self.kube.get(f"{base}/{plural}").expect(200)["items"]:
                path = f"{base}/{plural}/{obj['metadata']['name']}"
                # Protection finalizers no controller here takes off; a JSON patch names
                # only them (a merge patch of an allocated claim can be refused).
                if obj["metadata"].get("finalizers"):
                    remove = [{"op": "remove", "path": "/metadata/finalizers"}]
                    self.kube.request(
                        "PATCH", path, remove, content_type="application/json-patch+json"
                    ).expect(200, 404, 422)
                self.kube.delete(path).expect(200, 404)
        for obj in reversed(scenario.cluster):
            found = scenario.for_side(obj, self.side)
            self.kube.delete(self._path(found)).expect(200, 404)

    def _path(self, obj: JSON) -> str:
        meta = obj["metadata"]
        return self.kube.resource_for(obj["apiVersion"], obj["kind"]).path(
            meta.get("namespace"), meta["name"]
        )


def _items(listed: JSON, api: str, kind: str) -> list[JSON]:
    """A list's items, which carry no apiVersion or kind of their own."""
    return [{**item, "apiVersion": api, "kind": kind} for item in listed["items"]]


def _of_domain(obj: JSON, domain: str) -> bool:
    spec = obj["spec"]
    if obj["kind"] == "ResourceSlice":
        name = spec.get("driver")
    elif obj["kind"] == "DeviceTaintRule":
        name = spec["deviceSelector"].get("driver")
    else:
        name = obj["metadata"]["name"]
    return str(name).endswith(domain)


def _template_claims(obj: JSON) -> bool:
    return any("resourceClaimTemplateName" in c for c in obj["spec"].get("resourceClaims") or [])


def _claim_names(obj: JSON) -> dict[str, str]:
    """A pod's claims, by its own name for each: named, or made from a template."""
    made = {
        s["name"]: s.get("resourceClaimName")
        for s in (obj.get("status") or {}).get("resourceClaimStatuses") or []
    }
    found = {}
    for entry in obj["spec"].get("resourceClaims") or []:
        claim = entry.get("resourceClaimName") or made.get(entry["name"])
        if claim:
            found[entry["name"]] = claim
    return found


class Sides:
    """kube-scheduler's side and batchsched's, run at once."""

    def __init__(self, kube: SideRunner, ours: SideRunner, parallel: int) -> None:
        self.kube = kube
        self.ours = ours
        self.pool = ThreadPoolExecutor(parallel)

    def decide(self, first: Scenario, second: Scenario, settle: float) -> tuple[Answer, Answer]:
        """kube-scheduler on `first` and batchsched on `second`, at once."""
        kube = self.pool.submit(self.kube.run, first, settle=settle)
        return kube.result(), self.ours.run(second, settle=settle)


@dataclass(frozen=True)
class Outcome:
    """A scenario's answers and how they compare: SAME, ALTERNATIVES (both placed on
    other nodes, each valid for the other) or DIFFERENT (`finding` says how)."""

    scenario: Scenario
    kube: Answer
    ours: Answer
    verdict: str
    finding: str = ""
    went_away: bool = False


def scenario_result(sides: Sides, args: argparse.Namespace, index: int) -> Outcome:
    """One scenario on both sides, run again with a longer wait if they differ."""
    scenario = generate(scenario_rng(args.seed, index), index)
    found = judge(sides, scenario, args.settle)
    if found.verdict != DIFFERENT:
        return found
    again = judge(sides, scenario.again().again(), args.settle * CONFIRM_FACTOR)
    if again.verdict != DIFFERENT:
        return Outcome(scenario, found.kube, found.ours, again.verdict, went_away=True)
    return again


def judge(sides: Sides, scenario: Scenario, settle: float) -> Outcome:
    kube, ours = sides.decide(scenario, scenario, settle)
    verdict: Verdict = compare(kube, ours)
    if verdict.same:
        return Outcome(scenario, kube, ours, SAME)
    if not verdict.nodes_differ:
        return Outcome(scenario, kube, ours, DIFFERENT, verdict.difference)
    # Each scheduler asked about the other's nodes.
    kube_there, ours_there = sides.decide(scenario.pinned(ours), scenario.pinned(kube), settle)
    problems = []
    if not valid_there(kube_there, ours):
        problems.append(
            f"kube-scheduler, pinned to batchsched's nodes: {compare(kube_there, ours).difference}"
        )
    if not valid_there(ours_there, kube):
        problems.append(
            f"batchsched, pinned to kube-scheduler's nodes: {compare(kube, ours_there).difference}"
        )
    if not problems:
        return Outcome(scenario, kube, ours, ALTERNATIVES)
    return Outcome(scenario, kube, ours, DIFFERENT, f"{verdict.difference}; " + "; ".join(problems))


@contextlib.contextmanager
def schedulers(
    plane: ControlPlane, assets: Path, *, operator: bool, parallel: int
) -> Iterator[Sides]:
    """kube-scheduler with GangScheduling and kube-controller-manager's resource-claim
    controller on the plane, and with `operator` `batchsched run` (stopped on leaving)."""
    plane.start_controller_manager(
        component_binary(assets, CONTROLLER_BINARY), controllers=CONTROLLERS
    )
    plane.start_scheduler(
        component_binary(assets, SCHEDULER_BINARY),
        SCHEDULER_CONFIG,
        feature_gates=DRA_SCHEDULER_GATES,
    )
    kube = plane.kube()
    with tempfile.TemporaryDirectory() as scratch:
        process: subprocess.Popen[bytes] | None = None
        alive: Callable[[], None] = _always
        if operator:
            log = Path(scratch) / "operator.log"
            process = start_operator(plane.kubeconfig, log, free_port())
            alive = operator_check(process, log)
            wait_synced(log, alive, STEP_TIMEOUT)
        sides = Sides(
            SideRunner(kube, KUBE, _always, False),
            SideRunner(kube, OURS, alive, not operator),
            parallel,
        )
        try:
            yield sides
        finally:
            sides.pool.shutdown()
            if process is not None:
                process.terminate()
                process.wait(30)


def _always() -> None:
    """A side whose scheduler cannot be gone without the control plane."""


def start_plane(assets: Path) -> ControlPlane:
    return ControlPlane.start(
        assets,
        crds=load_manifests(REPO / "crds"),
        feature_gates=DRA_GATES,
        runtime_config=DRA_RUNTIME_CONFIG,
    )


def run(args: argparse.Namespace) -> JSON:
    assets = find_assets()
    started = time.monotonic()
    indices = scenario_indices(args)
    with (
        start_plane(assets) as plane,
        schedulers(plane, assets, operator=args.operator, parallel=args.parallel) as sides,
        ThreadPoolExecutor(args.parallel) as pool,
    ):
        done = each_scenario(pool, partial(scenario_result, sides, args), indices)
    results = sorted(done.results, key=lambda r: r.scenario.index)
    found = summary(args, results, Path(args.out), time.monotonic() - started)
    return {**found, "timed_out": done.timed_out, "interrupted": done.interrupted}


def summary(args: argparse.Namespace, results: list[Outcome], out: Path, seconds: float) -> JSON:
    verdicts: Counter[str] = Counter(r.verdict for r in results)
    kinds: dict[str, Counter[str]] = {}
    for r in results:
        counts = kinds.setdefault(r.scenario.kind, Counter())
        counts[r.verdict] += 1
        counts["pods"] += len(r.kube)
        counts["placed by kube-scheduler"] += sum(a.node is not None for a in r.kube.values())
    cases: list[str] = []
    pods = placed_kube = placed_ours = placed_alike = devices_compared = 0
    for r in results:
        pods += len(r.kube)
        placed_kube += sum(a.node is not None for a in r.kube.values())
        placed_ours += sum(a.node is not None for a in r.ours.values())
        placed_alike += sum((r.kube[p].node is None) == (r.ours[p].node is None) for p in r.kube)
        devices_compared += r.verdict == SAME and any(a.devices for a in r.kube.values())
        if r.verdict != DIFFERENT:
            continue
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"seed{args.seed}-scenario{r.scenario.index}.yaml"
        path.write_text(
            case_yaml(r.scenario, seed=args.seed, finding=r.finding, kube=r.kube, ours=r.ours)
        )
        cases.append(str(path))
        print(f"scenario {r.scenario.index}: {r.finding} -> {path}", file=sys.stderr)
    return {
        "scenarios": len(results),
        "seed": args.seed,
        "batchsched_side": "batchsched run" if args.operator else "simulator",
        "pods": pods,
        "pods_placed": {"kube_scheduler": placed_kube, "batchsched": placed_ours},
        # Pods both placed, or neither.
        "placed_agreement_pct": round(100 * placed_alike / pods, 2) if pods else None,
        # Scenarios alike (same nodes and devices), alike but for the node where more
        # than one is right (each valid for the other), and different.
        "verdicts": dict(verdicts),
        # The same per kind of scenario (bench/dra_scenarios.py, KINDS), with its pods.
        "by_kind": {k: dict(v) for k, v in sorted(kinds.items())},
        "devices_compared": devices_compared,
        "disagreements": len(cases),
        "cases": cases,
        "not_repeated": sum(r.went_away for r in results),
        "elapsed_seconds": round(seconds, 1),
    }


def main() -> None:
    parser = settled_parser(
        __doc__.splitlines()[0],
        out="dra-cases",
        decided="a scheduler's answer is read",
        parallel=2,
    )
    parser.add_argument(
        "--operator",
        action="store_true",
        help="batchsched's side is `batchsched run`, not its simulator",
    )
    report("dra_parity", run, parser.parse_args())


if __name__ == "__main__":
    main()
