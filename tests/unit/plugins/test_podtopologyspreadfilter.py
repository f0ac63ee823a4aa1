"""DoNotSchedule spread constraints, as kube-scheduler's PodTopologySpread filters."""

from typing import Any

import pytest

from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.plugins.podtopologyspreadfilter import (
    CONSTRAINTS_MISMATCH,
    MISSING_LABEL,
    TopologySpread,
)

from tests.support.objects import Obj, decide, node, placements, pod, pod_group, snapshot_of

HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
# No score: the first node that passes wins, so only the filter decides.
FILTER_ONLY = "tiers:\n- plugins: [{name: gang}, {name: predicates}]\n"


def spread(key: str = "zone", skew: int = 1, **fields: Any) -> dict[str, Any]:
    constraint = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": WEB},
        **fields,
    }
    return {"topologySpreadConstraints": [constraint]}


def zones(count: int, *, per_zone: int = 1, cpu: str = "8") -> list[Obj]:
    """Nodes h<zone>-<i> in zones z0.., with their hostname label."""
    return [
        node(f"h{z}-{i}", cpu=cpu, labels={HOST: f"h{z}-{i}", "zone": f"z{z}"})
        for z in range(count)
        for i in range(per_zone)
    ]


def running(name: str, on: str, **kwargs: Any) -> Obj:
    return pod(name, labels=WEB, node_name=on, scheduler="other", **kwargs)


def web(name: str, spec: dict[str, Any], **kwargs: Any) -> Obj:
    return pod(name, requests={"cpu": "1"}, labels=kwargs.pop("labels", WEB), spec=spec, **kwargs)


def zone_of(node_name: str) -> str:
    return node_name.split("-")[0].replace("h", "z")


def test_a_pod_goes_to_the_least_loaded_zone() -> None:
    existing = [running("a", "h0-0"), running("b", "h0-0"), running("c", "h1-0")]
    assert placements(decide([*zones(3), *existing, web("p", spread())], FILTER_ONLY)) == {
        "default/p": "h2-0"
    }


def test_a_larger_max_skew_allows_more() -> None:
    existing = [running("a", "h0-0"), running("b", "h0-0"), running("c", "h1-0")]
    decisions = decide([*zones(3), *existing, web("p", spread(skew=2))], FILTER_ONLY)
    assert placements(decisions) == {"default/p": "h1-0"}


def test_nodes_without_the_key_fail_with_missing_required_label() -> None:
    bare = node("bare", labels={HOST: "bare"})
    decisions = decide([bare, web("p", spread())], FILTER_ONLY)
    assert decisions.pending["default/p"] == f"0/1 nodes are available: 1 {MISSING_LABEL}."


def test_the_reason_names_the_constraints() -> None:
    full = [
        *zones(2, cpu="1"),
        running("a", "h0-0"),
        running("b", "h0-0"),
        running("c", "h1-0", requests={"cpu": "1"}),
    ]
    decisions = decide([*full, web("p", spread())], FILTER_ONLY)
    assert decisions.pending["default/p"] == (
        f"0/2 nodes are available: 1 Insufficient cpu, 1 {CONSTRAINTS_MISMATCH}."
    )


@pytest.mark.parametrize(("room", "bound"), [("2", 6), ("1", 0)])
def test_a_gang_spreads_among_its_own_tentative_members(room: str, bound: int) -> None:
    """Six members, maxSkew 1, over three zones: 2/2/2; with room for one in a zone,
    the sixth would make the skew 2, so none is bound."""
    members = [
        pod(f"g-{i}", requests={"cpu": "1"}, group="g", labels=WEB, spec=spread()) for i in range(6)
    ]
    cluster = [*zones(2, cpu="3"), node("h2-0", cpu=room, labels={HOST: "h2-0", "zone": "z2"})]
    decisions = decide([*cluster, pod_group("g", 6), *members])
    bound_nodes = placements(decisions)
    assert len(bound_nodes) == bound
    if bound:
        assert (
            sorted(zone_of(n) for n in bound_nodes.values()) == ["z0"] * 2 + ["z1"] * 2 + ["z2"] * 2
        )


