"""allocate: whole jobs in order; a gang that has waited too long holds its queue."""

import pytest

from tests.support.objects import Obj, at, decide, node, placements, pod, pod_group, queue, stamp

ONE_CPU = {"cpu": "1"}


def old_gang(size: int, cpu: str, *, min_member: int | None = None, running: int = 0) -> list[Obj]:
    """Gang `big`, created at 0: `size` pods asking for `cpu` each, the first `running`
    of them already on n1."""
    members = [
        pod(
            f"big-{i}",
            requests={"cpu": cpu},
            group="big",
            created=0,
            node_name="n1" if i < running else None,
            phase="Running" if i < running else None,
        )
        for i in range(size)
    ]
    return [pod_group("big", size if min_member is None else min_member, created=0), *members]


def cluster(small_queue: str) -> list[Obj]:
    """Two free CPUs; gang `big` (three 1-CPU pods) cannot fit; job `small` (one 1-CPU
    pod in `small_queue`, created at 10) can."""
    return [
        node("n1", cpu="4"),
        pod("hog", requests={"cpu": "2"}, node_name="n1", scheduler="other"),
        queue("other"),
        *old_gang(3, "1"),
        pod_group("small", 1, created=10, queue=small_queue),
        pod("small-0", requests=ONE_CPU, group="small", created=10),
    ]


@pytest.mark.parametrize(
    ("threshold", "waited", "small_queue", "held"),
    [
        ("60s", 30, "default", False),
        ("60s", 120, "default", True),
        ("60s", 120, "other", True),
        ("0", 120, "default", False),
    ],
    ids=["not-yet-starving", "starving", "other-queue-too", "threshold-off"],
)
def test_starving_gang_holds_room_on_its_node(
    threshold: str, waited: float, small_queue: str, held: bool
) -> None:
    decisions = decide(cluster(small_queue), f"starvationThreshold: {threshold}", now=at(waited))
    message = "gang default/big: room for 2 of 3; 0/1 nodes are available: 1 Insufficient cpu."
    if held:
        assert placements(decisions) == {}
        assert decisions.pending["default/big-0"] == (
            f"{message} It has waited past the starvation threshold: room is held for it "
            "on node(s) n1."
        )
        # Starving too, it holds what is left beside the gang's room.
        assert decisions.pending["default/small-0"].startswith(
            "gang default/small: room for 0 of 1; 0/1 nodes are available: "
            "1 node(s) had room held for starving gang(s) default/big."
        )
    else:
        assert decisions.pending["default/big-0"] == message
        assert placements(decisions) == {"default/small-0": "n1"}


def test_jobs_that_fit_elsewhere_run_beside_a_starving_gang() -> None:
    """The gang may only use n1; the small job of its own queue runs on n2."""
    big = old_gang(3, "1")
    for member in big[1:]:
        member["spec"]["nodeSelector"] = {"pool": "a"}
    objects = [
        node("n1", cpu="4", labels={"pool": "a"}),
        node("n2", cpu="4"),
        pod("hog", requests={"cpu": "2"}, node_name="n1", scheduler="other"),
        *big,
        pod("small", requests={"cpu": "3"}, created=10),
    ]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions) == {"default/small": "n2"}
    assert "room is held for it on node(s) n1" in decisions.pending["default/big-0"]


@pytest.mark.parametrize(
    ("hog_deadline", "small_deadline", "backfilled"),
    [
        (600, 300, True),
        (600, 600, False),
        (None, 60, False),
        (600, None, False),
    ],
    ids=["ends-first", "ends-after", "hog-unbounded", "small-unbounded"],
)
def test_a_pod_sure_to_end_before_the_held_room_is_ready_runs_in_it(
    hog_deadline: int | None, small_deadline: int | None, backfilled: bool
) -> None:
    """The starving gang needs 3 of n1's 4 CPUs; 2 are free and the hog holding the
    rest has run 0 of its `hog_deadline` seconds: the room is ready at 600 s at the
    latest. At 120 s a 1-CPU pod that must end within 300 s fits in before that."""
    hog = pod("hog", requests={"cpu": "2"}, node_name="n1", scheduler="other", created=0)
    hog["status"] = {"phase": "Running", "startTime": stamp(0)}
    if hog_deadline is not None:
        hog["spec"]["activeDeadlineSeconds"] = hog_deadline
    small = pod("small", requests=ONE_CPU, created=110)
    if small_deadline is not None:
        small["spec"]["activeDeadlineSeconds"] = small_deadline
    objects = [node("n1", cpu="4"), hog, *old_gang(3, "1"), small]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions) == ({"default/small": "n1"} if backfilled else {})


@pytest.mark.parametrize(
    "big",
    [
        pytest.param(old_gang(2, "8"), id="pods-larger-than-any-node"),
        pytest.param(old_gang(3, "2"), id="gang-larger-than-the-cluster"),
        pytest.param(old_gang(3, "3", min_member=2), id="min-member-larger-than-the-cluster"),
        # At minMember already: running, not starving, though its extra pod waits.
        pytest.param(old_gang(2, "3", min_member=1, running=1), id="running-gang-extra-member"),
    ],
)
def test_jobs_that_never_hold_their_queue(big: list[Obj]) -> None:
    objects = [node("n1", cpu="4"), *big, pod("small", requests=ONE_CPU, created=10)]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions)["default/small"] == "n1"


