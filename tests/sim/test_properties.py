"""Properties over random clusters: no node over-committed, no partial gang bound, and
the output a function of the input alone (not of run or input order).

Each cluster is drawn from `random.Random(seed)`; the generator also writes down, in its
own terms, what every pod requests and which group it belongs to, so the checks do not
rely on the scheduler's parsing.
"""

import copy
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from batchsched.config.load import default_config
from batchsched.sim.report import to_json
from batchsched.sim.simulator import simulate

SEEDS = range(30)
GPU = "nvidia.com/gpu"
MI = 2**20
EPOCH = "2024-01-01T00:{minute:02d}:{second:02d}Z"

Obj = dict[str, Any]


@dataclass
class Cluster:
    objects: list[Obj] = field(default_factory=list)
    allocatable: dict[str, dict[str, int]] = field(default_factory=dict)
    zone: dict[str, str] = field(default_factory=dict)
    # "ns/name" -> request in base units (cpu in millicores), for every pod of ours.
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    # Pods of another scheduler, already bound: (node, request).
    foreign: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    selector: dict[str, str] = field(default_factory=dict)
    # group key -> (minMember, member pod keys)
    groups: dict[str, tuple[int, list[str]]] = field(default_factory=dict)


def timestamp(seconds: int) -> str:
    return EPOCH.format(minute=seconds // 60, second=seconds % 60)


def pod_object(name: str, request: dict[str, int], *, created: int, meta: Obj, spec: Obj) -> Obj:
    requests = {"cpu": f"{request['cpu']}m", "memory": f"{request['memory'] // MI}Mi"}
    if request.get(GPU):
        requests[GPU] = str(request[GPU])
    containers = [{"name": "main", "resources": {"requests": requests}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": timestamp(created),
            **meta,
        },
        "spec": {"containers": containers, **spec},
    }


def random_request(rng: random.Random) -> dict[str, int]:
    request = {
        "cpu": rng.choice([100, 250, 500, 1000, 2000, 4000]),
        "memory": rng.choice([128, 512, 1024, 4096]) * MI,
        "pods": 1,
    }
    if rng.random() < 0.3:
        request[GPU] = rng.choice([1, 1, 2, 4])
    return request


def random_cluster(seed: int) -> Cluster:
    rng = random.Random(seed)
    cluster = Cluster()
    for i in range(rng.randint(2, 6)):
        name = f"node-{i}"
        allocatable = {
            "cpu": rng.choice([2, 4, 8, 16]) * 1000,
            "memory": rng.choice([4, 8, 16, 64]) * 1024 * MI,
            "pods": rng.choice([8, 110]),
            GPU: rng.choice([0, 0, 1, 2, 4, 8]),
        }
        cluster.allocatable[name] = allocatable
        cluster.zone[name] = rng.choice(["a", "b"])
        cluster.objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"zone": cluster.zone[name]}},
                "status": {
                    "allocatable": {
                        "cpu": f"{allocatable['cpu']}m",
                        "memory": f"{allocatable['memory'] // MI}Mi",
                        "pods": str(allocatable["pods"]),
                        GPU: str(allocatable[GPU]),
                    }
                },
            }
        )
        if rng.random() < 0.5:
            request = {"cpu": 500, "memory": 512 * MI, "pods": 1}
            cluster.foreign.append((name, request))
            spec = {"nodeName": name, "schedulerName": "default-scheduler"}
            cluster.objects.append(pod_object(f"agent-{i}", request, created=0, meta={}, spec=spec))
    for g in range(rng.randint(3, 12)):
        add_gang(cluster, rng, f"job-{g}")
    return cluster


