"""Preempt and reclaim carried out by the simulator, run through `batchsched simulate`:
victims deleted at once, their room nominated and then bound, gangs evicted whole or
only above minMember, PodDisruptionBudgets, and the pods no action may take."""

from collections import Counter
from pathlib import Path

import pytest

from batchsched.cli import main

from .harness import Run, simulate

EPOCH = "2025-01-01T00:{minute:02d}:{second:02d}Z"
# When the preemptors arrive: the input's pods have been bound for a while by then.
LATER = 60
HIGH = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""
LOW = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
"""


def stamp(seconds: int) -> str:
    return EPOCH.format(minute=seconds // 60, second=seconds % 60)


def node(name: str, cpu: int) -> str:
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status: {{allocatable: {{cpu: "{cpu}", memory: 64Gi, pods: "110"}}}}
"""


def pod(
    name: str,
    *,
    created: int = 0,
    priority: str | None = None,
    group: str | None = None,
    queue: str | None = None,
    namespace: str = "default",
    labels: str = "{}",
    duration: str | None = None,
    extra: str = "",
) -> str:
    """A pod of ours asking for one CPU; `extra` lines are appended to its spec."""
    notes = {}
    if group is not None:
        notes["scheduling.batchsched.io/group-name"] = group
    if queue is not None:
        notes["scheduling.batchsched.io/queue-name"] = queue
    if duration is not None:
        notes["simulation.batchsched.io/duration"] = duration
    annotations = ", ".join(f"{key}: {value}" for key, value in notes.items())
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  creationTimestamp: "{stamp(created)}"
  labels: {labels}
  annotations: {{{annotations}}}
spec:
  schedulerName: batch-scheduler
  priorityClassName: {priority or '""'}
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
{extra}"""


def gang(
    name: str,
    size: int,
    min_member: int,
    *,
    created: int = 0,
    priority: str | None = None,
    pods_created: int | None = None,
) -> str:
    """Our PodGroup `name` and its `size` one-CPU pods, created with it unless
    `pods_created` says when."""
    group = f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, creationTimestamp: "{stamp(created)}"}}
spec: {{minMember: {min_member}, priorityClassName: {priority or '""'}}}
"""
    members = created if pods_created is None else pods_created
    return group + "".join(
        pod(f"{name}-{i}", created=members, priority=priority, group=name) for i in range(size)
    )


def run_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *, config: str | None = None
) -> Run:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    config_path = None
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
        config_path = str(tmp_path / "config.yaml")
    run = simulate(capsys, path, config=config_path)
    assert run.code == 0, run.stderr
    assert run.stderr == ""
    return run


def evicted(run: Run) -> dict[str, dict[str, object]]:
    """The report's evictions by pod."""
    return {e["pod"]: e for e in run.report["evictions"]}


def running_by_group(run: Run) -> Counter[str]:
    return Counter(p["group"] for p in run.pods.values() if p["node"] and p["group"])


def test_a_high_priority_gang_evicts_whole_low_priority_gangs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 4)
        + node("n2", 4)
        + gang("low-a", 4, 4, priority="low")
        + gang("low-b", 4, 4, priority="low")
        + gang("high", 4, 4, created=LATER, priority="high"),
    )
    gone = evicted(run)
    # One gang's room is all the high gang needs.
    assert len(gone) == 4
    lost = Counter(str(run.pods[key]["group"]) for key in gone)
    # Whole gangs only: each gang that lost a member lost all four of them.
    assert all(count == 4 for count in lost.values()), lost
    assert set(lost) <= {"default/low-a", "default/low-b"}
    running = running_by_group(run)
    assert running["default/high"] == 4
    # No gang is left running short of minMember.
    for name, group in run.podgroups.items():
        assert running[name] == 0 or running[name] >= group["minMember"], name
    for eviction in gone.values():
        assert eviction["action"] == "preempt"
        assert eviction["preemptor"] == "default/high"
        assert eviction["at"] == LATER
        assert eviction["budget"] is None
        assert "gang" in str(eviction["message"])
    # Victims are deleted at once: the high gang binds in the session after the one
    # that nominated it, to the nodes it was nominated to.
    assert {run.pods[f"default/high-{i}"]["bound_at"] for i in range(4)} == {LATER + 1}
    assert run.report["summary"]["preempted"] == len(gone)
    assert run.report["summary"]["reclaimed"] == 0
    for key in gone:
        assert run.pods[key]["node"] is None
        assert run.pods[key]["evicted_at"] == LATER


