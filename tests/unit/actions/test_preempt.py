"""preempt: a job that does not fit evicts lower-priority work of its queue, gang-aware."""

from collections.abc import Mapping
from typing import Any

import pytest

from batchsched.model.decisions import Decisions

from tests.support.objects import Obj, at, decide, node, pod, pod_group, priority_class, queue

FOUR_CPU = {"cpu": "4"}


def running_gang(
    name: str,
    size: int,
    *,
    min_member: int,
    nodes: list[str],
    cpu: str = "4",
    priority: int = 0,
    created: float = 0,
    **spec: Any,
) -> list[Obj]:
    """A PodGroup with `size` running members spread round-robin over `nodes`."""
    return [
        pod_group(name, min_member, created=created, **spec),
        *(
            pod(
                f"{name}-{i}",
                requests={"cpu": cpu},
                group=name,
                node_name=nodes[i % len(nodes)],
                phase="Running",
                created=created + i,
                spec={"priority": priority},
            )
            for i in range(size)
        ),
    ]


def pending_gang(
    name: str, size: int, *, cpu: str = "4", priority: int = 1000, **pod_spec: Any
) -> list[Obj]:
    return [
        pod_group(name, size, created=100),
        *(
            pod(
                f"{name}-{i}",
                requests={"cpu": cpu},
                group=name,
                created=100,
                spec={"priority": priority, **pod_spec},
            )
            for i in range(size)
        ),
    ]


def evicted(decisions: Decisions) -> set[str]:
    return {e.key for e in decisions.evictions}


def nominated(decisions: Decisions) -> dict[str, str]:
    return {n.key: n.node for n in decisions.nominations}


def budget(name: str, allowed: int, labels: Mapping[str, str]) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": dict(labels)}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_a_high_priority_gang_evicts_whole_low_priority_gangs_and_is_nominated() -> None:
    """Two 2-CPU-short nodes: the 2-pod gang needs two nodes' worth, so both low gangs
    (minMember 2 each, exactly at it) go whole, never one member of each."""
    decisions = decide(
        [
            node("n1"),
            node("n2"),
            *running_gang("low-a", 2, min_member=2, nodes=["n1"]),
            *running_gang("low-b", 2, min_member=2, nodes=["n2"]),
            *pending_gang("high", 2, cpu="8"),
        ]
    )
    assert evicted(decisions) == {f"default/low-{g}-{i}" for g in "ab" for i in range(2)}
    assert nominated(decisions) == {"default/high-0": "n1", "default/high-1": "n2"}
    assert decisions.bindings == []
    assert all(e.action == "preempt" and e.preemptor == "default/high" for e in decisions.evictions)
    assert "waiting for them to terminate" in decisions.pending["default/high-0"]


def test_a_gang_loses_only_members_above_min_member_when_that_is_enough() -> None:
    decisions = decide(
        [
            node("n1"),
            *running_gang("low", 2, min_member=1, nodes=["n1"]),
            *pending_gang("high", 1),
        ]
    )
    # The most recently created member goes; one member is left, its minMember.
    assert evicted(decisions) == {"default/low-1"}


def test_never_part_of_a_gang_below_min_member() -> None:
    """Needing 4 CPUs of a node where a 3-of-4 gang runs 4 one-CPU members: taking one
    would be enough for one pod, but leaves the gang short, so the whole gang goes."""
    decisions = decide(
        [
            node("n1", cpu="4"),
            *running_gang("low", 4, min_member=4, nodes=["n1"], cpu="1"),
            *pending_gang("high", 1, cpu="1"),
        ]
    )
    assert evicted(decisions) == {f"default/low-{i}" for i in range(4)}
    assert "evicted whole" in decisions.evictions[0].message


def test_nothing_is_evicted_for_a_gang_that_cannot_fit_even_so() -> None:
    decisions = decide(
        [
            node("n1"),
            *running_gang("low", 2, min_member=2, nodes=["n1"]),
            *pending_gang("high", 2, cpu="8"),
        ]
    )
    assert decisions.evictions == [] and decisions.nominations == []


def test_equal_or_higher_priority_is_never_preempted() -> None:
    decisions = decide(
        [
            node("n1"),
            *running_gang("same", 2, min_member=2, nodes=["n1"], priority=1000),
            *pending_gang("high", 1),
        ]
    )
    assert decisions.evictions == []


