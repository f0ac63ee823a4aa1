"""kube-scheduler v1.36.3's own tests of topology-aware workload scheduling (KEP-5732,
the native PodGroup's `spec.schedulingConstraints.topology[0].key`) as a conformance
suite: each table case translated into nodes, pods and Kubernetes' own PodGroups run
through `batchsched simulate`, named `<Go test>/<case>`, the expectation taken from the
case's own assertion (docs/conformance.md, "kube-scheduler's topology-aware
scheduling").

- test/integration/scheduler/podgroup/topology_aware_scheduling/tas_test.go: every step
  becomes objects created at the step's moment (a later step, a later
  creationTimestamp). A pod the test deletes is a pod pinned to its node that succeeds
  at that moment (simulation.batchsched.io/duration): the simulator deletes nothing
  itself. A wait for pods to be unschedulable before that moment is a check that they
  were bound no earlier.
- test/integration/scheduler/podgroup/podgroup_test.go: its two cases that need the gate.
- pkg/scheduler/framework/plugins/topologyaware (TestGeneratePlacements): the placements
  the generator returns are the domains a gang may take; a gang that fits in exactly
  one of them shows which nodes make it, and "empty" or an error leaves the pod
  unscheduled. A node in the snapshot but outside the parent placement is a cordoned
  node: there, but no pod of the group goes to it.
- pkg/scheduler/framework/plugins/noderesources (TestScorePlacement_Resources): the score
  a placement gets decides which of two domains that both hold the gang wins. The
  case's placement is set beside one domain that scores 5 points less and one that
  scores 5 points more (a node with four times the placement's allocatable, holding a
  pod sized for that score); the case's domain must win against the first and lose
  against the second.
- pkg/scheduler/schedule_one_podgroup_test.go (TestPodGroupSchedulingPlacementAlgorithm,
  _Scoring): the fake plugins' placements are racks of one node each, their scores the
  fullness the real scorer gives, and a node the fake Filter rejects a node without
  room.
Cases not listed here are in docs/conformance.md with the reason.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.sim.simulator import DURATION_ANNOTATION

from .harness import Run, simulate
from tests.support.objects import HOSTNAME, SCHEDULER, member, native_pod_group, node, pod

Obj = dict[str, Any]

GANG = "TestTopologyAwareSchedulingWithGangPolicy"
BASIC = "TestTopologyAwareSchedulingWithBasicPolicy"
# The moment of each later step: a session of its own between two steps.
STEP = 10.0
# When a pod the test deletes succeeds, standing in for its deletion.
DELETED_AT = 60.0

# Why a case fails today: a decision (documented where named) or a defect.
PREEMPTS_IN_A_DOMAIN = (
    "decided (docs/topology.md, Preemption and reclaim inside a domain): a gang asking "
    "for a domain makes room inside one by preempt; kube-scheduler v1.36 preempts for no "
    "PodGroup with scheduling constraints"
)
UNKNOWN_NODE_LEFT_OUT = (
    "decided (docs/conformance.md): a member bound to a node the cluster does not have is "
    "left out of the domain its group must share, as Volcano's allocate test 'hard network "
    "topology constrain and task in job rescheduled, can allocate job ... three tier' "
    "asserts; kube-scheduler leaves the group unschedulable"
)


@dataclass(frozen=True, kw_only=True)
class Case:
    objects: tuple[Obj, ...]
    # Pods (names in "default") bound at the end, and pods left pending.
    scheduled: tuple[str, ...] = ()
    unscheduled: tuple[str, ...] = ()
    # verifyAssignments: each pod on one of these nodes.
    on: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = ()
    # verifyAssignedInOneDomain: the pods' nodes share one value of the label.
    together: tuple[tuple[str, ...], str] | None = None
    # waitForPodsUnschedulable before a deletion: bound at DELETED_AT, not before.
    waited: tuple[str, ...] = ()
    config: str | None = None
    defect: str | None = None


def rack_node(name: str, rack: str, zone: str) -> Obj:
    """tas_test.go's makeNode: 2 CPUs, labelled rack and zone."""
    return node(name, cpu="2", labels={"rack": rack, "zone": zone})


def gang_group(name: str, key: str, min_count: int | None, created: float = 0.0) -> Obj:
    """makeGangPodGroup (min_count) or makeBasicPodGroup (None): one topology key."""
    return native_pod_group(
        name, min_count, created=created, schedulingConstraints={"topology": [{"key": key}]}
    )


