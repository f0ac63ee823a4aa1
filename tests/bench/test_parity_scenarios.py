"""The conformance run's generator and comparison, without a control plane."""

import random
from pathlib import Path
from typing import Any

import pytest

from batchsched.config.load import default_config
from batchsched.sim.loader import load_files
from batchsched.sim.simulator import simulate

from bench.parity_scenarios import (
    BIND_COMPLETED,
    KUBE_SCHEDULER,
    PREFERRED,
    READ_WRITE_ONCE_POD,
    REQUIRED,
    Answer,
    Ours,
    Scenario,
    Theirs,
    Volumes,
    batchsched_verdict,
    case_yaml,
    disagreement,
    generate,
    kube_verdict,
    pin_resource,
)

SCENARIOS = 150


def scenarios() -> list[Scenario]:
    return [generate(random.Random(i), i) for i in range(SCENARIOS)]


def test_a_seed_gives_the_same_scenario() -> None:
    assert generate(random.Random(7), 7) == generate(random.Random(7), 7)
    assert generate(random.Random(7), 7) != generate(random.Random(8), 7)


def test_batchsched_takes_every_scenario_and_both_answers_occur() -> None:
    placed = [batchsched_verdict(s).node is not None for s in scenarios()]
    # Constraints bite often enough for both answers to be well represented.
    assert 0.25 < sum(placed) / len(placed) < 0.75


def selector_keys(selector: dict[str, Any] | None) -> set[str]:
    selector = selector or {}
    named = set(selector.get("matchLabels", {}))
    return named | {e["key"] for e in selector.get("matchExpressions", [])}


def test_spread_constraints_are_ones_the_api_server_accepts() -> None:
    for scenario in scenarios():
        for pod in [*scenario.existing, scenario.incoming]:
            constraints = pod["spec"].get("topologySpreadConstraints", [])
            pairs = [(c["topologyKey"], c["whenUnsatisfiable"]) for c in constraints]
            assert len(pairs) == len(set(pairs))
            for constraint in constraints:
                if "minDomains" in constraint:
                    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
                keys = set(constraint.get("matchLabelKeys", []))
                assert not keys or "labelSelector" in constraint
                assert not keys & selector_keys(constraint.get("labelSelector"))


def test_affinity_label_keys_are_ones_the_api_server_accepts() -> None:
    for scenario in scenarios():
        for pod in [*scenario.existing, scenario.incoming]:
            affinity = pod["spec"].get("affinity", {})
            for kind in ("podAffinity", "podAntiAffinity"):
                section = affinity.get(kind, {})
                terms = [
                    *section.get(REQUIRED, []),
                    *(e["podAffinityTerm"] for e in section.get(PREFERRED, [])),
                ]
                for term in terms:
                    match = set(term.get("matchLabelKeys", []))
                    mismatch = set(term.get("mismatchLabelKeys", []))
                    assert not match & mismatch
                    assert not (match | mismatch) & selector_keys(term.get("labelSelector"))
                    assert not (match or mismatch) or "labelSelector" in term


def test_a_pinned_pod_asks_for_the_resource_only_its_node_has() -> None:
    scenario = generate(random.Random(3), 3)
    node = scenario.nodes[0]["metadata"]["name"]
    pod = scenario.pod(KUBE_SCHEDULER, pin=node)
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"][pin_resource(node)] == resources["limits"][pin_resource(node)]
    assert pod["spec"]["schedulerName"] == KUBE_SCHEDULER
    assert pod["metadata"]["name"] == scenario.incoming["metadata"]["name"] + "-pinned"
    # The pinned copy leaves the scenario's own pod as it was.
    assert "limits" not in scenario.incoming["spec"]["containers"][0]["resources"]
    owners = [n for n in scenario.nodes if pin_resource(node) in n["status"]["allocatable"]]
    assert owners == [scenario.nodes[0]]


class Asked:
    """kube-scheduler's answers by pin (None: the free pod), recording the questions."""

    def __init__(self, answers: dict[str | None, str | None], volumes: Volumes = ()) -> None:
        self.answers = answers
        self.volumes = volumes
        self.pins: list[str | None] = []

    def __call__(self, pin: str | None) -> Answer:
        self.pins.append(pin)
        node = self.answers[pin]
        if node is None:
            return Answer(None, f"refused ({pin})")
        return Answer(node, volumes=self.volumes)


def test_a_pod_bound_to_our_node_settles_both_questions() -> None:
    ask = Asked({"n1": "n1"})
    theirs = kube_verdict(Ours("n1", None), ask)
    assert ask.pins == ["n1"]
    assert theirs == Theirs(feasible=True, accepts_ours=True, node="n1", message="")
    assert disagreement(Ours("n1", None), theirs) is None


