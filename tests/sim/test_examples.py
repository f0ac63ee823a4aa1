"""Every example in examples/ gives the outcome its header comment promises."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from batchsched.cli import main

from .harness import EXAMPLES, simulate

BINPACK_SEED = str(EXAMPLES / "config" / "binpack-seed.yaml")


def test_tencent_race(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "tencent-race.yaml")
    assert run.code == 0
    assert run.bound() == {f"default/web-group-race1-{i}": "node-1" for i in range(5)}
    groups = run.podgroups
    assert groups["default/group1"] == {
        "namespace": "default",
        "name": "group1",
        "phase": "Running",
        "minMember": 5,
        "scheduled": 5,
    }
    assert (groups["default/group2"]["phase"], groups["default/group2"]["scheduled"]) == (
        "Inqueue",
        0,
    )
    for i in range(5):
        pod = run.pods[f"default/web-group-race2-{i}"]
        assert pod["group"] == "default/group2"
        assert pod["reason"].startswith("gang default/group2: ")
        assert pod["reason"].endswith("0/1 nodes are available: 1 Insufficient cpu.")
    node = run.nodes["node-1"]
    assert node["allocatable"]["cpu"] == 8
    assert node["requested"]["cpu"] == pytest.approx(5.9)
    assert node["requested"]["memory"] == 140 * 2**20
    assert run.report["summary"]["pods"] == 10
    assert run.report["summary"]["bound"] == 5


def test_anti_affinity(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "anti-affinity.yaml")
    assert run.code == 0
    bound = run.bound()
    assert sorted(bound) == [f"default/etcd-{i}" for i in range(3)]
    assert sorted(bound.values()) == ["node-a", "node-b", "node-c"]
    for i in range(4):
        assert run.pods[f"default/kafka-{i}"]["reason"] == (
            "gang default/kafka: room for 3 of 4; "
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
        )
    assert run.pods["default/etcd-debug"]["reason"] == (
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    )
    assert run.podgroups["default/kafka"]["scheduled"] == 0


def test_zone_spread(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "zone-spread.yaml")
    assert run.code == 0
    bound = run.bound()
    assert sorted(bound[f"default/train-{i}"] for i in range(6)) == [
        "node-a1",
        "node-a1",
        "node-b1",
        "node-b1",
        "node-c1",
        "node-c1",
    ]
    web = sorted(node for pod, node in bound.items() if pod.startswith("default/web-"))
    assert web == ["node-a1", "node-b1", "node-c1"]
    for i in range(6):
        assert run.pods[f"default/eval-{i}"]["reason"] == (
            "gang default/eval: room for 2 of 6; 0/5 nodes are available: "
            "2 node(s) didn't match pod topology spread constraints, 3 Insufficient cpu."
        )
    assert run.podgroups["default/eval"]["scheduled"] == 0


def test_kube_batch_tfjobs(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "kube-batch-tfjobs.yaml")
    assert run.code == 0
    first = "kubeflow/tfjob-gang-scheduling"
    second = "kubeflow/tfjob-gang-scheduling2"
    bound = run.bound()
    assert sorted(bound) == [f"{first}-ps-0", *(f"{first}-worker-{i}" for i in range(3))]
    # One GPU per node: the three workers are on three different nodes.
    assert len({bound[f"{first}-worker-{i}"] for i in range(3)}) == 3
    assert sum(n["requested"].get("nvidia.com/gpu", 0) for n in run.report["nodes"]) == 3
    assert run.podgroups[first]["phase"] == "Running"
    assert run.podgroups[first]["scheduled"] == 4
    assert run.podgroups[second]["scheduled"] == 0
    assert run.podgroups[second]["minMember"] == 3
    for name in ("ps-0", "worker-0", "worker-1"):
        pod = run.pods[f"{second}-{name}"]
        assert pod["node"] is None
        assert "Insufficient nvidia.com/gpu" in pod["reason"]


@pytest.mark.parametrize("config", [None, BINPACK_SEED], ids=["default-config", "seed-config"])
def test_binpack_tfjob(capsys: pytest.CaptureFixture[str], config: str | None) -> None:
    run = simulate(capsys, EXAMPLES / "binpack-tfjob.yaml", config=config)
    assert run.code == 0
    names = ["ps-0", *(f"worker-{i}" for i in range(4))]
    assert run.bound() == {f"default/tf-smoke-gpu-{n}": "gpu-node-a" for n in names}
    assert run.podgroups["default/tf-smoke-gpu"] == {
        "namespace": "default",
        "name": "tf-smoke-gpu",
        "phase": "Running",
        "minMember": 5,
        "scheduled": 5,
    }
    assert run.nodes["gpu-node-a"]["requested"]["nvidia.com/gpu"] == 4
    assert run.nodes["gpu-node-b"]["requested"]["nvidia.com/gpu"] == 0


def test_preemption(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "preemption.yaml")
    assert run.code == 0
    evictions = run.report["evictions"]
    assert len(evictions) == 2
    for eviction in evictions:
        assert run.pods[eviction["pod"]]["group"] == "default/nightly"
        assert (eviction["action"], eviction["preemptor"], eviction["at"]) == (
            "preempt",
            "default/train",
            120,
        )
    assert [run.pods[f"default/train-{i}"]["bound_at"] for i in range(4)] == [121] * 4
    for name in ("default/nightly", "default/train"):
        assert (run.podgroups[name]["phase"], run.podgroups[name]["scheduled"]) == ("Running", 4)
    assert run.report["summary"]["preempted"] == 2


def test_preemption_never(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    example = EXAMPLES / "preemption-never.yaml"
    run = simulate(capsys, example)
    assert run.code == 0
    assert run.report["evictions"] == []
    running = {"default/guarded", "default/nightly-0", "default/nightly-1"}
    assert set(run.bound()) == running
    waiting = ("default/urgent", "default/urgent-gang-0", "default/urgent-gang-1")
    assert all(run.pods[name]["reason"] for name in waiting)
    # The class's default policy: both would have made room.
    default = tmp_path / "default-policy.yaml"
    default.write_text(example.read_text().replace("preemptionPolicy: Never\n", ""))
    preempting = simulate(capsys, default)
    assert {e["pod"] for e in preempting.report["evictions"]} == running
    assert set(preempting.bound()) == set(waiting)


def test_local_volumes(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "local-volumes.yaml")
    assert run.code == 0
    assert run.bound() == {
        "default/filler": "node-b",
        "default/train-0": "node-a",
        "default/train-1": "node-c",
    }
    assert run.pods["default/indexer"]["reason"] == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't match PersistentVolume's node affinity."
    )


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Check = Callable[[Any], bool]


def optional(kind: type) -> Check:
    return lambda value: value is None or isinstance(value, kind)


# README's "Simulating your own YAML" (`-o json`): key -> check of the value, per section
# of the report.
POD_FIELDS: dict[str, Check] = {
    "namespace": lambda v: isinstance(v, str),
    "name": lambda v: isinstance(v, str),
    "node": optional(str),
    "group": optional(str),
    "reason": optional(str),
}
PODGROUP_FIELDS: dict[str, Check] = {
    "namespace": lambda v: isinstance(v, str),
    "name": lambda v: isinstance(v, str),
    "phase": lambda v: v in ("Pending", "Inqueue", "Running", "Completed", "Failed", "Unknown"),
    "minMember": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "scheduled": lambda v: isinstance(v, int) and not isinstance(v, bool),
}
NODE_FIELDS: dict[str, Check] = {
    "name": lambda v: isinstance(v, str),
    "allocatable": lambda v: isinstance(v, dict) and all(is_number(x) for x in v.values()),
    "requested": lambda v: isinstance(v, dict) and all(is_number(x) for x in v.values()),
}
SUMMARY_FIELDS: dict[str, Check] = {
    "pods": lambda v: isinstance(v, int),
    "bound": lambda v: isinstance(v, int),
    "sessions": lambda v: isinstance(v, int),
    "elapsed_seconds": is_number,
}


def test_indexed_job_gang(capsys: pytest.CaptureFixture[str]) -> None:
    run = simulate(capsys, EXAMPLES / "indexed-job-gang.yaml")
    assert run.code == 0
    train = "default/train-7d9fk-train-pgt-0-x2q4w"
    members = [key for key, pod in run.pods.items() if pod["group"] == train]
    assert len(members) == 4
    # The first three waited for the fourth; then all four in one decision.
    assert {run.pods[key]["bound_at"] for key in members} == {60.0}
    assert run.podgroups[train]["origin"] == (
        "gang minCount 4, Workload train-7d9fk/train-pgt-0 of Job train"
    )
    evaluation = "default/eval-m4t8s-eval-pgt-0-h6w2n"
    for pod in run.pods.values():
        if pod["group"] == evaluation:
            assert pod["node"] is None
            assert pod["reason"].startswith(f"gang {evaluation}: room for 2 of 3; ")
    assert run.podgroups[evaluation]["scheduled"] == 0
    assert main(["simulate", "-f", str(EXAMPLES / "indexed-job-gang.yaml")]) == 0
    table = capsys.readouterr().out
    assert "SCHEDULED/MIN  POLICY" in table
    assert "4/4            gang minCount 4, Workload train-7d9fk/train-pgt-0 of Job train" in table


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_json_shape(capsys: pytest.CaptureFixture[str], example: str) -> None:
    report = simulate(capsys, EXAMPLES / example).report
    assert {"pods", "podgroups", "nodes", "summary"} <= report.keys()
    assert report["pods"] and report["nodes"]
    for section, fields in (
        ("pods", POD_FIELDS),
        ("podgroups", PODGROUP_FIELDS),
        ("nodes", NODE_FIELDS),
    ):
        for entry in report[section]:
            assert fields.keys() <= entry.keys(), section
            bad = [key for key, check in fields.items() if not check(entry[key])]
            assert not bad, f"{section}: {entry}"
    summary = report["summary"]
    assert {k for k, check in SUMMARY_FIELDS.items() if not check(summary.get(k))} == set()
    assert summary["bound"] == sum(1 for p in report["pods"] if p["node"])
    assert summary["pods"] == len(report["pods"])
    for pod in report["pods"]:
        assert (pod["node"] is None) == (pod["reason"] is not None), pod
    for node in report["nodes"]:
        assert node["allocatable"].keys() == node["requested"].keys()


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", str(EXAMPLES / "tencent-race.yaml")]) == 0
    table = capsys.readouterr().out
    assert table.startswith("POD ")
    assert "default/group1  Running  5/5" in table
    assert "5/10 pods bound in " in table
