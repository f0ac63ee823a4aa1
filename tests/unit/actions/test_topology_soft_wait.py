"""A soft topology ask waits `topology.softWait` for a domain of the lowest tier that
could hold it before it spans domains; without the setting it spans at once."""

from tests.support.objects import at, decide, node, placements, pod, pod_group

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


def test_a_soft_gang_waits_for_one_rack_within_its_soft_wait() -> None:
    """Each rack has one node free: the gang of two fits no rack. Within its wait it is
    placed nowhere and says for how long it waits; without the setting it spans racks."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    waiting = decide(objects, WAITING, now=at(60))
    assert not placements(waiting)
    message = waiting.pending["default/g-0"].message
    assert "in one domain of rack (soft) and waits 540s more for one" in message, message
    spanning = decide(objects, SPANNING, now=at(60))
    assert set(placements(spanning)) == {"default/g-0", "default/g-1"}


def test_a_soft_gang_spans_racks_once_its_wait_is_over() -> None:
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    decisions = decide(objects, WAITING, now=at(601))
    where = placements(decisions)
    assert set(where) == {"default/g-0", "default/g-1"}
    assert len({where[k].split("-")[0] for k in where}) == 2


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
    decisions = decide(objects, f"starvationThreshold: 60s\n{WAITING}", now=at(120))
    assert "waits 480s more" in decisions.pending["default/k-0"].message
    assert "room is held" not in decisions.pending["default/k-0"].message
    assert "default/small" in placements(decisions)


def test_a_soft_gang_set_aside_within_its_wait_is_woken_when_it_ends() -> None:
    """Its outcome changes when the wait runs out, though nothing else does (the
    starvation threshold set past it)."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    decisions = decide(objects, f"starvationThreshold: 1h\n{WAITING}", now=at(60))
    assert decisions.unplaced["default/g"].until == at(600)


def test_without_a_soft_wait_a_gang_created_after_the_clock_spans_at_once() -> None:
    """A creation time ahead of the session's clock (another machine's) leaves no wait
    when none is configured."""
    objects = [*racks(RACKS_FULL_BUT_ONE_NODE_EACH), *soft_gang(2)]
    assert len(placements(decide(objects, SPANNING, now=at(-30)))) == 2
