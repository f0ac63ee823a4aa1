"""Preempt and reclaim for a gang asking for a topology domain: victims inside the
domain the gang will use, the cheapest domain's set, never a hard ask broken, a soft
ask anywhere when no domain holds it, a running gang's domain kept, and each sub-group
in a domain of its own."""

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from batchsched.model.decisions import Decisions, TopologyDomain

from .test_preempt import evicted, nominated
from tests.support.objects import Obj, at, decide, node, pod, pod_group, queue, span_starts

RACK = "topology.kubernetes.io/rack"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}\n"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def racks(names: Iterable[str], per_rack: int = 2) -> list[Obj]:
    """Nodes `rack-i` of 4 CPUs, labelled with their rack."""
    return [
        node(f"{rack}-{i}", cpu="4", labels={RACK: rack}) for rack in names for i in range(per_rack)
    ]


def filler(priorities: Mapping[str, int], **extra: Any) -> list[Obj]:
    """One running lone pod of 4 CPUs on each node named, of the priority given."""
    return [
        pod(
            f"busy-{where}",
            requests={"cpu": "4"},
            node_name=where,
            phase="Running",
            spec={"priority": priority},
            **extra,
        )
        for where, priority in priorities.items()
    ]


def preemptor(name: str, size: int, *, priority: int = 1000, **spec: Any) -> list[Obj]:
    """A waiting gang of `size` pods of 4 CPUs asking for one rack (hard by default)."""
    spec.setdefault("networkTopology", {"mode": "hard", "highestTierName": "rack"})
    return [
        pod_group(name, size, created=100, **spec),
        *(
            pod(
                f"{name}-{i}",
                requests={"cpu": "4"},
                group=name,
                created=100,
                spec={"priority": priority},
            )
            for i in range(size)
        ),
    ]


def rack_of(where: str) -> str:
    return where.rsplit("-", 1)[0]


def victim_racks(decisions: Decisions) -> set[str]:
    return {rack_of(e.node) for e in decisions.evictions}


def test_victims_are_chosen_inside_the_cheapest_rack() -> None:
    """r1 comes first in packing order but holds a victim of priority 50; r2's victims
    are of priority 2 and 3. Over the cluster the two cheapest (1 and 2) span racks."""
    busy = filler({"r1-0": 1, "r1-1": 50, "r2-0": 2, "r2-1": 3})
    decisions = decide([*racks(["r1", "r2"]), *busy, *preemptor("g", 2)], TIERS)
    assert evicted(decisions) == {"default/busy-r2-0", "default/busy-r2-1"}
    assert {rack_of(n) for n in nominated(decisions).values()} == {"r2"}
    assert "in rack r2" in decisions.pending["default/g-0"].message
    assert decisions.jobs["default/g"].domain == TopologyDomain("rack", "r2")
    # Without the ask, the cheapest set spans both racks: the ask is what keeps it in one.
    plain = decide([*racks(["r1", "r2"]), *busy, *preemptor("g", 2, networkTopology=None)])
    assert evicted(plain) == {"default/busy-r1-0", "default/busy-r2-0"}


def test_a_hard_ask_no_rack_can_free_waits_and_says_why() -> None:
    """Each rack holds a pod of higher priority than the gang: only a set spanning racks
    would do, and none is taken."""
    busy = filler({"r1-0": 1, "r1-1": 2000, "r2-0": 2000, "r2-1": 1})
    decisions = decide([*racks(["r1", "r2"]), *busy, *preemptor("g", 2)], TIERS)
    assert decisions.evictions == []
    assert "asks its members in one domain of rack (hard)" in (
        decisions.pending["default/g-0"].message
    )


def test_a_soft_ask_no_rack_can_free_makes_room_anywhere() -> None:
    busy = filler({"r1-0": 1, "r1-1": 2000, "r2-0": 2000, "r2-1": 1})
    soft = {"mode": "soft", "highestTierName": "rack"}
    decisions = decide(
        [*racks(["r1", "r2"]), *busy, *preemptor("g", 2, networkTopology=soft)], TIERS
    )
    assert evicted(decisions) == {"default/busy-r1-0", "default/busy-r2-1"}


