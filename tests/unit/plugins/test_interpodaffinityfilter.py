"""Required pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity filters."""

from typing import Any

import pytest

from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.plugins.interpodaffinityfilter import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)

from tests.support.objects import (
    Obj,
    decide,
    node,
    pending_task,
    placements,
    pod,
    pod_group,
    snapshot_of,
)

HOST = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
WEB = {"app": "web"}


def term(topology: str = HOST, *, labels: dict[str, str] | None = None, **extra: Any) -> Obj:
    return {"labelSelector": {"matchLabels": labels or WEB}, "topologyKey": topology, **extra}


def anti(*terms: Obj) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {REQUIRED: list(terms)}}}


def near(*terms: Obj) -> dict[str, Any]:
    return {"affinity": {"podAffinity": {REQUIRED: list(terms)}}}


def hosts(count: int, *, zones: int = 0, cpu: str = "8") -> list[Obj]:
    """Nodes h0.. labelled with their hostname and, with `zones`, zone z<i % zones>."""
    return [
        node(
            f"h{i}",
            cpu=cpu,
            labels={HOST: f"h{i}", **({"zone": f"z{i % zones}"} if zones else {})},
        )
        for i in range(count)
    ]


def web(name: str, spec: dict[str, Any] | None = None, **kwargs: Any) -> Obj:
    return pod(name, requests={"cpu": "1"}, labels=WEB, spec=spec, **kwargs)


def gang(name: str, size: int, spec: dict[str, Any], labels: dict[str, str]) -> list[Obj]:
    members = [
        pod(f"{name}-{i}", requests={"cpu": "1"}, group=name, labels=labels, spec=spec)
        for i in range(size)
    ]
    return [pod_group(name, size), *members]


def test_two_pods_with_anti_affinity_on_hostname_take_two_nodes() -> None:
    bound = placements(decide([*hosts(2), web("a", anti(term())), web("b", anti(term()))]))
    assert sorted(bound) == ["default/a", "default/b"]
    assert bound["default/a"] != bound["default/b"]


def test_the_second_pod_waits_when_one_node_is_left() -> None:
    decisions = decide([*hosts(1), web("a", anti(term())), web("b", anti(term()))])
    assert list(placements(decisions)) == ["default/a"]
    assert decisions.pending["default/b"] == f"0/1 nodes are available: 1 {ANTI_AFFINITY_MISMATCH}."


def test_an_existing_pods_anti_affinity_keeps_the_incoming_pod_away() -> None:
    guard = web("guard", anti(term()), node_name="h0", scheduler="default-scheduler")
    assert placements(decide([*hosts(2), guard, web("plain")])) == {"default/plain": "h1"}
    decisions = decide([*hosts(1), guard, web("plain")])
    assert (
        decisions.pending["default/plain"]
        == f"0/1 nodes are available: 1 {EXISTING_ANTI_AFFINITY}."
    )


@pytest.mark.parametrize(("nodes", "bound"), [(8, 8), (7, 0)])
def test_a_gang_with_anti_affinity_on_hostname_takes_one_node_each_or_nothing(
    nodes: int, bound: int
) -> None:
    decisions = decide(
        [*hosts(nodes), *gang("ring", 8, anti(term(labels={"job": "ring"})), {"job": "ring"})]
    )
    chosen = placements(decisions)
    assert len(chosen) == bound
    assert len(set(chosen.values())) == bound
    if not bound:
        assert decisions.pending["default/ring-0"] == (
            "gang default/ring: room for 7 of 8; "
            f"0/7 nodes are available: 7 {ANTI_AFFINITY_MISMATCH}."
        )


def test_anti_affinity_on_a_zone_keeps_the_whole_zone_free() -> None:
    spec = anti(term("zone", labels={"job": "pair"}))
    chosen = placements(decide([*hosts(4, zones=2), *gang("pair", 2, spec, {"job": "pair"})]))
    assert len(chosen) == 2
    assert {int(n[1:]) % 2 for n in chosen.values()} == {0, 1}
    decisions = decide([*hosts(4, zones=2), *gang("trio", 3, spec, {"job": "pair"})])
    assert placements(decisions) == {}


def test_affinity_follows_the_pods_it_selects_into_their_zone() -> None:
    database = pod("db", labels={"app": "db"}, node_name="h1", scheduler="other")
    spec = near(term("zone", labels={"app": "db"}))
    chosen = placements(decide([*hosts(4, zones=2), database, web("client", spec)]))
    assert chosen["default/client"] in ("h1", "h3")


def test_affinity_without_any_selected_pod_waits() -> None:
    decisions = decide([*hosts(2), web("client", near(term(labels={"app": "db"})))])
    assert decisions.pending["default/client"] == f"0/2 nodes are available: 2 {AFFINITY_MISMATCH}."