def group_pod(name: str, group: str, cpu: str = "1", created: float = 0.0) -> Obj:
    """makePod (1 CPU), makeLargePod (2) or makeUnfittablePod (3), priority 100."""
    return member(name, group, {"cpu": cpu}, created=created, spec={"priority": 100})


def assigned(name: str, node_name: str, cpu: str) -> Obj:
    """makeAssignedPod: bound by spec.nodeName, priority 100."""
    return pod(
        name, {"cpu": cpu}, node_name=node_name, phase="Running", created=0, spec={"priority": 100}
    )


def deleted(name: str, node_name: str, cpu: str) -> Obj:
    """makeAssignedPod that the test deletes at DELETED_AT: pinned to its node, bound
    at the start, succeeding then."""
    return pod(
        name,
        {"cpu": cpu},
        created=0,
        annotations={DURATION_ANNOTATION: f"{DELETED_AT:.0f}s"},
        spec={"priority": 100, "nodeSelector": {HOSTNAME: node_name}},
    )


def pods(group: str, *names: str, cpu: str = "1", created: float = 1.0) -> tuple[Obj, ...]:
    return tuple(group_pod(name, group, cpu, created) for name in names)


def nodes_of(*names: str) -> frozenset[str]:
    return frozenset(names)


def racks(*spec: tuple[str, str, str]) -> tuple[Obj, ...]:
    return tuple(rack_node(*entry) for entry in spec)


# The gang policy's cases (tas_test.go); a gang's objects come a second after the
# nodes and the pods already running, a later step STEP after that.
GANG_CASES: dict[str, Case] = {
    "gang schedules on a single rack, when only one feasible rack is available": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
                ("node5-rack2", "rack-2", "zone-1"),
                ("node6-zone2", "rack-3", "zone-2"),
            ),
            assigned("existing1", "node4-rack2", "2"),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1", "node3-rack1")),),
    ),
    "gang remains pending when no feasible resources are found": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-1"),
                ("node4-zone2", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3", cpu="2"),
        ),
        unscheduled=("p1", "p2", "p3"),
    ),
    "gang remains pending when resources are consumed by existing pods": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
            ),
            deleted("existing1", "node1-rack1", "2"),
            assigned("existing2", "node3-rack1", "2"),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        waited=("p1", "p2", "p3"),
    ),
    "gang schedules on a single rack, choosing placement with the highest score in default "
    "placement scoring algorithm": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-2"),
                ("node4-rack2", "rack-2", "zone-2"),
                ("node5-rack2", "rack-2", "zone-2"),
                ("node6-rack3", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1")),),
    ),
    "gang schedules on a single rack, choosing placement with highest allocation percentage "
    "(default placement scoring algorithm) with pre-existing pods in cluster": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-2"),
                ("node4-rack2", "rack-2", "zone-2"),
                ("node5-rack2", "rack-2", "zone-2"),
                ("node6-rack3", "rack-3", "zone-2"),
                ("node7-rack3", "rack-3", "zone-2"),
                ("node8-rack3", "rack-3", "zone-2"),
                ("node9-rack4", "rack-4", "zone-2"),
            ),
            assigned("existing1", "node3-rack2", "2"),
            assigned("existing2", "node8-rack3", "1"),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node3-rack2", "node4-rack2", "node5-rack2")),),
    ),
    "two gangs schedule consecutively, each on a separate rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
                ("node5-rack2", "rack-2", "zone-1"),
            ),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3", cpu="2"),
            gang_group("pg2", "rack", 2, 1 + STEP),
            *pods("pg2", "p4", "p5", created=1 + STEP),
        ),
        scheduled=("p1", "p2", "p3", "p4", "p5"),
        on=(
            (("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1", "node3-rack1")),
            (("p4", "p5"), nodes_of("node4-rack2", "node5-rack2")),
        ),
    ),
    "two gangs schedule consecutively, both on the same rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
            ),
            gang_group("pg1", "rack", 2, 1),
            group_pod("p1", "pg1", "2", 1),
            group_pod("p2", "pg1", "1", 1),
            gang_group("pg2", "rack", 3, 1),
            *pods("pg2", "p3", "p4", "p5"),
        ),
        scheduled=("p1", "p2", "p3", "p4", "p5"),
        on=(
            (("p1", "p2"), nodes_of("node1-rack1", "node2-rack1", "node3-rack1")),
            (("p3", "p4", "p5"), nodes_of("node1-rack1", "node2-rack1", "node3-rack1")),
        ),
    ),
    "two gangs schedule consecutively, different topology keys": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-1"),
                ("node4-zone2", "rack-3", "zone-2"),
                ("node5-zone2", "rack-3", "zone-2"),
                ("node6-zone2", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3", cpu="2"),
            gang_group("pg2", "zone", 3, 1 + STEP),
            *pods("pg2", "p4", "p5", "p6", cpu="2", created=1 + STEP),
        ),
        scheduled=("p1", "p2", "p3", "p4", "p5", "p6"),
        on=(
            (("p1", "p2", "p3"), nodes_of("node4-zone2", "node5-zone2", "node6-zone2")),
            (("p4", "p5", "p6"), nodes_of("node1-rack1", "node2-rack1", "node3-rack2")),
        ),
    ),
    "two gangs schedule consecutively, only one fits in the cluster": Case(
        objects=(
            *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack1", "rack-1", "zone-1")),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
            gang_group("pg2", "rack", 2, 1 + STEP),
            *pods("pg2", "p4", "p5", created=1 + STEP),
        ),
        scheduled=("p1", "p2", "p3"),
        unscheduled=("p4", "p5"),
        on=((("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1")),),
    ),
    "gang with minCount < pod count schedules on a single rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
            ),
            gang_group("pg1", "rack", 2, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        together=(("p1", "p2", "p3"), "rack"),
    ),
    "gang with minCount < pod count schedules on a single rack, choosing smaller rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
                ("node5-rack2", "rack-2", "zone-1"),
                ("node6-rack3", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", 3, 1),
            *pods("pg1", "p1", "p2", "p3"),
            *pods("pg1", "p4", created=1 + STEP),
            *pods("pg1", "p5", created=1 + 2 * STEP),
        ),
        scheduled=("p1", "p2", "p3", "p4"),
        unscheduled=("p5",),
        on=((("p1", "p2", "p3", "p4"), nodes_of("node4-rack2", "node5-rack2")),),
    ),
    "gang does not schedule on a single rack when preemption could free up enough resources": (
        Case(
            objects=(
                *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack1", "rack-1", "zone-1")),
                assigned("existing1", "node2-rack1", "2"),
                gang_group("pg1", "rack", 3, 1),
                *pods("pg1", "p1", "p2", "p3"),
            ),
            unscheduled=("p1", "p2", "p3"),
        )
    ),
}

