"""Per-card GPU accounting: cards are never over-allocated and are freed with their pods."""

import random
from collections.abc import Mapping

from batchsched.api.gpu import GPU_INDEX_ANNOTATION, GPU_MILLI
from batchsched.api.resources import GPU
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.snapshot import Snapshot
from batchsched.sim.simulator import simulate

from tests.support.objects import (
    SCHEDULER,
    Obj,
    cache_of,
    decide,
    node,
    pending_task,
    placements,
    pod,
    snapshot_of,
)


def gpu_node(name: str, cards: int) -> Obj:
    return node(name, cpu="64", extra={GPU: str(cards), GPU_MILLI: str(cards * 1000)})


def share(
    name: str, milli: int, *, node_name: str | None = None, cards: Mapping[str, str] | None = None
) -> Obj:
    requests = {"cpu": "1", GPU_MILLI: str(milli)}
    return pod(name, requests=requests, node_name=node_name, annotations=cards)


def session_of(snapshot: Snapshot) -> Session:
    return Session(snapshot, tiers=default_config().tiers)


def test_shares_fill_one_card_before_a_second_is_touched() -> None:
    decisions = decide([gpu_node("n", 2), share("a", 600), share("b", 300), share("c", 100)])
    cards = {b.name: b.gpu_index for b in decisions.bindings}
    assert cards == {"a": (0,), "b": (0,), "c": (0,)}


def test_a_share_never_overflows_a_card() -> None:
    decisions = decide([gpu_node("n", 2), share("a", 600), share("b", 600), share("c", 600)])
    assert placements(decisions) == {"default/a": "n", "default/b": "n"}
    assert decisions.pending["default/c"] == (
        "0/1 nodes are available: 1 node(s) didn't have a GPU card with 600 milli free."
    )


def test_whole_cards_need_cards_no_share_has_touched() -> None:
    decisions = decide([gpu_node("n", 2), share("a", 100), pod("b", requests={GPU: "2"})])
    assert placements(decisions) == {"default/a": "n"}
    assert "didn't have 2 whole free GPU card(s)" in decisions.pending["default/b"]


def test_node_level_shortage_is_left_to_the_predicates_message() -> None:
    decisions = decide([gpu_node("n", 1), pod("a", requests={GPU: "2"})])
    assert (
        decisions.pending["default/a"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )


def test_share_goes_to_the_fullest_card_that_fits() -> None:
    snapshot = snapshot_of([gpu_node("n", 3), share("x", 300)])
    session = session_of(snapshot)
    session.gpu.free[0] = [500, 400, 1000]
    task = pending_task(snapshot, "default/x")
    assert session.gpu.best_fit(task, 0) == (1,)


def test_random_placements_never_overcommit_and_undo_restores() -> None:
    rng = random.Random(7)
    objects = [gpu_node(f"n{i}", rng.choice([1, 2, 4, 8])) for i in range(6)]
    for i in range(120):
        if rng.random() < 0.6:
            objects.append(share(f"s{i:03}", rng.choice([100, 250, 460, 810])))
        else:
            objects.append(pod(f"w{i:03}", requests={"cpu": "1", GPU: str(rng.choice([1, 2]))}))
    snapshot = snapshot_of(objects)
    session = session_of(snapshot)
    fresh = session.gpu.free.copy()
    for job in sorted(snapshot.jobs.values(), key=lambda j: j.key):
        task = job.pending[0]
        chosen = session.best_node(task)
        if chosen is None:
            continue
        statement = Statement(session, job)
        statement.allocate(task, chosen)
        assert (session.gpu.free >= 0).all()
        if rng.random() < 0.3:
            statement.discard()
        else:
            statement.commit()
    assert (session.gpu.free >= 0).all()
    used = fresh - session.gpu.free
    placed = sum(
        t.gpu.total
        for job in snapshot.jobs.values()
        for t in job.pending
        if t.key in session.gpu.placed
    )
    assert used.sum() == placed


def test_discarded_statement_gives_its_cards_back() -> None:
    snapshot = snapshot_of([gpu_node("n", 2), share("a", 700)])
    session = session_of(snapshot)
    job = next(iter(snapshot.jobs.values()))
    statement = Statement(session, job)
    statement.allocate(job.pending[0], 0)
    assert session.gpu.free[0].tolist() == [300, 1000]
    statement.discard()
    assert session.gpu.free[0].tolist() == [1000, 1000]
    assert session.gpu.placed == {}


def test_bound_pods_hold_their_annotated_cards_and_the_rest_fit_around_them() -> None:
    snapshot = snapshot_of(
        [
            gpu_node("n", 3),
            share("a", 400, node_name="n", cards={GPU_INDEX_ANNOTATION: "2"}),
            pod("b", requests={GPU: "1"}, node_name="n", annotations={GPU_INDEX_ANNOTATION: "0"}),
            share("c", 500, node_name="n"),
        ]
    )
    assert session_of(snapshot).gpu.free[0].tolist() == [0, 1000, 100]


def test_overclaimed_card_counts_as_full_not_negative() -> None:
    snapshot = snapshot_of(
        [
            gpu_node("n", 1),
            share("a", 700, node_name="n", cards={GPU_INDEX_ANNOTATION: "0"}),
            share("b", 700, node_name="n", cards={GPU_INDEX_ANNOTATION: "0"}),
        ]
    )
    assert session_of(snapshot).gpu.free[0].tolist() == [0]


def test_deleting_a_pod_frees_its_card_for_the_next_session() -> None:
    holder = share("a", 800, node_name="n", cards={GPU_INDEX_ANNOTATION: "0"})
    cache = cache_of([gpu_node("n", 1), holder, share("b", 800)])
    first = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert session_of(first).gpu.free[0].tolist() == [200]
    cache.apply(holder, deleted=True)
    second = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    session = session_of(second)
    assert session.gpu.free[0].tolist() == [1000]
    assert session.best_node(pending_task(second, "default/b")) == 0


def test_simulator_records_the_chosen_cards_on_bound_pods() -> None:
    result = simulate(
        [gpu_node("n", 2), share("a", 600), pod("b", requests={GPU: "1"})], default_config()
    )
    tasks = result.cache.tasks
    assert {tasks["default/a"].gpu_index, tasks["default/b"].gpu_index} == {(0,), (1,)}
    assert session_of(result.snapshot).gpu.free[0].sum() == 400
