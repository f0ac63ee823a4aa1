"""Simulated time: pods that finish and free their node, and pods that arrive later."""

from pathlib import Path

import pytest

from batchsched.cli import main

from .harness import simulate, simulate_text

EPOCH = "2025-01-01T00:{minute:02d}:{second:02d}Z"


def stamp(seconds: int) -> str:
    return EPOCH.format(minute=seconds // 60, second=seconds % 60)


def node(cpu: int, *, name: str = "n1", created: int | None = None) -> str:
    stamped = "" if created is None else f', creationTimestamp: "{stamp(created)}"'
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}{stamped}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 8Gi}}}}
"""


def pod(
    name: str,
    *,
    created: int = 0,
    duration: str | None = None,
    group: str | None = None,
    cpu: int = 1,
    deadline: int | None = None,
    on: str | None = None,
) -> str:
    notes = {}
    if duration is not None:
        notes["simulation.batchsched.io/duration"] = duration
    if group is not None:
        notes["scheduling.batchsched.io/group-name"] = group
    annotations = ", ".join(f"{key}: {value!r}" for key, value in notes.items())
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  creationTimestamp: "{stamp(created)}"
  annotations: {{{annotations}}}
spec:
  schedulerName: batch-scheduler
  nodeName: {on or "null"}
  activeDeadlineSeconds: {"null" if deadline is None else deadline}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def gang(name: str, size: int, *, created: int = 0, duration: str | None = None) -> str:
    notes = f"{{simulation.batchsched.io/duration: {duration!r}}}" if duration else "{}"
    return f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, creationTimestamp: "{stamp(created)}", annotations: {notes}}}
spec: {{minMember: {size}}}
""" + "".join(pod(f"{name}-{i}", created=created, group=name) for i in range(size))


def test_a_finished_pod_frees_its_node_for_a_waiting_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(
        capsys, tmp_path, node(1) + pod("first", duration="60s") + pod("second", created=1)
    )
    first, second = run.pods["default/first"], run.pods["default/second"]
    assert (first["node"], first["bound_at"], first["finished_at"]) == ("n1", 0, 60)
    assert (second["node"], second["bound_at"]) == ("n1", 60)
    assert "finished_at" not in second
    # The last session, one schedulePeriod after the last bind, finds nothing to do.
    assert run.report["summary"]["simulated_seconds"] == 61