def test_a_refused_node_is_followed_by_the_free_question() -> None:
    ask = Asked({"n1": None, None: "n2"})
    ours = Ours("n1", None)
    theirs = kube_verdict(ours, ask)
    assert ask.pins == ["n1", None]
    assert theirs.feasible and theirs.accepts_ours is False and theirs.node == "n2"
    finding = disagreement(ours, theirs)
    assert finding is not None
    assert "refuses (refused (n1))" in finding and "placed it on n2" in finding


def test_feasibility_disagreements_either_way() -> None:
    ours = Ours("n1", None)
    theirs = kube_verdict(ours, Asked({"n1": None, None: None}))
    assert not theirs.feasible
    assert "kube-scheduler found no node" in (disagreement(ours, theirs) or "")
    pending = Ours(None, "no node fits")
    theirs = kube_verdict(pending, Asked({None: "n2"}))
    assert theirs.accepts_ours is None
    assert disagreement(pending, theirs) == (
        "kube-scheduler placed the pod on n2; batchsched: no node fits"
    )


def test_the_volumes_of_waiting_claims_are_compared_where_both_place_the_pod() -> None:
    ours = Ours("n1", None, (("c0", "pv-small"), ("c1", "")))
    same = kube_verdict(ours, Asked({"n1": "n1"}, ours.volumes))
    assert same.volumes == ours.volumes and disagreement(ours, same) is None
    other = kube_verdict(ours, Asked({"n1": "n1"}, (("c0", "pv-large"), ("c1", ""))))
    assert disagreement(ours, other) == (
        "on n1, batchsched gives the claims c0: pv-small, c1: to provision, "
        "kube-scheduler c0: pv-large, c1: to provision"
    )


def test_batchsched_names_the_volumes_its_simulator_gives_waiting_claims() -> None:
    """An existing volume by name, one the simulator made for a claim as to be provisioned."""
    seen: set[bool] = set()
    for scenario in storage_scenarios():
        ours = batchsched_verdict(scenario)
        if ours.node is None:
            assert ours.volumes == ()
            continue
        assert [claim for claim, _ in ours.volumes] == scenario.waiting_claims()
        names = {v["metadata"]["name"] for v in by_kind(scenario, "PersistentVolume")}
        for _, volume in ours.volumes:
            assert volume == "" or volume in names
            seen.add(volume == "")
    assert seen == {True, False}


def test_both_refusing_is_agreement() -> None:
    pending = Ours(None, "no node fits")
    assert disagreement(pending, kube_verdict(pending, Asked({None: None}))) is None


def storage_scenarios() -> list[Scenario]:
    return [s for s in scenarios() if s.storage]


def by_kind(scenario: Scenario, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in scenario.storage if obj["kind"] == kind]


def test_a_share_of_scenarios_carry_storage_and_both_answers_occur() -> None:
    with_storage = storage_scenarios()
    assert 0.25 < len(with_storage) / SCENARIOS < 0.45
    mounting = [s for s in with_storage if s.incoming["spec"].get("volumes")]
    assert len(mounting) > 0.9 * len(with_storage)
    placed = [batchsched_verdict(s).node is not None for s in mounting]
    assert 0.15 < sum(placed) / len(placed) < 0.75


def test_waiting_claims_are_the_incoming_pods_unbound_claims_of_a_waiting_class() -> None:
    seen = 0
    for scenario in storage_scenarios():
        waiting_classes = {
            c["metadata"]["name"]
            for c in by_kind(scenario, "StorageClass")
            if c["volumeBindingMode"] == "WaitForFirstConsumer"
        }
        claims = {c["metadata"]["name"]: c for c in by_kind(scenario, "PersistentVolumeClaim")}
        mounted = {
            v["persistentVolumeClaim"]["claimName"]
            for v in scenario.incoming["spec"].get("volumes", [])
        }
        expected = {
            name
            for name in mounted & set(claims)
            if "volumeName" not in claims[name]["spec"]
            and claims[name]["spec"].get("storageClassName") in waiting_classes
        }
        assert set(scenario.waiting_claims()) == expected
        seen += bool(expected)
    assert seen > 0.1 * len(storage_scenarios())


