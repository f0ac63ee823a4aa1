"""A gang asking for a domain is tried in each candidate domain in turn; the reasons its
members wait (Session.explain) are worked out only for the try they are reported from,
and are the same as if every try had worked them out; of the domains where no member
could go, one is tried."""

from typing import Any

import pytest

from batchsched.actions import gang_placement
from batchsched.api.gpu import GPU_MILLI
from batchsched.api.resources import GPU
from batchsched.config.load import SchedulerConfig, load_config
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.reasons import Reason
from batchsched.model.snapshot import TaskInfo
from batchsched.plugins.gpufragmentation import GpuFragmentation

from tests.support.objects import decide, node, placements, pod, pod_group

RACK = "topology.kubernetes.io/rack"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}"


def racks(ssd: dict[str, int]) -> list[dict[str, object]]:
    """Racks r1, r2 and r3 of three 4-CPU nodes, `ssd[rack]` of them labelled disk=ssd;
    small pods of another scheduler make r3 the fullest and r2 the next."""
    objects: list[dict[str, object]] = []
    for rack, ssd_nodes in ssd.items():
        for i in range(3):
            labels = {RACK: rack, **({"disk": "ssd"} if i < ssd_nodes else {})}
            objects.append(node(f"{rack}-{i}", cpu="4", labels=labels))
    objects.append(pod("busy-r3", {"cpu": "1"}, node_name="r3-2", scheduler="other"))
    objects.append(pod("busy-r2", {"cpu": "500m"}, node_name="r2-2", scheduler="other"))
    return objects


def ssd_gang(size: int) -> list[dict[str, object]]:
    """A hard gang of 3-CPU pods that only disk=ssd nodes take: one a node."""
    objects = [pod_group("g", size, networkTopology={"mode": "hard", "highestTierName": "rack"})]
    spec = {"nodeSelector": {"disk": "ssd"}}
    objects += [pod(f"g-{i}", {"cpu": "3"}, group="g", spec=spec) for i in range(size)]
    return objects


@pytest.fixture
def explained(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pods whose reasons the session works out, in order."""
    seen: list[str] = []
    real = Session.explain

    def counting(session: Session, task: TaskInfo) -> Reason:
        seen.append(task.key)
        return real(session, task)

    monkeypatch.setattr(Session, "explain", counting)
    return seen


def test_a_waiting_gang_reports_the_domain_holding_most_and_explains_only_it(
    explained: list[str],
) -> None:
    """Every rack has nodes for two 3-CPU pods, so each is tried: r3 (the fullest, no
    ssd node) holds none, r2 one, r1 one. The reason is r2's, the first to hold the
    most, counted over its three nodes; only that try's member is explained."""
    decisions = decide([*racks({"r1": 1, "r2": 1, "r3": 0}), *ssd_gang(2)], TIERS)
    assert not placements(decisions)
    message = decisions.pending["default/g-0"].message
    assert message == (
        "gang default/g: PodGroup default/g.spec.networkTopology asks its members in one "
        "domain of rack (hard); the best, rack r2, holds 1 of 2; 0/3 nodes are available: "
        "1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
    )
    assert explained == ["default/g-1"]


def test_a_placed_gang_keeps_the_reasons_of_its_members_left_out(
    explained: list[str],
) -> None:
    """A gang of minMember 2 with a third member: r3 holds none of them, r2 two, and the
    third waits with the reason worked out in r2, the domain the gang took; r3's try
    explains no one."""
    objects = racks({"r1": 2, "r2": 2, "r3": 0})
    objects += [pod_group("g", 2, networkTopology={"mode": "hard", "highestTierName": "rack"})]
    spec = {"nodeSelector": {"disk": "ssd"}}
    objects += [pod(f"g-{i}", {"cpu": "3"}, group="g", spec=spec) for i in range(3)]
    decisions = decide(objects, TIERS)
    assert sorted(placements(decisions).values()) == ["r2-0", "r2-1"]
    assert decisions.pending["default/g-2"].message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu."
    )
    assert explained == ["default/g-2"]