def test_a_hard_ask_allowed_the_whole_cluster_makes_room_across_racks_naming_no_domain() -> None:
    """A limit above the one tier allows the whole cluster: room for three is made over
    both racks, and neither the gang's reason nor its status names the cluster as the
    domain it lands in, for it is none."""
    busy = filler({"r1-0": 1, "r1-1": 1, "r2-0": 1, "r2-1": 1})
    ask = {"mode": "hard", "highestTierAllowed": 2}
    decisions = decide(
        [*racks(["r1", "r2"]), *busy, *preemptor("g", 3, networkTopology=ask)], TIERS
    )
    assert victim_racks(decisions) == {"r1", "r2"}
    message = decisions.pending["default/g-0"].message
    assert message.startswith("preempt: evicting 3 pod(s)") and " in " not in message, message
    assert decisions.jobs["default/g"].domain is None


def test_a_running_gang_makes_room_for_its_member_in_its_own_rack() -> None:
    """One member runs on r2-0; the other evicts r2-1's pod of priority 5, not r1's of
    priority 1, and not the unlabelled node's."""
    objects = [*racks(["r1", "r2"], per_rack=1), node("r2-1", cpu="4", labels={RACK: "r2"})]
    objects += [node("bare", cpu="4"), *filler({"r1-0": 1, "r2-1": 5, "bare": 1})]
    gang = preemptor("g", 2)
    gang[1].update(spec={**gang[1]["spec"], "nodeName": "r2-0"}, status={"phase": "Running"})
    decisions = decide([*objects, *gang], TIERS)
    assert evicted(decisions) == {"default/busy-r2-1"}
    assert nominated(decisions) == {"default/g-1": "r2-1"}


def test_reclaim_takes_back_room_inside_one_rack() -> None:
    """Queue a borrowed every node; queue b's gang of 2 asking for a rack reclaims two
    pods of one rack."""
    objects: list[Obj] = [queue("a"), queue("b"), *racks(["r1", "r2", "r3"])]
    for where in ("r1-0", "r1-1", "r2-0", "r2-1", "r3-0", "r3-1"):
        objects.append(pod_group(f"a-{where}", 1, queue="a"))
        objects.append(
            pod(
                f"a-{where}",
                requests={"cpu": "4"},
                group=f"a-{where}",
                node_name=where,
                phase="Running",
            )
        )
    decisions = decide([*objects, *preemptor("b", 2, queue="b", priority=0)], TIERS)
    assert len(decisions.evictions) == 2
    assert {e.action for e in decisions.evictions} == {"reclaim"}
    assert len(victim_racks(decisions)) == 1
    assert {rack_of(n) for n in nominated(decisions).values()} == victim_racks(decisions)


def test_sub_groups_each_make_room_in_a_rack_of_their_own() -> None:
    """Volcano sub-groups of 2, each hard in one rack: four racks of two nodes, each
    with a pod of priority 1 and one of higher priority but r2 and r4: the stages go
    to r2 and r4."""
    busy = {f"r{r}-{i}": 1 for r in range(1, 5) for i in range(2)}
    busy |= {"r1-1": 2000, "r3-1": 2000}
    policy = [
        {
            "name": "stage",
            "subGroupSize": 2,
            "matchLabelKeys": ["stage"],
            "networkTopology": {"mode": "hard", "highestTierName": "rack"},
        }
    ]
    group = pod_group("g", 4, api_version=VOLCANO, subGroupPolicy=policy, created=100)
    members = [
        pod(
            f"g-{i}",
            requests={"cpu": "4"},
            labels={"stage": str(i // 2)},
            annotations={"scheduling.k8s.io/group-name": "g"},
            created=100,
            spec={"priority": 1000},
        )
        for i in range(4)
    ]
    objects = [*racks(["r1", "r2", "r3", "r4"]), *filler(busy), group, *members]
    decisions = decide(objects, TIERS)
    where = nominated(decisions)
    assert len(where) == 4
    stages = [{rack_of(where[f"default/g-{i}"]) for i in pair} for pair in ((0, 1), (2, 3))]
    assert all(len(racks_of_stage) == 1 for racks_of_stage in stages)
    assert stages[0] | stages[1] == {"r2", "r4"}
    assert victim_racks(decisions) == {"r2", "r4"}


# The starvation threshold past the wait: no room is held for the gang at either time.
WAITING = (
    "starvationThreshold: 1h\n"
    f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}], softWait: 10m}}\n"
)


def waits_then_spans(objects: list[Obj], waiter: str) -> Decisions:
    """The gang evicts nothing while it waits: its softWait starts at 160s, as room made
    across racks would place it, and 300s later it waits the rest; the decisions once
    its wait (10m) is over."""
    waiting = decide(objects, WAITING, now=at(160))
    assert waiting.evictions == []
    assert span_starts(waiting) == {"default/g": at(160)}
    assert waiting.unplaced["default/g"].until == at(760)
    later = decide(objects, WAITING, now=at(460), span_clocks=waiting.span_clocks)
    assert later.evictions == []
    assert "(soft) and waits 300s more" in later.pending[f"default/{waiter}"].message
    return decide(objects, WAITING, now=at(761), span_clocks=waiting.span_clocks)


