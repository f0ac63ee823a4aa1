"""Volcano's PodGroups as Volcano defines them: minMember 0, minTaskMember by the pods'
`volcano.sh/task-spec`, each elastic member held to its queue's deserved share, queue
guarantees held as reservations, and a group with no pods reported Pending.

Where a case comes from Volcano v1.15.1's own tests, its file and case name are given and
the expectation is its assertion; the others take theirs from the Volcano code named."""

from pathlib import Path

import pytest

from .harness import EXAMPLES, Run, simulate, simulate_text

DROP_IN = EXAMPLES / "config" / "drop-in.yaml"

VOLCANO = "scheduling.volcano.sh/v1beta1"
# Volcano's allocate_test.go: pkg/scheduler/actions/allocate/allocate_test.go, TestAllocate.
ALLOCATE_TEST = "pkg/scheduler/actions/allocate/allocate_test.go"


def node(name: str, cpu: str, memory: str, role: str = "") -> str:
    labels = f"{{nodeRole: {role}}}" if role else "{}"
    return f"""---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {labels}}}
status: {{allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "10"}}}}
"""


def queue(name: str, spec: str = "{weight: 1}") -> str:
    return f"""---
apiVersion: {VOLCANO}
kind: Queue
metadata: {{name: {name}}}
spec: {spec}
"""


def pod_group(name: str, namespace: str, queue_name: str, min_member: int, tasks: str = "") -> str:
    roles = f", minTaskMember: {tasks}" if tasks else ""
    return f"""---
apiVersion: {VOLCANO}
kind: PodGroup
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{minMember: {min_member}, queue: {queue_name}{roles}}}
status: {{phase: Inqueue}}
"""


def pod(
    name: str, namespace: str, group: str, cpu: str = "1", role: str = "", selector: str = ""
) -> str:
    """As Volcano's test helper BuildPod writes it: the group in the annotation
    scheduling.k8s.io/group-name, the task role in the label volcano.sh/task-spec."""
    labels = f"{{volcano.sh/task-spec: {role}}}" if role else "{}"
    node_selector = f"\n  nodeSelector: {{nodeRole: {selector}}}" if selector else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
  annotations: {{scheduling.k8s.io/group-name: {group}}}
spec:
  schedulerName: batch-scheduler{node_selector}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}", memory: 1G}}}}}}]
