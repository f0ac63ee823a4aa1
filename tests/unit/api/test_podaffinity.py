"""Pod affinity terms: defaulting as the API server applies it, and bad terms by field."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.podaffinity import AffinityTerm, pod_affinity
from batchsched.api.pods import ShapeMemo, task_from_pod
from batchsched.api.selectors import NOTHING, Requirement, Selector, parse_selector

from tests.support.objects import pod

WHERE = "Pod shop/p"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def parse_term(term: dict[str, Any], *, labels: dict[str, str] | None = None) -> AffinityTerm:
    affinity = pod_affinity(
        {"podAntiAffinity": {REQUIRED: [term]}},
        namespace="shop",
        labels=labels or {},
        where=WHERE,
    )
    assert affinity is not None
    (parsed,) = affinity.anti_affinity
    return parsed


def test_a_term_without_namespaces_selects_in_the_pods_own_namespace() -> None:
    parsed = parse_term({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"})
    assert parsed.namespaces == frozenset({"shop"})
    assert parsed.namespace_selector == NOTHING
    assert parsed.matches("shop", {"app": "web"}, {})
    assert not parsed.matches("other", {"app": "web"}, {})


def test_an_empty_namespace_selector_selects_every_namespace() -> None:
    parsed = parse_term({"labelSelector": {}, "namespaceSelector": {}, "topologyKey": "zone"})
    assert parsed.namespaces == frozenset()
    assert parsed.matches("anywhere", {"any": "thing"}, {})


def test_a_term_without_a_label_selector_selects_no_pod() -> None:
    parsed = parse_term({"topologyKey": "zone"})
    assert parsed.selector == NOTHING
    assert not parsed.matches("shop", {}, {})


def test_match_label_keys_are_merged_from_the_pods_labels() -> None:
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "zone",
        "matchLabelKeys": ["version", "absent"],
        "mismatchLabelKeys": ["tenant"],
    }
    parsed = parse_term(term, labels={"app": "web", "version": "2", "tenant": "a"})
    assert parsed.selector == Selector(
        (
            Requirement("app", "In", ("web",)),
            Requirement("version", "In", ("2",)),
            Requirement("tenant", "NotIn", ("a",)),
        )
    )


def test_a_pod_without_pod_affinity_has_none() -> None:
    assert pod_affinity({"podAntiAffinity": {}}, namespace="shop", labels={}, where=WHERE) is None


@pytest.mark.parametrize(
    ("term", "message"),
    [
        (
            {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}},
            "labelSelector.matchExpressions[0].operator: 'Gt' is not one of "
            "DoesNotExist, Exists, In, NotIn",
        ),
        (
            {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            "labelSelector.matchExpressions[0].values: must be non-empty when operator is In",
        ),
        (
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
                }
            },
            "labelSelector.matchExpressions[0].values: must be empty when operator is Exists",
        ),
        (
            {"labelSelector": {}, "namespaceSelector": {"matchLabels": "team"}},
            "namespaceSelector.matchLabels: expected a map, got 'team'",
        ),
        ({"labelSelector": {}, "topologyKey": ""}, "topologyKey: must be a non-empty label key"),
        (
            {"matchLabelKeys": ["version"]},
            "matchLabelKeys: may not be set without labelSelector",
        ),
    ],
)
def test_bad_terms_name_their_field(term: dict[str, Any], message: str) -> None:
    term.setdefault("topologyKey", "zone")
    with pytest.raises(InvalidObject) as error:
        parse_term(term)
    prefix = f"{WHERE}.spec.affinity.podAntiAffinity.{REQUIRED}[0]."
    assert str(error.value) == prefix + message


def test_a_preferred_weight_must_be_from_1_to_100() -> None:
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    affinity = {"podAffinity": {preferred: [{"weight": 0, "podAffinityTerm": {}}]}}
    with pytest.raises(InvalidObject) as error:
        pod_affinity(affinity, namespace="shop", labels={}, where=WHERE)
    assert str(error.value) == (
        f"{WHERE}.spec.affinity.podAffinity.{preferred}[0].weight: 0 is not a whole number "
        "from 1 to 100"
    )


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        (None, {}, False),
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ],
)
def test_label_selectors(selector: object, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(selector, where=WHERE).matches(labels) is matches


def test_selectors_are_indexed_by_their_first_in_requirement() -> None:
    selector = parse_selector(
        {
            "matchExpressions": [
                {"key": "a", "operator": "Exists"},
                {"key": "b", "operator": "In", "values": ["1", "2"]},
            ]
        },
        where=WHERE,
    )
    assert selector.indexed_by() == (("b", "1"), ("b", "2"))
    assert Selector().indexed_by() is None


def test_the_memo_resolves_terms_per_namespace_and_labels() -> None:
    """Pods of one template in two namespaces, or with another version label, get terms
    of their own: matchLabelKeys and the default namespace come from the pod."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "zone",
        "matchLabelKeys": ["version"],
    }
    spec = {"affinity": {"podAntiAffinity": {REQUIRED: [term]}}}
    memo = ShapeMemo()
    parsed = [
        task_from_pod(
            pod(name, namespace=ns, labels={"app": "web", "version": v}, spec=spec), shapes=memo
        )
        for name, ns, v in (
            ("a", "shop", "1"),
            ("b", "shop", "2"),
            ("c", "lab", "1"),
            ("d", "shop", "1"),
        )
    ]
    terms = [t.affinity.anti_affinity[0] if t.affinity else None for t in parsed]
    assert terms[0] == terms[3]
    assert len({terms[0], terms[1], terms[2]}) == 3
    assert parsed[0].shape_key == parsed[3].shape_key != parsed[1].shape_key