def test_a_soft_ask_within_its_soft_wait_makes_room_only_in_a_rack() -> None:
    """As above, no rack can be freed for the gang: within its softWait it is a hard ask
    of a rack, and evicts nothing (room made across racks would not be taken before
    the wait ends); once the wait is over it makes room anywhere."""
    busy = filler({"r1-0": 1, "r1-1": 2000, "r2-0": 2000, "r2-1": 1})
    soft = {"mode": "soft", "highestTierName": "rack"}
    objects = [*racks(["r1", "r2"]), *busy, *preemptor("g", 2, networkTopology=soft)]
    spanning = waits_then_spans(objects, "g-0")
    assert evicted(spanning) == {"default/busy-r1-0", "default/busy-r2-1"}


def test_a_soft_sub_group_within_its_soft_wait_makes_room_only_in_a_rack() -> None:
    """The same for a soft sub-group of a gang asking nothing as a whole; a rack that
    can be freed is freed within the wait."""
    policy = [{"name": "workers", "subGroupSize": 2, "networkTopology": {"mode": "soft"}}]
    gang = preemptor("g", 2, networkTopology=None, subGroupPolicy=policy)
    busy = filler({"r1-0": 1, "r1-1": 2000, "r2-0": 2000, "r2-1": 1})
    waiting = decide([*racks(["r1", "r2"]), *busy, *gang], WAITING, now=at(160))
    assert waiting.evictions == []
    assert "sub-group workers: " in waiting.pending["default/g-0"].message
    started = {"default/g": at(100)}
    spanning = decide(
        [*racks(["r1", "r2"]), *busy, *gang], WAITING, now=at(701), span_clocks=started
    )
    assert evicted(spanning) == {"default/busy-r1-0", "default/busy-r2-1"}
    busy = filler({"r1-0": 1, "r1-1": 2000, "r2-0": 3, "r2-1": 1})
    freed = decide([*racks(["r1", "r2"]), *busy, *gang], WAITING, now=at(160))
    assert evicted(freed) == {"default/busy-r2-0", "default/busy-r2-1"}


def soft_sub_group() -> list[Obj]:
    """A gang asking nothing as a whole, its sub-group of two asking softly for a rack."""
    policy = [{"name": "workers", "subGroupSize": 2, "networkTopology": {"mode": "soft"}}]
    return preemptor("g", 2, networkTopology=None, subGroupPolicy=policy)


def kueue_pod_sets() -> list[Obj]:
    """A gang of two Kueue pod sets, a and b, of two pods each preferring one rack."""
    notes = {
        "scheduling.batchsched.io/group-name": "g",
        "kueue.x-k8s.io/podset-preferred-topology": RACK,
    }
    members = [
        pod(
            f"g-{i}",
            requests={"cpu": "4"},
            labels={"kueue.x-k8s.io/podset": "ab"[i // 2]},
            annotations=notes,
            created=100,
            spec={"priority": 1000},
        )
        for i in range(4)
    ]
    return [pod_group("g", 4, created=100), *members]


@pytest.mark.parametrize(
    ("gang", "busy", "waiter"),
    [
        (soft_sub_group(), {"r1-0": 1, "r1-1": 2000, "r2-0": 2000, "r2-1": 1}, "g-0"),
        # Pod set a takes r1, freed whole; pod set b could only span r2 and r3.
        (
            kueue_pod_sets(),
            {"r1-0": 1, "r1-1": 1, "r2-0": 1, "r2-1": 2000, "r3-0": 2000, "r3-1": 1},
            "g-2",
        ),
    ],
    ids=["volcano sub-group", "kueue pod set among several"],
)
def test_a_soft_part_within_its_soft_wait_starts_it_when_room_could_be_made_across_racks(
    gang: list[Obj], busy: dict[str, int], waiter: str
) -> None:
    """No rack can be freed for the part, and the cluster has no free room: only room
    made across racks would place the gang, so its softWait starts then, as a whole
    gang's does; once it is over, the pods of priority 1 are evicted across racks."""
    objects = [*racks(sorted({rack_of(where) for where in busy})), *filler(busy), *gang]
    spanning = waits_then_spans(objects, waiter)
    assert evicted(spanning) == {f"default/busy-{where}" for where, p in busy.items() if p == 1}