"""


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *documents: str) -> Run:
    return simulate_text(capsys, tmp_path, "".join(documents))


def roles_case(tasks: str) -> list[str]:
    """Two masters for a 1-CPU node labelled master, two workers for a node labelled
    worker (1 CPU in the first case, 2 in the second)."""
    return [
        pod_group("pg1", "c1", "c1", 2, tasks),
        *(pod(f"p{i}", "c1", "pg1", role="master", selector="master") for i in (0, 1)),
        *(pod(f"p{i}", "c1", "pg1", role="worker", selector="worker") for i in (2, 3)),
        queue("c1"),
    ]


def test_a_task_role_short_of_its_minimum_keeps_the_whole_gang_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "master's min member can not be allocated, break from
    allocating": minTaskMember master 2 but one master fits; nothing is bound."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "1", "2Gi", role="master"),
        node("n2", "2", "2Gi", role="worker"),
        *roles_case("{master: 2, worker: 0}"),
    )
    assert result.bound() == {}
    assert result.podgroups["c1/pg1"]["phase"] != "Running"
    reason = result.pods["c1/p2"]["reason"]
    assert "gang c1/pg1: room for 1 of the 2 pods of task 'master' minTaskMember needs" in reason


def test_each_task_role_at_its_minimum_starts_the_gang(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "prepredicate failed and tasks are not used up, continue on
    until min member meet"."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "1", "2Gi", role="master"),
        node("n2", "1", "2Gi", role="worker"),
        *roles_case("{master: 1, worker: 1}"),
    )
    assert result.bound() == {"c1/p0": "n1", "c1/p2": "n2"}


def test_a_role_selector_that_matches_no_node_leaves_the_other_role_placed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "prepredicate failed: node selector does not match"."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "2", "4Gi", role="worker"),
        pod_group("pg1", "c1", "c1", 1),
        pod("p1", "c1", "pg1", role="master", selector="master"),
        pod("p2", "c1", "pg1", role="worker", selector="worker"),
        queue("c1"),
    )
    assert result.bound() == {"c1/p2": "n1"}


def test_too_few_pods_of_a_role_leave_the_gang_waiting_and_say_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Volcano's gang plugin refuses such a job as invalid (CheckTaskValid, in
    pkg/scheduler/api/job_info.go): the two workers alone reach minMember 2, but the
    group asks for a master that does not exist."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "4", "4Gi"),
        pod_group("pg1", "c1", "c1", 2, "{master: 1}"),
        pod("w0", "c1", "pg1", role="worker"),
        pod("w1", "c1", "pg1", role="worker"),
        queue("c1"),
    )
    assert result.bound() == {}
    reason = result.pods["c1/w0"]["reason"]
    assert "'master'" in reason and "minTaskMember" in reason


def test_min_member_below_the_roles_sum_counts_the_total_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """minMember 1 below minTaskMember's sum 2: Volcano skips the roles' checks
    (CheckTaskReady returns true), so the master that fits starts alone."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "1", "2Gi", role="master"),
        pod_group("pg1", "c1", "c1", 1, "{master: 2}"),
        pod("p0", "c1", "pg1", role="master", selector="master"),
        pod("p1", "c1", "pg1", role="master", selector="master"),
        queue("c1"),
    )
    assert result.bound() == {"c1/p0": "n1"}
    # The gang is at its minimum: the member left over waits for room alone.
    assert result.pods["c1/p1"]["reason"].startswith("0/1 nodes are available: 1 Insufficient")


def test_min_member_zero_places_every_member_that_fits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "one Job with two Pods on one node"."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "2", "4Gi"),
        pod_group("pg1", "c1", "c1", 0),
        pod("p1", "c1", "pg1"),
        pod("p2", "c1", "pg1"),
        queue("c1"),
    )
    assert result.bound() == {"c1/p1": "n1", "c1/p2": "n1"}


def two_queues(min_member: int) -> list[str]:
    return [
        node("n1", "2", "4G"),
        pod_group("pg1", "c1", "c1", min_member),
        pod_group("pg2", "c2", "c2", min_member),
        pod("pg1-p-1", "c1", "pg1"),
        pod("pg1-p-2", "c1", "pg1"),
        pod("pg2-p-1", "c2", "pg2"),
        pod("pg2-p-2", "c2", "pg2"),
        queue("c1"),
        queue("c2"),
    ]


def test_elastic_members_stay_within_their_queues_share(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "two Jobs on one node": each queue deserves one of the two
    CPUs, and proportion's allocatable check holds each member to it."""
    result = run(capsys, tmp_path, *two_queues(0))
    assert result.bound() == {"c1/pg1-p-1": "n1", "c2/pg2-p-1": "n1"}


def test_members_above_min_member_wait_while_another_queue_waits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The same with minMember 1: the second member of each job is beyond its minimum,
    and Volcano's allocatable check (pkg/scheduler/plugins/proportion/proportion.go)
    holds it to the share as it holds every member."""
    result = run(capsys, tmp_path, *two_queues(1))
    assert result.bound() == {"c1/pg1-p-1": "n1", "c2/pg2-p-1": "n1"}
    assert "deserved share of cpu" in result.pods["c1/pg1-p-2"]["reason"]


def test_an_elastic_member_takes_what_no_other_queue_waits_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Alone, a queue deserves all it asks for (Volcano caps deserved at the request)."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "2", "4G"),
        pod_group("pg1", "c1", "c1", 1),
        pod("pg1-p-1", "c1", "pg1"),
        pod("pg1-p-2", "c1", "pg1"),
        queue("c1"),
        queue("c2"),
    )
    assert set(result.bound()) == {"c1/pg1-p-1", "c1/pg1-p-2"}


def test_a_queue_that_cannot_fit_does_not_block_another(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """allocate_test.go, "high priority queue should not block others"."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "2", "4G"),
        pod_group("pg1", "c1", "c1", 0),
        pod_group("pg2", "c1", "c2", 0),
        pod("p1", "c1", "pg1", cpu="3"),
        pod("p2", "c1", "pg2"),
        queue("c1"),
        queue("c2"),
    )
    assert result.bound() == {"c1/p2": "n1"}
    # Nothing of pg1 runs: minMember 0 does not make it Running (nor Completed).
    assert result.podgroups["c1/pg1"]["phase"] == "Inqueue"
    assert result.podgroups["c1/pg2"]["phase"] == "Running"


