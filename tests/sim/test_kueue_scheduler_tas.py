"""The placement cases of Kueue v0.17.0's TestScheduleForTAS
(pkg/scheduler/scheduler_tas_test.go), translated case by case and run through
`batchsched simulate`: each case's nodes, the pods already on them (its non-TAS pods and
its admitted workloads' pods), and its workload's pod sets as the pods Kueue admits (the
topology request as Kueue's annotations, the flavor's node label and tolerations as the
node selector and tolerations Kueue injects), one gang. The expectation is the case's
own: the pods of each pod set per node of its topology assignment
(wantNewAssignments), or none placed (wantInadmissibleLeft). Likewise the cases of
TestScheduleForTASPreemption where a workload preempts lower-priority ones in its
ClusterQueue to fit its topology: its admitted workloads are running gangs of their
priority, and the expectation is the workloads Kueue evicts (wantWorkloads' Evicted
condition) and those left waiting (wantLeft). The cases about quota,
flavors, admission checks, ProvisioningRequests, unhealthy-node replacement and partial
admission are Kueue's own mechanics and are listed in docs/conformance.md ("Kueue's
topology tables") with why they are not translated."""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import simulate
from tests.support.objects import node, pod, pod_group, priority_class

HOST = "kubernetes.io/hostname"
RACK = "cloud.provider.com/rack"
BLOCK = "cloud.com/topology-block"
CUSTOM = "cloud.com/custom-level"
PODSET = "kueue.x-k8s.io/podset"
# The TAS ResourceFlavor's node label, which Kueue injects as the pods' node selector.
FLAVOR = {"tas-node": "true"}
# Kueue's Topology objects, as our tiers (finest first).
SINGLE = (HOST,)
TWO = (HOST, RACK)


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, str]
    # Kueue's pod-set annotations (the topology request), without the prefix.
    ask: Mapping[str, str] = field(default_factory=dict)
    # Through a TAS flavor: its node label as the pods' node selector.
    tas: bool = True
    spec: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    nodes: Sequence[dict[str, Any]]
    tiers: Sequence[str]
    podsets: Sequence[PodSet]
    # Pod set -> pods per node; None: the workload is not admitted.
    want: Mapping[str, Mapping[str, int]] | None
    # Pods already bound: (name, node, requests).
    placed: Sequence[tuple[str, str, Mapping[str, str]]] = ()


def tas_node(name: str, cpu: str, memory: str = "1Gi", pods: str = "10", **labels: str) -> Any:
    return node(name, cpu=cpu, memory=memory, extra={"pods": pods}, labels={**FLAVOR, **labels})


def required(key: str) -> dict[str, str]:
    return {"podset-required-topology": key}


def preferred(key: str) -> dict[str, str]:
    return {"podset-preferred-topology": key}


SINGLE_NODE = [tas_node("x1", "1")]
ZERO_CAPACITY_INSTANCE = [
    tas_node("x1", "0", **{RACK: "r1"}),
    tas_node("x2", "1", **{RACK: "r1"}),
    tas_node("x3", "1", **{RACK: "r1"}),
]
TWO_HOSTS_IN_A_RACK = [tas_node(n, "8", **{RACK: "r1"}) for n in ("x1", "y1")]
CPU = "cpu"

