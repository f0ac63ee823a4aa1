"""The victims a preemption takes, as a set: the cheapest set that makes the gang fit
over the whole cluster (not node by node, not more than it needs), never a pod that is
not bound, and never a gang left below minMember by a pass that also completes it.
Volcano's preempt cases for preemption inside a queue at its capability and between
BestEffort pods, with their expectations taken from its assertions."""

from pathlib import Path

import pytest

from .test_preemption import HIGH, LATER, LOW, evicted, run_input, stamp


def node(name: str, cpu: int, pods: int = 110, memory: str = "64Gi") -> str:
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status: {{allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "{pods}"}}}}
"""


def pod(
    name: str,
    *,
    cpu: str | None = "1",
    memory: str | None = None,
    node_name: str | None = None,
    priority: str = "low",
    created: int = 0,
    annotations: str = "",
    uid: str | None = None,
) -> str:
    """A pod of ours, bound to `node_name` (Running) when given; `annotations` is the
    inside of its annotations map."""
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value}
    asked = ", ".join(f"{key}: {value}" for key, value in requests.items())
    placed = f"  nodeName: {node_name}\n" if node_name else ""
    status = "status: {phase: Running}\n" if node_name else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  creationTimestamp: "{stamp(created)}"
  uid: {uid or name + "-uid"}
  annotations: {{{annotations}}}
spec:
  schedulerName: batch-scheduler
  priorityClassName: {priority}
{placed}  containers: [{{name: c, resources: {{requests: {{{asked}}}}}}}]
{status}"""


def group(name: str, min_member: int, *, priority: str = "low", created: int = 0) -> str:
    return f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, namespace: default, creationTimestamp: "{stamp(created)}"}}
spec: {{minMember: {min_member}, priorityClassName: {priority}}}
"""


def member(gang: str) -> str:
    return f"scheduling.batchsched.io/group-name: {gang}"


# Six one-gang pods filling n1 and n2 (1 + 1 + 2 CPUs each): evicting the gang empties both.
ONE_GANG = group("wide", 6) + "".join(
    pod(f"wide-{n}-{i}", cpu=cpu, node_name=n, annotations=member("wide"))
    for n in ("n1", "n2")
    for i, cpu in enumerate(("1", "1", "2"))
)
# The high-priority gang of 2 x 4 CPUs the room is made for.
PREEMPTOR = group("big", 2, priority="high", created=LATER) + "".join(
    pod(f"big-{i}", cpu="4", priority="high", created=LATER, annotations=member("big"))
    for i in range(2)
)


def lone(prefix: str, where: str, count: int, *, priority: str = "low", cpu: str = "1") -> str:
    return "".join(
        pod(f"{prefix}-{i}", cpu=cpu, node_name=where, priority=priority) for i in range(count)
    )


def test_one_gang_evicted_whole_rather_than_a_node_per_member(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Member by member, each 4-CPU member finds the node whose own victims are fewest
    (four lone pods, against the six pods of the gang): eight pods of two jobs. The
    gang evicted whole frees two nodes at once: six pods of one job, the cheapest set."""
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + "".join(node(n, 4) for n in ("n1", "n2", "n3", "n4"))
        + ONE_GANG
        + lone("a", "n3", 4)
        + lone("b", "n4", 4)
        + PREEMPTOR,
    )
    assert sorted(evicted(run)) == sorted(
        f"default/wide-{n}-{i}" for n in ("n1", "n2") for i in range(3)
    )
    assert {run.pods[f"default/big-{i}"]["node"] for i in range(2)} == {"n1", "n2"}


def test_victims_the_gang_turns_out_not_to_need_are_given_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The first member takes n3's four lone pods; the second cannot take n4 (a pod of
    priority 100 there) and takes the gang, which frees two nodes: the four lone pods
    are not needed, and stay."""
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: hundred}
value: 100
"""
        + "".join(node(n, 4) for n in ("n1", "n2", "n3", "n4"))
        + ONE_GANG
        + lone("a", "n3", 4)
        + lone("b", "n4", 2)
        + lone("c", "n4", 1, priority="hundred", cpu="2")
        + PREEMPTOR,
    )
    assert sorted(evicted(run)) == sorted(
        f"default/wide-{n}-{i}" for n in ("n1", "n2") for i in range(3)
    )


def test_a_gang_completed_from_its_placement_record_loses_no_member(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A leader cut off after binding a gang's first member (which carries the placement
    record) leaves the rest pending; the next pass completes the gang from the record.
    A higher-priority lone pod waiting in the same pass may not take the bound member
    "with its whole gang": the members bound in that pass would be left below minMember.
    The gang is out of reach in that pass; a later pass may take it whole."""
    record = (
        '{"at":0,"pods":{'
        + ",".join(f'"job-{i}":["n{1 + i}","job-{i}-u"]' for i in range(4))
        + "}}"
    )
    first = pod(
        "job-0",
        node_name="n1",
        uid="job-0-uid",
        annotations=member("job") + f", scheduling.batchsched.io/gang-placement: '{record}'",
    )
    rest = "".join(
        pod(f"job-{i}", uid=f"job-{i}-uid", annotations=member("job")) for i in range(1, 4)
    )
    urgent = pod("urgent", priority="high")
    run = run_input(
        capsys,
        tmp_path,
        HIGH
        + LOW
        + "".join(node(f"n{i}", 1) for i in range(1, 5))
        + group("job", 4)
        + first
        + rest
        + urgent,
    )
    # The pass that completes the gang evicts none of it; a later one may evict it whole.
    assert [e["pod"] for e in run.report["evictions"] if e["at"] == 0] == []
    gone = evicted(run)
    assert set(gone) in (set(), {f"default/job-{i}" for i in range(4)})
    running = {key for key, where in run.bound().items() if key.startswith("default/job")}
    assert len(running) in (0, 4)


# Volcano v1.15.1, pkg/scheduler/actions/preempt/preempt_test.go, TestPreempt: its
# objects as Volcano's test helpers build them (util.BuildPodGroupWithPrio, BuildPod,
# BuildNode, BuildQueue), each expectation from the case's ExpectEvicted/ExpectEvictNum.
VOLCANO_CLASSES = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priority}
value: 100000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low-priority}
value: 10
"""