def test_a_gang_above_min_member_loses_only_its_extra_members(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 4)
        + gang("wide", 4, 2, priority="low")
        + gang("high", 2, 2, created=LATER, priority="high"),
    )
    gone = evicted(run)
    assert len(gone) == 2
    assert {run.pods[key]["group"] for key in gone} == {"default/wide"}
    running = running_by_group(run)
    assert running == {"default/wide": 2, "default/high": 2}
    assert run.podgroups["default/wide"]["phase"] == "Running"
    assert all("evicted whole" not in str(e["message"]) for e in gone.values())


def test_a_starving_gang_evicts_only_what_min_member_spares(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The high gang's PodGroup was created ten minutes before its pods (as Volcano's
    job controller creates pods once the group is admitted), so it arrives past the
    starvation threshold, with room held for it on the freest node. Two of the six
    low members are all it needs: the room held for it is its own to preempt into."""
    arrives = 600
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 4)
        + node("n2", 4)
        + gang("low", 6, 4, priority="low")
        + gang("high", 4, 4, priority="high", pods_created=arrives),
    )
    gone = evicted(run)
    assert len(gone) == 2
    assert {e["at"] for e in gone.values()} == {arrives}
    assert running_by_group(run) == {"default/low": 4, "default/high": 4}
    assert {run.pods[f"default/high-{i}"]["bound_at"] for i in range(4)} == {arrives + 1}


def budget(name: str, allowed: int) -> str:
    return f"""---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, namespace: default}}
spec: {{selector: {{matchLabels: {{app: db}}}}}}
status: {{disruptionsAllowed: {allowed}}}
"""


def test_a_budget_protected_victim_is_spared_for_an_unprotected_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 2)
        + budget("db", 0)
        + pod("db-0", priority="low", labels="{app: db}")
        + pod("batch-0", priority="low")
        + pod("urgent", created=LATER, priority="high"),
    )
    assert list(evicted(run)) == ["default/batch-0"]
    assert run.bound() == {"default/db-0": "n1", "default/urgent": "n1"}


def test_an_eviction_exceeding_a_budget_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 1)
        + budget("db", 0)
        + pod("db-0", priority="low", labels="{app: db}")
        + pod("urgent", created=LATER, priority="high"),
    )
    gone = evicted(run)
    assert list(gone) == ["default/db-0"]
    assert gone["default/db-0"]["budget"] == "default/db"
    assert "exceeds PodDisruptionBudget default/db" in str(gone["default/db-0"]["message"])
    assert run.bound() == {"default/urgent": "n1"}


def test_evictions_spend_the_budget_for_later_sessions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The budget allows one disruption: the first eviction spends it (the simulator
    standing in for the disruption controller), so the second, a minute later and in
    another session, exceeds it."""
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 1)
        + node("n2", 1)
        + budget("db", 1)
        + pod("db-0", priority="low", labels="{app: db}")
        + pod("db-1", priority="low", labels="{app: db}")
        + pod("urgent-0", created=LATER, priority="high")
        + pod("urgent-1", created=2 * LATER, priority="high"),
    )
    budgets = [(e["at"], e["budget"]) for e in run.report["evictions"]]
    assert budgets == [(LATER, None), (2 * LATER, "default/db")]
    assert set(run.bound()) == {"default/urgent-0", "default/urgent-1"}


