"""The DRA conformance run's generator and comparison, without a control plane."""

import json
from pathlib import Path

import pytest

from batchsched.api.dra import ADMIN_ACCESS_LABEL
from batchsched.config.load import default_config
from batchsched.sim.loader import load_files
from batchsched.sim.simulator import simulate

from bench import dra_scenarios
from bench.dra_scenarios import (
    DOMAIN,
    KINDS,
    PIN,
    PLAIN,
    SIDE_LABEL,
    PodAnswer,
    Scenario,
    case_yaml,
    compare,
    generate,
    valid_there,
)
from bench.gang_scenarios import KUBE, OURS
from bench.parity import scenario_rng

GPU0 = ("devices", "gpu", "gpu.example.com", "n0", "gpu-0")
GPU1 = ("devices", "gpu", "gpu.example.com", "n0", "gpu-1")


def test_the_same_seed_and_index_give_the_same_scenario() -> None:
    first = generate(scenario_rng(3, 7), 7)
    again = generate(scenario_rng(3, 7), 7)
    assert first == again
    assert first != generate(scenario_rng(3, 8), 8)


def test_each_side_has_its_own_drivers_classes_and_nodes() -> None:
    scenario = generate(scenario_rng(1, 3), 3)
    for side, other in ((KUBE, OURS), (OURS, KUBE)):
        objects = scenario.case_objects(side)
        text = json.dumps(objects)
        assert scenario.domain(other) not in text
        assert f'"gpu.{DOMAIN}"' not in text
        for obj in objects:
            if obj["kind"] == "Pod":
                assert obj["spec"]["nodeSelector"] == {SIDE_LABEL: scenario.namespace(side)}
                assert obj["spec"]["schedulerName"] == side.scheduler
            if obj["kind"] == "ResourceSlice" and "nodeName" in obj["spec"]:
                assert obj["spec"]["nodeName"].startswith(scenario.namespace(side))
            if obj["kind"] == "ResourceSlice" and "nodeSelector" in obj["spec"]:
                term = obj["spec"]["nodeSelector"]["nodeSelectorTerms"][0]
                assert {
                    "key": SIDE_LABEL,
                    "operator": "In",
                    "values": [scenario.namespace(side)],
                } in term["matchExpressions"]


def test_scenarios_cover_what_the_run_compares() -> None:
    said = " | ".join(
        " | ".join(generate(scenario_rng(1, index), index).traits) for index in range(200)
    )
    for expected in (
        "gang of",
        "template",
        "claim by name",
        "shares",
        "All GPUs",
        "firstAvailable",
        "matchAttribute",
        "distinctAttribute",
        "tolerates",
        "partitions",
        "GPU and NIC",
        "a VF",
        "a missing class",
    ):
        assert expected in said, expected


def _first_of(kind: str) -> Scenario:
    return next(s for s in (generate(scenario_rng(1, i), i) for i in range(200)) if s.kind == kind)


def test_every_kind_is_drawn() -> None:
    scenarios = [generate(scenario_rng(1, index), index) for index in range(200)]
    assert {s.kind for s in scenarios} == set(KINDS)


def test_a_kind_leaves_the_rest_of_the_scenario_as_the_plain_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawn = [generate(scenario_rng(1, index), index) for index in range(60)]
    monkeypatch.setattr(dra_scenarios, "KINDS", {PLAIN: (None, 1.0)})
    plain = [generate(scenario_rng(1, index), index) for index in range(60)]
    for scenario, base in zip(drawn, plain, strict=True):
        assert base.kind == PLAIN
        if scenario.kind == PLAIN:
            assert scenario == base
        else:
            # What the kind changed, in words after the plain scenario's.
            assert scenario.traits[: len(base.traits)] == base.traits
            assert len(scenario.traits) == len(base.traits) + 1
            assert {o["metadata"]["name"] for o in base.cluster} <= {
                o["metadata"]["name"] for o in scenario.cluster
            }


def test_per_device_node_selection_and_taint_rules_are_the_sides_own() -> None:
    for kind in ("per-device node selection", "DeviceTaintRule"):
        scenario = _first_of(kind)
        for side, other in ((KUBE, OURS), (OURS, KUBE)):
            objects = scenario.case_objects(side)
            assert scenario.domain(other) not in json.dumps(objects)
            for obj in objects:
                if obj["kind"] == "DeviceTaintRule":
                    assert obj["metadata"]["name"].startswith(scenario.namespace(side))
                    assert obj["spec"]["deviceSelector"]["driver"].endswith(scenario.domain(side))
                if obj["kind"] != "ResourceSlice" or not obj["spec"].get("perDeviceNodeSelection"):
                    continue
                for device in obj["spec"]["devices"]:
                    if "nodeName" in device:
                        assert device["nodeName"].startswith(scenario.namespace(side))
                    for term in (device.get("nodeSelector") or {}).get("nodeSelectorTerms", ()):
                        assert {
                            "key": SIDE_LABEL,
                            "operator": "In",
                            "values": [scenario.namespace(side)],
                        } in term["matchExpressions"]


