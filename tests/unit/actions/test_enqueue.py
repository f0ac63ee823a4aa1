"""enqueue: a job is admitted only once its minResources fit its queue and the idle cluster."""

import pytest

from batchsched.plugins.gang import AWAITING_PODS

from tests.support.objects import (
    SCHEDULER,
    Obj,
    Quantities,
    at,
    decide,
    gang,
    node,
    placements,
    pod,
    pod_group,
    queue,
)

ONE_CPU = {"cpu": "1"}
VOLCANO = "scheduling.volcano.sh/v1beta1"


@pytest.mark.parametrize(
    ("min_resources", "message"),
    [
        ({"cpu": "6"}, "minResources needs cpu 6, the cluster has 4 idle"),
        (
            {"cpu": "4", "memory": "64Gi"},
            "minResources needs memory 64Gi, the cluster has 16Gi idle",
        ),
        ({"nvidia.com/gpu": 1}, "minResources needs nvidia.com/gpu 1, the cluster has 0 idle"),
    ],
)
def test_min_resources_beyond_the_idle_cluster(min_resources: Quantities, message: str) -> None:
    decisions = decide(
        [
            node("n1", cpu="4", memory="16Gi"),
            *gang("g", 2, requests=ONE_CPU, minResources=min_resources),
        ]
    )
    assert placements(decisions) == {}
    assert decisions.pending["default/g-0"] == f"waiting for resources: {message}"
    assert decisions.jobs["default/g"].phase == "Pending"


@pytest.mark.parametrize(
    ("holder", "idle"),
    [
        # Admitted in an earlier session: its minResources stay reserved.
        (
            [
                {**pod_group("held", 1, minResources={"cpu": "3"}), "status": {"phase": "Inqueue"}},
                pod("held-0", requests=ONE_CPU, group="held"),
            ],
            "1",
        ),
        # Admitted now, earlier in the same pass.
        ([*gang("held", 1, requests={"cpu": "5"}, minResources={"cpu": "3"})], "1"),
        # Running pods of any scheduler use the cluster.
        ([pod("other", requests={"cpu": "3"}, node_name="n1", scheduler="other")], "1"),
    ],
)
def test_admission_counts_what_is_already_promised(holder: list[Obj], idle: str) -> None:
    decisions = decide(
        [node("n1", cpu="4"), *holder, *gang("g", 2, requests=ONE_CPU, minResources={"cpu": "2"})]
    )
    assert decisions.pending["default/g-0"] == (
        f"waiting for resources: minResources needs cpu 2, the cluster has {idle} idle"
    )


def test_min_resources_beyond_queue_capability() -> None:
    decisions = decide(
        [
            node("n1", cpu="8"),
            queue("q", capability={"cpu": "2"}),
            *gang("g", 1, requests=ONE_CPU, queue="q", minResources={"cpu": "3"}),
        ]
    )
    assert decisions.pending == {
        "default/g-0": "queue q: minResources would exceed its capability for cpu (0 of 2 in use)"
    }


@pytest.mark.parametrize(("actions", "bound"), [("enqueue, allocate", 0), ("allocate", 2)])
def test_enqueue_is_the_gate(actions: str, bound: int) -> None:
    """Without the enqueue action, minResources are not checked and the small pods run."""
    decisions = decide(
        [node("n1", cpu="4"), *gang("g", 2, requests=ONE_CPU, minResources={"cpu": "6"})],
        f"actions: {actions}",
    )
    assert len(decisions.bindings) == bound
    assert decisions.jobs["default/g"].phase == ("Running" if bound else "Pending")


def test_admitted_but_unplaced_job_is_inqueue() -> None:
    decisions = decide(
        [node("n1", cpu="4"), *gang("g", 2, requests={"cpu": "3"}, minResources={"cpu": "2"})]
    )
    assert decisions.jobs["default/g"].phase == "Inqueue"
    assert decisions.pending["default/g-0"] == (
        "gang default/g: room for 1 of 2; 0/1 nodes are available: 1 Insufficient cpu."
    )


