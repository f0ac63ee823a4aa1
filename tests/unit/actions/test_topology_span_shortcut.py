"""A gang waiting for a domain with its softWait not started is not tried across domains
when the cluster's free room cannot hold its fewest members that would make it ready
(gang_placement._too_big), and its try across domains passes over the tiers its own try
just found nothing in: on random clusters, every decision is the one the whole try
would have led to."""

import random
from collections.abc import Callable
from typing import Any

import pytest

from batchsched.actions import gang_placement
from batchsched.model.decisions import Decisions

from tests.support.objects import at, decide, node, pod, pod_group

RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"
CONFIG = (
    "starvationThreshold: 1h\n"
    f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}, {{name: zone, nodeLabel: {ZONE}}}],"
    " softWait: 10m}"
)
SEEDS = range(60)


def cluster(rng: random.Random) -> list[dict[str, Any]]:
    """Two zones of racks of a few nodes, partly filled by another scheduler's pods, and
    gangs of one shape or two, some asking softly for a rack as a whole, some through a
    sub-group, some bound in part already."""
    objects: list[dict[str, Any]] = []
    for r in range(rng.randint(2, 5)):
        for i in range(rng.randint(1, 4)):
            name = f"r{r}-{i}"
            labels = {RACK: f"r{r}", ZONE: f"z{r % 2}"}
            objects.append(node(name, cpu=str(rng.choice((4, 8))), labels=labels))
            used = rng.choice((0, 0, 2, 4, 6, 8))
            if used:
                hog = pod(f"hog-{name}", {"cpu": str(used)}, node_name=name, scheduler="other")
                objects.append(hog)
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    for g in range(rng.randint(2, 6)):
        name, size = f"g{g}", rng.randint(1, 7)
        spec: dict[str, Any] = {}
        if rng.random() < 0.25:
            spec["subGroupPolicy"] = [
                {"name": "w", "subGroupSize": size, "networkTopology": {"mode": "soft"}}
            ]
        elif rng.random() < 0.9:
            spec["networkTopology"] = {"mode": "soft", "highestTierAllowed": rng.choice((1, 2))}
        objects.append(pod_group(name, rng.randint(1, size), created=g, **spec))
        # One shape, or two (a launcher or a mix of workers).
        cpus = rng.sample(("500m", "1", "2", "3", "4"), rng.choice((1, 2)))
        for i in range(size):
            asks = {"cpu": rng.choice(cpus)}
            bound = rng.choice(nodes) if rng.random() < 0.1 else None
            objects.append(pod(f"{name}-{i}", asks, group=name, created=g, node_name=bound))
    return objects


def outcome(decisions: Decisions) -> tuple[object, ...]:
    """Every decision a session reports, in full."""
    pending = {key: (r.code, r.message) for key, r in decisions.pending.items()}
    return (decisions.bindings, pending, decisions.span_clocks, decisions.unplaced)


def whole(could_span: Callable[..., bool]) -> Callable[..., bool]:
    """`could_span` passing over no tier."""

    def span(*args: Any) -> bool:
        return could_span(*args[:-1], None)

    return span


def counting(wrapped: Callable[..., bool], counts: dict[bool, int]) -> Callable[..., bool]:
    def count(*args: Any) -> bool:
        found = wrapped(*args)
        counts[found] = counts.get(found, 0) + 1
        return found

    return count


def test_the_shortcut_decides_as_the_try_across_domains(monkeypatch: pytest.MonkeyPatch) -> None:
    shortcut: dict[bool, int] = {}
    spans: dict[bool, int] = {}
    for seed in SEEDS:
        objects = cluster(random.Random(seed))
        with monkeypatch.context() as patched:
            # The whole try: no gang found too big, no tier passed over.
            patched.setattr(gang_placement, "_too_big", lambda *_: False)
            patched.setattr(gang_placement, "_could_span", whole(gang_placement._could_span))
            tried = outcome(decide(objects, CONFIG, now=at(60)))
        with monkeypatch.context() as patched:
            patched.setattr(gang_placement, "_too_big", counting(gang_placement._too_big, shortcut))
            patched.setattr(
                gang_placement, "_could_span", counting(gang_placement._could_span, spans)
            )
            assert outcome(decide(objects, CONFIG, now=at(60))) == tried, seed
    # Both ways were taken: gangs found too big, and gangs whose clock started.
    assert shortcut.get(True) and spans.get(True), (shortcut, spans)