# The basic policy's cases, run by upstream with GangScheduling on and off alike (the
# gate changes nothing for a basic PodGroup): one case each here.
BASIC_CASES: dict[str, Case] = {
    "basic podgroup schedules on the only rack in the cluster": Case(
        objects=(
            *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack1", "rack-1", "zone-1")),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1")),),
    ),
    "basic podgroup schedules all pods on a single rack, when there are multiple racks "
    "fitting in the cluster": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
                ("node5-zone2", "rack-3", "zone-2"),
                ("node6-zone2", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        together=(("p1", "p2", "p3"), "rack"),
    ),
    "basic podgroup cannot fit on a single rack, no pods get scheduled on a different rack": (
        Case(
            objects=(
                *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack2", "rack-2", "zone-1")),
                gang_group("pg1", "rack", None, 1),
                *pods("pg1", "p1", "p2", "p3"),
            ),
            scheduled=("p1", "p2"),
            unscheduled=("p3",),
            together=(("p1", "p2"), "rack"),
        )
    ),
    "basic podgroup does not schedule at all when no pods fit": Case(
        objects=(
            *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack2", "rack-2", "zone-1")),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2", cpu="3"),
        ),
        unscheduled=("p1", "p2"),
    ),
    "basic podgroup schedules only some pods when others don't fit on any node": Case(
        objects=(
            *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack2", "rack-2", "zone-1")),
            gang_group("pg1", "rack", None, 1),
            group_pod("p1", "pg1", "3", 1),
            group_pod("p2", "pg1", "1", 1),
        ),
        scheduled=("p2",),
        unscheduled=("p1",),
    ),
    "basic podgroup schedules on a single rack, choosing placement with highest allocation "
    "percentage (default placement scoring algorithm)": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-2"),
                ("node4-rack2", "rack-2", "zone-2"),
                ("node5-rack2", "rack-2", "zone-2"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node1-rack1", "node2-rack1")),),
    ),
    "basic podgroup schedules on a single rack, choosing placement with highest allocation "
    "percentage with pre-existing pods": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-2"),
                ("node5-rack2", "rack-2", "zone-2"),
                ("node6-rack2", "rack-2", "zone-2"),
                ("node7-rack3", "rack-3", "zone-2"),
                ("node8-rack3", "rack-3", "zone-2"),
                ("node9-rack3", "rack-3", "zone-2"),
                ("node10-rack3", "rack-3", "zone-2"),
            ),
            assigned("existing1", "node1-rack1", "1"),
            assigned("existing2", "node5-rack2", "1"),
            assigned("existing3", "node6-rack2", "1"),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2", "p3"),
        ),
        scheduled=("p1", "p2", "p3"),
        on=((("p1", "p2", "p3"), nodes_of("node4-rack2", "node5-rack2", "node6-rack2")),),
    ),
    "basic podgroup schedules on a single rack, choosing best scoring placement that will not "
    "fit all podgroup": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack1", "rack-1", "zone-1"),
                ("node5-rack2", "rack-2", "zone-1"),
            ),
            assigned("existing1", "node1-rack1", "2"),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1"),
            *pods("pg1", "p2", "p3", created=1 + STEP),
        ),
        scheduled=("p1", "p2"),
        unscheduled=("p3",),
        on=((("p1", "p2"), nodes_of("node5-rack2")),),
    ),
    "two basic podgroups schedule consecutively, each on a single rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
                ("node4-rack2", "rack-2", "zone-1"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2"),
            gang_group("pg2", "rack", None, 2),
            *pods("pg2", "p3", "p4", created=2),
        ),
        scheduled=("p1", "p2", "p3", "p4"),
        on=(
            (("p1", "p2"), nodes_of("node4-rack2")),
            (("p3", "p4"), nodes_of("node1-rack1", "node2-rack1", "node3-rack1")),
        ),
    ),
    "two basic podgroups schedule consecutively on the only rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack1", "rack-1", "zone-1"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2"),
            gang_group("pg2", "rack", None, 2),
            *pods("pg2", "p3", "p4", "p5", created=2),
        ),
        scheduled=("p1", "p2", "p3", "p4", "p5"),
    ),
    "two basic podgroups schedule consecutively, different topology keys": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-zone2", "rack-2", "zone-2"),
                ("node3-zone2", "rack-2", "zone-2"),
                ("node4-zone2", "rack-3", "zone-2"),
                ("node5-zone2", "rack-3", "zone-2"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1", "p2"),
            gang_group("pg2", "zone", None, 2),
            *pods("pg2", "p3", "p4", "p5", cpu="2", created=2),
        ),
        scheduled=("p1", "p2", "p3", "p4", "p5"),
        on=(
            (("p1", "p2"), nodes_of("node1-rack1")),
            (
                ("p3", "p4", "p5"),
                nodes_of("node2-zone2", "node3-zone2", "node4-zone2", "node5-zone2"),
            ),
        ),
    ),
    "two basic podgroups schedule consecutively, one does not fit in the assigned rack": Case(
        objects=(
            *racks(
                ("node1-rack1", "rack-1", "zone-1"),
                ("node2-rack1", "rack-1", "zone-1"),
                ("node3-rack2", "rack-2", "zone-1"),
            ),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1"),
            *pods("pg1", "p2", "p3", created=1 + STEP),
            gang_group("pg2", "rack", None, 1 + 2 * STEP),
            *pods("pg2", "p4", "p5", "p6", created=1 + 2 * STEP),
        ),
        scheduled=("p1", "p2", "p4", "p5", "p6"),
        unscheduled=("p3",),
        on=(
            (("p1", "p2"), nodes_of("node3-rack2")),
            (("p4", "p5", "p6"), nodes_of("node1-rack1", "node2-rack1")),
        ),
    ),
    "basic podgroup continues to schedule pods when more resources become available": Case(
        objects=(
            *racks(("node1-rack1", "rack-1", "zone-1"), ("node2-rack2", "rack-2", "zone-1")),
            deleted("existing1", "node1-rack1", "1"),
            gang_group("pg1", "rack", None, 1),
            *pods("pg1", "p1"),
            *pods("pg1", "p2", created=1 + STEP),
        ),
        scheduled=("p1", "p2"),
        waited=("p2",),
        on=((("p1", "p2"), nodes_of("node1-rack1")),),
    ),
}

