"""Kueue's own topology tests as a conformance suite: each file under
tests/conformance/kueue/ is one case of Kueue v0.17.0's TestFindTopologyAssignments
(pkg/cache/scheduler/tas_cache_test.go), its nodes as Kueue's wrappers build them, its
pod sets as the pods Kueue admits (the topology request as Kueue's pod-set annotations,
one gang), its Topology levels our tiers, and its expectation the case's own: the pods
of each pod set per domain of the assignment's levels, or no placement at all.
hack/kueue_tables.py writes them from Kueue's module (docs/conformance.md, "Kueue's
topology tables"). Each runs through `batchsched simulate`."""

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import simulate

CASES = Path(__file__).resolve().parents[1] / "conformance" / "kueue"
PODSET_LABEL = "kueue.x-k8s.io/podset"

# Where a case differs by a decision (docs/conformance.md, "Kueue's topology tables").
NODES_BY_SCORES = (
    "decided: inside the domain, members go to nodes by the node scores, as any pod; "
    "Kueue's BestFit puts them on the fewest nodes"
)
SOFT_SPANS_BY_SCORES = (
    "decided (docs/topology.md): a preferred ask no domain holds is placed anywhere by "
    "the node scores; Kueue spreads it over the fewest domains, the roomiest first"
)
SLICES_ONE_BY_ONE = (
    "decided: each slice takes the fullest domain that holds it, of those alike the "
    "tightest fit; Kueue assigns a pod set's slices together, the roomiest domains first "
    "and the tightest for the last"
)
NODE_IN_THE_LABELS_IT_HAS = (
    "decided: a node is in the domains of the labels it has; Kueue leaves a node lacking "
    "any level of its Topology out of every domain"
)
BOTH_ASKS_KEPT = (
    "decided: a slice label above the pod set's is kept as stated (a pod set on one host "
    "has its slices in one block); Kueue refuses the request"
)
FAILS: dict[str, str] = {
    "choose-the-node-that-can-accommodate-all-pods": NODES_BY_SCORES,
    "block-preferred-pods-fit-in-2-blocks-bestfit": SOFT_SPANS_BY_SCORES,
    "block-preferred-but-only-multiple-blocks-can-accommodate-the-workload-bestfit": (
        SOFT_SPANS_BY_SCORES
    ),
    "rack-preferred-but-only-multiple-blocks-can-accommodate-the-workload-bestfit": (
        SOFT_SPANS_BY_SCORES
    ),
    "block-required-for-podset-host-required-for-slices-optimize-last-domain-bestfit": (
        SLICES_ONE_BY_ONE
    ),
    "block-required-for-podset-host-required-for-slices-prioritize-more-free-slice-ca": (
        SLICES_ONE_BY_ONE
    ),
    "block-preferred-for-podset-host-required-for-slices-2-blocks-with-unbalanced-sub": (
        SLICES_ONE_BY_ONE
    ),
    "only-nodes-with-matching-levels-are-considered-no-host-label-on-node-bestfit": (
        NODE_IN_THE_LABELS_IT_HAS
    ),
    "slice-required-topology-level-cannot-be-above-the-main-required-topology-level": (
        BOTH_ASKS_KEPT
    ),
}


def _cases() -> list[Any]:
    params = []
    for path in sorted(CASES.glob("*.yaml")):
        if path.stem == "not-translated":
            continue
        why = FAILS.get(path.stem)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def test_every_case_said_to_fail_is_there() -> None:
    assert set(FAILS) <= {path.stem for path in CASES.glob("*.yaml")}


@pytest.mark.parametrize("path", _cases())
def test_kueue_case(path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    objects = tmp_path / "input.yaml"
    objects.write_text(yaml.safe_dump_all(scenario["objects"]))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(scenario["config"]))
    run = simulate(capsys, objects, config=str(config))
    assert run.code == 0, run.stderr
    labels = {
        node["metadata"]["name"]: node["metadata"].get("labels", {})
        for node in scenario["objects"]
        if node["kind"] == "Node"
    }
    podsets = {
        f"{pod['metadata']['namespace']}/{pod['metadata']['name']}": pod["metadata"]["labels"][
            PODSET_LABEL
        ]
        for pod in scenario["objects"]
        if pod["kind"] == "Pod" and PODSET_LABEL in pod["metadata"].get("labels", {})
    }
    bound = run.bound()
    reasons = [want["reason"] for want in scenario["expect"].values() if "reason" in want]
    if reasons:
        # Kueue admits no pod set of a workload one of whose pod sets does not fit.
        assert not [key for key in podsets if key in bound], reasons
        return
    for podset, want in scenario["expect"].items():
        placed = [bound[key] for key, name in podsets.items() if name == podset and key in bound]
        got = Counter(tuple(labels[node].get(level) for level in want["levels"]) for node in placed)
        expected = Counter({tuple(d["values"]): d["count"] for d in want["domains"]})
        assert dict(got) == dict(expected), podset
