"""capacity: Volcano's queue plugin, a queue deserving what its `deserved` states."""

import pytest

from ..actions.test_preempt import evicted
from ..actions.test_reclaim import running, waiting
from tests.support.objects import Obj, decide, node, placements, pod, pod_group, queue


def config(plugin: str, actions: str) -> str:
    return (
        f'actions: "{actions}"\ntiers:\n- plugins: [{{name: priority}}, {{name: gang}}]\n'
        f"- plugins: [{{name: predicates}}, {{name: {plugin}}}]\n"
    )


def deserving(name: str, cpu: str | None) -> Obj:
    built = queue(name)
    if cpu is not None:
        built["spec"]["deserved"] = {"cpu": cpu}
    return built


@pytest.mark.parametrize(("plugin", "placed"), [("proportion", 1), ("capacity", 4)])
def test_elastic_members_go_beyond_what_the_queue_deserves(plugin: str, placed: int) -> None:
    """Queue a deserves 1 CPU of 4 and queue b waits (its pod fits nowhere): proportion
    holds a's members beyond the gang's minimum to its share, capacity does not."""
    objects = [
        node("n1", cpu="4"),
        deserving("a", "1"),
        deserving("b", "3"),
        pod_group("elastic", 1, created=0, queue="a"),
        *(pod(f"elastic-{i}", requests={"cpu": "1"}, group="elastic") for i in range(4)),
        pod_group("huge", 1, created=0, queue="b"),
        pod("huge-0", requests={"cpu": "8"}, group="huge"),
    ]
    decisions = decide(objects, config(plugin, "enqueue, allocate"))
    assert len(placements(decisions)) == placed


@pytest.mark.parametrize(("plugin", "reclaimed"), [("proportion", 1), ("capacity", 0)])
def test_a_queue_deserving_nothing_reclaims_nothing(plugin: str, reclaimed: int) -> None:
    """Queue b states no `deserved`: by weight it deserves half the cluster and
    reclaims; under capacity it deserves nothing, so it never reclaims (Volcano's
    preemptive check), whatever queue a holds beyond its own 4 CPUs."""
    objects = [
        *(node(f"n{i}", cpu="4") for i in range(2)),
        deserving("a", "4"),
        deserving("b", None),
        *running("a-0", "n0", "a"),
        *running("a-1", "n1", "a"),
        *waiting("b-0", "b"),
    ]
    decisions = decide(objects, config(plugin, "reclaim"))
    assert len(evicted(decisions)) == reclaimed


def test_capacity_reclaims_for_a_queue_below_what_it_deserves() -> None:
    objects = [
        *(node(f"n{i}", cpu="4") for i in range(2)),
        deserving("a", None),
        deserving("b", "4"),
        *running("a-0", "n0", "a"),
        *running("a-1", "n1", "a"),
        *waiting("b-0", "b"),
    ]
    decisions = decide(objects, config("capacity", "reclaim"))
    assert len(evicted(decisions)) == 1


def test_capacity_reclaims_only_for_a_pod_that_keeps_its_queue_within_its_due() -> None:
    """Queue b deserves 4 CPUs and holds 2: a 4-CPU pod would take it to 6, so it
    reclaims nothing for it, as Volcano's capacity counts the pod before allowing it."""
    objects = [
        *(node(f"n{i}", cpu="4") for i in range(3)),
        deserving("a", None),
        deserving("b", "4"),
        *running("a-0", "n0", "a"),
        *running("a-1", "n1", "a"),
        pod_group("b-run", 1, created=0, queue="b"),
        pod("b-run-0", requests={"cpu": "2"}, group="b-run", node_name="n2", phase="Running"),
        *waiting("b-0", "b"),
    ]
    decisions = decide(objects, config("capacity", "reclaim"))
    assert evicted(decisions) == set()


def tree_queue(name: str, parent: str | None, cpu: str | None, *, reclaimable: bool = True) -> Obj:
    built = deserving(name, cpu)
    if parent is not None:
        built["spec"]["parent"] = parent
    built["spec"]["reclaimable"] = reclaimable
    return built


@pytest.mark.parametrize(("levels", "reclaimed"), [(0, 1), (1, 0)])
def test_ancestor_reclaim_level_spares_a_parent_within_what_it_deserves(
    levels: int, reclaimed: int
) -> None:
    """Queue a1 (under p1) deserves nothing and holds 4 CPUs, which its parent p1
    deserves: with ancestorReclaimLevel 1, b1 (under p2) reclaims nothing from it, as
    p1 is not above what it deserves; with 0, only a1 itself is looked at."""
    objects = [
        *(node(f"n{i}", cpu="4") for i in range(2)),
        tree_queue("p1", None, "4"),
        tree_queue("p2", None, "4"),
        tree_queue("a1", "p1", None),
        tree_queue("b1", "p2", "4"),
        tree_queue("c1", "p2", None, reclaimable=False),
        *running("a1-0", "n0", "a1"),
        *running("c1-0", "n1", "c1"),
        *waiting("b1-0", "b1"),
    ]
    text = config("capacity", "reclaim").replace(
        "{name: capacity}", f"{{name: capacity, arguments: {{ancestorReclaimLevel: {levels}}}}}"
    )
    decisions = decide(objects, text)
    assert len(evicted(decisions)) == reclaimed