NEVER_CLASS = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000
preemptionPolicy: Never
"""


@pytest.mark.parametrize("where", ["pod", "class"])
def test_preemption_policy_never_evicts_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    urgent = (
        pod("urgent", created=LATER, priority="high", extra="  preemptionPolicy: Never\n")
        if where == "pod"
        else pod("urgent", created=LATER, priority="high-never")
    )
    run = run_input(
        capsys,
        tmp_path,
        HIGH + LOW + NEVER_CLASS + node("n1", 1) + pod("batch-0", priority="low") + urgent,
    )
    assert run.report["evictions"] == []
    assert run.bound() == {"default/batch-0": "n1"}
    assert run.pods["default/urgent"]["reason"]


OTHER_POD = """---
apiVersion: v1
kind: Pod
metadata: {name: theirs, namespace: default, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  schedulerName: other
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
status: {phase: Running}
"""


@pytest.mark.parametrize("allowed", [False, True])
def test_pods_of_other_schedulers_are_evicted_only_when_configured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, allowed: bool
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH + node("n1", 1) + OTHER_POD + pod("urgent", created=LATER, priority="high"),
        config=f"preemptOtherSchedulers: {str(allowed).lower()}\n",
    )
    if allowed:
        assert list(evicted(run)) == ["default/theirs"]
        assert run.bound() == {"default/urgent": "n1"}
    else:
        assert run.report["evictions"] == []
        assert run.bound() == {}


def test_a_pod_in_kube_system_is_never_evicted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + node("n1", 1)
        + pod("agent", namespace="kube-system", priority="low")
        + pod("urgent", namespace="kube-system", created=LATER, priority="high"),
    )
    assert run.report["evictions"] == []
    assert run.bound() == {"kube-system/agent": "n1"}


def queue(name: str, *, reclaimable: bool = True) -> str:
    return f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: Queue
metadata: {{name: {name}}}
spec: {{weight: 1, reclaimable: {str(reclaimable).lower()}}}
"""


# Two 4-CPU nodes: queue a fills them with eight one-CPU pods running for an hour while
# b is idle; b's six pods arrive a minute later. At 1:1, each queue deserves 4 CPUs.
RECLAIM_PODS = "".join(pod(f"a-{i}", queue="a", duration="1h") for i in range(8)) + "".join(
    pod(f"b-{i}", queue="b", created=LATER, duration="1h") for i in range(6)
)


def test_reclaim_brings_an_idle_queue_up_to_its_share(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys, tmp_path, node("n1", 4) + node("n2", 4) + queue("a") + queue("b") + RECLAIM_PODS
    )
    gone = evicted(run)
    assert sorted(gone) == [f"default/a-{i}" for i in range(4)]
    assert {e["action"] for e in gone.values()} == {"reclaim"}
    assert {e["at"] for e in gone.values()} == {LATER}
    # Within two sessions b is at its share: evicted in the first after b arrives,
    # bound in the next. Its other two pods wait for a's to finish, an hour in.
    b_bound = Counter(run.pods[f"default/b-{i}"]["bound_at"] for i in range(6))
    assert b_bound == {LATER + 1: 4, 3600: 2}
    assert [run.pods[f"default/a-{i}"].get("finished_at") for i in range(4, 8)] == [3600] * 4
    assert run.report["summary"]["reclaimed"] == 4


def test_a_queue_that_is_not_reclaimable_keeps_what_it_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = run_input(
        capsys,
        tmp_path,
        node("n1", 4) + node("n2", 4) + queue("a", reclaimable=False) + queue("b") + RECLAIM_PODS,
    )
    assert run.report["evictions"] == []
    assert [run.pods[f"default/b-{i}"]["bound_at"] for i in range(6)] == [3600] * 6


def test_the_table_counts_and_lists_evictions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(
        HIGH
        + LOW
        + node("n1", 1)
        + pod("batch-0", priority="low")
        + pod("urgent", created=LATER, priority="high")
    )
    assert main(["simulate", "-f", str(path)]) == 0
    table = capsys.readouterr().out
    assert "default/batch-0  <pending>  -      Evicted at 60s: preempted by pod" in table
    assert "EVICTED POD" in table
    assert table.rstrip().endswith("; 1 pods preempted, 0 reclaimed")