def volcano_queue(capability: str) -> str:
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: q1}}
spec: {{weight: 1, capability: {capability}}}
"""


def volcano_group(name: str, min_member: int, priority: str) -> str:
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: c1, creationTimestamp: "{stamp(0)}"}}
spec: {{minMember: {min_member}, queue: q1, priorityClassName: {priority}}}
status: {{phase: Inqueue}}
"""


def volcano_pod(
    name: str,
    group: str,
    requests: str,
    *,
    node_name: str = "",
    preemptable: str = "true",
    priority: int | None = None,
) -> str:
    """A pod of `group`; running on `node_name` (with the case's `volcano.sh/preemptable`
    annotation) when given."""
    notes = f"scheduling.k8s.io/group-name: {group}"
    if node_name:
        notes += f', volcano.sh/preemptable: "{preemptable}"'
    placed = f"  nodeName: {node_name}\n" if node_name else ""
    if priority is not None:
        placed += f"  priority: {priority}\n"
    phase = "Running" if node_name else "Pending"
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: c1
  creationTimestamp: "{stamp(0)}"
  annotations: {{{notes}}}
spec:
  schedulerName: batch-scheduler
{placed}  containers: [{{name: c, resources: {{requests: {requests}}}}}]
status: {{phase: {phase}}}
"""


def volcano_case(capability: str, victim: str, preemptor: str, *, pods: int = 10) -> str:
    """pg1 (low-priority) runs preemptee1 on n1 (12 CPU, 12G); pg2 (high-priority,
    minMember 1) waits with preemptor1; both in q1. pg1's minMember is 0 in Volcano's
    cases; 1 here changes nothing they check: its one running pod is all of it."""
    return (
        VOLCANO_CLASSES
        + node("n1", 12, pods=pods, memory="12G")
        + volcano_queue(capability)
        + volcano_group("pg1", 1, "low-priority")
        + volcano_group("pg2", 1, "high-priority")
        + volcano_pod("preemptee1", "pg1", victim, node_name="n1")
        + volcano_pod("preemptor1", "pg2", preemptor)
    )


THREE = '{cpu: "3", memory: 3G}'


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        # "preempt low priority job in same queue" (case about #3161)
        ("{cpu: 4, memory: 4G}", ["c1/preemptee1"]),
        # "preempt low priority job in same queue: allocatable and has enough resource,
        # don't preempt" (case about #3161)
        ("{cpu: 6, memory: 6G}", []),
    ],
    ids=["at-capability", "room-in-capability"],
)
def test_volcano_preemption_inside_a_queue_at_its_capability(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, capability: str, expected: list[str]
) -> None:
    """The node has room; the queue's capability (3 of 4 CPUs in use) does not. The
    higher-priority job of the same queue evicts the lower-priority one to fit in it."""
    run = run_input(capsys, tmp_path, volcano_case(capability, THREE, THREE))
    assert sorted(evicted(run)) == expected
    assert run.pods["c1/preemptor1"]["node"] == "n1"


def test_volcano_preemption_at_capability_spares_what_may_not_go(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """ "preempt low priority job in same queue but not pod with preemptable=false or
    higher priority" (case about issue #2232): q1 (capability 3) holds three of pg1's
    one-CPU pods; one is not preemptable, one has a pod priority of high-priority (listed
    first here, so that input order cannot pick the expected victim)."""
    one = '{cpu: "1", memory: 1G}'
    run = run_input(
        capsys,
        tmp_path,
        VOLCANO_CLASSES
        + node("n1", 12, pods=10, memory="12G")
        + volcano_queue('{cpu: "3", memory: 3G}')
        + volcano_group("pg1", 1, "low-priority")
        + volcano_group("pg2", 1, "high-priority")
        + volcano_pod("preemptee1", "pg1", one, node_name="n1", preemptable="false")
        + volcano_pod("preemptee3", "pg1", one, node_name="n1", priority=100000)
        + volcano_pod("preemptee2", "pg1", one, node_name="n1")
        + volcano_pod("preemptor1", "pg2", one),
    )
    assert sorted(evicted(run)) == ["c1/preemptee2"]
    assert run.pods["c1/preemptor1"]["node"] == "n1"


@pytest.mark.parametrize(
    "preemptor",
    [
        # "unBestEffort high-priority pod preempt BestEffort low-priority pod in same
        # queue" (case about #3335)
        THREE,
        # "BestEffort high-priority pod preempt BestEffort low-priority pod in same
        # queue" (case about #3335)
        "{}",
    ],
    ids=["burstable-preemptor", "besteffort-preemptor"],
)
def test_volcano_a_besteffort_pod_is_preempted_for_its_pod_slot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, preemptor: str
) -> None:
    """n1 takes one pod, a BestEffort one holds it: the high-priority pod, BestEffort
    or not, evicts it."""
    run = run_input(capsys, tmp_path, volcano_case("{cpu: 6, memory: 6G}", "{}", preemptor, pods=1))
    assert sorted(evicted(run)) == ["c1/preemptee1"]
    assert run.pods["c1/preemptor1"]["node"] == "n1"