def test_min_domains_counts_missing_domains_as_empty() -> None:
    """Two zones, minDomains 3: the global minimum stays 0, so each zone takes one."""
    pods = [web(f"p{i}", spread(minDomains=3), created=i) for i in range(3)]
    decisions = decide([*zones(2), *pods], FILTER_ONLY)
    assert sorted(placements(decisions).values()) == ["h0-0", "h1-0"]
    assert decisions.pending["default/p2"] == f"0/2 nodes are available: 2 {CONSTRAINTS_MISMATCH}."
    without = [web(f"p{i}", spread(), created=i) for i in range(3)]
    assert len(placements(decide([*zones(2), *without], FILTER_ONLY))) == 3


def test_a_pod_that_does_not_match_its_selector_adds_nothing_to_the_skew() -> None:
    existing = [running("a", "h0-0")]
    other = web("p", spread(), labels={"app": "other"})
    assert placements(decide([*zones(2), *existing, other], FILTER_ONLY)) == {"default/p": "h0-0"}


def test_only_pods_of_the_same_namespace_and_not_terminating_count() -> None:
    existing = [
        running("a", "h0-0", namespace="elsewhere"),
        {**running("b", "h0-0"), "metadata": {**running("b", "h0-0")["metadata"]}},
    ]
    existing[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert placements(decide([*zones(2), *existing, web("p", spread())], FILTER_ONLY)) == {
        "default/p": "h0-0"
    }


def gpu_zones() -> list[Obj]:
    """z0 has a GPU node holding one web pod; z1 has none and no web pod."""
    return [
        node("h0-0", labels={HOST: "h0-0", "zone": "z0", "gpu": "yes"}),
        node(
            "h1-0",
            labels={HOST: "h1-0", "zone": "z1"},
            taints=[{"key": "k", "effect": "NoSchedule"}],
        ),
        running("a", "h0-0"),
    ]


@pytest.mark.parametrize(("policy", "bound"), [("Honor", True), ("Ignore", False)])
def test_node_affinity_policy(policy: str, bound: bool) -> None:
    """With Honor, z1 (no node the pod may use) is no domain, so the minimum is z0's 1."""
    spec = {**spread(nodeAffinityPolicy=policy), "nodeSelector": {"gpu": "yes"}}
    decisions = decide([*gpu_zones(), web("p", spec)], FILTER_ONLY)
    assert ("default/p" in placements(decisions)) is bound


@pytest.mark.parametrize(("policy", "bound"), [("Honor", True), ("Ignore", False)])
def test_node_taints_policy(policy: str, bound: bool) -> None:
    """With Honor, z1's only node has a taint the pod does not tolerate: no domain."""
    decisions = decide([*gpu_zones(), web("p", spread(nodeTaintsPolicy=policy))], FILTER_ONLY)
    assert ("default/p" in placements(decisions)) is bound


def test_no_filter_is_added_when_no_pending_pod_states_a_constraint() -> None:
    plain = snapshot_of([*zones(2), running("a", "h0-0", spec=spread()), pod("p")])
    session = Session(plain, tiers=default_config().tiers)
    assert not any(isinstance(f, TopologySpread) for f in session.fresh_filters)
    stated = snapshot_of([*zones(2), web("p", spread())])
    session = Session(stated, tiers=default_config().tiers)
    assert any(isinstance(f, TopologySpread) for f in session.fresh_filters)


def test_a_gang_that_is_undone_leaves_no_counts_behind() -> None:
    """The gang fits 2/2/1 and is undone; had its members stayed counted, the later pod
    would make zone z0's skew 2 + 1 - 1 = 2."""
    members = [
        pod(f"g-{i}", requests={"cpu": "1"}, group="g", labels=WEB, spec=spread(), created=0)
        for i in range(6)
    ]
    cluster = [*zones(2, cpu="3"), node("h2-0", cpu="1", labels={HOST: "h2-0", "zone": "z2"})]
    later = web("p", spread(), created=10)
    decisions = decide([*cluster, pod_group("g", 6, created=0), *members, later], FILTER_ONLY)
    assert placements(decisions) == {"default/p": "h0-0"}