def test_a_gang_with_affinity_to_itself_lands_in_one_zone() -> None:
    """The first member may go anywhere (it matches its own terms); the rest follow."""
    spec = near(term("zone", labels={"job": "tight"}))
    chosen = placements(decide([*hosts(6, zones=3), *gang("tight", 3, spec, {"job": "tight"})]))
    assert len(chosen) == 3
    assert len({int(n[1:]) % 3 for n in chosen.values()}) == 1


def test_once_the_first_member_is_placed_the_others_must_follow_it() -> None:
    """One pod per node: the second member cannot share the first one's node, and only
    the other node of its zone will do."""
    spec = near(term("zone", labels={"job": "tight"}))
    objects = [*hosts(6, zones=3, cpu="1"), *gang("tight", 2, spec, {"job": "tight"})]
    assert sorted(placements(decide(objects)).values()) == ["h0", "h3"]


def test_affinity_needs_the_topology_key_on_the_node() -> None:
    database = pod("db", labels={"app": "db"}, node_name="h0", scheduler="other")
    spec = near(term("rack", labels={"app": "db"}))
    decisions = decide([*hosts(2), database, web("client", spec)])
    assert decisions.pending["default/client"] == f"0/2 nodes are available: 2 {AFFINITY_MISMATCH}."


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.parametrize(
    ("extra", "avoided"),
    [
        pytest.param({}, False, id="own-namespace-only"),
        pytest.param({"namespaces": ["shop"]}, True, id="listed"),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"team": "sales"}}}, True, id="selector"
        ),
        pytest.param({"namespaceSelector": {"matchLabels": {"team": "ops"}}}, False, id="other"),
        pytest.param({"namespaceSelector": {}}, True, id="empty-selects-all"),
        pytest.param(
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
            True,
            id="by-name-label",
        ),
    ],
)
def test_terms_select_pods_in_their_namespaces(extra: Obj, avoided: bool) -> None:
    other = web("shopfront", namespace="shop", node_name="h0", scheduler="other")
    objects = [*hosts(2), namespace("shop", team="sales"), other, web("p", anti(term(**extra)))]
    chosen = placements(decide(objects))
    assert chosen["default/p"] == ("h1" if avoided else "h0")


def test_match_label_keys_keep_only_pods_of_the_same_version_apart() -> None:
    spec = anti(term(matchLabelKeys=["version"]))
    old = pod("old", labels={**WEB, "version": "1"}, node_name="h0", scheduler="other")
    new = [pod(f"new-{i}", labels={**WEB, "version": "2"}, spec=spec) for i in range(2)]
    chosen = placements(decide([*hosts(2), old, *new]))
    assert sorted(chosen.values()) == ["h0", "h1"]


def test_mismatch_label_keys_keep_other_tenants_out() -> None:
    spec = anti(
        {
            "labelSelector": {"matchExpressions": [{"key": "tenant", "operator": "Exists"}]},
            "topologyKey": HOST,
            "mismatchLabelKeys": ["tenant"],
        }
    )
    theirs = pod("theirs", labels={"tenant": "b"}, node_name="h0", scheduler="other")
    ours = pod("ours", labels={"tenant": "a"}, node_name="h1", scheduler="other")
    chosen = placements(
        decide([*hosts(2), theirs, ours, pod("p", labels={"tenant": "a"}, spec=spec)])
    )
    assert chosen == {"default/p": "h1"}


def test_no_filter_is_added_where_no_pod_states_a_term() -> None:
    snapshot = snapshot_of([*hosts(2), web("a"), web("b", near(term()), node_name="h0")])
    assert not InterPodAffinity.needed(Session(snapshot, tiers=default_config().tiers))
    snapshot = snapshot_of([*hosts(2), web("a", anti(term()))])
    assert InterPodAffinity.needed(Session(snapshot, tiers=default_config().tiers))


def test_a_gang_that_is_undone_leaves_no_counts_behind() -> None:
    spec = anti(term(labels={"job": "big"}))
    later = pod("later", requests={"cpu": "1"}, labels={"job": "big"})
    decisions = decide([*hosts(2), *gang("big", 3, spec, {"job": "big"}), later])
    assert list(placements(decisions)) == ["default/later"]


def test_a_pod_no_term_concerns_is_not_masked() -> None:
    guard = web("guard", anti(term()), node_name="h0", scheduler="default-scheduler")
    snapshot = snapshot_of([*hosts(2), guard, pod("db", labels={"app": "db"}), web("w")])
    session = Session(snapshot, tiers=default_config().tiers)
    (found,) = session.fresh_filters
    assert found.mask(pending_task(snapshot, "default/db")) is None
    mask = found.mask(pending_task(snapshot, "default/w"))
    assert mask is not None
    assert mask.tolist() == [False, True]
