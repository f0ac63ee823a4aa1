"""Hard topology asks are never broken, over random clusters (seeded, reproducible):
racks of random sizes and loads, some nodes without the rack label, HyperNodes over the
racks, and gangs asking in every form (hard and soft networkTopology, Kueue's required
topology and slices, Volcano sub-groups), some with members already running. With
victims (lone pods and gangs of ours of low priority filling the racks, and gangs of
high priority), preempt makes room: a hard ask is still never broken, no running gang is
left short of its minimum, and the lone pods evicted for a gang asking for a rack are in
the one rack its members are nominated to.

The generator writes down in its own terms which nodes each domain holds and what each
gang asked, so the checks do not rely on the scheduler's parsing."""

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from batchsched.config.load import load_config
from batchsched.sim.simulator import simulate

from tests.support.objects import hypernode, hypernode_member, node, pod, pod_group

SEEDS = range(25)
RACK = "topology.kubernetes.io/rack"
VOLCANO = "scheduling.volcano.sh/v1beta1"
CONFIG = load_config(f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}")
Obj = dict[str, Any]


@dataclass
class Cluster:
    objects: list[Obj] = field(default_factory=list)
    rack_of: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, int] = field(default_factory=dict)
    # Pod key -> its cpu request; pods of ours only.
    requests: dict[str, int] = field(default_factory=dict)
    # Foreign pods' cpu per node.
    foreign: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Pod keys that must share one rack, each list one constraint.
    together: list[list[str]] = field(default_factory=list)
    # Gang key -> its members' keys, for gangs asking for one rack as a whole.
    whole: dict[str, list[str]] = field(default_factory=dict)
    # Victim gangs of ours running: key -> (minMember, members' keys).
    running: dict[str, tuple[int, list[str]]] = field(default_factory=dict)


def build(seed: int, *, victims: bool = False) -> Cluster:
    rng = random.Random(seed)
    cluster = Cluster()
    for r in range(rng.randint(2, 5)):
        for i in range(rng.randint(1, 4)):
            name = f"r{r}-{i}"
            cpu = rng.choice([4, 8])
            cluster.rack_of[name], cluster.cpu[name] = f"r{r}", cpu
            cluster.objects.append(node(name, cpu=str(cpu), labels={RACK: f"r{r}"}))
            if rng.random() < 0.3:
                used = rng.randint(1, cpu)
                cluster.foreign[name] += used
                cluster.objects.append(
                    pod(f"busy-{name}", {"cpu": str(used)}, node_name=name, scheduler="other")
                )
    for i in range(rng.randint(0, 2)):
        name = f"bare-{i}"
        cluster.cpu[name] = 64
        cluster.objects.append(node(name, cpu="64"))
    racks = sorted(set(cluster.rack_of.values()))
    for rack in racks:
        pattern = {"pattern": f"^{rack}-"}
        cluster.objects.append(
            hypernode(rack, 1, [hypernode_member("Node", regexMatch=pattern)], "rack")
        )
    if victims:
        _victims(rng, cluster)
    for g in range(rng.randint(2, 6)):
        _gang(rng, cluster, f"g{g}", priority=rng.choice([0, 1000]) if victims else None)
    return cluster


