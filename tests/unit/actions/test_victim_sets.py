"""Victim sets as a whole: never a pod that is not bound, never a gang left below
minMember, and, on random clusters, minimal (no victim given back would still let the
preemptor run) and of the lowest priority that lets it run."""

import random
from collections import Counter
from collections.abc import Iterable, Mapping

import pytest

from batchsched.cache.keeper import take_snapshot
from batchsched.model.decisions import Decisions
from batchsched.scheduler import run_session

from tests.support.objects import SCHEDULER, Obj, cache_of, config_of, decide, node, pod, pod_group

ALLOCATE_ONLY = "actions: allocate\n"


def decide_assuming(objects: Iterable[Obj], assumed: Mapping[str, str]) -> Decisions:
    """One session once the pods of `assumed` ("ns/name" -> node) were decided there,
    their Bindings not yet seen on them (sent, or waiting for their claims)."""
    cache = cache_of(objects)
    for key, where in assumed.items():
        cache.assume(key, where)
    now = max(t.creation for t in cache.tasks.values())
    snapshot = take_snapshot(cache, now=now, scheduler_names={SCHEDULER})
    return run_session(snapshot, config_of(None))


def urgent(cpu: str = "4") -> Obj:
    return pod("urgent", requests={"cpu": cpu}, created=100, spec={"priority": 1000})


def test_a_pod_not_bound_yet_is_no_victim() -> None:
    waiting = pod("waiting", requests={"cpu": "4"}, created=1, spec={"priority": 1})
    objects = [node("n1", cpu="4"), waiting, urgent()]
    assert decide_assuming(objects, {"default/waiting": "n1"}).evictions == []
    # Bound, the same pod is the victim.
    bound = pod("waiting", requests={"cpu": "4"}, node_name="n1", phase="Running", created=1)
    bound["spec"]["priority"] = 1
    assert [e.key for e in decide([node("n1", cpu="4"), bound, urgent()]).evictions] == [
        "default/waiting"
    ]


def test_a_gang_with_a_member_not_bound_yet_is_not_evicted_whole() -> None:
    """Its bound member alone would leave it short, and the member on its way cannot be
    evicted: none of it goes."""
    members = [
        pod("pair-0", requests={"cpu": "4"}, group="pair", node_name="n1", phase="Running"),
        pod("pair-1", requests={"cpu": "4"}, group="pair", created=1),
    ]
    for member in members:
        member["spec"]["priority"] = 1
    objects = [node("n1", cpu="4"), node("n2", cpu="4"), pod_group("pair", 2), *members, urgent()]
    assert decide_assuming(objects, {"default/pair-1": "n2"}).evictions == []


# Random clusters: nodes of 4 CPUs filled with lone pods and gangs of three priorities,
# and one gang of a higher priority that fits only by evicting.
PRIORITIES = (10, 50, 100)


def random_cluster(seed: int) -> tuple[list[Obj], list[Obj], dict[str, tuple[str | None, int]]]:
    """The running objects, the preemptor's, and per running pod its group and priority."""
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(rng.randint(2, 5))]
    free = dict.fromkeys(nodes, 4)
    running: list[Obj] = [node(n, cpu="4") for n in nodes]
    pods: dict[str, tuple[str | None, int]] = {}
    for job in range(12):
        priority = rng.choice(PRIORITIES)
        size = rng.choice((1, 1, 2, 3, 4))
        name = f"j{job}"
        group = name if size > 1 else None
        members = []
        for i in range(size):
            cpu = rng.choice((1, 1, 2))
            where = [n for n in nodes if free[n] >= cpu]
            if not where:
                break
            target = rng.choice(where)
            free[target] -= cpu
            members.append(
                pod(
                    f"{name}-{i}",
                    requests={"cpu": str(cpu)},
                    group=group,
                    node_name=target,
                    phase="Running",
                    created=job,
                    spec={"priority": priority},
                )
            )
            pods[f"default/{name}-{i}"] = (group, priority)
        if group is not None and members:
            running.append(pod_group(group, rng.randint(1, len(members)), created=job))
        running += members
    size = rng.randint(1, 3)
    cpu = rng.choice((2, 3, 4))
    preemptor = [pod_group("big", size, created=100)] + [
        pod(
            f"big-{i}",
            requests={"cpu": str(cpu)},
            group="big",
            created=100,
            spec={"priority": 1000},
        )
        for i in range(size)
    ]
    return running, preemptor, pods


def fits_without(running: list[Obj], preemptor: list[Obj], gone: set[str]) -> bool:
    """Whether allocate alone places the whole preemptor once the pods `gone` are gone."""
    kept = [o for o in running if f"default/{o['metadata']['name']}" not in gone]
    placed = decide(kept + preemptor, ALLOCATE_ONLY).bindings
    return len(placed) == sum(1 for o in preemptor if o["kind"] == "Pod")


def givebacks(
    victims: set[str], pods: Mapping[str, tuple[str | None, int]], mins: Mapping[str, int]
) -> list[set[str]]:
    """The victims that can be given back alone leaving every gang whole or at
    minMember: a lone pod, a member of a gang that keeps minMember without it, or a
    gang evicted whole."""
    running = Counter(group for group, _ in pods.values() if group is not None)
    taken = Counter(group for key in victims if (group := pods[key][0]) is not None)
    units: list[set[str]] = []
    for group, count in taken.items():
        if count == running[group]:
            units.append({key for key in victims if pods[key][0] == group})
    for key in victims:
        group = pods[key][0]
        if group is None or running[group] - taken[group] + 1 >= mins[group]:
            units.append({key})
    return units


@pytest.mark.parametrize("seed", range(100))
def test_random_victim_sets_are_minimal_and_lowest_priority(seed: int) -> None:
    running, preemptor, pods = random_cluster(seed)
    decisions = decide(running + preemptor)
    victims = {e.key for e in decisions.evictions}
    if not victims:
        # Nothing evicted: either it fits without, or nothing of lower priority would do.
        everything = set(pods)
        assert fits_without(running, preemptor, set()) or not fits_without(
            running, preemptor, everything
        )
        return
    mins = {
        o["metadata"]["name"]: int(o["spec"]["minMember"])
        for o in running
        if o["kind"] == "PodGroup"
    }
    assert fits_without(running, preemptor, victims)
    # No gang is left running short of minMember.
    left = Counter(group for key, (group, _) in pods.items() if key not in victims and group)
    for group, count in left.items():
        assert count >= mins[group] or count == 0, (group, count)
    # Minimal: no victim (or gang evicted whole) could have been spared.
    for unit in givebacks(victims, pods, mins):
        assert not fits_without(running, preemptor, victims - unit), sorted(unit)
    # Lowest priority: all the pods below the highest victim's priority would not do.
    highest = max(pods[key][1] for key in victims)
    below = {key for key, (_, priority) in pods.items() if priority < highest}
    assert not fits_without(running, preemptor, below)