def test_a_guarantee_is_held_back_from_other_queues(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Volcano's proportion and capacity plugins cap every queue at its realCapability:
    the cluster less all guarantees, plus its own. research guarantees 3 of 4 CPUs and
    asks for none of them yet; batch gets only the 1 CPU beside it."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "4", "8Gi"),
        queue("research", '{weight: 1, guarantee: {resource: {cpu: "3"}}}'),
        queue("batch"),
        pod_group("pg1", "c1", "batch", 0),
        *(pod(f"b{i}", "c1", "pg1") for i in range(4)),
    )
    assert list(result.bound()) == ["c1/b0"]
    assert "guarantees hold" in result.pods["c1/b1"]["reason"]


def test_a_gang_may_not_take_another_queues_guarantee_either(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The reservation holds for a gang's minimum as for elastic members: a gang of 2
    CPUs beside a guarantee of 3 of 4 CPUs waits, a one-CPU job beside it runs."""
    result = run(
        capsys,
        tmp_path,
        node("n1", "4", "8Gi"),
        queue("research", '{weight: 1, guarantee: {resource: {cpu: "3"}}}'),
        queue("batch"),
        pod_group("big", "c1", "batch", 2),
        pod("big-0", "c1", "big"),
        pod("big-1", "c1", "big"),
        pod_group("small", "c1", "batch", 1),
        pod("small-0", "c1", "small"),
    )
    assert result.bound() == {"c1/small-0": "n1"}


def test_a_group_with_no_pods_is_admitted_if_its_queue_has_room(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Volcano's job controller creates a job's pods only once its PodGroup is Inqueue.
    pkg/scheduler/actions/enqueue/enqueue_test.go, "pggroup cannot enqueue because queue
    resources are less than podgroup MinResources": a group with no pods asking 8 CPUs
    of a queue capped at 1 stays Pending. Groups with no pods that fit are admitted, as
    Volcano's enqueue admits every Pending group that fits (its minMember 0 one too).
    Only while Volcano's scheduler name is served: no pod says whose such a group is."""
    path = tmp_path / "input.yaml"
    path.write_text(
        "".join(
            (
                node("n1", "2", "4Gi"),
                queue("c1", '{weight: 1, capability: {cpu: "1", memory: 1G}}'),
                queue("c2"),
                pod_group("pg1", "c1", "c1", 1)
                .replace("status: {phase: Inqueue}\n", "")
                .replace("queue: c1", 'queue: c1, minResources: {cpu: "8", memory: 8G}'),
                pod_group("later", "c1", "c2", 2).replace("status: {phase: Inqueue}\n", ""),
                pod_group("empty", "c1", "c2", 0).replace("status: {phase: Inqueue}\n", ""),
            )
        )
    )
    result = simulate(capsys, path, config=str(DROP_IN))
    assert result.code == 0, result.stderr
    assert result.podgroups["c1/pg1"]["phase"] == "Pending"
    assert result.podgroups["c1/later"]["phase"] == "Inqueue"
    assert result.podgroups["c1/empty"]["phase"] == "Inqueue"


# Volcano's pkg/scheduler/plugins/proportion/proportion_test.go, TestEnqueueAndAllocable:
# its three tiers of the proportion plugin's flags (with predicates, which batchsched
# requires), run with the enqueue and allocate actions as the test runs them.
PROPORTION_TIERS = {
    "allEnable": "enabledAllocatable: true, enabledOverused: true, enabledJobEnqueued: true",
    "enqueueable": "enabledAllocatable: false, enabledOverused: false, enabledJobEnqueued: true",
    "allocatable": "enabledAllocatable: true, enabledOverused: false, enabledJobEnqueued: false",
}


def proportion_config(tmp_path: Path, flags: str) -> str:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(
        'actions: "enqueue, allocate"\n'
        f"tiers:\n- plugins:\n  - {{name: proportion, {flags}}}\n  - {{name: predicates}}\n"
    )
    return str(path)


def sized_pod(name: str, group_name: str, cpu: str, memory: str, node_name: str = "") -> str:
    bound = f"\n  nodeName: {node_name}" if node_name else ""
    phase = "Running" if node_name else "Pending"
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ns1
  annotations: {{scheduling.k8s.io/group-name: {group_name}}}
spec:
  schedulerName: batch-scheduler{bound}
  containers: [{{name: c, resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}}}]
