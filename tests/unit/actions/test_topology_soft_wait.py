"""A soft topology ask waits `topology.softWait` for a domain of the lowest tier that
could hold it before it spans domains, counted from the first session in which it could
have been placed across domains; without the setting it spans at once."""

from tests.support.objects import at, decide, node, placements, pod, pod_group, span_starts

RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"
TIERS = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}, {{name: zone, nodeLabel: {ZONE}}}]"
WAITING = f"{TIERS}, softWait: 10m}}"
SPANNING = f"{TIERS}}}"


def racks(busy: tuple[str, ...]) -> list[dict[str, object]]:
    """Racks r1 and r2 (zone z1) and r3 (zone z2) of two 4-CPU nodes each; a pod of
    another scheduler fills each node of `busy`."""
    objects: list[dict[str, object]] = []
    for rack, zone in {"r1": "z1", "r2": "z1", "r3": "z2"}.items():
        for i in range(2):
            name = f"{rack}-{i}"
            objects.append(node(name, cpu="4", labels={RACK: rack, ZONE: zone}))
            if name in busy:
                objects.append(pod(f"hog-{name}", {"cpu": "4"}, node_name=name, scheduler="other"))
    return objects


def soft_gang(size: int) -> list[dict[str, object]]:
    objects = [pod_group("g", size, created=0, networkTopology={"mode": "soft"})]
    objects += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=0) for i in range(size)]
    return objects


RACKS_FULL_BUT_ONE_NODE_EACH = ("r1-0", "r2-0", "r3-0")
# Gang g's softWait started when it was created: an earlier session found it could
# have been placed across domains then.
STARTED = {"default/g": at(0)}


def test_a_soft_gang_waits_for_one_rack_within_its_soft_wait() -> None:
    """Each rack has one node free: the gang of two fits no rack. Within its wait it is
    placed nowhere and says for how long it waits; without the setting it spans racks."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    waiting = decide(objects, WAITING, now=at(60), span_clocks=STARTED)
    assert not placements(waiting)
    assert span_starts(waiting) == STARTED
    message = waiting.pending["default/g-0"].message
    assert "in one domain of rack (soft) and waits 540s more for one" in message, message
    spanning = decide(objects, SPANNING, now=at(60))
    assert set(placements(spanning)) == {"default/g-0", "default/g-1"}


def test_a_soft_gang_spans_racks_once_its_wait_is_over() -> None:
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    decisions = decide(objects, WAITING, now=at(601), span_clocks=STARTED)
    where = placements(decisions)
    assert set(where) == {"default/g-0", "default/g-1"}
    assert len({where[k].split("-")[0] for k in where}) == 2
    # Placed, it keeps its clock until a snapshot shows its members on nodes.
    assert span_starts(decisions) == STARTED


def test_a_soft_gang_that_could_start_nowhere_waits_past_its_soft_wait() -> None:
    """Every node is full: the gang cannot start anywhere, so its softWait does not
    start, however long ago it was created; it says so, and no time wakes it."""
    full = tuple(f"{rack}-{i}" for rack in ("r1", "r2", "r3") for i in range(2))
    objects = [*racks(full), *soft_gang(2)]
    decisions = decide(objects, f"starvationThreshold: 1h\n{WAITING}", now=at(3000))
    assert not placements(decisions)
    assert not decisions.span_clocks
    message = decisions.pending["default/g-0"].message
    assert (
        "in one domain of rack (soft); its softWait of 600s starts once it could start "
        "across domains (topology.softWait)"
    ) in message, message
    assert decisions.unplaced["default/g"].until == at(3600)


def test_a_soft_gang_starts_its_wait_when_room_comes_across_racks_only() -> None:
    """Created long before, it waited with every node full. Room comes on one node of
    each rack: it does not span them at once, its softWait starts then (the session
    reports the start); a session softWait later, it spans them."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    first = decide(objects, WAITING, now=at(3000))
    assert not placements(first)
    assert span_starts(first) == {"default/g": at(3000)}
    message = first.pending["default/g-0"].message
    assert "in one domain of rack (soft) and waits 600s more for one" in message, message
    later = decide(objects, WAITING, now=at(3300), span_clocks=first.span_clocks)
    assert not placements(later) and later.span_clocks == first.span_clocks
    assert "waits 300s more" in later.pending["default/g-0"].message
    where = placements(decide(objects, WAITING, now=at(3601), span_clocks=first.span_clocks))
    assert len({node.split("-")[0] for node in where.values()}) == 2


