"""proportion with Volcano's queue fields: guarantees, fixed deserved shares, a tree
of parents, and which running pods a job may reclaim."""

from collections import Counter
from typing import Any

from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.model.snapshot import JobInfo

from tests.support.objects import Obj, decide, gang, node, placements, pod, pod_group, snapshot_of

VOLCANO = "scheduling.volcano.sh/v1beta1"


def queue(name: str, **spec: Any) -> Obj:
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def wanting(queue_name: str, cpus: int) -> list[Obj]:
    """`cpus` single-pod jobs of one CPU each in `queue_name`."""
    objects: list[Obj] = []
    for i in range(cpus):
        objects += gang(f"{queue_name}{i}", 1, requests={"cpu": "1"}, queue=queue_name)
    return objects


def by_queue(objects: list[Obj]) -> tuple[Counter[str], dict[str, dict[str, int]]]:
    """How many one-CPU jobs of each queue were placed, and the queues' deserved shares."""
    decisions = decide(objects)
    placed = Counter(
        key.split("/")[1].split("-")[0].rstrip("0123456789") for key in placements(decisions)
    )
    return placed, decisions.deserved


def test_a_guarantee_is_a_floor_not_an_extra() -> None:
    """Weighted 1:3, g would deserve 2 of 8 CPUs; its guarantee of 4 lifts it to 4."""
    placed, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("g", weight=1, guarantee={"resource": {"cpu": "4"}}),
            queue("h", weight=3),
            *wanting("g", 8),
            *wanting("h", 8),
        ]
    )
    assert placed == {"g": 4, "h": 4}
    assert (deserved["g"]["cpu"], deserved["h"]["cpu"]) == (4000, 4000)


def test_a_guarantee_below_the_weighted_share_changes_nothing() -> None:
    _, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("g", weight=3, guarantee={"resource": {"cpu": "1"}}),
            queue("h", weight=1),
            *wanting("g", 8),
            *wanting("h", 8),
        ]
    )
    assert (deserved["g"]["cpu"], deserved["h"]["cpu"]) == (6000, 2000)


def test_a_guarantee_is_held_for_its_queue_even_while_it_wants_less() -> None:
    """A reservation, as Volcano's realCapability: h may use the 2 CPUs beside g's
    guarantee of 6, not the 5 g leaves unused."""
    placed, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("g", guarantee={"resource": {"cpu": "6"}}),
            queue("h"),
            *wanting("g", 1),
            *wanting("h", 8),
        ]
    )
    assert placed == {"g": 1, "h": 2}
    assert (deserved["g"]["cpu"], deserved["h"]["cpu"]) == (1000, 2000)


def test_guarantees_beyond_the_cluster_are_scaled_down_alike() -> None:
    _, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("g", guarantee={"resource": {"cpu": "6"}}),
            queue("h", guarantee={"resource": {"cpu": "10"}}),
            *wanting("g", 8),
            *wanting("h", 12),
        ]
    )
    assert (deserved["g"]["cpu"], deserved["h"]["cpu"]) == (3000, 5000)


def test_deserved_fixes_a_share_instead_of_weight() -> None:
    placed, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("f", weight=1, deserved={"cpu": "6"}),
            queue("h", weight=5),
            *wanting("f", 8),
            *wanting("h", 8),
        ]
    )
    assert placed == {"f": 6, "h": 2}
    assert (deserved["f"]["cpu"], deserved["h"]["cpu"]) == (6000, 2000)


def test_a_parents_share_is_split_among_its_children_by_weight() -> None:
    """Top: org and solo weighted 1:1 share 8 CPUs; org's 4 go to x and y 1:3."""
    placed, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("org"),
            queue("x", parent="org", weight=1),
            queue("y", parent="org", weight=3),
            queue("solo", parent="root"),
            *wanting("x", 8),
            *wanting("y", 8),
            *wanting("solo", 8),
        ]
    )
    assert placed == {"x": 1, "y": 3, "solo": 4}
    assert {name: deserved[name]["cpu"] for name in ("org", "x", "y", "solo")} == {
        "org": 4000,
        "x": 1000,
        "y": 3000,
        "solo": 4000,
    }