def test_available_volumes_are_unbound_or_pre_bound_to_a_waiting_claim() -> None:
    pre_bound = 0
    for scenario in storage_scenarios():
        refs: list[tuple[str, str]] = []
        claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in by_kind(scenario, "PersistentVolumeClaim")
        }
        for volume in by_kind(scenario, "PersistentVolume"):
            if volume.get("status", {}).get("phase") != "Available":
                continue
            ref = volume["spec"].get("claimRef")
            if ref is not None:
                pre_bound += 1
                refs.append((ref["namespace"], ref["name"]))
                assert "uid" not in ref
                assert "volumeName" not in claims[(ref["namespace"], ref["name"])]["spec"]
        # kube-scheduler's pick between two volumes pre-bound to one claim is its cache's order.
        assert len(refs) == len(set(refs))
    assert pre_bound > 0


def test_storage_objects_are_ones_the_api_server_accepts() -> None:
    for scenario in storage_scenarios():
        for claim in by_kind(scenario, "PersistentVolumeClaim"):
            modes = claim["spec"]["accessModes"]
            assert len(modes) == 1 or READ_WRITE_ONCE_POD not in modes
            assert claim["spec"]["resources"]["requests"]["storage"]
        for volume in by_kind(scenario, "PersistentVolume"):
            spec = volume["spec"]
            assert len({"csi", "hostPath"} & set(spec)) == 1
            assert spec["capacity"]["storage"] and spec["accessModes"]
            for term in (
                spec.get("nodeAffinity", {}).get("required", {}).get("nodeSelectorTerms", [])
            ):
                for expression in term["matchExpressions"]:
                    assert bool(expression.get("values")) == (expression["operator"] != "Exists")
        for csi_node in by_kind(scenario, "CSINode"):
            for driver in csi_node["spec"]["drivers"]:
                assert driver["nodeID"] == csi_node["metadata"]["name"]
                assert driver.get("allocatable", {}).get("count", 0) >= 0


def test_bound_claims_and_their_volumes_name_each_other() -> None:
    kinds_seen = set()
    for scenario in storage_scenarios():
        volumes = {v["metadata"]["name"]: v for v in by_kind(scenario, "PersistentVolume")}
        for claim in by_kind(scenario, "PersistentVolumeClaim"):
            meta, name = claim["metadata"], claim["spec"].get("volumeName")
            bound = BIND_COMPLETED in meta.get("annotations", {})
            assert not bound or name
            if name in volumes:
                ref = volumes[name]["spec"]["claimRef"]
                assert (ref["namespace"], ref["name"]) == (meta["namespace"], meta["name"])
            kinds_seen.add(
                "deleting"
                if "deletionTimestamp" in meta
                else "lost"
                if claim.get("status", {}).get("phase") == "Lost"
                else "gone"
                if bound and name not in volumes
                else "bound"
                if bound
                else "pre-bound"
                if name
                else "unbound"
            )
    assert kinds_seen == {"deleting", "lost", "gone", "bound", "pre-bound", "unbound"}


def test_pods_mount_claims_of_their_own_namespace() -> None:
    missing = 0
    for scenario in storage_scenarios():
        claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"])
            for c in by_kind(scenario, "PersistentVolumeClaim")
        }
        for pod in [*scenario.existing, scenario.incoming]:
            volumes = pod["spec"].get("volumes", [])
            assert len({v["name"] for v in volumes}) == len(volumes)
            for volume in volumes:
                key = (pod["metadata"]["namespace"], volume["persistentVolumeClaim"]["claimName"])
                missing += key not in claims
    # The claim that does not exist is named by the incoming pod alone, and not often.
    assert 0 < missing < len(storage_scenarios()) / 5


def test_cluster_scoped_storage_is_named_for_its_scenario() -> None:
    """So that deleting a scenario's objects leaves nothing a later one could mistake."""
    for scenario in storage_scenarios():
        for obj in scenario.storage:
            if obj["kind"] != "PersistentVolumeClaim":
                assert obj["metadata"]["name"].startswith(f"s{scenario.index}-")


def test_storage_comes_before_the_pods_that_mount_it() -> None:
    scenario = storage_scenarios()[0]
    kinds = [obj["kind"] for obj in scenario.objects()]
    assert kinds.index("Pod") > max(i for i, k in enumerate(kinds) if k == "PersistentVolumeClaim")


STORAGE_CASES = [i for i in range(40) if generate(random.Random(i), i).storage][:4]


@pytest.mark.parametrize("index", [1, 2, 5, *STORAGE_CASES])
def test_a_case_file_reproduces_the_scenario(tmp_path: Path, index: int) -> None:
    scenario = generate(random.Random(index), index)
    path = tmp_path / "case.yaml"
    path.write_text(case_yaml(scenario, seed=1, finding="a finding"))
    loaded = load_files([str(path)])
    assert not loaded.warnings
    sim = simulate(loaded.objects, default_config())
    assert sim.cache.tasks[scenario.incoming_key].node_name == batchsched_verdict(scenario).node
