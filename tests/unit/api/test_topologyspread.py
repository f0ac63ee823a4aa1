"""Topology spread constraints: defaulting as kube-scheduler reads them, bad ones by field."""

from typing import Any

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.pods import ShapeMemo, task_from_pod
from batchsched.api.selectors import NOTHING, Requirement, Selector
from batchsched.api.topologyspread import SpreadConstraint, spread_constraint, spread_constraints

from tests.support.objects import pod

WHERE = "Pod shop/p"
WEB = {"matchLabels": {"app": "web"}}


def constraint(**fields: Any) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": WEB,
        **fields,
    }


def test_defaults() -> None:
    (parsed,) = spread_constraints([constraint()], labels={}, where=WHERE)
    assert parsed == SpreadConstraint(
        max_skew=1,
        topology_key="zone",
        hard=True,
        selector=Selector((Requirement("app", "In", ("web",)),)),
        min_domains=1,
        honor_affinity=True,
        honor_taints=False,
    )


def test_policies_and_min_domains_are_read() -> None:
    (parsed,) = spread_constraints(
        [constraint(minDomains=3, nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor")],
        labels={},
        where=WHERE,
    )
    assert (parsed.min_domains, parsed.honor_affinity, parsed.honor_taints) == (3, False, True)


def test_match_label_keys_are_merged_from_the_pods_labels() -> None:
    (parsed,) = spread_constraints(
        [constraint(matchLabelKeys=["pod-template-hash", "absent"])],
        labels={"app": "web", "pod-template-hash": "abc"},
        where=WHERE,
    )
    assert parsed.selector.requirements == (
        Requirement("app", "In", ("web",)),
        Requirement("pod-template-hash", "In", ("abc",)),
    )


def test_a_missing_selector_selects_nothing_and_an_empty_one_counts_nothing() -> None:
    missing, empty = spread_constraints(
        [constraint(labelSelector=None), constraint(labelSelector={}, topologyKey="host")],
        labels={"app": "web"},
        where=WHERE,
    )
    assert missing.selector == NOTHING and not missing.counts_pods
    assert empty.selector.matches({"app": "web"}) and not empty.counts_pods


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"maxSkew": 0}, "[0].maxSkew: 0 must be greater than zero"),
        ({"maxSkew": "1"}, "[0].maxSkew: '1' must be greater than zero"),
        ({"topologyKey": ""}, "[0].topologyKey: must be a non-empty label key"),
        (
            {"whenUnsatisfiable": "Sometimes"},
            "[0].whenUnsatisfiable: 'Sometimes' is not one of DoNotSchedule, ScheduleAnyway",
        ),
        ({"whenUnsatisfiable": None}, "[0].whenUnsatisfiable: None is not one of"),
        ({"minDomains": 0}, "[0].minDomains: 0 must be greater than zero"),
        (
            {"minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"},
            "[0].minDomains: may only be set with whenUnsatisfiable DoNotSchedule",
        ),
        ({"nodeTaintsPolicy": "Always"}, "[0].nodeTaintsPolicy: 'Always' is not one of"),
        (
            {"matchLabelKeys": ["app"]},
            "[0].matchLabelKeys: 'app' exists in both matchLabelKeys and labelSelector",
        ),
        (
            {"matchLabelKeys": ["hash"], "labelSelector": None},
            "[0].matchLabelKeys: may not be set without labelSelector",
        ),
    ],
)
def test_bad_constraints_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        spread_constraints([constraint(**fields)], labels={}, where=WHERE)
    assert str(caught.value).startswith(f"{WHERE}.spec.topologySpreadConstraints{message}")


def test_two_constraints_on_one_key_and_action_are_refused() -> None:
    with pytest.raises(InvalidObject, match=r"\[1\]: duplicate topologyKey 'zone'"):
        spread_constraints([constraint(), constraint(maxSkew=2)], labels={}, where=WHERE)


def test_a_default_constraint_takes_its_selector_from_match_label_keys_alone() -> None:
    entry = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    keyed = {**entry, "matchLabelKeys": ["app"]}
    parsed = spread_constraint(keyed, labels={"app": "web"}, where="d", selector_allowed=False)
    assert parsed.selector == Selector((Requirement("app", "In", ("web",)),))
    unlabelled = spread_constraint(keyed, labels={}, where="d", selector_allowed=False)
    assert unlabelled.selector == NOTHING
    with pytest.raises(InvalidObject, match=r"d\.labelSelector: may not be set"):
        spread_constraint(
            {**keyed, "labelSelector": WEB}, labels={}, where="d", selector_allowed=False
        )


def test_a_pod_keeps_its_constraints_out_of_its_fit_key() -> None:
    spec = {"topologySpreadConstraints": [constraint()]}
    task = task_from_pod(pod("p", labels={"app": "web"}, spec=spec))
    plain = task_from_pod(pod("q", labels={"app": "web"}))
    assert task.blocked is None
    assert len(task.spread) == 1
    assert task.fit_key == plain.shape_key
    assert task.shape_key != plain.shape_key


def test_the_shape_memo_keys_constraints_on_the_labels_they_read() -> None:
    memo = ShapeMemo()
    spec = {"topologySpreadConstraints": [constraint(matchLabelKeys=["hash"])]}

    def parsed(name: str, hash_value: str) -> Any:
        labels = {"app": "web", "hash": hash_value, "pod-name": name}
        return task_from_pod(pod(name, labels=labels, spec=spec), shapes=memo).spread

    first, same, other = parsed("a", "1"), parsed("b", "1"), parsed("c", "2")
    assert first is same
    assert other != first
    assert other[0].selector.requirements[-1] == Requirement("hash", "In", ("2",))
    bad = {"topologySpreadConstraints": [constraint(maxSkew=0)]}
    for name in ("d", "e"):
        with pytest.raises(InvalidObject, match=rf"^Pod default/{name}\.spec\.topology"):
            task_from_pod(pod(name, spec=bad), shapes=memo)