def test_preemption_policy_never_evicts_nothing() -> None:
    objects = [node("n1"), *running_gang("low", 2, min_member=2, nodes=["n1"])]
    assert decide([*objects, *pending_gang("high", 1, preemptionPolicy="Never")]).evictions == []
    never = priority_class("polite", 1000)
    never["preemptionPolicy"] = "Never"
    pods = [
        pod_group("high", 1, created=100),
        pod(
            "high-0",
            requests=FOUR_CPU,
            group="high",
            created=100,
            spec={"priorityClassName": "polite"},
        ),
    ]
    assert decide([*objects, never, *pods]).evictions == []


def test_lowest_priority_victims_on_the_least_disturbed_node() -> None:
    decisions = decide(
        [
            node("n1"),
            node("n2"),
            pod(
                "mid",
                requests={"cpu": "8"},
                node_name="n1",
                phase="Running",
                spec={"priority": 500},
            ),
            pod(
                "low", requests={"cpu": "8"}, node_name="n2", phase="Running", spec={"priority": 10}
            ),
            *pending_gang("high", 1),
        ]
    )
    assert evicted(decisions) == {"default/low"}
    assert nominated(decisions) == {"default/high-0": "n2"}


def test_a_budget_protected_victim_is_spared_when_another_exists() -> None:
    objects = [
        node("n1"),
        node("n2"),
        pod("kept", requests={"cpu": "8"}, node_name="n1", phase="Running", labels={"app": "db"}),
        pod(
            "other", requests={"cpu": "8"}, node_name="n2", phase="Running", labels={"app": "batch"}
        ),
        budget("db", 0, {"app": "db"}),
        *pending_gang("high", 1),
    ]
    decisions = decide(objects)
    assert evicted(decisions) == {"default/other"}
    assert decisions.evictions[0].budget == ""


def test_a_budget_is_exceeded_only_when_no_other_victim_would_do_and_says_so() -> None:
    decisions = decide(
        [
            node("n1"),
            pod(
                "kept", requests={"cpu": "8"}, node_name="n1", phase="Running", labels={"app": "db"}
            ),
            budget("db", 0, {"app": "db"}),
            *pending_gang("high", 1),
        ]
    )
    [eviction] = decisions.evictions
    assert eviction.budget == "default/db"
    assert "exceeds PodDisruptionBudget default/db" in eviction.message


def test_other_schedulers_system_and_critical_pods_are_left_alone() -> None:
    objects = [
        node("n1"),
        pod("theirs", requests={"cpu": "8"}, node_name="n1", phase="Running", scheduler="other"),
        *pending_gang("high", 1),
    ]
    assert decide(objects).evictions == []
    allowed = decide(
        objects,
        "preemptOtherSchedulers: true",
    )
    assert evicted(allowed) == {"default/theirs"}
    system = [
        node("n1"),
        pod("dns", requests={"cpu": "8"}, node_name="n1", phase="Running", namespace="kube-system"),
        *pending_gang("high", 1),
    ]
    assert decide(system, "preemptOtherSchedulers: true").evictions == []


def test_preempt_stays_within_the_queue() -> None:
    decisions = decide(
        [
            queue("a"),
            queue("b"),
            node("n1"),
            *running_gang("low", 2, min_member=2, nodes=["n1"], queue="b"),
            pod_group("high", 1, created=100, queue="a"),
            pod("high-0", requests=FOUR_CPU, group="high", created=100, spec={"priority": 1000}),
        ],
        "actions: enqueue, allocate, preempt",
    )
    assert decisions.evictions == []


def nominated_pod(name: str, node_name: str, *, group: str) -> Obj:
    obj = pod(name, requests={"cpu": "8"}, group=group, created=100, spec={"priority": 1000})
    obj["status"] = {"phase": "Pending", "nominatedNodeName": node_name}
    return obj


def test_a_nominated_pod_binds_to_its_node_once_the_victims_are_gone() -> None:
    decisions = decide(
        [
            node("n1"),
            node("n2"),
            pod_group("high", 1, created=100),
            nominated_pod("high-0", "n2", group="high"),
        ]
    )
    assert [(b.name, b.node) for b in decisions.bindings] == [("high-0", "n2")]


