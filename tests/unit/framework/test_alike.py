"""Searching claims once per class of alike nodes (framework/alike.py) decides as the
search on every node does: random clusters and claims, with devices changing hands
between the questions, against DeviceClaims searching node by node afresh."""

import random
from typing import Any

import numpy as np
import pytest

from batchsched.framework.alike import AlikeNodes
from batchsched.framework.deviceclaims import DeviceClaims
from batchsched.framework.devices import DeviceMemo
from batchsched.model.snapshot import JobInfo, Snapshot, TaskInfo

from tests.support.objects import (
    device,
    device_class,
    exactly,
    first_available,
    node,
    pod,
    resource_claim,
    resource_slice,
    snapshot_of,
)

DRIVER = "gpu.example.com"
MODEL = f"device.attributes['{DRIVER}'].model"
TAINT = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}
TOLERATION = {"key": "maintenance", "operator": "Exists"}


def _gpu(index: int, *, shape: int) -> dict[str, Any]:
    """A GPU of one of a few kinds; `shape` picks the node's layout, so that nodes of
    one shape are alike until their devices change hands."""
    attributes: dict[str, dict[str, Any]] = {
        "model": {"string": "a" if (shape + index) % 3 else "b"},
        "numa": {"int": index % 2},
    }
    if shape == 3 and index == 0:
        # A selector reading it fails on every device without it.
        attributes["extra"] = {"int": 1}
    taints = [TAINT] if shape == 2 and index == 1 else []
    return device(f"gpu-{index}", attributes=attributes, taints=taints)


def _cluster(rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [device_class("gpu", f"device.driver == '{DRIVER}'")]
    for n in range(12):
        name = f"n{n:02d}"
        objects.append(node(name, labels={"rack": str(n % 2)}))
        shape = rng.randrange(4)
        devices = [_gpu(i, shape=shape) for i in range(2 + shape)]
        count = 1
        odd = rng.random()
        if odd < 0.1:
            # Shares counters: the node is searched on its own.
            part = device("part", attributes={"model": {"string": "a"}}, consumes={"c": {"m": "1"}})
            devices.append(part)
            counters = resource_slice(
                f"{name}-c", driver=DRIVER, pool=name, slice_count=2, counters={"c": {"m": "2"}}
            )
            objects.append(counters)
            count = 2
        elif odd < 0.3:
            # Allows multiple allocations: searched on its own too.
            shared = device(
                "shared",
                attributes={"model": {"string": "a"}},
                capacity={"mem": "2"},
                multiple=True,
            )
            devices.append(shared)
        elif odd > 0.9:
            # Its pool is incomplete: an `All` request errs there.
            count = 2
        slice_ = resource_slice(
            f"{name}-gpus", driver=DRIVER, pool=name, node_name=name, devices=devices
        )
        slice_["spec"]["pool"]["resourceSliceCount"] = count
        objects.append(slice_)
    if rng.random() < 0.5:
        # Its pool sorts first: searches try its devices before the nodes' own.
        rack = [device(f"nic-{i}", attributes={"model": {"string": "n"}}) for i in range(2)]
        objects.append(
            resource_slice(
                "rack", driver=DRIVER, pool="a-rack", node_selector={"rack": "1"}, devices=rack
            )
        )
    return objects


def _request(rng: random.Random, name: str) -> dict[str, Any]:
    tolerations = [TOLERATION] if rng.random() < 0.3 else []
    selectors = [f"{MODEL} == '{rng.choice('an')}'"] if rng.random() < 0.4 else []
    if rng.random() < 0.05:
        selectors = [f"device.attributes['{DRIVER}'].extra == 1"]
    kind = rng.random()
    if kind < 0.15:
        return exactly(name, "gpu", mode="All", selectors=selectors, tolerations=tolerations)
    count = rng.randint(1, 3)
    if kind < 0.25:
        # Devices without the capacity are not picked: only the shared one fits.
        return exactly(name, "gpu", capacity={"mem": "1"}, tolerations=tolerations)
    if kind < 0.4:
        return first_available(
            name,
            exactly("b", "gpu", count=count + 1, selectors=[f"{MODEL} == 'b'"]),
            exactly("any", "gpu", count=count, tolerations=tolerations),
        )
    return exactly(name, "gpu", count=count, selectors=selectors, tolerations=tolerations)


def _claims_and_pods(rng: random.Random) -> list[dict[str, Any]]:
    objects = []
    for p in range(12):
        names = []
        for c in range(rng.choice((1, 1, 2))):
            name = f"p{p}-c{c}"
            requests = [_request(rng, f"r{r}") for r in range(rng.choice((1, 1, 2)))]
            constraints = []
            if rng.random() < 0.5:
                which = rng.choice(("numa", "model"))
                key = "distinctAttribute" if rng.random() < 0.3 else "matchAttribute"
                constraints.append({key: f"{DRIVER}/{which}"})
            objects.append(resource_claim(name, *requests, constraints=constraints))
            names.append(name)
        claims = [{"name": n, "resourceClaimName": n} for n in names]
        objects.append(pod(f"p{p}", created=float(p), spec={"resourceClaims": claims}))
    return objects


def _claims(snapshot: Snapshot, *, alike: bool) -> DeviceClaims:
    inventory = DeviceMemo().inventory(snapshot.devices, snapshot.nodes)
    claims = DeviceClaims(
        devices=snapshot.devices,
        inventory=inventory,
        placed=snapshot.placed,
        namespace_labels=snapshot.namespace_labels,
        unavailable=str,
    )
    if not alike:
        # No node is grouped: every node is searched on its own, as before classes.
        claims._alike = AlikeNodes(inventory, claims.usage.taken, np.ones(inventory.size, bool))
    return claims


def _fits(claims: DeviceClaims, task: TaskInfo) -> list[int]:
    allowed = claims.mask(task)
    return list(range(claims.size)) if allowed is None else np.flatnonzero(allowed).tolist()


def _failures(claims: DeviceClaims, task: TaskInfo) -> list[tuple[str, list[bool]]]:
    return [(reason, mask.tolist()) for reason, mask in claims.failures(task)]


@pytest.mark.parametrize("seed", range(30))
def test_classes_of_alike_nodes_decide_as_the_search_on_every_node(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = snapshot_of([*_cluster(rng), *_claims_and_pods(rng)])
    grouped, exact = _claims(snapshot, alike=True), _claims(snapshot, alike=False)
    tasks: list[tuple[JobInfo, TaskInfo]] = [
        (job, task) for job in snapshot.jobs.values() for task in job.pending
    ]
    placed: list[tuple[JobInfo, TaskInfo, int]] = []
    waiting = list(tasks)
    for _ in range(16):
        for _, task in waiting:
            # The exact side searches afresh every time, remembering nothing.
            exact._memo.clear()
            assert _failures(grouped, task) == _failures(exact, task), task.key
        fitting = [(job, task, _fits(grouped, task)) for job, task in waiting]
        fitting = [(job, task, rows) for job, task, rows in fitting if rows]
        if placed and (not fitting or rng.random() < 0.3):
            job, task, row = placed.pop(rng.randrange(len(placed)))
            grouped.released_by(job, task, row)
            exact.released_by(job, task, row)
            waiting.append((job, task))
            continue
        if not fitting:
            break
        job, task, rows = rng.choice(fitting)
        row = rng.choice(rows)
        grouped.allocated_to(job, task, row)
        exact.allocated_to(job, task, row)
        assert grouped.allocated.get(task.key) == exact.allocated.get(task.key)
        placed.append((job, task, row))
        waiting.remove((job, task))