def test_a_parent_deserves_at_least_its_childrens_guarantees() -> None:
    _, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("org", weight=1),
            queue("x", parent="org", guarantee={"resource": {"cpu": "6"}}),
            queue("solo", weight=7),
            *wanting("x", 8),
            *wanting("solo", 8),
        ]
    )
    assert (deserved["org"]["cpu"], deserved["x"]["cpu"], deserved["solo"]["cpu"]) == (
        6000,
        6000,
        2000,
    )


def test_a_child_is_held_within_its_parents_capability() -> None:
    decisions = decide(
        [
            node("n1", cpu="8"),
            queue("org", capability={"cpu": "2"}),
            queue("x", parent="org"),
            queue("y", parent="org"),
            *wanting("x", 3),
        ]
    )
    assert sorted(placements(decisions)) == ["default/x0-0", "default/x1-0"]
    assert decisions.pending["default/x2-0"].endswith(
        "queue org: pod default/x2-0 would exceed its capability for cpu (2 of 2 in use)"
    )


def test_jobs_sent_to_a_parent_wait_naming_its_children() -> None:
    decisions = decide(
        [
            node("n1"),
            queue("org"),
            queue("y", parent="org"),
            queue("x", parent="org"),
            *wanting("org", 1),
        ]
    )
    assert decisions.pending == {
        "default/org0-0": "queue 'org' has child queues; submit to one of them: x, y"
    }


def test_a_closed_parent_closes_its_children() -> None:
    closed = {**queue("org"), "status": {"state": "Closed"}}
    decisions = decide([node("n1"), closed, queue("x", parent="org"), *wanting("x", 1)])
    assert decisions.pending == {"default/x0-0": "queue org is closed"}


def running(name: str, cpu: str, *, scheduler: str = "batch-scheduler") -> Obj:
    """A pod running on n1 as the only member of the PodGroup of its name."""
    return pod(
        name,
        requests={"cpu": cpu} if cpu else None,
        group=name,
        node_name="n1",
        phase="Running",
        scheduler=scheduler,
    )


def reclaim_session(objects: list[Obj]) -> tuple[Session, JobInfo]:
    session = Session(snapshot_of(objects), tiers=default_config().tiers)
    return session, session.snapshot.jobs["default/a-new"]


def may_reclaim(session: Session, job: JobInfo) -> dict[str, bool]:
    (check,) = session.reclaimable
    victims = session.victims
    mask = check(job, victims)
    return {task.name: bool(allowed) for task, allowed in zip(victims.tasks, mask, strict=True)}


# On 12 CPUs: a holds 1 and wants 4 more, b holds 7 with a guarantee of 6, c holds 4 and is
# not reclaimable. Weighted alike, a deserves 3, b 6 (its floor), c 3.
RECLAIM = [
    node("n1", cpu="12"),
    queue("a"),
    queue("b", guarantee={"resource": {"cpu": "6"}}),
    queue("c", reclaimable=False),
    pod_group("a-run", 1, queue="a"),
    running("a-run", "1"),
    *gang("a-new", 4, requests={"cpu": "1"}, queue="a"),
    *(pod_group(name, 1, queue="b") for name in ("b-big0", "b-big1", "b-small")),
    running("b-big0", "3"),
    running("b-big1", "3"),
    running("b-small", "1"),
    *(pod_group(f"c{i}", 1, queue="c") for i in range(4)),
    *(running(f"c{i}", "1") for i in range(4)),
    running("foreign", "", scheduler="default-scheduler"),
]


def test_reclaim_takes_only_what_leaves_a_queue_its_guarantee() -> None:
    session, job = reclaim_session(RECLAIM)
    assert may_reclaim(session, job) == {
        "a-run": False,  # its own queue
        "b-big0": False,  # would leave b 4 of its guaranteed 6
        "b-big1": False,
        "b-small": True,
        "c0": False,  # c is over its share but not reclaimable
        "c1": False,
        "c2": False,
        "c3": False,
        "foreign": False,  # in no queue
    }


def test_reclaim_stops_once_the_victims_queue_is_back_at_its_share() -> None:
    session, job = reclaim_session(RECLAIM)
    names = [task.name for task in session.victims.tasks]
    session.evict(names.index("b-small"))
    assert not any(may_reclaim(session, job).values())