def test_the_room_is_held_while_victims_terminate() -> None:
    """n1 holds a terminating victim (its room not yet free) and 4 CPUs idle; a newcomer
    that would fit those 4 CPUs waits, so the nominated pod finds its room when the
    victim is gone."""
    victim = pod("victim", requests={"cpu": "4"}, node_name="n1", phase="Running")
    victim["metadata"]["deletionTimestamp"] = "2024-01-01T00:10:00Z"
    decisions = decide(
        [
            node("n1"),
            victim,
            pod_group("high", 1, created=100),
            nominated_pod("high-0", "n1", group="high"),
            pod("newcomer", requests=FOUR_CPU, created=200),
        ],
        "actions: enqueue, allocate, backfill",
    )
    assert decisions.bindings == []
    assert (
        "waiting for the pods preempted there to terminate" in decisions.pending["default/high-0"]
    )


def test_a_stale_nomination_is_cleared() -> None:
    """Nothing terminates on n1 and the pod fits nowhere, nor may it preempt: its
    nomination is cleared."""
    decisions = decide(
        [
            node("n1"),
            pod(
                "stays",
                requests={"cpu": "8"},
                node_name="n1",
                phase="Running",
                spec={"priority": 2000},
            ),
            pod_group("high", 1, created=100),
            nominated_pod("high-0", "n1", group="high"),
        ]
    )
    assert decisions.bindings == []
    assert nominated(decisions) == {"default/high-0": ""}


def test_a_nominated_gang_enqueue_held_back_keeps_its_room_and_evicts_no_more() -> None:
    """A gang with minResources, which enqueue admits only into idle room, made room by
    preempting: the session after, its victims still terminating, it holds that room
    and evicts nothing more."""
    group = pod_group("high", 1, created=100, minResources={"cpu": "8"})
    victim = pod("victim", requests={"cpu": "8"}, node_name="n1", phase="Running")
    spare = pod("spare", requests={"cpu": "8"}, node_name="n2", phase="Running")
    first = decide(
        [
            node("n1"),
            node("n2"),
            victim,
            spare,
            group,
            pod(
                "high-0", requests={"cpu": "8"}, group="high", created=100, spec={"priority": 1000}
            ),
        ]
    )
    assert len(first.evictions) == 1
    [nomination] = first.nominations
    gone = {"n1": victim, "n2": spare}[nomination.node]
    gone["metadata"]["deletionTimestamp"] = "2024-01-01T00:10:00Z"
    second = decide(
        [
            node("n1"),
            node("n2"),
            victim,
            spare,
            group,
            nominated_pod("high-0", nomination.node, group="high"),
        ]
    )
    assert second.evictions == [] and second.bindings == []
    assert "waiting for the pods preempted there to terminate" in second.pending["default/high-0"]


def test_only_as_many_preempt_as_there_is_room_for() -> None:
    """Three equal lone pods and room for one by preemption: the first preempts, the
    others find nothing left to evict and keep allocate's reason."""
    decisions = decide(
        [
            node("n1"),
            pod("low", requests={"cpu": "8"}, node_name="n1", phase="Running"),
            *(
                pod(f"high-{i}", requests={"cpu": "8"}, created=100 + i, spec={"priority": 1000})
                for i in range(3)
            ),
        ]
    )
    assert evicted(decisions) == {"default/low"}
    assert nominated(decisions) == {"default/high-0": "n1"}
    assert decisions.pending["default/high-2"].startswith("0/1 nodes are available")


@pytest.mark.parametrize(
    ("where", "key", "value", "spared"),
    [
        ("annotations", "volcano.sh/preemptable", "false", True),
        ("labels", "volcano.sh/preemptable", "false", True),
        ("annotations", "scheduling.batchsched.io/preemptable", "False", True),
        ("annotations", "scheduling.batchsched.io/preemptable", "no", True),
        ("annotations", "volcano.sh/preemptable", "true", False),
    ],
)
def test_a_pod_marked_not_preemptable_is_never_evicted(
    where: str, key: str, value: str, spared: bool
) -> None:
    kept = pod("kept", requests={"cpu": "8"}, node_name="n1", phase="Running")
    kept["metadata"][where] = {key: value}
    decisions = decide([node("n1"), kept, *pending_gang("high", 1)])
    assert evicted(decisions) == (set() if spared else {"default/kept"})


def test_nothing_is_evicted_for_members_beyond_min_member() -> None:
    """Volcano's preempt stops once the job can start: a gang of four members needing
    two evicts room for two, and its other members wait for room of their own."""
    decisions = decide(
        [
            *(node(f"n{i}", cpu="4") for i in range(4)),
            *(
                member
                for i in range(4)
                for member in running_gang(f"low-{i}", 1, min_member=1, nodes=[f"n{i}"])
            ),
            pod_group("high", 2, created=100),
            *(
                pod(
                    f"high-{i}",
                    requests=FOUR_CPU,
                    group="high",
                    created=100,
                    spec={"priority": 1000},
                )
                for i in range(4)
            ),
        ]
    )
    assert len(evicted(decisions)) == 2
    assert len(nominated(decisions)) == 2


