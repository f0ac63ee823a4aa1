"""A Kubernetes PodGroup whose pods name different schedulers, as sessions over a kept
snapshot decide it (the operator's way): refused whole, whatever order its pods come
in, and decided alike however their arrivals fall into sessions."""

from dataclasses import dataclass, field

import pytest

from batchsched.cache.cluster import ClusterCache
from batchsched.cache.keeper import SnapshotKeeper
from batchsched.config.load import default_config
from batchsched.model.decisions import Decisions
from batchsched.model.snapshot import Snapshot
from batchsched.scheduler import run_session

from tests.support.objects import SCHEDULER, Obj, member, native_pod_group, node

CPU = {"cpu": "1", "memory": "1Gi"}
MIXED = "its pods name different schedulers in spec.schedulerName"


def theirs(name: str, *, phase: str | None = None) -> Obj:
    """A member of PodGroup g naming another scheduler."""
    return member(name, "g", CPU, scheduler="default-scheduler", phase=phase)


@dataclass
class Operator:
    """A cache, its keeper and sessions over it, binds assumed as the operator's loop
    assumes them."""

    cache: ClusterCache = field(default_factory=ClusterCache)
    bound: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keeper = SnapshotKeeper(self.cache, scheduler_names={SCHEDULER})
        self.config = default_config()
        self.now = 0.0

    def apply(self, *objects: Obj, deleted: bool = False) -> None:
        for obj in objects:
            self.cache.apply(obj, deleted=deleted)

    def session(self) -> tuple[Snapshot, Decisions]:
        self.now += 1.0
        snapshot = self.keeper.take(now=self.now)
        decisions = run_session(snapshot, self.config)
        self.keeper.set_aside(decisions.unplaced)
        for binding in decisions.bindings:
            self.cache.assume(binding.key, binding.node, gpu_index=binding.gpu_index)
            self.bound[binding.key] = binding.node
        return snapshot, decisions


def started(*objects: Obj) -> Operator:
    """An operator that has run its first session over `objects`."""
    operator = Operator()
    operator.apply(*objects)
    operator.session()
    return operator


def arrive(operator: Operator, batches: list[list[Obj]]) -> Decisions:
    """Each batch reaches the cache between two sessions; then one more session, as
    the one a group held back asks for."""
    for batch in batches:
        operator.apply(*batch)
        operator.session()
    return operator.session()[1]


@pytest.mark.parametrize(
    "batches",
    [
        [[member("g-0", "g", CPU)], [theirs("theirs")], [member("g-1", "g", CPU)]],
        [[member("g-0", "g", CPU), theirs("theirs")], [member("g-1", "g", CPU)]],
        [[member("g-0", "g", CPU), theirs("theirs"), member("g-1", "g", CPU)]],
    ],
    ids=["a session after each", "member and theirs in one", "all in one"],
)
def test_a_member_that_came_before_the_pod_of_another_scheduler_is_decided_alike(
    batches: list[list[Obj]],
) -> None:
    """The member that came first is placed however its arrival and that of the pod
    mixing its group fall into sessions; the member that came after waits, naming both."""
    operator = started(node("n0", cpu=4), native_pod_group("g", None))
    decisions = arrive(operator, batches)
    assert operator.bound == {"default/g-0": "n0"}
    assert MIXED in decisions.pending["default/g-1"].message


def test_a_gang_completed_before_the_pod_of_another_scheduler_starts_alike() -> None:
    """Two members bound, minCount 4: the two that complete it came before the pod of
    another scheduler, in the same session; they start, and a later member waits."""
    placed = [member(f"g-bound-{i}", "g", CPU, node_name="n0") for i in range(2)]
    operator = started(node("n0", cpu=8), native_pod_group("g", 4), *placed)
    joining = [member("g-0", "g", CPU), member("g-1", "g", CPU), theirs("theirs")]
    decisions = arrive(operator, [joining, [member("g-2", "g", CPU)]])
    assert set(operator.bound) == {"default/g-0", "default/g-1"}
    assert MIXED in decisions.pending["default/g-2"].message


def test_a_member_that_came_after_the_pod_of_another_scheduler_is_refused_at_once() -> None:
    operator = started(node("n0", cpu=4), native_pod_group("g", None))
    operator.apply(theirs("theirs"), member("g-0", "g", CPU))
    snapshot, decisions = operator.session()
    assert not operator.bound
    assert MIXED in decisions.pending["default/g-0"].message
    assert snapshot.held_back == {"default/g"}


def test_a_member_held_back_that_did_not_fit_then_waits_naming_the_mix() -> None:
    """Decided as it stood before the pod of another scheduler came, the member finds
    no room; the next session refuses the group whole, and says so."""
    operator = started(node("n0", cpu=1), native_pod_group("g", None), member("big", "g", CPU))
    operator.apply(member("g-0", "g", CPU), theirs("theirs"))
    snapshot, decisions = operator.session()
    assert snapshot.held_back == {"default/g"}
    assert MIXED not in decisions.pending["default/g-0"].message
    snapshot, decisions = operator.session()
    assert not snapshot.held_back
    assert MIXED in decisions.pending["default/g-0"].message
    assert snapshot.jobs["default/g"].error is not None


def test_a_group_mixed_before_the_first_session_is_refused_whole() -> None:
    """What was there before any session came in no order a session saw."""
    operator = Operator()
    operator.apply(node("n0", cpu=4), native_pod_group("g", None))
    operator.apply(member("g-0", "g", CPU), theirs("theirs"))
    snapshot, decisions = operator.session()
    assert not operator.bound
    assert not snapshot.held_back
    assert MIXED in decisions.pending["default/g-0"].message


@pytest.mark.parametrize(
    "phase", [None, "Succeeded", "Failed"], ids=["deleted", "succeeded", "failed"]
)
def test_the_refusal_ends_when_the_pod_of_another_scheduler_goes(phase: str | None) -> None:
    """A finished pod asks for nothing, and kube-scheduler does not see it: the group
    is no longer mixed, as when the pod is deleted."""
    operator = started(
        node("n0", cpu=4), native_pod_group("g", 2), member("g-0", "g", CPU), theirs("theirs")
    )
    operator.apply(member("g-1", "g", CPU))
    assert MIXED in operator.session()[1].pending["default/g-1"].message
    operator.apply(theirs("theirs", phase=phase), deleted=phase is None)
    operator.session()
    assert set(operator.bound) == {"default/g-0", "default/g-1"}