CASES: dict[str, Case] = {
    "initial scheduling; TAS uses podspec memory for placement": Case(
        [tas_node("x1", "4", "2Gi"), tas_node("x2", "4", "2Gi")],
        SINGLE,
        [PodSet("one", 2, {CPU: "1", "memory": "1536Mi"}, preferred(HOST))],
        {"one": {"x1": 1, "x2": 1}},
    ),
    "workload with a PodSet of size zero": Case(
        [tas_node("x1", "3", **{RACK: "r1"})],
        TWO,
        [
            PodSet("launcher", 1, {CPU: "1"}, preferred(HOST)),
            PodSet("worker", 0, {CPU: "1"}, preferred(HOST)),
        ],
        {"launcher": {"x1": 1}},
    ),
    "workload with mixed PodSets (requiring TAS and not)": Case(
        SINGLE_NODE,
        SINGLE,
        [
            PodSet("launcher", 1, {CPU: "500m"}, tas=False),
            PodSet("worker", 1, {CPU: "500m"}, required(HOST)),
        ],
        {"launcher": {"x1": 1}, "worker": {"x1": 1}},
    ),
    "workload required TAS gets scheduled": Case(
        SINGLE_NODE, SINGLE, [PodSet("one", 1, {CPU: "1"}, required(HOST))], {"one": {"x1": 1}}
    ),
    "workload requests topology level which is not present in topology": Case(
        SINGLE_NODE,
        SINGLE,
        [PodSet("one", 1, {CPU: "1"}, required("cloud.com/non-existing"))],
        None,
    ),
    "workload requests topology level which is only present in second flavor": Case(
        [node("x1", cpu="1", labels={**FLAVOR, CUSTOM: "x1"})],
        (CUSTOM,),
        [PodSet("one", 1, {CPU: "1"}, required(CUSTOM))],
        {"one": {"x1": 1}},
    ),
    "workload does not get scheduled as it does not fit within the node capacity": Case(
        SINGLE_NODE, SINGLE, [PodSet("one", 2, {CPU: "1"}, required(HOST))], None
    ),
    "workload does not get scheduled as the node capacity is already used by another TAS "
    "workload": Case(
        SINGLE_NODE,
        SINGLE,
        [PodSet("one", 1, {CPU: "1"}, required(HOST))],
        None,
        placed=[("bar-admitted-0", "x1", {CPU: "1"})],
    ),
    "workload does not get scheduled as the node capacity is already used by a non-TAS pod": Case(
        SINGLE_NODE,
        SINGLE,
        [PodSet("one", 1, {CPU: "1"}, required(HOST))],
        None,
        placed=[("test-pending", "x1", {CPU: "600m"})],
    ),
    "workload gets admitted next to already admitted workload, multiple resources used": Case(
        SINGLE_NODE,
        SINGLE,
        [PodSet("one", 1, {CPU: "500m", "memory": "500Mi"}, required(HOST))],
        {"one": {"x1": 1}},
        placed=[("bar-admitted-0", "x1", {CPU: "500m", "memory": "500Mi"})],
    ),
    "workload with multiple PodSets requesting the same TAS flavor; multiple levels": Case(
        [tas_node(n, "3", **{RACK: "r1"}) for n in ("x1", "y1")],
        TWO,
        [
            PodSet("launcher", 1, {CPU: "1"}, preferred(HOST)),
            PodSet("worker", 1, {CPU: "7"}, preferred(HOST)),
        ],
        None,
    ),
    "scheduling workload with multiple PodSets requesting TAS flavor and will succeed": Case(
        TWO_HOSTS_IN_A_RACK,
        TWO,
        [
            PodSet("launcher", 1, {CPU: "1"}, required(HOST)),
            PodSet("worker", 15, {CPU: "1"}, preferred(HOST)),
        ],
        {"launcher": {"x1": 1}, "worker": {"x1": 7, "y1": 8}},
    ),
    "scheduling workload with multiple PodSets requesting higher level topology": Case(
        TWO_HOSTS_IN_A_RACK,
        TWO,
        [
            PodSet("launcher", 1, {CPU: "1"}, required(RACK)),
            PodSet("worker", 15, {CPU: "1"}, required(RACK)),
        ],
        {"launcher": {"x1": 1}, "worker": {"x1": 7, "y1": 8}},
    ),
    "scheduling workload on a tainted node when the toleration is on ResourceFlavor": Case(
        [
            node(
                "x1",
                cpu="1",
                labels=FLAVOR,
                taints=[{"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}],
            )
        ],
        SINGLE,
        [
            PodSet(
                "one",
                1,
                {CPU: "1"},
                preferred(HOST),
                spec={"tolerations": [{"key": "example.com/gpu", "operator": "Exists"}]},
            )
        ],
        {"one": {"x1": 1}},
    ),
    "workload does not get scheduled as the node capacity (.status.allocatable['pods']) is "
    "already used by non-TAS and TAS workloads": Case(
        [tas_node("x1", "1000m", pods="3")],
        SINGLE,
        [PodSet("one", 1, {CPU: "300m"}, required(HOST))],
        None,
        placed=[
            ("test-running", "x1", {CPU: "300m"}),
            ("bar-admitted-0", "x1", {CPU: "150m"}),
            ("bar-admitted-1", "x1", {CPU: "150m"}),
        ],
    ),
    "workload with zero value request gets scheduled": Case(
        SINGLE_NODE, SINGLE, [PodSet("one", 1, {CPU: "0", "memory": "10Mi"})], {"one": {"x1": 1}}
    ),
    "does not admit workload when node does not match required affinity": Case(
        SINGLE_NODE,
        SINGLE,
        [
            PodSet(
                "one",
                1,
                {CPU: "1"},
                preferred(HOST),
                spec={"affinity": {"nodeAffinity": {"required": ("unused-key", "value")}}},
            )
        ],
        None,
    ),
    "admits workload when node matches required affinity": Case(
        [tas_node("x1", "1", **{"expected-label": "expected-value"})],
        SINGLE,
        [
            PodSet(
                "one",
                1,
                {CPU: "1"},
                preferred(HOST),
                spec={
                    "affinity": {"nodeAffinity": {"required": ("expected-label", "expected-value")}}
                },
            )
        ],
        {"one": {"x1": 1}},
    ),
    "admits workload when nodes are partially empty; unconstrained": Case(
        ZERO_CAPACITY_INSTANCE,
        TWO,
        [PodSet("one", 2, {CPU: "1"}, {"podset-unconstrained-topology": "true"})],
        {"one": {"x2": 1, "x3": 1}},
    ),
    "admits workload when nodes are partially empty; preferred": Case(
        ZERO_CAPACITY_INSTANCE,
        TWO,
        [PodSet("one", 2, {CPU: "1"}, preferred(RACK))],
        {"one": {"x2": 1, "x3": 1}},
    ),
    "admits workload when nodes are partially empty; required": Case(
        ZERO_CAPACITY_INSTANCE,
        TWO,
        [PodSet("one", 2, {CPU: "1"}, required(RACK))],
        {"one": {"x2": 1, "x3": 1}},
    ),
}


def spec_of(podset: PodSet) -> dict[str, Any]:
    """The pod spec Kueue leaves: the flavor's node selector, and the pod set's own
    tolerations and required node affinity (one term: key In [value])."""
    spec: dict[str, Any] = {"nodeSelector": dict(FLAVOR)} if podset.tas else {}
    if "tolerations" in podset.spec:
        spec["tolerations"] = podset.spec["tolerations"]
    if "affinity" in podset.spec:
        key, value = podset.spec["affinity"]["nodeAffinity"]["required"]
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return spec


def objects_of(case: Case) -> list[dict[str, Any]]:
    objects = [*case.nodes]
    objects += [
        pod(name, dict(requests), node_name=host, phase="Running", scheduler="default-scheduler")
        for name, host, requests in case.placed
    ]
    objects.append(pod_group("foo", sum(p.count for p in case.podsets)))
    for podset in case.podsets:
        notes = {f"kueue.x-k8s.io/{key}": value for key, value in podset.ask.items()}
        objects += [
            pod(
                f"{podset.name}-{i:02d}",
                dict(podset.requests),
                group="foo",
                labels={PODSET: podset.name},
                annotations=notes,
                spec=spec_of(podset),
            )
            for i in range(podset.count)
        ]
    return objects


@pytest.mark.parametrize("name", list(CASES))
def test_schedule_for_tas(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    case = CASES[name]
    objects = objects_of(case)
    (tmp_path / "input.yaml").write_text(yaml.safe_dump_all(objects))
    tiers = [{"name": key, "nodeLabel": key} for key in case.tiers]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"topology": {"tiers": tiers}}))
    run = simulate(capsys, tmp_path / "input.yaml", config=str(tmp_path / "config.yaml"))
    assert run.code == 0, run.stderr
    bound = run.bound()
    members = {
        f"default/{o['metadata']['name']}": o["metadata"]["labels"][PODSET]
        for o in objects
        if o["kind"] == "Pod" and PODSET in o["metadata"].get("labels", {})
    }
    if case.want is None:
        assert not [key for key in members if key in bound]
        return
    got = {
        podset: dict(Counter(bound[key] for key, name in members.items() if name == podset))
        for podset in {*members.values()}
    }
    assert got == case.want


