"""Volcano's own tests as a conformance suite: each file under
tests/conformance/volcano/<action>/ is one table case of Volcano v1.15.1's
pkg/scheduler/actions/*/*_test.go, its objects built as Volcano's test helpers build them,
its configuration the tiers and flags the test sets, and its expectation the test's own
assertion; under e2e/, a case of its e2e scheduling tests rebuilt (docs/conformance.md).
hack/volcano_tables.py writes them from Volcano's module. Each runs through
`batchsched simulate`."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import Run, simulate

CASES = Path(__file__).resolve().parents[1] / "conformance" / "volcano"

# Why a case fails today, as the defects it runs into in turn. A case leaves this table
# when its last defect is fixed: the marks are strict, so a fixed case fails until then.
QUEUE_PRIORITY = "a Volcano Queue's spec.priority is refused (Volcano reclaims from lower first)"
QUEUE_STATE = (
    "a Volcano Queue's status.state is not read (spec.state is), so a queue Volcano closed "
    "still reclaims"
)
# Where a case differs by a decision written in docs/drop-in.md.
GANG_CANNOT_START = (
    "decided (docs/drop-in.md): nothing is evicted for a gang that still cannot start"
)
RUNNING_WITHOUT_NODE = (
    "decided (docs/drop-in.md): a pod without spec.nodeName is pending, whatever its status.phase"
)
# A hard networkTopology is kept whatever the HyperNodes say (docs/topology.md).
TIER_NAME_MISSING = (
    "decided (docs/drop-in.md): a highestTierName no tier has keeps the group waiting, "
    "naming it; Volcano places the job as if no limit were stated"
)

FAILS: dict[str, tuple[str, ...]] = {
    "enqueue/when-podgroup-status-is-running": (RUNNING_WITHOUT_NODE,),
    "reclaim/reclaim-succeeds-for-second-task-when-first-task-has-preemptionp": (
        GANG_CANNOT_START,
    ),
    "allocate/network-topology-hard-network-topology-with-highesttiername-constrain-and-tasks-i": (
        TIER_NAME_MISSING,
    ),
}


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _cases() -> list[Any]:
    params = []
    for path in sorted(CASES.glob("*/*.yaml")):
        name = _name(path)
        why = FAILS.get(name)
        marks = [pytest.mark.xfail(strict=True, reason="; then ".join(why))] if why else []
        params.append(pytest.param(path, id=name, marks=marks))
    return params


def test_every_case_said_to_fail_is_there() -> None:
    """A renamed or removed scenario takes its entry out of FAILS with it."""
    assert set(FAILS) <= {_name(path) for path in CASES.glob("*/*.yaml")}


@pytest.mark.parametrize("path", _cases())
def test_volcano_case(path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    assert {"source", "test", "case", "config", "expect", "objects"} <= set(scenario)
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(scenario["objects"]))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(scenario["config"]))
    run = simulate(capsys, objects, config=str(config))
    assert run.code == 0, run.stderr
    placed = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        for o in scenario["objects"]
        if o["kind"] == "Pod" and o["spec"].get("nodeName")
    }
    _check(scenario["expect"], run, placed)


def _check(expect: Mapping[str, Any], run: Run, placed: set[str]) -> None:
    """Volcano's CheckAll, on what the simulator reports: the binds it made (pods that
    had no node), the pods it evicted, the node each pipelined job's pods wait for
    (nominated, or bound once room was freed), and the PodGroups' phases."""
    binds = {key: node for key, node in run.bound().items() if key not in placed}
    if "binds" in expect:
        assert binds == expect["binds"]
    if "bindCount" in expect:
        assert len(binds) == expect["bindCount"]
    evicted = sorted(e["pod"] for e in run.report["evictions"])
    if "evicted" in expect:
        assert evicted == expect["evicted"]
    if "evictCount" in expect:
        assert len(evicted) == expect["evictCount"]
    for job, nodes in expect.get("pipelined", {}).items():
        waiting = [
            pod.get("nominated_node") or pod["node"]
            for key, pod in run.pods.items()
            if pod["group"] == job and key not in placed
        ]
        assert [n for n in waiting if n], f"{job}: nothing pipelined"
        assert all(n in nodes for n in waiting if n), f"{job}: pipelined to {waiting}"
    for job, phase in expect.get("phases", {}).items():
        assert run.podgroups[job]["phase"] == phase, job
    # Volcano's e2e waits (at least so many of a job's pods running, or pending) and its
    # checks of where they run.
    for job, count in expect.get("ready", {}).items():
        assert sum(bool(p["node"]) for p in run.pods.values() if p["group"] == job) >= count, job
    for job, count in expect.get("pending", {}).items():
        assert sum(not p["node"] for p in run.pods.values() if p["group"] == job) >= count, job
    for job, nodes in expect.get("onNodes", {}).items():
        assert {p["node"] for p in run.pods.values() if p["group"] == job and p["node"]} <= set(
            nodes
        ), job
    for job in expect.get("sameNode", []):
        assert len({p["node"] for p in run.pods.values() if p["group"] == job}) == 1, job
    for job in expect.get("apart", []):
        on = [p["node"] for p in run.pods.values() if p["group"] == job]
        assert len(set(on)) == len(on), job
    for job, counts in expect.get("taskStatus", {}).items():
        members = [pod for key, pod in run.pods.items() if pod["group"] == job]
        for status, count in counts.items():
            shown = BOUND if status in BOUND_STATUSES else status
            assert sum(_status(pod) == shown for pod in members) == count, (job, status)


# Volcano's task statuses of a pod given a node, which the simulator shows as bound.
BOUND_STATUSES = ("Allocated", "Binding", "Bound", "Running")
BOUND = "bound"


def _status(pod: Mapping[str, Any]) -> str:
    """A pod's task status as far as the simulator shows it."""
    if pod["node"]:
        return BOUND
    return "Pipelined" if pod.get("nominated_node") else "Pending"