status: {{phase: {phase}}}
"""


def sized_group(name: str, queue_name: str, cpu: str, memory: str, phase: str) -> str:
    return f"""---
apiVersion: {VOLCANO}
kind: PodGroup
metadata: {{name: {name}, namespace: ns1}}
spec: {{minMember: 1, queue: {queue_name}, minResources: {{cpu: "{cpu}", memory: {memory}}}}}
status: {{phase: {phase}}}
"""


ENQUEUE_AND_ALLOCATABLE = {
    "pg1": ("q1", "1", "2G", "n1"),
    "pg2": ("q2", "2", "1G", "n2"),
    "pg3": ("q1", "1", "0G", ""),
    "pg4": ("q2", "0", "1G", ""),
    "pg5": ("q1", "1", "1G", ""),
}


@pytest.mark.parametrize(
    ("case", "tiers", "pending", "expected"),
    [
        (
            "case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
            "allEnable",
            "pg3",
            {"ns1/pod3": "n1"},
        ),
        (
            "case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
            "allEnable",
            "pg4",
            {"ns1/pod4": "n2"},
        ),
        ("case2: exceed capacity, can not enqueue", "enqueueable", "pg5", {}),
        ("case3: exceed deserved, can not allocate", "allocatable", "pg5", {}),
    ],
)
def test_volcanos_enqueue_and_allocatable_table(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    case: str,
    tiers: str,
    pending: str,
    expected: dict[str, str],
) -> None:
    """proportion_test.go, TestEnqueueAndAllocable, `case` (case4, a Queue closed in its
    status, is the Queue reader's). Two running pods fill n1's memory and n2's CPU."""
    documents = [
        node("n1", "2", "2G"),
        node("n2", "2", "2G"),
        queue("q1", '{weight: 1, capability: {cpu: "2", memory: 2G}}'),
        queue("q2", '{weight: 1, capability: {cpu: "3", memory: 3G}}'),
    ]
    for name in ("pg1", "pg2", pending):
        queue_name, cpu, memory, node_name = ENQUEUE_AND_ALLOCATABLE[name]
        phase = "Running" if node_name else "Pending"
        documents.append(sized_group(name, queue_name, cpu, memory, phase))
        documents.append(sized_pod(f"pod{name[2:]}", name, cpu, memory, node_name))
    path = tmp_path / "input.yaml"
    path.write_text("".join(documents))
    result = simulate(capsys, path, config=proportion_config(tmp_path, PROPORTION_TIERS[tiers]))
    assert result.code == 0, result.stderr
    placed = {k: v for k, v in result.bound().items() if k not in ("ns1/pod1", "ns1/pod2")}
    assert placed == expected, case