# podgroup_test.go's TestPodGroupScheduling cases that need the gate: a 4-CPU node in
# zone1, four 1-CPU pods of priority 5 and 10 filling it, then a gang of two of
# priority 50 asking the zone.


def no_preemption_for_topology() -> Case:
    """Both cases: with pod-by-pod preemption, and with workload-aware preemption
    (WorkloadAwarePreemption on); upstream asserts the gang unschedulable in both."""
    filler = [
        pod(name, {"cpu": "1"}, created=0, spec={"priority": priority})
        for name, priority in (
            ("very-low-p1", 5),
            ("very-low-p2", 5),
            ("low-p1", 10),
            ("low-p2", 10),
        )
    ]
    zone = "topology.kubernetes.io/zone"
    gang = [
        gang_group("mid-pg", zone, 2, STEP),
        *(
            member(name, "mid-pg", {"cpu": "1"}, created=STEP, spec={"priority": 50})
            for name in ("mid-p1", "mid-p2")
        ),
    ]
    return Case(
        objects=(node("node", cpu="4", labels={zone: "zone1"}), *filler, *gang),
        unscheduled=("mid-p1", "mid-p2"),
        defect=PREEMPTS_IN_A_DOMAIN,
    )


PODGROUP_CASES: dict[str, Case] = {
    "tas gang with constraint does not use pod by pod preemption": no_preemption_for_topology(),
    "tas gang with constraint does not use workload preemption": no_preemption_for_topology(),
}