def test_a_soft_gang_within_its_wait_takes_a_rack_that_holds_it() -> None:
    objects = [*racks(("r1-0", "r3-0")), *soft_gang(2)]
    where = placements(decide(objects, WAITING, now=at(60)))
    assert sorted(where.values()) == ["r2-0", "r2-1"]


def test_a_soft_gang_bigger_than_any_rack_waits_for_one_zone() -> None:
    """Three members fit no rack: the gang waits for a zone rather than for a rack none
    could hold it in, and takes zone z1 once it has the room."""
    objects = [*racks(("r1-0",)), *soft_gang(3)]
    where = placements(decide(objects, WAITING, now=at(60)))
    assert sorted(where.values()) == ["r1-1", "r2-0", "r2-1"]
    objects = [*racks(("r1-0", "r2-0")), *soft_gang(3)]
    decisions = decide(objects, WAITING, now=at(60))
    assert not placements(decisions)
    assert "in one domain of zone (soft) and waits" in decisions.pending["default/g-0"].message


def test_a_soft_gang_within_its_wait_holds_no_room_past_the_starvation_threshold() -> None:
    """It could start across racks, and waits for one by its own choice: room held in a
    rack would idle there until the last of it came, so a small pod still takes the
    free node of the rack closest to holding the gang."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    objects.append(pod("small", {"cpu": "4"}, created=110))
    decisions = decide(objects, f"starvationThreshold: 60s\n{WAITING}", now=at(120))
    assert "room is held" not in decisions.pending["default/g-0"].message
    assert "default/small" in placements(decisions)


def test_a_kueue_preferred_pod_set_within_its_wait_holds_no_room_either() -> None:
    """The same, the soft ask stated on the pod set by Kueue's annotation."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), pod_group("k", 2, created=0)]
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        "kueue.x-k8s.io/podset-preferred-topology": RACK,
    }
    labels = {"kueue.x-k8s.io/podset": "workers"}
    objects += [
        pod(f"k-{i}", {"cpu": "4"}, labels=labels, annotations=notes, created=0) for i in range(2)
    ]
    objects.append(pod("small", {"cpu": "4"}, created=110))
    started = {"default/k": at(0)}
    decisions = decide(
        objects, f"starvationThreshold: 60s\n{WAITING}", now=at(120), span_clocks=started
    )
    assert "waits 480s more" in decisions.pending["default/k-0"].message
    assert "room is held" not in decisions.pending["default/k-0"].message
    assert "default/small" in placements(decisions)


def test_a_soft_gang_set_aside_within_its_wait_is_woken_when_it_ends() -> None:
    """Its outcome changes when the wait runs out, though nothing else does (the
    starvation threshold set past it)."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    decisions = decide(
        objects, f"starvationThreshold: 1h\n{WAITING}", now=at(60), span_clocks=STARTED
    )
    assert decisions.unplaced["default/g"].until == at(600)


def test_without_a_soft_wait_a_gang_created_after_the_clock_spans_at_once() -> None:
    """A creation time ahead of the session's clock (another machine's) leaves no wait
    when none is configured."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    assert len(placements(decide(objects, SPANNING, now=at(-30)))) == 2


def sub_group_gang(size: int) -> list[dict[str, object]]:
    """A gang of `size` asking nothing as a whole, whose members form one sub-group
    asking softly for a rack."""
    policy = [{"name": "workers", "subGroupSize": size, "networkTopology": {"mode": "soft"}}]
    objects = [pod_group("g", size, created=0, subGroupPolicy=policy)]
    objects += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=0) for i in range(size)]
    return objects