@dataclass(frozen=True)
class Workload:
    name: str
    priority: int
    podset: PodSet
    # Admitted: the node its pods run on.
    on: str | None = None


@dataclass(frozen=True)
class PreemptCase:
    nodes: Sequence[dict[str, Any]]
    workloads: Sequence[Workload]
    evicted: set[str]
    # Workloads left waiting once the evictions are made.
    waiting: set[str] = field(default_factory=set)


def admitted(name: str, priority: int, on: str, **requests: str) -> Workload:
    return Workload(name, priority, PodSet("one", 1, requests, required(HOST)), on)


PREEMPTION_NODE = tas_node("x1", "5", "5Gi")
TWO_NODES = [tas_node(n, "5", "5Gi") for n in ("x1", "y1")]
PREEMPTION: dict[str, PreemptCase] = {
    "preemption; TAS uses podspec memory for fit": PreemptCase(
        [PREEMPTION_NODE],
        [
            Workload("foo", 3, PodSet("one", 1, {CPU: "1", "memory": "4Gi"}, preferred(HOST))),
            admitted("low-priority-admitted", 1, "x1", cpu="1", memory="2Gi"),
        ],
        {"low-priority-admitted"},
    ),
    "only low priority workload is preempted": PreemptCase(
        [PREEMPTION_NODE],
        [
            Workload("foo", 3, PodSet("one", 1, {CPU: "2"}, preferred(HOST))),
            admitted("low-priority-admitted", 1, "x1", cpu="5"),
        ],
        {"low-priority-admitted"},
    ),
    "With pods count usage pressure on nodes: only low priority workload is preempted": (
        PreemptCase(
            [tas_node("x1", "5", "5Gi", pods="1")],
            [
                Workload("high-priority-waiting", 3, PodSet("one", 1, {CPU: "2"}, preferred(HOST))),
                admitted("low-priority-admitted", 1, "x1", cpu="5"),
            ],
            {"low-priority-admitted"},
        )
    ),
    "low priority workload is preempted, mid-priority workload survives": PreemptCase(
        [PREEMPTION_NODE],
        [
            Workload("foo", 3, PodSet("one", 1, {CPU: "2"}, preferred(HOST))),
            admitted("mid-priority-admitted", 2, "x1", cpu="2"),
            admitted("low-priority-admitted", 1, "x1", cpu="2"),
        ],
        {"low-priority-admitted"},
    ),
    "low priority workload is preempted even though there is enough capacity, but "
    "fragmented": PreemptCase(
        TWO_NODES,
        [
            Workload("foo", 3, PodSet("one", 2, {CPU: "1"}, required(HOST))),
            admitted("mid-priority-admitted", 2, "x1", cpu="4"),
            admitted("low-priority-admitted", 1, "y1", cpu="4"),
        ],
        {"low-priority-admitted"},
    ),
    "workload with equal priority awaits for other workloads to complete": PreemptCase(
        [PREEMPTION_NODE],
        [
            Workload(
                "low-priority-which-would-fit", 1, PodSet("one", 1, {CPU: "1"}, required(HOST))
            ),
            Workload("mid-priority-waiting", 2, PodSet("one", 2, {CPU: "1"}, required(HOST))),
            admitted("mid-priority-admitted", 2, "x1", cpu="4"),
        ],
        set(),
        {"low-priority-which-would-fit", "mid-priority-waiting"},
    ),
}