# TestGeneratePlacements (topology_placement_test.go): PodGroup pg1 in "default", basic
# but where a gang shows the placement (the test's states no policy, which the generator
# does not read).


def labelled(name: str, key: str | None, value: str = "", *, other: bool = False) -> Obj:
    """A 2-CPU node of the test, `other` for its otherNodes (outside the placement)."""
    return node(name, cpu="2", labels={key: value} if key else None, unschedulable=other)


def asking(key: str | None, min_count: int | None = None) -> Obj:
    if key is None:
        return native_pod_group("pg1", min_count, created=0)
    return gang_group("pg1", key, min_count)


def running(name: str, node_name: str) -> Obj:
    """A scheduledPodGroupPods entry: a member bound to its node."""
    return member(name, "pg1", {"cpu": "1"}, node_name=node_name, phase="Running", created=0)


UNSCHEDULED = member("unscheduled", "pg1", {"cpu": "1"}, created=0)
# Two members each taking a whole node, a gang of both: they show which nodes the domain
# they take has (kube-scheduler places a basic group's first pod alone).
WHOLE_NODES = tuple(member(f"whole-{i}", "pg1", {"cpu": "2"}, created=0) for i in (1, 2))
# The nodes of the cases with pods already scheduled: node0 in d2 and node1 in d1 make
# the placement.
PLACED_TOPOLOGY = (labelled("node0", "topology", "d2"), labelled("node1", "topology", "d1"))