def add_gang(cluster: Cluster, rng: random.Random, name: str) -> None:
    """A gang of 1 to 8 pods (or a lone pod), named in one of three ways."""
    size = rng.randint(1, 8)
    min_member = rng.randint(1, size)
    styles = ["podgroup", "kube-batch", "label-only"] + (["alone"] if size == 1 else [])
    style = rng.choice(styles)
    created = rng.randint(0, 300)
    shape = random_request(rng)
    spec: Obj = {"schedulerName": "batch-scheduler"}
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": rng.choice(["a", "b"])}
    if style in ("podgroup", "kube-batch"):
        api = "scheduling.batchsched.io/v1alpha1"
        if style == "kube-batch":
            api = "scheduling.incubator.k8s.io/v1alpha1"
        cluster.objects.append(
            {
                "apiVersion": api,
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "creationTimestamp": timestamp(created),
                },
                "spec": {"minMember": min_member},
            }
        )
    members = []
    for i in range(size):
        key = f"default/{name}-{i}"
        request = shape if rng.random() < 0.8 else random_request(rng)
        meta: Obj = {}
        if style == "podgroup":
            meta["annotations"] = {"scheduling.batchsched.io/group-name": name}
        elif style == "kube-batch":
            meta["annotations"] = {"scheduling.k8s.io/group-name": name}
        elif style == "label-only":
            meta["labels"] = {
                "pod-group.scheduling.sigs.k8s.io/name": name,
                "pod-group.scheduling.sigs.k8s.io/min-available": str(min_member),
            }
        # Members of one gang are created up to two minutes apart, so gangs interleave.
        pod_created = created + rng.randint(0, 120)
        cluster.objects.append(
            pod_object(f"{name}-{i}", request, created=pod_created, meta=meta, spec=spec)
        )
        cluster.requests[key] = request
        if "nodeSelector" in spec:
            cluster.selector[key] = spec["nodeSelector"]["zone"]
        members.append(key)
    if style != "alone":
        cluster.groups[f"default/{name}"] = (min_member, members)


def run(objects: list[Obj]) -> dict[str, Any]:
    return to_json(simulate(copy.deepcopy(objects), default_config()))


def canonical(report: dict[str, Any]) -> str:
    """The report as JSON text, without the wall-clock time."""
    timeless = copy.deepcopy(report)
    del timeless["summary"]["elapsed_seconds"]
    return json.dumps(timeless, indent=2)


def bound_pods(report: dict[str, Any]) -> dict[str, str]:
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in report["pods"] if p["node"]}


@pytest.fixture(scope="module")
def clusters() -> dict[int, Cluster]:
    return {seed: random_cluster(seed) for seed in SEEDS}


@pytest.fixture(scope="module")
def reports(clusters: dict[int, Cluster]) -> dict[int, dict[str, Any]]:
    return {seed: run(cluster.objects) for seed, cluster in clusters.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_invariants(
    seed: int, clusters: dict[int, Cluster], reports: dict[int, dict[str, Any]]
) -> None:
    cluster, report = clusters[seed], reports[seed]
    bound = bound_pods(report)
    assert report["summary"]["pods"] == len(cluster.requests)

    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node, request in [*cluster.foreign, *((n, cluster.requests[k]) for k, n in bound.items())]:
        for resource, amount in request.items():
            used[node][resource] += amount
    for node, usage in used.items():
        over = {
            r: (a, cluster.allocatable[node][r])
            for r, a in usage.items()
            if a > cluster.allocatable[node][r]
        }
        assert not over, f"{node} over-committed: {over}"

    for key, zone in cluster.selector.items():
        if key in bound:
            assert cluster.zone[bound[key]] == zone, key

    reported = {f"{g['namespace']}/{g['name']}": g for g in report["podgroups"]}
    for group, (min_member, members) in cluster.groups.items():
        count = sum(1 for m in members if m in bound)
        assert count == 0 or count >= min_member, f"partial gang {group}: {count}/{min_member}"
        assert (reported[group]["minMember"], reported[group]["scheduled"]) == (min_member, count)


@pytest.mark.parametrize("seed", SEEDS)
def test_same_input_same_output(
    seed: int, clusters: dict[int, Cluster], reports: dict[int, dict[str, Any]]
) -> None:
    objects = clusters[seed].objects
    first = canonical(reports[seed])
    assert canonical(run(objects)) == first
    shuffled = list(objects)
    random.Random(seed + 1000).shuffle(shuffled)
    assert canonical(run(shuffled)) == first


def test_clusters_exercise_the_scheduler(
    clusters: dict[int, Cluster], reports: dict[int, dict[str, Any]]
) -> None:
    """Most clusters bind some gangs and refuse others, so the properties are not vacuous."""
    mixed = 0
    for seed, cluster in clusters.items():
        bound = bound_pods(reports[seed])
        outcomes = {any(m in bound for m in members) for _, members in cluster.groups.values()}
        mixed += outcomes == {True, False}
    assert mixed >= len(clusters) // 2