def test_a_queue_at_its_share_reclaims_nothing() -> None:
    session, job = reclaim_session(
        [
            node("n1", cpu="4"),
            queue("a"),
            queue("b"),
            pod_group("a-run", 1, queue="a"),
            running("a-run", "2"),
            *gang("a-new", 1, requests={"cpu": "1"}, queue="a"),
            *(pod_group(f"b{i}", 1, queue="b") for i in range(2)),
            *(running(f"b{i}", "1") for i in range(2)),
        ]
    )
    assert may_reclaim(session, job) == {"a-run": False, "b0": False, "b1": False}


def test_reclaim_keeps_an_ancestors_guarantee_except_within_it() -> None:
    """org guarantees 7 of 10 CPUs and holds 7, x (weight 1) 4 of them, above its share;
    y (weight 3) is below its share. Taking from x would leave org short of its
    guarantee, so a may not; y may, as the CPUs stay within org."""
    objects = [
        node("n1", cpu="10"),
        queue("a"),
        queue("org", guarantee={"resource": {"cpu": "7"}}),
        queue("x", parent="org", weight=1),
        queue("y", parent="org", weight=3),
        *(pod_group(f"x{i}", 1, queue="x") for i in range(4)),
        *(running(f"x{i}", "1") for i in range(4)),
        *(pod_group(f"y{i}", 1, queue="y") for i in range(3)),
        *(running(f"y{i}", "1") for i in range(3)),
        *gang("a-new", 4, requests={"cpu": "1"}, queue="a"),
        *gang("y-new", 3, requests={"cpu": "1"}, queue="y"),
    ]
    session, job = reclaim_session(objects)
    assert not any(may_reclaim(session, job).values())
    sibling = session.snapshot.jobs["default/y-new"]
    assert [name for name, ok in may_reclaim(session, sibling).items() if ok] == [
        f"x{i}" for i in range(4)
    ]


def test_guarantees_are_held_at_every_level_of_the_tree() -> None:
    """Of 8 CPUs, the top queue alpha guarantees 2 and betaone (under beta) 1: betatwo,
    beside both, may hold 5 and deserves no more, though it alone asks."""
    placed, deserved = by_queue(
        [
            node("n1", cpu="8"),
            queue("alpha", guarantee={"resource": {"cpu": "2"}}),
            queue("beta"),
            queue("betaone", parent="beta", guarantee={"resource": {"cpu": "1"}}),
            queue("betatwo", parent="beta"),
            *wanting("betatwo", 8),
        ]
    )
    assert placed == {"betatwo": 5}
    assert deserved["betatwo"]["cpu"] == 5000


def test_a_queue_of_higher_priority_is_served_first() -> None:
    """Volcano's proportion orders queues by spec.priority before their shares: the
    one CPU goes to the high queue's job although the low queue's came first."""
    decisions = decide(
        [
            node("n1", cpu="1"),
            queue("low", priority=0),
            queue("high", priority=5),
            *gang("early", 1, requests={"cpu": "1"}, queue="low"),
            *gang("late", 1, requests={"cpu": "1"}, queue="high", created=5),
        ]
    )
    assert placements(decisions) == {"default/late-0": "n1"}


def test_fifo_holds_the_jobs_behind_one_that_cannot_start_and_traverse_does_not() -> None:
    decisions = decide(
        [
            node("n1", cpu="2"),
            queue("ff", dequeueStrategy="fifo"),
            queue("tr", dequeueStrategy="traverse"),
            *gang("ff-huge", 2, requests={"cpu": "2"}, queue="ff"),
            *gang("ff-small", 1, requests={"cpu": "500m"}, queue="ff", created=1),
            *gang("tr-huge", 2, requests={"cpu": "2"}, queue="tr"),
            *gang("tr-small", 1, requests={"cpu": "500m"}, queue="tr", created=1),
        ]
    )
    assert placements(decisions) == {"default/tr-small-0": "n1"}
    assert decisions.pending["default/ff-small-0"] == (
        "queue ff dequeues in order (dequeueStrategy fifo) and job default/ff-huge ahead "
        "cannot start"
    )