GENERATOR_CASES: dict[str, Case] = {
    "without constraint returns placement matching all nodes": Case(
        objects=(
            labelled("node1", None),
            labelled("node2", "foo", "bar"),
            labelled("node3", None, other=True),
            asking(None, len(WHOLE_NODES)),
            *WHOLE_NODES,
        ),
        scheduled=("whole-1", "whole-2"),
        on=((("whole-1", "whole-2"), nodes_of("node1", "node2")),),
    ),
    "with topology key constraint, returns placement for each topology domain": Case(
        objects=(
            labelled("node0", "topology2", "d1"),
            labelled("node1", "topology2", "d4"),
            labelled("node2", "topology1", "d1"),
            labelled("node3", "topology1", "d2"),
            labelled("node4", "topology1", "d1"),
            labelled("node5", "topology1", "d3"),
            asking("topology1", len(WHOLE_NODES)),
            *WHOLE_NODES,
        ),
        scheduled=("whole-1", "whole-2"),
        on=((("whole-1", "whole-2"), nodes_of("node2", "node4")),),
    ),
    "without matching topology label, returns empty": Case(
        objects=(
            labelled("node0", "topology2", "d1"),
            labelled("node1", "topology2", "d4"),
            labelled("node2", "topology1", "d1"),
            labelled("node3", "topology1", "d2"),
            labelled("node4", "topology1", "d1"),
            labelled("node5", "topology1", "d3"),
            asking("topology3"),
            UNSCHEDULED,
        ),
        unscheduled=("unscheduled",),
    ),
    "with pods already scheduled in a single domain, returns that domain": Case(
        objects=(
            *PLACED_TOPOLOGY,
            labelled("node2", "topology", "d1", other=True),
            labelled("node3", "topology", "d1", other=True),
            asking("topology"),
            running("pod1", "node2"),
            running("pod2", "node3"),
            UNSCHEDULED,
        ),
        scheduled=("unscheduled",),
        on=((("unscheduled",), nodes_of("node1")),),
    ),
    "with pods already scheduled in a single domain not present in current placement, "
    "returns empty": Case(
        objects=(
            labelled("node0", "topology", "d2"),
            labelled("node2", "topology", "d1", other=True),
            labelled("node3", "topology", "d1", other=True),
            asking("topology"),
            running("pod1", "node2"),
            running("pod2", "node3"),
            UNSCHEDULED,
        ),
        unscheduled=("unscheduled",),
    ),
    "with pods already scheduled in conflicting domains, returns error": Case(
        objects=(
            *PLACED_TOPOLOGY,
            labelled("node2", "topology", "d0", other=True),
            labelled("node3", "topology", "d1", other=True),
            asking("topology"),
            running("pod1", "node2"),
            running("pod2", "node3"),
            UNSCHEDULED,
        ),
        unscheduled=("unscheduled",),
    ),
    "with already scheduled pod on node outside of snapshot, returns error": Case(
        objects=(
            *PLACED_TOPOLOGY,
            labelled("node2", "topology", "d1", other=True),
            labelled("node3", "topology", "d1", other=True),
            asking("topology"),
            running("pod1", "node2"),
            running("pod2", "node4"),
            UNSCHEDULED,
        ),
        unscheduled=("unscheduled",),
        defect=UNKNOWN_NODE_LEFT_OUT,
    ),
    "with already scheduled pod on node without topology label, returns error": Case(
        objects=(
            labelled("node1", "topology", "d2"),
            labelled("node2", "foo", "bar", other=True),
            asking("topology"),
            running("pod1", "node2"),
            UNSCHEDULED,
        ),
        unscheduled=("unscheduled",),
    ),
}

# TestScorePlacement_Resources (fit_test.go): nodes of 5 CPUs and 5000 bytes of memory
# (and 5 GPUs where the case has them), gang pods foo and bar, the pod baz already on
# node1, and the placement's expected score.
GPU = "nvidia.com/gpu"
KEY = "example.com/placement"
# The domain set beside the case's: one node of this much of each resource, so that a
# pod sized in whole units gives it any score in hundredths.
BESIDE = {"cpu": 100_000, "memory": 100_000, GPU: 100}


@dataclass(frozen=True)
class FitCase:
    resources: tuple[tuple[str, int], ...]  # resourceSpec: name and weight
    foo: dict[str, int]  # cpu in millicores, memory in bytes, GPUs
    bar: dict[str, int]
    baz: dict[str, int] | None  # on node1 when set
    outside: bool  # node3, outside the placement
    score: int  # expectedScore
    gpus: bool = False

    def requests(self, which: dict[str, int]) -> dict[str, str]:
        return {name: f"{value}m" if name == "cpu" else str(value) for name, value in which.items()}