def kueue_pod_sets() -> list[dict[str, object]]:
    """A gang of two Kueue pod sets, a and b, of two pods each preferring one rack."""
    notes = {
        "scheduling.batchsched.io/group-name": "k",
        "kueue.x-k8s.io/podset-preferred-topology": RACK,
    }
    objects = [pod_group("k", 4, created=0)]
    for i in range(4):
        labels = {"kueue.x-k8s.io/podset": "ab"[i // 2]}
        objects.append(pod(f"k-{i}", {"cpu": "4"}, labels=labels, annotations=notes, created=0))
    return objects


def test_a_soft_sub_group_waits_for_one_rack_within_its_soft_wait() -> None:
    """The gang asks nothing as a whole; its sub-group of two asks softly for a rack,
    and no rack has two nodes free. Within the wait it waits, saying which part waits
    and for how long; without the setting, or once the wait is over, it spans racks."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *sub_group_gang(2)]
    # The starvation threshold past the wait: its end is the first time it may change.
    config = f"starvationThreshold: 1h\n{WAITING}"
    waiting = decide(objects, config, now=at(60), span_clocks=STARTED)
    assert not placements(waiting)
    message = waiting.pending["default/g-0"].message
    assert (
        "sub-group workers: PodGroup default/g.spec.subGroupPolicy[0].networkTopology asks "
        "its members in one domain of rack (soft) and waits 540s more for one before "
        "spanning domains (topology.softWait); the best, rack r1, holds 1 of 2"
    ) in message, message
    assert waiting.unplaced["default/g"].until == at(600)
    for config, now in ((SPANNING, 60), (WAITING, 601)):
        where = placements(decide(objects, config, now=at(now), span_clocks=STARTED))
        assert set(where) == {"default/g-0", "default/g-1"}
        assert len({node.split("-")[0] for node in where.values()}) == 2


def test_a_soft_sub_group_within_its_wait_takes_a_rack_that_holds_it() -> None:
    objects = [*racks(("r1-0", "r3-0")), *sub_group_gang(2)]
    assert sorted(placements(decide(objects, WAITING, now=at(60))).values()) == ["r2-0", "r2-1"]


def test_a_soft_sub_group_waits_for_a_rack_inside_the_gangs_zone() -> None:
    """A gang of three asks for one zone (no rack holds it); two of its members form a
    sub-group asking softly for a rack. Zone z1, the fuller, has one node free in each
    of its three racks: within the wait the sub-group does not span them, and the gang
    takes zone z2, whose rack r4 holds the sub-group; at once, it spans z1's racks."""
    objects: list[dict[str, object]] = []
    for rack, zone in {"r1": "z1", "r2": "z1", "r3": "z1", "r4": "z2", "r5": "z2"}.items():
        for i in range(2):
            name = f"{rack}-{i}"
            objects.append(node(name, cpu="4", labels={RACK: rack, ZONE: zone}))
            if name in ("r1-0", "r2-0", "r3-0", "r5-0"):
                objects.append(pod(f"hog-{name}", {"cpu": "4"}, node_name=name, scheduler="other"))
    workers = {"matchLabels": {"role": "worker"}}
    policy = [
        {
            "name": "workers",
            "labelSelector": workers,
            "subGroupSize": 2,
            "networkTopology": {"mode": "soft"},
        }
    ]
    objects.append(
        pod_group(
            "g", 3, created=0, networkTopology={"highestTierName": "zone"}, subGroupPolicy=policy
        )
    )
    for i in range(3):
        labels = {"role": "worker"} if i < 2 else {}
        objects.append(pod(f"g-{i}", {"cpu": "4"}, group="g", labels=labels, created=0))
    where = placements(decide(objects, WAITING, now=at(60)))
    assert sorted(where[f"default/g-{i}"] for i in range(2)) == ["r4-0", "r4-1"]
    assert where["default/g-2"] == "r5-1"
    where = placements(decide(objects, SPANNING, now=at(60)))
    assert len(where) == 3 and all(n.split("-")[0] in ("r1", "r2", "r3") for n in where.values())
    assert where["default/g-0"][:2] != where["default/g-1"][:2]


def test_a_kueue_preferred_pod_set_among_several_waits_for_one_rack() -> None:
    """Rack r1 is free, r2 and r3 have a node each: pod set a takes r1, and pod set b
    waits for a rack within the wait (the gang with it), spanning r2 and r3 at once or
    once the wait is over."""
    objects = [*racks(("r2-0", "r3-0")), *kueue_pod_sets()]
    waiting = decide(
        objects, f"starvationThreshold: 1h\n{WAITING}", now=at(60), span_clocks={"default/k": at(0)}
    )
    assert not placements(waiting)
    message = waiting.pending["default/k-2"].message
    assert "pod set b: " in message, message
    assert "in one domain of topology.kubernetes.io/rack (soft) and waits 540s more" in message
    assert waiting.unplaced["default/k"].until == at(600)
    for config, now in ((SPANNING, 60), (WAITING, 601)):
        where = placements(decide(objects, config, now=at(now), span_clocks={"default/k": at(0)}))
        assert {where["default/k-0"][:2], where["default/k-1"][:2]} == {"r1"}
        assert {where["default/k-2"][:2], where["default/k-3"][:2]} == {"r2", "r3"}


def test_a_soft_sub_group_within_its_wait_holds_no_room_past_the_starvation_threshold() -> None:
    """As for a whole gang: its gang could start with the sub-group across racks, so a
    small pod still takes the free node of a rack."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *sub_group_gang(2)]
    objects.append(pod("small", {"cpu": "4"}, created=110))
    decisions = decide(
        objects, f"starvationThreshold: 60s\n{WAITING}", now=at(120), span_clocks=STARTED
    )
    message = decisions.pending["default/g-0"].message
    assert "waits 480s more" in message and "room is held" not in message, message
    assert "default/small" in placements(decisions)


def hard_zone_gang_of_a_soft_sub_group() -> list[dict[str, object]]:
    """A gang of two asking hard for one zone, whose two members form one sub-group
    asking softly for a rack (and no higher tier)."""
    soft = {"mode": "soft", "highestTierName": "rack"}
    policy = [{"name": "workers", "subGroupSize": 2, "networkTopology": soft}]
    ask = {"mode": "hard", "highestTierName": "zone"}
    objects = [pod_group("g", 2, created=0, networkTopology=ask, subGroupPolicy=policy)]
    objects += [pod(f"g-{i}", {"cpu": "4"}, group="g", created=0) for i in range(2)]
    return objects


def test_a_soft_sub_group_waiting_inside_a_zone_with_room_names_its_own_wait() -> None:
    """Zone z1 has room for the gang (a node free in r1 and in r2) and z2 none: the gang's
    own ask is met, it waits only for its sub-group's rack. Its reason names the part's
    wait, not the zone as if it held no member."""
    objects = [*racks(("r1-0", "r2-0", "r3-0", "r3-1")), *hard_zone_gang_of_a_soft_sub_group()]
    decisions = decide(objects, WAITING, now=at(60), span_clocks=STARTED)
    assert not placements(decisions)
    message = decisions.pending["default/g-0"].message
    assert message.startswith(
        "gang default/g: sub-group workers: PodGroup default/g.spec.subGroupPolicy[0]."
        "networkTopology asks its members in one domain of rack (soft) and waits 540s more"
    ), message
    assert "zone z1" not in message, message


def test_a_starving_gang_whose_sub_group_has_no_rack_to_wait_for_in_its_zones_holds_room() -> None:
    """Zone z1's racks have a node each (r2-0 busy); zone z2's rack r3 has two, both busy.
    The gang (hard: one zone) cannot start in any zone, spanning racks or not, and in z1
    no rack could ever hold its sub-group, so the sub-group would not wait there: past
    the starvation threshold room is held for it, within softWait as after it."""
    objects: list[dict[str, object]] = []
    layout = {
        "r1-0": ("r1", "z1"),
        "r2-0": ("r2", "z1"),
        "r3-0": ("r3", "z2"),
        "r3-1": ("r3", "z2"),
    }
    for name, (rack, zone) in layout.items():
        objects.append(node(name, cpu="4", labels={RACK: rack, ZONE: zone}))
        if name != "r1-0":
            objects.append(pod(f"hog-{name}", {"cpu": "4"}, node_name=name, scheduler="other"))
    objects += hard_zone_gang_of_a_soft_sub_group()
    objects.append(pod("small", {"cpu": "4"}, created=110))
    config = f"starvationThreshold: 60s\n{WAITING}"
    for now in (120, 700):
        message = decide(objects, config, now=at(now)).pending["default/g-0"].message
        assert "room is held for it on node(s) r3-0, r3-1" in message, (now, message)


def test_a_soft_gang_that_could_start_nowhere_holds_room_past_the_starvation_threshold() -> None:
    """Every node is full and its softWait has not started: past the starvation
    threshold room is held for it, in the rack closest to holding it, as for any gang
    (it could not start across racks, so no room it holds waits on its own choice)."""
    full = tuple(f"{rack}-{i}" for rack in ("r1", "r2", "r3") for i in range(2))
    objects = [*racks(full), *soft_gang(2)]
    decisions = decide(objects, f"starvationThreshold: 60s\n{WAITING}", now=at(120))
    assert not decisions.span_clocks
    assert "room is held" in decisions.pending["default/g-0"].message


def test_a_soft_gang_whose_binds_failed_keeps_its_clock() -> None:
    """A session spans racks with the gang, but its binds fail (or the operator drops
    them, a pod having changed meanwhile): the cluster is as it was, and the next
    session spans them again rather than starting the softWait afresh, as in the
    simulator, where every bind succeeds."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    first = decide(objects, WAITING, now=at(100))
    assert span_starts(first) == {"default/g": at(100)}
    spanning = decide(objects, WAITING, now=at(701), span_clocks=first.span_clocks)
    assert len(placements(spanning)) == 2
    retried = decide(objects, WAITING, now=at(702), span_clocks=spanning.span_clocks)
    assert len(placements(retried)) == 2, retried.pending["default/g-0"].message
