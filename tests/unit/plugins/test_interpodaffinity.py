"""interpodaffinity: preferred terms weigh where pods go, as kube-scheduler scores them."""

from typing import Any

import numpy as np
import pytest

from batchsched.api.errors import InvalidObject
from batchsched.config.load import load_config
from batchsched.plugins.interpodaffinity import min_max

from tests.support.objects import Obj, decide, node, placements, pod, pod_group

HOST = "kubernetes.io/hostname"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# No binpack: without a score every node ties and the first one wins.
SCORED = "tiers:\n- plugins: [{name: predicates}, {name: interpodaffinity}]\n"
UNSCORED = "tiers:\n- plugins: [{name: predicates}]\n"


def hosts(count: int) -> list[Obj]:
    return [node(f"h{i}", labels={HOST: f"h{i}", "zone": f"z{i % 2}"}) for i in range(count)]


def term(app: str, topology: str = HOST) -> Obj:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology}


def prefers(kind: str, app: str, weight: int = 10, topology: str = HOST) -> dict[str, Any]:
    entry = {"weight": weight, "podAffinityTerm": term(app, topology)}
    return {"affinity": {kind: {PREFERRED: [entry]}}}


def placed(name: str, app: str, on: str, spec: dict[str, Any] | None = None) -> Obj:
    return pod(name, labels={"app": app}, node_name=on, scheduler="other", spec=spec)


def client(spec: dict[str, Any] | None = None) -> Obj:
    return pod("client", labels={"app": "client"}, spec=spec)


@pytest.mark.parametrize(
    ("existing", "spec", "expected"),
    [
        pytest.param([], None, "h0", id="nothing-stated"),
        pytest.param(
            [placed("db", "db", "h1")],
            prefers("podAffinity", "db", topology="zone"),
            "h1",
            id="own-affinity",
        ),
        pytest.param(
            [placed("web", "web", "h0")],
            prefers("podAntiAffinity", "web"),
            "h1",
            id="own-anti-affinity",
        ),
        pytest.param(
            [placed("cache", "cache", "h1", prefers("podAffinity", "client"))],
            None,
            "h1",
            id="existing-preferred-affinity",
        ),
        pytest.param(
            [placed("noisy", "noisy", "h0", prefers("podAntiAffinity", "client"))],
            None,
            "h1",
            id="existing-preferred-anti-affinity",
        ),
        pytest.param(
            [
                placed(
                    "sidecar",
                    "sidecar",
                    "h1",
                    {"affinity": {"podAffinity": {REQUIRED: [term("client")]}}},
                )
            ],
            None,
            "h1",
            id="existing-required-affinity-weighs-hard",
        ),
    ],
)
def test_preferences_decide_between_equal_nodes(
    existing: list[Obj], spec: dict[str, Any] | None, expected: str
) -> None:
    decisions = decide([*hosts(2), *existing, client(spec)], SCORED)
    assert placements(decisions) == {"default/client": expected}


def test_hard_pod_affinity_weight_zero_ignores_existing_required_terms() -> None:
    config = SCORED.replace(
        "{name: interpodaffinity}",
        "{name: interpodaffinity, arguments: {hardPodAffinityWeight: 0}}",
    )
    sidecar = placed(
        "sidecar", "sidecar", "h1", {"affinity": {"podAffinity": {REQUIRED: [term("client")]}}}
    )
    assert placements(decide([*hosts(2), sidecar, client()], config)) == {"default/client": "h0"}


def test_stronger_preference_wins() -> None:
    spec = {
        "affinity": {
            "podAffinity": {PREFERRED: [{"weight": 5, "podAffinityTerm": term("a")}]},
            "podAntiAffinity": {PREFERRED: [{"weight": 20, "podAffinityTerm": term("b")}]},
        }
    }
    existing = [placed("a", "a", "h0"), placed("b", "b", "h0")]
    assert placements(decide([*hosts(2), *existing, client(spec)], SCORED)) == {
        "default/client": "h1"
    }


def test_preferred_terms_wait_when_no_plugin_scores_them() -> None:
    decisions = decide([*hosts(2), client(prefers("podAntiAffinity", "web"))], UNSCORED)
    assert decisions.pending["default/client"] == (
        f"spec.affinity.podAntiAffinity.{PREFERRED} is not scored: "
        "the configuration does not list the interpodaffinity plugin"
    )


def test_scores_are_normalized_over_the_nodes_that_fit() -> None:
    """kube-scheduler's NormalizeScore: min and max over the feasible nodes only, and the
    float arithmetic truncated (29 / 100 is 28.999... in floating point)."""
    raw = np.array([1000, 29, 0, 100], dtype=np.int64)
    feasible = np.array([False, True, True, True])
    normal = min_max(raw, feasible)
    assert normal is not None
    assert normal[feasible].tolist() == [28, 0, 100]
    assert min_max(np.array([5, 5, 9]), np.array([True, True, False])) is None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidObject) as error:
        load_config(
            SCORED.replace(
                "{name: interpodaffinity}", "{name: interpodaffinity, arguments: {weight: 0}}"
            )
        )
    assert "plugin interpodaffinity: weight must be from 1 to 100, got 0" in str(error.value)


def test_members_placed_in_the_session_weigh_on_the_next_one() -> None:
    spec = prefers("podAntiAffinity", "ring")
    members = [pod(f"ring-{i}", labels={"app": "ring"}, group="ring", spec=spec) for i in range(2)]
    chosen = placements(decide([*hosts(2), pod_group("ring", 2), *members], SCORED))
    assert sorted(chosen.values()) == ["h0", "h1"]