@pytest.mark.parametrize(("minimum", "evictions"), [("8", 1), ("17", 0)])
def test_a_group_held_back_preempts_only_for_minresources_the_cluster_could_hold(
    minimum: str, evictions: int
) -> None:
    """A group enqueue holds back for want of idle room makes room by preempting, unless
    its minResources exceed the whole cluster's: no eviction would admit it (Volcano's
    e2e "preemption doesn't work when podgroup is pending due to insufficient resource")."""
    decisions = decide(
        [
            node("n1"),
            node("n2"),
            pod("victim", requests={"cpu": "8"}, node_name="n1", phase="Running"),
            pod("spare", requests={"cpu": "8"}, node_name="n2", phase="Running"),
            pod_group("high", 1, created=100, minResources={"cpu": minimum}),
            pod(
                "high-0", requests={"cpu": "8"}, group="high", created=100, spec={"priority": 1000}
            ),
        ]
    )
    assert len(decisions.evictions) == evictions


DAY = 86400


def nightly_and_train(train_created: float | None, **train_spec: Any) -> list[Obj]:
    """Two 4-CPU nodes; `nightly` (minMember 4) runs six 1-CPU members, four on n1 and
    two on n2; `train` (minMember 4, four 1-CPU members created at 120) asks for four
    CPUs where two are free. Evicting two of nightly is enough, and leaves it four."""
    return [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        *running_gang("nightly", 6, min_member=4, nodes=["n1"] * 4 + ["n2"] * 2, cpu="1"),
        pod_group("train", 4, created=train_created, **train_spec),
        *(
            pod(
                f"train-{i}",
                requests={"cpu": "1"},
                group="train",
                created=120,
                spec={"priority": 1000},
            )
            for i in range(4)
        ),
    ]


@pytest.mark.parametrize(
    "train_created",
    [120, None, 120 - 3 * DAY],
    ids=["just-created", "no-creationTimestamp", "waited-three-days"],
)
def test_a_starving_gang_makes_room_in_the_room_held_for_it(train_created: float | None) -> None:
    """A gang past the starvation threshold has room held for it by allocate, on the
    node with the most room free (n2); preempt then lets it take that room rather than
    hold it against the gang itself, which would leave n1 to evict and all six of
    nightly to go whole."""
    decisions = decide(nightly_and_train(train_created))
    # The two most recently created, on n2, where the four then go.
    assert evicted(decisions) == {"default/nightly-4", "default/nightly-5"}
    assert nominated(decisions) == {f"default/train-{i}": "n2" for i in range(4)}


SLA = """tiers:
- plugins: [{name: priority}, {name: gang}, {name: sla}]
- plugins: [{name: predicates}, {name: proportion}]
"""


def test_a_gang_that_failed_for_want_of_held_room_does_not_stop_its_holder() -> None:
    """Two alike gangs of four 1-CPU members: `first` states an SLA waiting time not yet
    run out, so it goes first; `starving`, older, is past the starvation threshold and
    has n1's room held for it. n2 is taken by a pod of equal priority. `first` can make
    no room outside the held room and fails; `starving`, for which that room is held,
    is not taken to fail like it, and evicts n1's gang."""

    def alike(name: str, created: float) -> list[Obj]:
        return [
            pod_group(name, 4, created=created),
            *(
                pod(
                    f"{name}-{i}",
                    requests={"cpu": "1"},
                    group=name,
                    created=created,
                    spec={"priority": 1000},
                )
                for i in range(4)
            ),
        ]

    first = alike("first", 200)
    first[0]["metadata"]["annotations"] = {"volcano.sh/sla-waiting-time": "1h"}
    decisions = decide(
        [
            node("n1", cpu="4"),
            node("n2", cpu="4"),
            *running_gang("nightly", 2, min_member=2, nodes=["n1"], cpu="1"),
            pod(
                "equal",
                requests=FOUR_CPU,
                node_name="n2",
                phase="Running",
                created=0,
                spec={"priority": 1000},
            ),
            *first,
            *alike("starving", 0),
        ],
        SLA,
        now=at(400),
    )
    assert evicted(decisions) == {"default/nightly-0", "default/nightly-1"}
    assert nominated(decisions) == {f"default/starving-{i}": "n1" for i in range(4)}
