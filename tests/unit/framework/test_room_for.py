"""Session.room_for: per node, how many of some pods it takes whichever go first, as the
filters bound it (NodeFilter.room_for); nothing said where a filter reads what other
pods are placed, or for a share of a card."""

import numpy as np

from batchsched.api.gpu import GPU_MILLI
from batchsched.api.resources import GPU
from batchsched.config.load import default_config
from batchsched.framework.session import Session
from batchsched.framework.statement import Statement
from batchsched.model.snapshot import Snapshot, TaskInfo

from tests.support.objects import Obj, node, pending_task, pod, snapshot_of


def session_of(objects: list[Obj]) -> tuple[Session, Snapshot]:
    snapshot = snapshot_of(objects)
    return Session(snapshot, tiers=default_config().tiers), snapshot


def tasks(snapshot: Snapshot, *names: str) -> list[TaskInfo]:
    return [pending_task(snapshot, f"default/{name}") for name in names]


def gpu_node(name: str, cards: int, *, pool: str = "a") -> Obj:
    extra = {GPU: str(cards), GPU_MILLI: str(cards * 1000)}
    return node(name, cpu="8", labels={"pool": pool}, extra=extra)


def test_the_most_each_resource_is_asked_on_nodes_every_pod_may_go_to() -> None:
    session, snapshot = session_of(
        [
            gpu_node("n0", 4),
            # A share of one card taken: three whole ones left.
            pod("share", {GPU_MILLI: "500"}, node_name="n0", scheduler="other"),
            gpu_node("n1", 8, pool="b"),
            node("n2", cpu="8", labels={"pool": "a"}),
            pod("launcher", {"cpu": "1"}),
            pod("worker", {"cpu": "2", GPU: "2"}),
            pod("kept", {"cpu": "1"}, spec={"nodeSelector": {"pool": "b"}}),
        ]
    )
    room = session.room_for(tasks(snapshot, "launcher", "worker"))
    assert room is not None
    # n0: 3 whole cards // 2 = 1; n1: 8 // 2 = 4 (and 8 cores // 2); n2: no card.
    assert room.tolist() == [1, 4, 0]
    room = session.room_for(tasks(snapshot, "launcher", "kept"))
    assert room is not None
    assert room.tolist() == [0, 8, 0]


def test_placing_one_lowers_the_room_of_its_node_by_one_at_most() -> None:
    session, snapshot = session_of(
        [gpu_node("n0", 4), gpu_node("n1", 8), pod("a", {"cpu": "1"}), pod("b", {GPU: "2"})]
    )
    members = tasks(snapshot, "a", "b")
    before = session.room_for(members)
    assert before is not None
    for task in members:
        job = next(j for j in snapshot.jobs.values() if task in j.pending)
        Statement(session, job).allocate(task, 0)
        after = session.room_for(members)
        assert after is not None
        assert before[0] - 1 <= after[0] and (after[1:] == before[1:]).all()
        before = after


def test_nothing_is_said_of_a_share_of_a_card_or_a_host_port() -> None:
    port = {"name": "main", "ports": [{"containerPort": 80, "hostPort": 8080}]}
    session, snapshot = session_of(
        [
            gpu_node("n0", 4),
            pod("share", {GPU_MILLI: "300"}),
            pod("port", {"cpu": "1"}, spec={"containers": [port]}),
            pod("plain", {"cpu": "1"}),
        ]
    )
    assert session.room_for(tasks(snapshot, "plain")) is not None
    assert session.room_for(tasks(snapshot, "plain", "share")) is None
    assert session.room_for(tasks(snapshot, "plain", "port")) is None


def test_nothing_is_said_of_pods_a_filter_asked_afresh_bears_on() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    session, snapshot = session_of(
        [
            node("n0"),
            pod("apart", {"cpu": "1"}, labels={"app": "x"}, spec={"affinity": apart}),
            pod("plain", {"cpu": "1"}),
        ]
    )
    assert session.room_for(tasks(snapshot, "plain")) is not None
    assert session.room_for(tasks(snapshot, "apart")) is None


def test_room_held_for_a_starving_gang_is_left_out() -> None:
    session, snapshot = session_of(
        [node("n0", cpu="8"), node("n1", cpu="8"), pod("p", {"cpu": "2"})]
    )
    cpu = np.zeros(len(snapshot.column), dtype=np.int64)
    cpu[snapshot.column["cpu"]] = 5000
    session.reserve("default/starving", [1], [cpu])
    room = session.room_for(tasks(snapshot, "p"))
    assert room is not None
    assert room.tolist() == [4, 1]
