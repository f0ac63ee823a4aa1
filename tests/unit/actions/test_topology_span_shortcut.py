"""A gang waiting for a domain with its softWait not started is not tried across domains
when the cluster's free room cannot hold its fewest members that would make it ready
(gang_placement._too_big), nor when the filters' bounds on each node's room add up to
all of its members and its queue and gang accept them (gang_placement._places_all), and
its try across domains passes over the tiers its own try just found nothing in: on
random clusters, every decision is the one the whole try would have led to."""

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from batchsched.actions import gang_placement
from batchsched.api.gpu import GPU_MILLI
from batchsched.api.pods import TASK_ROLE_KEY
from batchsched.api.resources import GPU
from batchsched.config.load import load_config
from batchsched.framework.session import Session
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import JobInfo, TaskInfo
from batchsched.plugins.gpufragmentation import GpuFragmentation
from batchsched.plugins.predicates import Predicates

from tests.support.objects import at, decide, node, pod, pod_group, queue

RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"
CONFIG = (
    "starvationThreshold: 1h\n"
    f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}, {{name: zone, nodeLabel: {ZONE}}}],"
    " softWait: 10m}"
)
SEEDS = range(60)
# The varied clusters' (fewer of their gangs are tried across domains).
VARIED = range(150)


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
            # The whole try: no gang found too big or placed whole, no tier passed over.
            patched.setattr(gang_placement, "_too_big", lambda *_: False)
            patched.setattr(gang_placement, "_places_all", lambda *_: False)
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