def _victims(rng: random.Random, cluster: Cluster) -> None:
    """Low-priority pods of ours in the room the foreign pods leave: gangs of two or
    three members over random racked nodes (minMember all, or one less), then lone pods."""
    left = {name: cpu - cluster.foreign[name] for name, cpu in cluster.cpu.items()}
    racked = sorted(cluster.rack_of)
    for v in range(rng.randint(0, 3)):
        size = rng.randint(2, 3)
        hosts = [n for n in rng.sample(racked, min(size, len(racked))) if left[n] >= 1]
        if len(hosts) < 2:
            continue
        minimum = rng.choice([len(hosts), len(hosts) - 1])
        cluster.objects.append(pod_group(f"v{v}", minimum))
        members = []
        for i, host in enumerate(hosts):
            left[host] -= 1
            members.append(f"default/v{v}-{i}")
            cluster.objects.append(
                pod(
                    f"v{v}-{i}",
                    {"cpu": "1"},
                    group=f"v{v}",
                    node_name=host,
                    phase="Running",
                    spec={"priority": 1},
                )
            )
        cluster.running[f"default/v{v}"] = (minimum, members)
    for name in racked:
        if left[name] and rng.random() < 0.9:
            cpu = rng.randint((left[name] + 1) // 2, left[name])
            left[name] -= cpu
            cluster.objects.append(
                pod(
                    f"lone-{name}",
                    {"cpu": str(cpu)},
                    node_name=name,
                    phase="Running",
                    spec={"priority": 1},
                )
            )


def _gang(rng: random.Random, cluster: Cluster, name: str, *, priority: int | None) -> None:
    size = rng.randint(1, 6)
    cpu = rng.choice([1, 2, 4])
    form = rng.choice(["hard", "soft", "kueue", "slices", "subgroups", "running"])
    keys = [f"default/{name}-{i}" for i in range(size)]
    notes: dict[str, str] = {}
    spec: dict[str, Any] = {}
    api = "scheduling.batchsched.io/v1alpha1"
    if form in ("hard", "running"):
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
        cluster.together.append(keys)
        cluster.whole[f"default/{name}"] = keys
    elif form == "soft":
        spec["networkTopology"] = {"mode": "soft", "highestTierName": "rack"}
    elif form == "kueue":
        notes = {"kueue.x-k8s.io/podset-required-topology": RACK}
        cluster.together.append(keys)
    elif form == "slices":
        size = 2 * rng.randint(1, 3)
        keys = [f"default/{name}-{i}" for i in range(size)]
        notes = {
            "kueue.x-k8s.io/podset-slice-required-topology": RACK,
            "kueue.x-k8s.io/podset-slice-size": "2",
        }
        ordered = sorted(keys)
        cluster.together += [ordered[i : i + 2] for i in range(0, size, 2)]
    else:
        api = VOLCANO
        spec["subGroupPolicy"] = [
            {
                "name": "part",
                "subGroupSize": 2,
                "matchLabelKeys": ["part"],
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            }
        ]
    group_key = (
        "scheduling.k8s.io/group-name" if api == VOLCANO else "scheduling.batchsched.io/group-name"
    )
    cluster.objects.append(pod_group(name, size, api_version=api, **spec))
    parts: dict[str, list[str]] = defaultdict(list)
    running = form == "running" and size > 1
    if running:
        # The first half already runs together in one rack, where the generator puts it.
        rack = rng.choice(sorted(set(cluster.rack_of.values())))
        hosts = [n for n, r in cluster.rack_of.items() if r == rack]
    for i, key in enumerate(keys):
        labels = {"part": str(i // 2)} if form == "subgroups" else {}
        parts[str(i // 2)].append(key)
        on = None
        if running and i < size // 2:
            on = hosts[i % len(hosts)]
        cluster.objects.append(
            pod(
                f"{name}-{i}",
                {"cpu": str(cpu)},
                labels=labels,
                annotations={group_key: name, **notes},
                node_name=on,
                phase="Running" if on else None,
                spec=None if priority is None else {"priority": priority},
            )
        )
        cluster.requests[key] = cpu
    if form == "subgroups":
        cluster.together += [members for members in parts.values() if len(members) == 2]


@pytest.mark.parametrize("seed", SEEDS)
def test_hard_asks_are_never_broken(seed: int) -> None:
    cluster = build(seed)
    result = simulate(cluster.objects, CONFIG)
    assert not result.errors, result.errors
    where = {key: task.node_name for key, task in result.cache.tasks.items() if task.node_name}
    for keys in cluster.together:
        racks = {cluster.rack_of.get(where[k], "no rack") for k in keys if k in where}
        assert len(racks) <= 1 and "no rack" not in racks, (seed, keys, racks)


def test_the_seeds_place_constrained_gangs() -> None:
    """The property above looks at real placements: across the seeds, many gangs with a
    hard ask are placed whole."""
    placed = 0
    for seed in SEEDS:
        cluster = build(seed)
        result = simulate(cluster.objects, CONFIG)
        bound = {key for key, task in result.cache.tasks.items() if task.node_name}
        placed += sum(all(k in bound for k in keys) for keys in cluster.together)
    assert placed >= len(SEEDS)


@pytest.mark.parametrize("seed", SEEDS)
def test_hard_asks_are_never_broken_when_evicting(seed: int) -> None:
    cluster = build(seed, victims=True)
    result = simulate(cluster.objects, CONFIG)
    assert not result.errors, result.errors
    where = {key: task.node_name for key, task in result.cache.tasks.items() if task.node_name}
    for keys in cluster.together:
        racks = {cluster.rack_of.get(where[k], "no rack") for k in keys if k in where}
        assert len(racks) <= 1 and "no rack" not in racks, (seed, keys, racks)
    for gang, (minimum, members) in cluster.running.items():
        left = sum(1 for k in members if k in where)
        assert left == 0 or left >= minimum, (seed, gang, left, minimum)
    for evicted in result.evictions:
        eviction = evicted.eviction
        if eviction.preemptor not in cluster.whole or evicted.group is not None:
            continue
        # A lone pod evicted for a gang asking for a rack is in the rack the gang's
        # members are nominated to, all in one.
        landing = eviction.message.split("to make room on node(s) ")[1].split(";")[0]
        racks = {cluster.rack_of.get(n, "no rack") for n in landing.split(", ")}
        assert racks == {cluster.rack_of.get(eviction.node)}, (seed, eviction.key, racks)


def test_the_seeds_evict_for_gangs_asking_for_a_rack() -> None:
    """The property above looks at real evictions: across the seeds, gangs asking for
    one rack make room by evicting, and land."""
    preempted = 0
    for seed in SEEDS:
        cluster = build(seed, victims=True)
        result = simulate(cluster.objects, CONFIG)
        bound = {key for key, task in result.cache.tasks.items() if task.node_name}
        preempted += sum(
            all(k in bound for k in cluster.whole[key])
            for key in {e.eviction.preemptor for e in result.evictions}
            if key in cluster.whole
        )
    assert preempted >= 5