def test_a_gang_that_fits_each_node_but_not_the_cluster_never_holds_its_queue() -> None:
    """Three 2-CPU pods and two 3-CPU nodes: each pod fits a node and the total fits
    the cluster, but only one pod fits per node."""
    objects = [
        node("n1", cpu="3"),
        node("n2", cpu="3"),
        *old_gang(3, "2"),
        pod("small", requests=ONE_CPU, created=10),
    ]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions)["default/small"] in ("n1", "n2")


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"nodeSelector": {"pool": "training"}}, id="selector-no-node-matches"),
        pytest.param(
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app": "big"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                }
            },
            id="anti-affinity-one-node",
        ),
    ],
)
def test_a_gang_whose_constraints_the_empty_cluster_cannot_vouch_for_never_holds_its_queue(
    spec: dict[str, object],
) -> None:
    """Two 1-CPU members fit n1's 4 CPUs by resources alone, but one selects nodes
    that do not exist, or both keep away from each other on the only node."""
    gang = old_gang(2, "1")
    for member in gang[1:]:
        member["spec"].update(spec)
        member["metadata"]["labels"] = {"app": "big"}
    n1 = node("n1", cpu="4", labels={"kubernetes.io/hostname": "n1"})
    objects = [n1, *gang, pod("small", requests=ONE_CPU, created=10)]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions) == {"default/small": "n1"}


def test_a_gang_with_a_member_that_can_never_be_placed_never_holds_its_queue() -> None:
    gang = old_gang(2, "1")
    gang[2]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    objects = [node("n1", cpu="4"), *gang, pod("small", requests=ONE_CPU, created=10)]
    decisions = decide(objects, "starvationThreshold: 60s", now=at(120))
    assert placements(decisions)["default/small"] == "n1"


def test_older_job_first_within_a_queue() -> None:
    decisions = decide(
        [
            node("n1", cpu="2"),
            *(pod(f"p{i}", requests=ONE_CPU, created=10 - i) for i in range(3)),
        ],
        now=at(10),
    )
    assert sorted(placements(decisions)) == ["default/p1", "default/p2"]
    assert decisions.pending == {"default/p0": "0/1 nodes are available: 1 Insufficient cpu."}


def test_pods_of_other_schedulers_are_left_alone() -> None:
    decisions = decide([node("n1"), pod("theirs", requests=ONE_CPU, scheduler="default-scheduler")])
    assert decisions.bindings == []
    assert decisions.pending == {}


def test_binding_carries_uid_and_job() -> None:
    obj = pod("p", requests=ONE_CPU, group="g")
    obj["metadata"]["uid"] = "1234"
    decisions = decide([node("n1"), pod_group("g", 1), obj])
    [binding] = decisions.bindings
    assert (binding.key, binding.uid, binding.node, binding.job) == (
        "default/p",
        "1234",
        "n1",
        "default/g",
    )


def test_empty_cluster() -> None:
    decisions = decide([pod("p", requests=ONE_CPU)])
    assert decisions.pending == {"default/p": "no nodes available to schedule pods"}


def test_a_member_is_not_refused_for_a_mate_of_the_same_shape_that_pod_affinity_reads_apart() -> (
    None
):
    """g-0 is kept off every node by placed pods' anti-affinity, which reads a label
    g-1 does not carry; minMember 1 lets g-1 go alone."""
    keep_off = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"idx": "0"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    objects: list[Obj] = [
        node("n1", labels={"kubernetes.io/hostname": "n1"}),
        pod("guard", node_name="n1", phase="Running", spec={"affinity": keep_off}),
        pod_group("g", 1, created=0),
        pod("g-0", requests=ONE_CPU, group="g", created=0, labels={"idx": "0"}),
        pod("g-1", requests=ONE_CPU, group="g", created=0, labels={"idx": "1"}),
    ]
    assert placements(decide(objects)) == {"default/g-1": "n1"}


SLA = """starvationThreshold: "0"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: sla{arguments}}}]
- plugins: [{{name: predicates}}, {{name: proportion}}]
"""


@pytest.mark.parametrize(
    ("argument", "annotation", "waited", "held"),
    [
        ("60s", None, 30, False),
        ("60s", None, 120, True),
        (None, "60s", 120, True),
        ("10m", "60s", 120, True),
        ("60s", "10m", 120, False),
        (None, None, 120, False),
    ],
    ids=["within", "past", "annotation", "annotation-first", "annotation-longer", "none"],
)
def test_a_gang_past_its_sla_waiting_time_holds_room(
    argument: str | None, annotation: str | None, waited: float, held: bool
) -> None:
    """Volcano's sla plugin: past the waiting time its PodGroup states (else the plugin's
    argument), a gang has room held for it as a starving one has, the cluster's
    starvation threshold off."""
    objects = cluster("default")
    if annotation is not None:
        objects[3]["metadata"]["annotations"] = {"volcano.sh/sla-waiting-time": annotation}
    arguments = "" if argument is None else f", arguments: {{sla-waiting-time: {argument}}}"
    decisions = decide(objects, SLA.format(arguments=arguments), now=at(waited))
    message = decisions.pending["default/big-0"]
    assert (
        "past the waiting time it is given: room is held for it on node(s) n1" in message
    ) == held


def test_a_gang_past_its_sla_waiting_time_is_admitted_without_idle_room() -> None:
    """Enqueue admits it although its minResources exceed what is idle, so that room can
    be held for it; before its time it waits for idle room."""
    objects = cluster("default")
    objects[3]["spec"]["minResources"] = {"cpu": "3"}
    arguments = ", arguments: {sla-waiting-time: 60s}"
    early = decide(objects, SLA.format(arguments=arguments), now=at(30))
    assert early.pending["default/big-0"].startswith("waiting for resources: minResources")
    late = decide(objects, SLA.format(arguments=arguments), now=at(120))
    assert "room is held for it on node(s) n1" in late.pending["default/big-0"]