CPU_MEMORY = (("cpu", 1), ("memory", 1))
FOO, BAR = {"cpu": 1000, "memory": 0}, {"cpu": 2000, "memory": 2000}
FIT_CASES: dict[str, FitCase] = {
    "Computes score based on total requests": FitCase(CPU_MEMORY, FOO, BAR, None, False, 25),
    "Computes score using weights": FitCase((("cpu", 4), ("memory", 1)), FOO, BAR, None, False, 28),
    "Handles multiple pods per node": FitCase(
        (("cpu", 4), ("memory", 1)), FOO, BAR, None, False, 28
    ),
    "Does not include nodes from outside of placement": FitCase(
        CPU_MEMORY, FOO, BAR, None, True, 25
    ),
    "Includes pre-existing pods from outside of pod group": FitCase(
        CPU_MEMORY, FOO, BAR, {"cpu": 1000, "memory": 0}, False, 30
    ),
    "Includes scalar resources if any pod in pod group has nonzero requests": FitCase(
        (*CPU_MEMORY, (GPU, 1)),
        {"cpu": 1000, "memory": 0, GPU: 0},
        {"cpu": 1000, "memory": 2000, GPU: 1},
        {"cpu": 1000, "memory": 0, GPU: 0},
        False,
        20,
        gpus=True,
    ),
    "Does not include scalar resources if all pods in pod group have zero requests": FitCase(
        (*CPU_MEMORY, (GPU, 1)),
        {"cpu": 1000, "memory": 0, GPU: 0},
        {"cpu": 1000, "memory": 2000, GPU: 0},
        {"cpu": 1000, "memory": 0, GPU: 1},
        False,
        25,
        gpus=True,
    ),
}


def fit_objects(case: FitCase, beside: int) -> tuple[tuple[Obj, ...], str | None]:
    """The case's placement (domain a) and a domain b of one node scoring `beside`
    hundredths in every resource the case scores, and the configuration giving the
    case's resource weights (None: the default, cpu and memory alike)."""
    extra = {GPU: "5"} if case.gpus else None
    objects: list[Obj] = [
        node(name, cpu="5", memory="5000", extra=extra, labels={KEY: "a"})
        for name in ("node1", "node2")
    ]
    if case.outside:
        objects.append(node("node3", cpu="5", memory="5000", extra=extra))
    gang = {"foo": case.foo, "bar": case.bar}
    scored = [
        name for name, _ in case.resources if name != GPU or any(g.get(GPU) for g in gang.values())
    ]
    # The other domain's pod: each resource scored at `beside` hundredths once the gang
    # is in; what the gang does not score it asks none of.
    filler = {
        name: BESIDE[name] * beside // 100 - sum(g.get(name, 0) for g in gang.values())
        for name in scored
    }
    objects.append(
        node(
            "beside",
            cpu=f"{BESIDE['cpu']}m",
            memory=str(BESIDE["memory"]),
            extra={GPU: str(BESIDE[GPU])},
            labels={KEY: "b"},
        )
    )
    filled = case.requests(filler)
    objects.append(pod("filler", filled, node_name="beside", phase="Running", created=0))
    if case.baz is not None:
        objects.append(
            pod("baz", case.requests(case.baz), node_name="node1", phase="Running", created=0)
        )
    objects.append(
        native_pod_group("pg", 2, created=0, schedulingConstraints={"topology": [{"key": KEY}]})
    )
    objects += [member(name, "pg", case.requests(req), created=0) for name, req in gang.items()]
    config = None
    if dict(case.resources) != dict(CPU_MEMORY):
        config = yaml.safe_dump(kube_config(case.resources))
    return tuple(objects), config