def varied(rng: random.Random) -> list[dict[str, Any]]:
    """Racks of plain and GPU nodes in two pools, partly filled by another scheduler's
    pods (some on a share of a card), and soft gangs of one to three shapes (CPU, whole
    cards, a share of a card), some in a queue with a capability, some kept to a pool,
    apart from each other, spread over zones, on a host port or with a task role's
    minimum: what the filters bound the room of and what they do not."""
    objects: list[dict[str, Any]] = [queue("capped", capability={"cpu": str(rng.randint(2, 12))})]
    for r in range(rng.randint(2, 5)):
        for i in range(rng.randint(1, 4)):
            name = f"r{r}-{i}"
            labels = {RACK: f"r{r}", ZONE: f"z{r % 2}", "pool": rng.choice("ab")}
            cards = rng.choice((0, 0, 2, 4))
            gpus = {GPU: str(cards), GPU_MILLI: str(cards * 1000)} if cards else None
            objects.append(node(name, cpu=str(rng.choice((4, 8))), labels=labels, extra=gpus))
            used = rng.choice((0, 0, 2, 4))
            if used:
                hog = pod(f"hog-{name}", {"cpu": str(used)}, node_name=name, scheduler="other")
                objects.append(hog)
            if cards and rng.random() < 0.5:
                share = {GPU_MILLI: "500"}
                objects.append(pod(f"share-{name}", share, node_name=name, scheduler="other"))
    shapes: list[dict[str, str]] = [
        {"cpu": "500m"},
        {"cpu": "1"},
        {"cpu": "2"},
        {"cpu": "1", GPU: "1"},
        {"cpu": "1", GPU: "2"},
        {"cpu": "500m", GPU_MILLI: "300"},
    ]
    for g in range(rng.randint(2, 6)):
        name, size = f"g{g}", rng.randint(1, 8)
        spec: dict[str, Any] = {"networkTopology": {"mode": "soft", "highestTierAllowed": 1}}
        if rng.random() < 0.3:
            spec["queue"] = "capped"
        asks = rng.sample(shapes, rng.choice((1, 1, 2, 3)))
        extra: dict[str, Any] = {}
        roll = rng.random()
        selector = {"matchLabels": {"gang": name}}
        if roll < 0.1:
            term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
            extra["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        elif roll < 0.2:
            spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
            extra["topologySpreadConstraints"] = [{**spread, "labelSelector": selector}]
        elif roll < 0.25:
            extra["hostPort"] = True
        elif roll < 0.45:
            extra["nodeSelector"] = {"pool": rng.choice("ab")}
        roles = rng.random() < 0.15
        if roles:
            spec["minTaskMember"] = {"lead": 1}
        least = size if rng.random() < 0.6 else rng.randint(1, size)
        objects.append(pod_group(name, least, created=g, **spec))
        for i in range(size):
            requests = rng.choice(asks)
            body = {k: v for k, v in extra.items() if k != "hostPort"}
            if "hostPort" in extra:
                port = {"containerPort": 80, "hostPort": 8080}
                container = {"name": "main", "ports": [port], "resources": {"requests": requests}}
                body["containers"] = [container]
            annotations = {TASK_ROLE_KEY: "lead" if i == 0 else "worker"} if roles else None
            objects.append(
                pod(
                    f"{name}-{i}",
                    requests,
                    group=name,
                    created=g,
                    labels={"gang": name},
                    annotations=annotations,
                    spec=body,
                )
            )
    return objects


PlacesAll = Callable[[Session, JobInfo, list[TaskInfo]], bool]


def test_a_gang_placed_whole_without_a_try_is_decided_as_by_the_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decided whole by the filters' room bounds or not: the same decisions; the bounds
    are not said for members apart, spread, on a host port or on a share of a card."""
    placed: dict[bool, int] = {}
    unbounded: dict[bool, int] = {}
    for seed in VARIED:
        objects = varied(random.Random(seed))
        with monkeypatch.context() as patched:
            patched.setattr(gang_placement, "_places_all", lambda *_: False)
            tried = outcome(decide(objects, CONFIG, now=at(60)))
        with monkeypatch.context() as patched:
            counted = counting(gang_placement._places_all, placed)
            patched.setattr(gang_placement, "_places_all", counted)
            patched.setattr(Session, "room_for", bounded(Session.room_for, unbounded))
            assert outcome(decide(objects, CONFIG, now=at(60))) == tried, seed
    # Gangs placed whole, gangs left to the try, and room no filter bounds.
    assert placed.get(True) and placed.get(False) and unbounded.get(True), (placed, unbounded)


def bounded(
    room_for: Callable[[Session, list[TaskInfo]], Any], counts: dict[bool, int]
) -> Callable[[Session, list[TaskInfo]], Any]:
    """`room_for`, counting the times it says nothing (True) and the others."""

    def count(session: Session, tasks: list[TaskInfo]) -> Any:
        room = room_for(session, tasks)
        counts[room is None] = counts.get(room is None, 0) + 1
        return room

    return count


# Wrong in one respect: what a wrong shortcut replaces, given the session.
Patch = Callable[[Session], tuple[object, str, object]]
WRONG: dict[str, Patch] = {
    # The members' queue is not asked (its capability left out).
    "ignoring the queue": lambda s: (s, "not_allocatable", lambda *_: None),
    # Each member's queue is asked as if none before it were counted.
    "counting nothing": lambda s: (s, "count", lambda *_: None),
    # The room of nodes the members' constraints keep them off is counted.
    "ignoring the node mask": lambda s: (
        next(f for f in s.filters if isinstance(f, Predicates)),
        "_static_mask",
        lambda _: np.ones(s.node_count, dtype=np.bool_),
    ),
    # The GPU count of a node stands for its whole free cards.
    "ignoring the cards": lambda s: (
        s.gpu,
        "room_for",
        lambda _: np.full(s.node_count, np.iinfo(np.int64).max),
    ),
}


def wrong_in(patch: Patch, places_all: PlacesAll) -> PlacesAll:
    """`places_all` with what `patch` names replaced while it runs."""

    def wrong(session: Session, job: JobInfo, ordered: list[TaskInfo]) -> bool:
        target, name, value = patch(session)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(target, name, value)
            return places_all(session, job, ordered)

    return wrong


@pytest.mark.parametrize("patch", WRONG.values(), ids=WRONG.keys())
def test_a_shortcut_wrong_in_one_respect_changes_a_decision(
    monkeypatch: pytest.MonkeyPatch, patch: Patch
) -> None:
    """The random clusters above tell a shortcut that leaves out the queue (or what
    its members before take of it), the members' node constraints or the cards from
    the try it stands for."""
    for seed in VARIED:
        objects = varied(random.Random(seed))
        with monkeypatch.context() as patched:
            patched.setattr(gang_placement, "_places_all", lambda *_: False)
            tried = outcome(decide(objects, CONFIG, now=at(60)))
        with monkeypatch.context() as patched:
            patched.setattr(
                gang_placement, "_places_all", wrong_in(patch, gang_placement._places_all)
            )
            if outcome(decide(objects, CONFIG, now=at(60))) != tried:
                return
    pytest.fail("no seed tells the wrong shortcut from the try")


def test_every_try_is_made_while_a_plugin_learns_from_the_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gpufragmentation without lookahead counts pods as they are first tried, and its
    mix then follows which are tried in what order: no try is answered without it."""
    tiers = (
        "\ntiers:\n- plugins: [{name: priority}, {name: gang}]\n"
        "- plugins: [{name: predicates}, {name: proportion}, {name: gpufragmentation}]"
    )
    config = load_config(CONFIG + tiers)
    plugin = next(p for tier in config.tiers for p in tier if isinstance(p, GpuFragmentation))
    plugin.assume({}, lookahead=False)
    spans: dict[bool, int] = {}
    shortcuts: dict[bool, int] = {}
    monkeypatch.setattr(gang_placement, "_could_span", counting(gang_placement._could_span, spans))
    for name in ("_too_big", "_places_all"):
        shortcut = counting(getattr(gang_placement, name), shortcuts)
        monkeypatch.setattr(gang_placement, name, shortcut)
    for seed in range(20):
        decide(varied(random.Random(seed)), config, now=at(60))
    assert spans.get(True) and spans.get(False) and not shortcuts, (spans, shortcuts)
