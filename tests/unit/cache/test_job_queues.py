"""Which queue a job is in: its PodGroup's spec.queue, else its pods' annotation (jobs
without a PodGroup), else its namespace's annotation, then label, else the default."""

import re

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cache.keeper import take_snapshot
from batchsched.config.load import default_config
from batchsched.scheduler import run_session

from tests.support.objects import (
    SCHEDULER,
    Obj,
    cache_of,
    decide,
    node,
    placements,
    pod,
    pod_group,
    queue,
)

KEY = "scheduling.batchsched.io/queue-name"
VOLCANO_KEY = "scheduling.volcano.sh/queue-name"
NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
QUEUES = [queue(name) for name in ("group-q", "pod-q", "ns-note", "ns-label")]


def namespace(name: str, *, label: object = None, note: object = None) -> Obj:
    """A Namespace naming its queue by label and/or annotation (None: not at all)."""
    meta: Obj = {"name": name}
    if label is not None:
        meta["labels"] = {KEY: label}
    if note is not None:
        meta["annotations"] = {KEY: note}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def member(
    name: str, group: str, size: int, *, queue_name: str | None = None, queue_key: str = KEY
) -> Obj:
    """A pod of a label-only gang of `size` in namespace ml, naming `queue_name` if given."""
    labels = {NAME_LABEL: group, MIN_LABEL: str(size)}
    notes = None if queue_name is None else {queue_key: queue_name}
    return pod(name, namespace="ml", labels=labels, annotations=notes, requests={"cpu": "1"})


BOTH = namespace("ml", label="ns-label", note="ns-note")
GROUP_NO_QUEUE = pod_group("g", 1, namespace="ml")
GROUP_POD = pod("g-0", namespace="ml", group="g", annotations={KEY: "pod-q"})


@pytest.mark.parametrize(
    ("objects", "job", "expected"),
    [
        ([BOTH, pod_group("g", 1, namespace="ml", queue="group-q"), GROUP_POD], "ml/g", "group-q"),
        ([BOTH, GROUP_NO_QUEUE, GROUP_POD], "ml/g", "ns-note"),
        ([namespace("ml", label="ns-label"), GROUP_NO_QUEUE], "ml/g", "ns-label"),
        ([GROUP_NO_QUEUE], "ml/g", "default"),
        ([BOTH, pod("p", namespace="ml", annotations={KEY: "pod-q"})], "pod:ml/p", "pod-q"),
        ([BOTH, pod("p", namespace="ml")], "pod:ml/p", "ns-note"),
        ([namespace("ml", label="ns-label"), pod("p", namespace="ml")], "pod:ml/p", "ns-label"),
        ([BOTH, member("a", "lg", 2), member("b", "lg", 2, queue_name="pod-q")], "ml/lg", "pod-q"),
        ([BOTH, member("a", "lg", 2)], "ml/lg", "ns-note"),
    ],
    ids=[
        "group-spec-wins",
        "group-unset-namespace-annotation",
        "group-unset-namespace-label",
        "group-unset-default",
        "lone-pod-annotation",
        "lone-pod-namespace-annotation",
        "lone-pod-namespace-label",
        "label-only-gang-annotation",
        "label-only-gang-namespace",
    ],
)
def test_queue_precedence(objects: list[Obj], job: str, expected: str) -> None:
    cache = cache_of([*QUEUES, *objects])
    jobs = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER}).jobs
    assert (jobs[job].queue, jobs[job].error) == (expected, None)


def test_members_naming_different_queues_leave_their_gang_waiting() -> None:
    decisions = decide(
        [
            node("n1"),
            *QUEUES,
            member("a", "lg", 3, queue_name="pod-q"),
            member("b", "lg", 3),
            member("c", "lg", 3, queue_key=VOLCANO_KEY, queue_name="ns-note"),
        ]
    )
    # The queues in name order, each with the least of the pods naming it: the message
    # does not depend on the order the pods reached the cache.
    message = (
        f"gang ml/lg: its pods name different queues, 'ns-note' (named by Pod ml/c's "
        f"annotation {VOLCANO_KEY}) and 'pod-q' (named by Pod ml/a's annotation {KEY})"
    )
    assert placements(decisions) == {}
    assert decisions.pending == {"ml/a": message, "ml/b": message, "ml/c": message}


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        (
            [namespace("ml", note="team-x"), pod("p", namespace="ml")],
            f"queue 'team-x' does not exist (named by Namespace ml's annotation {KEY})",
        ),
        (
            [namespace("ml", label="team-x"), pod_group("g", 1, namespace="ml"), GROUP_POD],
            f"queue 'team-x' does not exist (named by Namespace ml's label {KEY})",
        ),
        (
            [pod("p", namespace="ml", annotations={VOLCANO_KEY: "team-x"})],
            f"queue 'team-x' does not exist (named by Pod ml/p's annotation {VOLCANO_KEY})",
        ),
    ],
    ids=["namespace-annotation", "namespace-label", "pod-annotation"],
)
def test_a_missing_queue_says_where_it_was_named(objects: list[Obj], message: str) -> None:
    decisions = decide([node("n1"), *objects])
    assert placements(decisions) == {}
    assert list(decisions.pending.values()) == [message]


def test_an_invalid_queue_says_why_and_where_it_was_named() -> None:
    cache = cache_of([node("n1"), pod("p", annotations={KEY: "q"})])
    with pytest.raises(InvalidObject):
        cache.apply(queue("q", capability={"cpu": "-2"}))
    decisions = run_session(
        take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER}), default_config()
    )
    assert decisions.pending == {
        "default/p": "queue 'q' is invalid: Queue q.spec.capability.cpu: '-2' is negative "
        f"(named by Pod default/p's annotation {KEY})"
    }


@pytest.mark.parametrize("bad", ["", 5])
def test_a_namespace_naming_no_queue_is_refused_and_its_pods_still_scheduled(bad: object) -> None:
    cache = cache_of([node("n1"), pod("p", namespace="ml", requests={"cpu": "1"})])
    message = f"Namespace ml: label {KEY}={bad!r} must name a queue"
    with pytest.raises(InvalidObject, match=re.escape(message)):
        cache.apply(namespace("ml", label=bad))
    snapshot = take_snapshot(cache, now=0.0, scheduler_names={SCHEDULER})
    assert snapshot.jobs["pod:ml/p"].queue == "default"
    assert placements(run_session(snapshot, default_config())) == {"ml/p": "n1"}
