"""The simulator standing in for the kubelet and controllers when a session evicts and
nominates: pods deleted at once, their runs ended, budgets spent, nominations written."""

from typing import Any

from batchsched.cache.cluster import ClusterCache
from batchsched.model.decisions import Eviction, Nomination
from batchsched.sim.simulator import DURATION_ANNOTATION, _Events


def pod(
    name: str, *, labels: dict[str, str] | None = None, duration: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": labels or {},
            "annotations": {DURATION_ANNOTATION: duration} if duration else {},
        },
        "spec": {
            "schedulerName": "batch-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def budget(name: str, namespace: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": allowed},
    }


def events(*objects: dict[str, Any]) -> _Events:
    found = _Events(ClusterCache(), [])
    node = {
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
    }
    for obj in (node, *objects):
        found.apply(obj)
    assert found.errors == []
    return found


def eviction(name: str) -> Eviction:
    return Eviction(
        namespace="default",
        name=name,
        uid="",
        node="n1",
        action="preempt",
        preemptor="default/high",
        message="preempted",
    )


def test_an_evicted_pod_is_deleted_and_its_run_never_ends() -> None:
    """The pod comes back (as a controller would recreate it) and binds again: only
    the second run's finish counts, the first one's is dropped with the eviction."""
    first = pod("job", duration="60s")
    sim = events(first)
    sim.bind("default/job", "n1", (), now=0.0)
    sim.evict(eviction("job"), now=10.0)
    assert "default/job" not in sim.cache.tasks
    assert [(e.at, e.eviction.key, e.group) for e in sim.evicted] == [(10.0, "default/job", None)]
    sim.apply(first)
    sim.bind("default/job", "n1", (), now=20.0)
    sim.advance(60.0)
    assert sim.finished_at == {}
    assert sim.cache.tasks["default/job"].phase == "Running"
    sim.advance(80.0)
    assert sim.finished_at == {"default/job": 80.0}


def test_an_eviction_spends_a_disruption_of_each_budget_selecting_the_pod() -> None:
    sim = events(
        budget("db", "default", 1),
        budget("elsewhere", "other", 1),
        pod("db-0", labels={"app": "db"}),
        pod("db-1", labels={"app": "db"}),
        pod("web", labels={"app": "web"}),
    )
    for name in ("web", "db-0", "db-1"):
        sim.evict(eviction(name), now=0.0)
    allowed = {key: b.disruptions_allowed for key, b in sim.cache.budgets.items()}
    # Never below none: the second eviction exceeded the budget.
    assert allowed == {"default/db": 0, "other/elsewhere": 1}


def test_a_nomination_is_written_on_the_pod_and_cleared() -> None:
    sim = events(pod("high", duration="5m"))
    created = sim.cache.tasks["default/high"].creation
    nominate = Nomination(namespace="default", name="high", uid="", node="n1", job="")
    assert sim.nominate(nominate)
    task = sim.cache.tasks["default/high"]
    assert (task.nominated_node, task.creation) == ("n1", created)
    assert sim.pods["default/high"]["status"] == {"nominatedNodeName": "n1"}
    assert not sim.nominate(nominate)
    cleared = Nomination(namespace="default", name="high", uid="", node="", job="")
    assert sim.nominate(cleared)
    assert sim.cache.tasks["default/high"].nominated_node is None
    assert sim.pods["default/high"]["status"] == {}
    # The pod's duration still holds once it binds.
    sim.bind("default/high", "n1", (), now=0.0)
    sim.advance(300.0)
    assert sim.finished_at == {"default/high": 300.0}