def test_a_domain_no_member_could_go_to_is_tried_once_for_all_such_domains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """r4 and r3 (the fullest) have no ssd node: a try in either places no one, so r3
    is passed over once r4 was tried; the reason is r2's, as when every rack was tried
    (its try made again to work out the reason)."""
    tried: list[str | None] = []
    real = gang_placement._place_plan

    def recording(*args: Any) -> dict[str, Reason]:
        domain = args[5]
        tried.append(None if domain is None else domain.name)
        return real(*args)

    monkeypatch.setattr(gang_placement, "_place_plan", recording)
    objects = racks({"r1": 1, "r2": 1, "r3": 0})
    objects += [node(f"r4-{i}", cpu="4", labels={RACK: "r4"}) for i in range(3)]
    objects.append(pod("busy-r4", {"cpu": "2"}, node_name="r4-2", scheduler="other"))
    decisions = decide([*objects, *ssd_gang(2)], TIERS)
    assert not placements(decisions)
    assert "the best, rack r2, holds 1 of 2; 0/3 nodes" in decisions.pending["default/g-0"].message
    assert tried == ["rack r4", "rack r2", "rack r1", "rack r2"]


def learning_from_tries(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], SchedulerConfig]:
    """A configuration whose gpufragmentation counts only the pods it has seen tried
    (no lookahead), so that a try made again may place otherwise; and the number of
    members each try placed, recorded as the tries are made."""
    tried: list[int] = []
    real = gang_placement._place_plan

    def recording(*args: Any) -> dict[str, Reason]:
        failures = real(*args)
        statement: Statement = args[4]
        tried.append(len(statement.placed))
        return failures

    monkeypatch.setattr(gang_placement, "_place_plan", recording)
    config = load_config(
        f"{TIERS}\ntiers:\n- plugins: [{{name: priority}}, {{name: gang}}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: gpufragmentation}]"
    )
    plugin = next(p for tier in config.tiers for p in tier if isinstance(p, GpuFragmentation))
    plugin.assume({}, lookahead=False)
    return tried, config


def test_a_domain_tried_again_that_places_the_gang_keeps_the_first_tries_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gpufragmentation without lookahead learns from the tries, so r0 tried again for
    its reasons places the gang its first try did not: the gang still waits, with the
    first try's reason, and the session does not fail."""
    tried, config = learning_from_tries(monkeypatch)
    card = {GPU: "1", GPU_MILLI: "1000"}
    objects = [node(f"r0-{i}", labels={RACK: "r0"}, extra=card) for i in range(2)]
    objects.append(pod("half", {GPU_MILLI: "500"}, node_name="r0-1", scheduler="other"))
    objects.append(pod_group("g", 2, networkTopology={"mode": "hard", "highestTierName": "rack"}))
    # Seen alone, the share ties on both nodes and takes r0-0, the card the other needs;
    # once both are seen, it goes to the half card left on r0-1.
    objects.append(pod("g-0", {"cpu": "1", GPU_MILLI: "500"}, group="g"))
    objects.append(pod("g-1", {"cpu": "1", GPU: "1"}, group="g"))
    decisions = decide(objects, config)
    assert not placements(decisions)
    assert tried == [1, 2]
    message = decisions.pending["default/g-1"].message
    assert message.endswith(
        f"the best, rack r0, holds 1 of 2; {gang_placement.UNEXPLAINED.message}"
    )


def test_a_domain_whose_explained_try_falls_short_binds_none_of_the_gang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gpufragmentation without lookahead learns from the tries, so r0's try explained
    again for the member it left out places fewer than the minimum: none is bound."""
    tried, config = learning_from_tries(monkeypatch)
    objects = [
        node("r0-0", labels={RACK: "r0"}, extra={GPU: "2", GPU_MILLI: "2000"}),
        node("r0-1", labels={RACK: "r0"}, extra={GPU: "1", GPU_MILLI: "1000"}),
        pod_group("g", 4, networkTopology={"mode": "hard", "highestTierName": "rack"}),
    ]
    # Seen first, the half cards fill r0-0, leaving g-2 (two cards) out and room for the
    # last two; once g-2 is seen, the first two go to r0-1, g-2 takes r0-0, and the last
    # two find no card.
    share, pair = {"cpu": "500m", GPU_MILLI: "500"}, {"cpu": "1", GPU: "2"}
    asks = [share, share, pair, share, share]
    objects += [pod(f"g-{i}", ask, group="g") for i, ask in enumerate(asks)]
    decisions = decide(objects, config)
    assert tried == [4, 3]
    assert not placements(decisions)
    assert sorted(decisions.pending) == [f"default/g-{i}" for i in range(5)]
    assert "the best, rack r0, holds 3 of 4" in decisions.pending["default/g-0"].message