def kube_config(resources: tuple[tuple[str, int], ...]) -> Obj:
    """The default profile serving our scheduler, NodeResourcesFit's resources set."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": SCHEDULER,
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "LeastAllocated",
                                "resources": [
                                    {"name": name, "weight": weight} for name, weight in resources
                                ],
                            }
                        },
                    }
                ],
            }
        ],
    }


# TestPodGroupSchedulingPlacementAlgorithm (schedule_one_podgroup_test.go): placement1
# is node1, placement2 node2, each a rack of its own; the PodGroup pg of the one pod foo.
RACK = "example.com/rack"


def one_node_racks(*, full: tuple[str, ...] = (), fuller: str = "") -> tuple[Obj, ...]:
    """node1 and node2 of 3 CPUs, each its own rack, with no room on those `full` (the
    fake Filter rejects them) and a third of `fuller` taken (the placement scoring
    higher)."""
    objects: list[Obj] = [
        node(name, cpu="3", labels={RACK: f"placement{i}"})
        for i, name in enumerate(("node1", "node2"), start=1)
    ]
    taken = [(name, "3") for name in full] + ([(fuller, "1")] if fuller else [])
    for name, cpu in taken:
        objects.append(pod(f"on-{name}", {"cpu": cpu}, node_name=name, phase="Running", created=0))
    return tuple(objects)


FOO_POD = member("foo", "pg", {"cpu": "1"}, created=0)


def foo_group(key: str = RACK) -> Obj:
    return native_pod_group("pg", 1, created=0, schedulingConstraints={"topology": [{"key": key}]})


ALGORITHM_CASES: dict[str, Case] = {
    "respects higher score of placement1": Case(
        objects=(*one_node_racks(fuller="node1"), foo_group(), FOO_POD),
        on=((("foo",), nodes_of("node1")),),
    ),
    "respects higher score of placement2": Case(
        objects=(*one_node_racks(fuller="node2"), foo_group(), FOO_POD),
        on=((("foo",), nodes_of("node2")),),
    ),
    "when no placements are generated, returns unschedulable": Case(
        objects=(*one_node_racks(), foo_group("example.com/none"), FOO_POD),
        unscheduled=("foo",),
    ),
    "when all placements are infeasible, returns unschedulable": Case(
        objects=(
            *one_node_racks(full=("node1", "node2")),
            foo_group(),
            FOO_POD,
        ),
        unscheduled=("foo",),
    ),
    "filters out infeasible placements": Case(
        objects=(*one_node_racks(full=("node2",)), foo_group(), FOO_POD),
        on=((("foo",), nodes_of("node1")),),
    ),
}


def fit_cases() -> dict[str, Case]:
    """Each TestScorePlacement_Resources case twice: against a domain scoring a point
    less (the case's domain wins) and one scoring a point more (it loses)."""
    cases = {}
    for name, fit in FIT_CASES.items():
        for beside, wins in ((fit.score - 1, "a"), (fit.score + 1, "b")):
            objects, config = fit_objects(fit, beside)
            on = nodes_of("node1", "node2") if wins == "a" else nodes_of("beside")
            cases[f"{name} (beside {beside})"] = Case(
                objects=objects,
                scheduled=("foo", "bar"),
                on=((("foo", "bar"), on),),
                config=config,
            )
    return cases


TABLES: dict[str, dict[str, Case]] = {
    GANG: GANG_CASES,
    BASIC: BASIC_CASES,
    "TestPodGroupScheduling": PODGROUP_CASES,
    "TestGeneratePlacements": GENERATOR_CASES,
    "TestScorePlacement_Resources": fit_cases(),
    "TestPodGroupSchedulingPlacementAlgorithm": ALGORITHM_CASES,
}


def params() -> list[Any]:
    return [
        pytest.param(
            case,
            id=f"{test}/{name}",
            marks=[pytest.mark.xfail(strict=True, reason=case.defect)] if case.defect else [],
        )
        for test, table in TABLES.items()
        for name, case in table.items()
    ]


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case) -> Run:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump_all(case.objects))
    config = None
    if case.config is not None:
        config = str(tmp_path / "config.yaml")
        Path(config).write_text(case.config)
    result = simulate(capsys, path, config=config)
    assert result.code == 0, result.stderr
    return result


@pytest.mark.parametrize("case", params())
def test_upstream_case(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: Case) -> None:
    result = run(capsys, tmp_path, case)
    shown = {key.removeprefix("default/"): p for key, p in result.pods.items()}
    check(case, {name: p["node"] for name, p in shown.items()})
    for name in case.waited:
        assert shown[name]["bound_at"] >= DELETED_AT, shown[name]


def check(case: Case, where: dict[str, str | None]) -> None:
    """The case's assertion on where its pods are (name -> node, None while pending)."""
    for name in case.scheduled:
        assert where[name], f"{name} not scheduled"
    for name in case.unscheduled:
        assert not where[name], f"{name} scheduled on {where[name]}"
    for names, allowed in case.on:
        outside = {name: where[name] for name in names if where[name] not in allowed}
        assert not outside, f"not on {sorted(allowed)}: {outside}"
    if case.together is not None:
        names, key = case.together
        labels = {
            o["metadata"]["name"]: o["metadata"]["labels"]
            for o in case.objects
            if o["kind"] == "Node"
        }
        values = {labels[str(where[name])].get(key) for name in names}
        assert len(values) == 1, values