def workload_objects(workload: Workload) -> list[dict[str, Any]]:
    """A workload's gang: admitted ones running from the start, the others created a
    minute later, as Kueue's test admits them before it schedules the rest."""
    created = 0 if workload.on else 60
    podset = workload.podset
    notes = {f"kueue.x-k8s.io/{key}": value for key, value in podset.ask.items()}
    spec = {"priorityClassName": f"p{workload.priority}", **spec_of(podset)}
    group = pod_group(
        workload.name, podset.count, created=created, priorityClassName=f"p{workload.priority}"
    )
    return [
        group,
        *(
            pod(
                f"{workload.name}-{i}",
                dict(podset.requests),
                group=workload.name,
                labels={PODSET: podset.name},
                annotations=notes,
                node_name=workload.on,
                phase="Running" if workload.on else None,
                created=created,
                spec=spec,
            )
            for i in range(podset.count)
        ),
    ]


# Where a case differs by a decision (docs/conformance.md, "Kueue's topology tables").
NO_HEAD_OF_LINE_BLOCKING = (
    "decided (README, 'No head-of-line blocking, no starvation'): a job that fits now "
    "starts while a larger one waits, which holds room only past starvationThreshold; "
    "Kueue keeps the capacity for the workload ahead in its queue"
)
PREEMPTION_FAILS = {
    "workload with equal priority awaits for other workloads to complete": (
        NO_HEAD_OF_LINE_BLOCKING
    ),
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[pytest.mark.xfail(strict=True, reason=PREEMPTION_FAILS[name])]
            if name in PREEMPTION_FAILS
            else [],
        )
        for name in PREEMPTION
    ],
)
def test_schedule_for_tas_preemption(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    case = PREEMPTION[name]
    priorities = {w.priority for w in case.workloads}
    objects = [*case.nodes, *(priority_class(f"p{p}", p) for p in sorted(priorities))]
    for workload in case.workloads:
        objects += workload_objects(workload)
    (tmp_path / "input.yaml").write_text(yaml.safe_dump_all(objects))
    tiers = [{"name": HOST, "nodeLabel": HOST}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"topology": {"tiers": tiers}}))
    run = simulate(capsys, tmp_path / "input.yaml", config=str(tmp_path / "config.yaml"))
    assert run.code == 0, run.stderr
    evicted = {e["pod"].split("/")[1].rsplit("-", 1)[0] for e in run.report["evictions"]}
    assert evicted == case.evicted
    bound = run.bound()
    waiting = {
        w.name
        for w in case.workloads
        if not w.on and not any(key.startswith(f"default/{w.name}-") for key in bound)
    }
    assert waiting == case.waiting