def test_admin_access_labels_the_namespace_and_a_deleted_claim_is_shown_deleted() -> None:
    admin = _first_of("admin access")
    assert admin.namespace_object(OURS)["metadata"]["labels"] == {ADMIN_ACCESS_LABEL: "true"}
    assert admin.pinned({}).namespace_labels == admin.namespace_labels
    deleted = _first_of("claim being deleted")
    claims = {
        o["metadata"]["name"]: o for o in deleted.case_objects(OURS) if o["kind"] == "ResourceClaim"
    }
    for name in deleted.deleted:
        assert "deletionTimestamp" in claims[name]["metadata"]
        assert claims[name]["metadata"]["finalizers"]
    assert deleted.again().deleted == deleted.deleted


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_simulator_reads_every_object_of_each_kind(kind: str, tmp_path: Path) -> None:
    scenario = _first_of(kind)
    case = tmp_path / "case.yaml"
    case.write_text(case_yaml(scenario, seed=1, finding="none", kube={}, ours={}))
    result = simulate(load_files([str(case)]).objects, default_config())
    assert result.errors == []


@pytest.mark.parametrize("index", range(12))
def test_the_simulator_reads_every_object_of_a_scenario(index: int, tmp_path: Path) -> None:
    scenario = generate(scenario_rng(1, index), index)
    case = tmp_path / "case.yaml"
    case.write_text(case_yaml(scenario, seed=1, finding="none", kube={}, ours={}))
    result = simulate(load_files([str(case)]).objects, default_config())
    assert result.errors == []
    namespace = scenario.namespace(OURS)
    assert {f"{namespace}/{p}" for p in scenario.pods} <= set(result.cache.tasks)


def test_a_pinned_pod_keeps_its_requests_and_claims_and_asks_for_its_node() -> None:
    scenario = next(
        s for s in (generate(scenario_rng(1, i), i) for i in range(50)) if len(s.pods) > 1
    )
    answer = {p: PodAnswer("n1") for p in scenario.pods}
    for obj in scenario.pinned(answer).unit:
        if obj["kind"] != "Pod":
            continue
        resources = obj["spec"]["containers"][0]["resources"]
        assert resources["requests"] == {"cpu": "100m", f"{PIN}/n1": "1"}
        assert resources["limits"] == {f"{PIN}/n1": "1"}
        assert resources["claims"] == [{"name": "devices"}]
    assert scenario.pinned(answer).namespace(KUBE) != scenario.namespace(KUBE)


def test_answers_alike_differ_in_placement_in_nodes_or_in_devices() -> None:
    placed = {"p": PodAnswer("n0", (GPU0,))}
    assert compare(placed, {"p": PodAnswer("n0", (GPU0,))}).same
    assert "placed" in compare(placed, {"p": PodAnswer(None)}).difference
    elsewhere = compare(placed, {"p": PodAnswer("n1", (GPU0,))})
    assert elsewhere.nodes_differ and not elsewhere.same
    other = compare(placed, {"p": PodAnswer("n0", (GPU1,))})
    assert "devices" in other.difference and not other.nodes_differ


def test_a_gangs_members_are_interchangeable() -> None:
    kube = {"g-0": PodAnswer("n0", (GPU0,)), "g-1": PodAnswer("n0", (GPU1,))}
    ours = {"g-0": PodAnswer("n0", (GPU1,)), "g-1": PodAnswer("n0", (GPU0,))}
    assert compare(kube, ours).same
    assert valid_there(ours, kube)
    assert not compare({"g-0": PodAnswer("n0"), "g-1": PodAnswer(None)}, ours).same


def test_nothing_placed_on_either_side_is_alike() -> None:
    assert compare({"p": PodAnswer(None, message="x")}, {"p": PodAnswer(None)}).same


def test_which_member_holds_a_device_several_nodes_reach_is_not_compared() -> None:
    """Seed 1, scenario 309: the gang's members took the all-nodes VFs in the order they
    were placed."""
    vf0 = ("devices", "vf", "nic.example.com", "cluster", "vf-0")
    vf1 = ("devices", "vf", "nic.example.com", "cluster", "vf-1")
    kube = {"g-0": PodAnswer("n0", (GPU0, vf0)), "g-1": PodAnswer("n1", (GPU1, vf1))}
    ours = {"g-0": PodAnswer("n0", (GPU0, vf1)), "g-1": PodAnswer("n1", (GPU1, vf0))}
    assert compare(kube, ours).same
    lone = compare({"p": PodAnswer("n0", (GPU0, vf0))}, {"p": PodAnswer("n0", (GPU0, vf1))})
    assert "devices" in lone.difference
    taken = {"g-0": PodAnswer("n0", (GPU0, vf0)), "g-1": PodAnswer("n1", (GPU0, vf1))}
    assert not compare(kube, taken).same