def test_an_overcommitted_node_takes_nothing_from_the_room_on_others() -> None:
    """n1's bound pods ask for 6 of its 4 CPUs; n2 is empty. The cluster has 4 idle CPUs,
    not 2, so a group needing 3 is admitted and placed on n2."""
    hogs = [
        pod(f"hog-{i}", requests={"cpu": "3"}, node_name="n1", scheduler="other") for i in range(2)
    ]
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        *hogs,
        *gang("g", 3, requests=ONE_CPU, minResources={"cpu": "3"}),
    ]
    assert set(placements(decide(objects)).values()) == {"n2"}


def test_a_gang_failed_at_its_schedule_timeout_reserves_nothing() -> None:
    """The failed gang's one bound member uses 1 of 4 CPUs; the 3 CPUs it would still
    have reserved for its minResources go to the next group, which needs 3."""
    fail = (
        "tiers:\n- plugins: [{name: gang, arguments: {scheduleTimeoutAction: Fail}}, "
        "{name: predicates}]\n"
    )
    failed = pod_group("stuck", 2, created=0, scheduleTimeoutSeconds=30, minResources={"cpu": "4"})
    objects = [
        node("n1", cpu="4"),
        failed,
        pod("stuck-0", requests=ONE_CPU, group="stuck", node_name="n1", phase="Running", created=0),
        pod("stuck-1", requests={"cpu": "8"}, group="stuck", created=0),
        *gang("next", 3, requests=ONE_CPU, minResources={"cpu": "3"}),
    ]
    decisions = decide(objects, fail, now=at(120))
    assert decisions.jobs["default/stuck"].phase == "Failed"
    assert set(placements(decisions)) == {f"default/next-{i}" for i in range(3)}


@pytest.mark.parametrize("api_version", ["scheduling.batchsched.io/v1alpha1", VOLCANO])
@pytest.mark.parametrize(
    ("min_resources", "phase", "message"),
    [
        ({"cpu": "3"}, "Inqueue", AWAITING_PODS),
        (
            {"cpu": "6"},
            "Pending",
            "waiting for resources: minResources needs cpu 6, the cluster has 4 idle",
        ),
    ],
)
def test_a_group_whose_pods_are_yet_to_be_created_is_admitted_on_its_min_resources(
    api_version: str, min_resources: Quantities, phase: str, message: str
) -> None:
    """Volcano's job controller creates a Job's pods only once its PodGroup is Inqueue."""
    group = pod_group("g", 3, api_version=api_version, minResources=min_resources)
    decisions = decide([node("n1", cpu="4"), group], serving=(SCHEDULER, "volcano"))
    status = decisions.jobs["default/g"]
    assert (status.phase, status.condition and status.condition.message) == (phase, message)


def test_an_admitted_group_without_pods_keeps_its_min_resources_reserved() -> None:
    held = {**pod_group("held", 3, minResources={"cpu": "3"}), "status": {"phase": "Inqueue"}}
    decisions = decide(
        [node("n1", cpu="4"), held, *gang("g", 2, requests=ONE_CPU, minResources={"cpu": "2"})]
    )
    assert decisions.jobs["default/held"].phase == "Inqueue"
    assert decisions.pending["default/g-0"] == (
        "waiting for resources: minResources needs cpu 2, the cluster has 1 idle"
    )


def test_a_volcano_group_without_pods_is_left_to_the_scheduler_that_serves_volcano() -> None:
    """Volcano's scheduler, still running, admits its own PodGroups."""
    group = pod_group("g", 3, api_version=VOLCANO, minResources={"cpu": "1"})
    assert "default/g" not in decide([node("n1", cpu="4"), group]).jobs


def test_volcano_min_resources_are_read_as_volcano_reads_them() -> None:
    """Its job controller writes quota usage: count/pods and requests.cpu beside cpu and
    pods, which no node has; Volcano's scheduler counts only the resources."""
    written = {"count/pods": "3", "cpu": "3", "pods": "3", "requests.cpu": "3"}
    group = pod_group("g", 3, api_version=VOLCANO, minResources=written)
    decisions = decide([node("n1", cpu="4"), group], serving=(SCHEDULER, "volcano"))
    assert decisions.jobs["default/g"].phase == "Inqueue"