def test_a_pod_without_duration_runs_for_ever(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(capsys, tmp_path, node(1) + pod("first") + pod("second", created=1))
    assert run.bound() == {"default/first": "n1"}
    assert run.pods["default/second"]["reason"]


def test_a_podgroups_duration_ends_every_member(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(capsys, tmp_path, node(2) + gang("g", 2, duration="2m") + pod("late"))
    assert [run.pods[f"default/g-{i}"]["finished_at"] for i in range(2)] == [120, 120]
    assert run.pods["default/late"]["bound_at"] == 120


def test_a_gang_arriving_later_binds_when_it_arrives(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = simulate_text(capsys, tmp_path, node(4) + pod("early") + gang("g", 3, created=300))
    assert run.pods["default/early"]["bound_at"] == 0
    assert [run.pods[f"default/g-{i}"]["bound_at"] for i in range(3)] == [300, 300, 300]
    assert run.podgroups["default/g"]["phase"] == "Running"


def test_a_node_created_later_arrives_then(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Room that comes late is not there before: the operator only sees a node once
    it is created. A node older than the first pod is simply there, and does not start
    the clock early."""
    nodes = node(1, created=0) + node(2, name="n2", created=300)
    pods = pod("small", created=60) + pod("big", created=60, cpu=2)
    run = simulate_text(capsys, tmp_path, nodes + pods)
    # Seconds since the start, which is the first pod's creation.
    assert (run.pods["default/small"]["node"], run.pods["default/small"]["bound_at"]) == ("n1", 0)
    assert (run.pods["default/big"]["node"], run.pods["default/big"]["bound_at"]) == ("n2", 240)


def test_a_node_holding_a_pod_is_there_from_the_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Whatever its stamp says (a node registered again keeps its pods): the pod on it
    was there from the start, and so was its node."""
    held = pod("running", on="n1")
    run = simulate_text(capsys, tmp_path, node(2, created=300) + held + pod("waiting"))
    assert run.bound() == {"default/running": "n1", "default/waiting": "n1"}
    assert run.pods["default/waiting"]["bound_at"] == 0


def test_a_bad_duration_is_reported_and_the_rest_simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(node(2) + pod("bad", duration="soon") + pod("good", duration="10m"))
    run = simulate(capsys, path)
    message = (
        "Pod default/bad: annotation simulation.batchsched.io/duration: "
        "'soon' is not a duration like 30s, 5m or 1h30m"
    )
    assert run.code == 0
    assert f"error: {message}" in run.stderr.splitlines()
    assert run.pods["default/bad"]["reason"] == message
    assert run.pods["default/good"]["finished_at"] == 600


def test_the_table_shows_finished_pods(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(node(1) + pod("first", duration="90s"))
    assert main(["simulate", "-f", str(path)]) == 0
    table = capsys.readouterr().out
    assert "Succeeded at 90s" in table
    assert "over 90s simulated" in table


STREAM = 20
# The gang is created while the stream's first job runs, so the node is never empty.
GANG_CREATED = 30


@pytest.mark.parametrize(("threshold", "held"), [("2m", True), ("0", False)])
def test_a_starving_gang_binds_behind_a_stream_of_short_jobs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, threshold: str, held: bool
) -> None:
    """One-pod jobs of a minute each arrive every 30s, so two always run and the gang
    never finds its four CPUs free. Past the starvation threshold its queue holds the
    CPUs the jobs free, and the gang binds once the last running job is done; without a
    threshold it waits for the whole stream."""
    (tmp_path / "input.yaml").write_text(
        node(4)
        + "".join(pod(f"job-{i:02d}", created=30 * i, duration="60s") for i in range(STREAM))
        + gang("g", 4, created=GANG_CREATED)
    )
    (tmp_path / "config.yaml").write_text(f"starvationThreshold: {threshold}\n")
    run = simulate(capsys, tmp_path / "input.yaml", config=str(tmp_path / "config.yaml"))
    assert run.code == 0, run.stderr
    waited = run.pods["default/g-0"]["bound_at"] - GANG_CREATED
    if held:
        assert 120 < waited <= 120 + 60 + 1
    else:
        last = run.pods[f"default/job-{STREAM - 1:02d}"]
        assert waited + GANG_CREATED == last["finished_at"]
    assert run.podgroups["default/g"]["phase"] == "Running"


@pytest.mark.parametrize("deadline", [20, None])
def test_pods_sure_to_end_in_time_run_in_the_room_held_for_a_starving_gang(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, deadline: int | None
) -> None:
    """A 2-CPU pod that must end by 300s holds half of n1; the 3-pod gang arriving at 5s
    starves from 65s, its room ready at 300s at the latest. One-CPU jobs of 20s arrive
    every 30s: those that state they end within 20s keep running in the held room until
    one would end after 300s, and the gang still binds at 300s; those that state no
    deadline wait from 65s on, until the gang has its room."""
    (tmp_path / "input.yaml").write_text(
        node(4)
        + pod("hog", cpu=2, duration="300s", deadline=300)
        + gang("g", 3, created=5)
        + "".join(
            pod(f"job-{i:02d}", created=10 + 30 * i, duration="20s", deadline=deadline)
            for i in range(11)
        )
    )
    (tmp_path / "config.yaml").write_text("starvationThreshold: 60s\n")
    run = simulate(capsys, tmp_path / "input.yaml", config=str(tmp_path / "config.yaml"))
    assert run.code == 0, run.stderr
    assert run.pods["default/g-0"]["bound_at"] == 300
    waited = {i: run.pods[f"default/job-{i:02d}"]["bound_at"] - (10 + 30 * i) for i in range(11)}
    if deadline is not None:
        # Arriving at 10 .. 280s, each ends by 300s; the one at 310s finds the gang there.
        assert all(waited[i] == 0 for i in range(10)), waited
    else:
        assert all(waited[i] == 0 for i in range(2)), waited
        assert run.pods["default/job-02"]["bound_at"] >= 300, waited


def test_a_pod_past_its_active_deadline_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "input.yaml").write_text(node(1) + pod("slow", duration="60s", deadline=30))
    run = simulate(capsys, tmp_path / "input.yaml")
    slow = run.pods["default/slow"]
    assert (slow["finished_at"], slow["deadline_exceeded"]) == (30, True)


def test_a_podgroups_bad_duration_keeps_its_pods_waiting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(node(4) + gang("g", 2, duration="-5s") + pod("alone"))
    run = simulate(capsys, path)
    message = "PodGroup default/g: annotation simulation.batchsched.io/duration: '-5s' is not"
    assert any(line.startswith(f"error: {message}") for line in run.stderr.splitlines())
    assert run.pods["default/g-0"]["reason"].startswith(message)
    assert run.bound() == {"default/alone": "n1"}
