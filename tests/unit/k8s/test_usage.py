"""What a session leaves each queue and the cluster holding."""

from batchsched.config.load import default_config
from batchsched.k8s.usage import summarize
from batchsched.model.decisions import Binding, Nomination
from batchsched.scheduler import run_session

from tests.support.objects import gang, node, pod, queue, snapshot_of


def test_queue_usage_counts_bound_and_just_decided_pods() -> None:
    objects = [
        node("n1", cpu="4", memory="8Gi"),
        queue("research"),
        pod("running", requests={"cpu": "1"}, node_name="n1", phase="Running", namespace="default"),
        *gang("fits", 2, requests={"cpu": "1"}, queue="research", namespace="default"),
        *gang("waits", 4, requests={"cpu": "1"}, queue="research", namespace="default"),
    ]
    snapshot = snapshot_of(objects)
    decisions = run_session(snapshot, default_config())
    usage = summarize(snapshot, decisions)
    research = usage.queues["research"]
    assert research.allocated["cpu"] == 2000
    assert (research.pending + research.inqueue, research.running) == (1, 1)
    assert usage.queues["default"].allocated["cpu"] == 1000  # lone pods are in the default queue
    assert usage.cluster_allocatable["cpu"] == 4000
    assert usage.cluster_allocated["cpu"] == 3000
    assert usage.pending_groups == 1


def test_a_parent_queue_shows_what_its_children_hold() -> None:
    objects = [
        node("n1", cpu="8", memory="8Gi"),
        queue("root"),
        queue("team", parent="root"),
        queue("research", parent="team"),
        queue("ops", parent="team"),
        *gang("r", 2, requests={"cpu": "1"}, queue="research", namespace="default"),
        *gang("o", 1, requests={"cpu": "2"}, queue="ops", namespace="default"),
    ]
    snapshot = snapshot_of(objects)
    usage = summarize(snapshot, run_session(snapshot, default_config()))
    cpu = {name: used.allocated.get("cpu", 0) for name, used in usage.queues.items()}
    assert cpu == {"root": 4000, "team": 4000, "research": 2000, "ops": 2000, "default": 0}


def nominated(name: str, node_name: str) -> dict[str, object]:
    waiting = pod(name, requests={"cpu": "8"}, namespace="default")
    waiting["status"] = {"phase": "Pending", "nominatedNodeName": node_name}
    return waiting


def test_nominated_pods_count_the_sessions_nominations_and_not_pods_it_bound() -> None:
    objects = [
        node("n1", cpu="4", memory="8Gi"),
        nominated("held-0", "n1"),
        nominated("held-1", "n1"),
        nominated("cleared", "n1"),
    ]
    snapshot = snapshot_of(objects)
    decisions = run_session(snapshot, default_config())
    # Bound in the session (as if room had come free): it no longer waits on its node.
    decisions.bindings = [Binding("default", "held-1", "", "n1", "")]
    decisions.nominations = [
        Nomination("default", "cleared", "", "", ""),
        Nomination("default", "fresh", "", "n1", ""),
    ]
    assert summarize(snapshot, decisions).nominated == 2
