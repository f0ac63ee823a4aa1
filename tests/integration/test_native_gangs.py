"""`batchsched run` scheduling Kubernetes' own gangs (scheduling.k8s.io/v1alpha2) on a
real kube-apiserver and kube-controller-manager v1.36.3, as the scheduler's
least-privilege account (manifests/rbac.yaml).

What kube-scheduler's GangScheduling does with these objects (docs/development.md has
what was confirmed on this control plane) is the expectation: all of a gang or none of
it, the pods of a group that does not exist waiting, a group once scheduled never
told otherwise, the Job controller's gangs scheduled whole, and the PodGroup status
in kube-scheduler's words. Nothing else stops being scheduled meanwhile: each test has
a lone pod bound beside what waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from batchsched.api.nativegroups import AWAITING_GROUP, AWAITING_MEMBERS

from .operator_support import (  # noqa: F401 (fixtures)
    Scheduler,
    StartScheduler,
    add_nodes,
    create,
    eventually,
    placements,
    pods,
    priority_class,
    ready_node,
    scheduler_kubeconfig_fixture,
    set_running,
    start_scheduler_fixture,
    ticks_pass,
    unschedulable_message,
)

# The control plane of test_workload_api, one of this module's own: v1alpha2 served, the
# Job controller making gangs, garbage collection and the PodGroup protection finalizer.
from .test_workload_api import (  # noqa: F401 (fixtures)
    control_plane,
    items,
    job,
    job_pods,
    scheduling,
)
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import member, native_pod_group, node, pod

pytestmark = pytest.mark.integration

# The Job builder's pods ask for 100m: two such nodes hold four of them, not five.
SMALL = {"cpu": "200m", "memory": "1Gi"}
CPU = {"cpu": "100m"}
UNSCHEDULABLE = "pod group is unschedulable"
RACK = "topology.kubernetes.io/rack"
DISRUPTION = "batch-scheduler: preempting to accommodate a higher priority pod"


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:  # noqa: F811 (the fixture imported above)
    return control_plane.kube()


@dataclass(frozen=True)
class Cluster:
    """A test's namespace on the module's control plane, and what it adds to it."""

    kube: Kube
    namespace: str
    objects: ClusterObjects
    start_scheduler: StartScheduler

    def nodes(
        self, count: int, allocatable: dict[str, str] = SMALL, *, stem: str = "n"
    ) -> list[str]:
        names = [f"{stem}{i}-{self.namespace}"[:63] for i in range(count)]
        add_nodes(self.objects, self.kube, names, allocatable)
        return names

    def racks(self, sizes: dict[str, int]) -> dict[str, list[str]]:
        """Racks of 1-CPU nodes labelled RACK, `sizes[rack]` nodes each: rack -> its
        nodes' names."""
        racks: dict[str, list[str]] = {}
        for rack, count in sizes.items():
            racks[rack] = [f"{rack}-{i}-{self.namespace}"[:63] for i in range(count)]
            labels = {RACK: f"{rack}-{self.namespace}"[:63]}
            for name in racks[rack]:
                made = node(name, cpu="1", memory="1Gi", labels=labels)
                ready_node(self.objects, self.kube, made)
        return racks

    def scheduling(self, count: int, allocatable: dict[str, str] = SMALL) -> Scheduler:
        """`count` nodes, and `batchsched run` scheduling them."""
        self.nodes(count, allocatable)
        return self.start_scheduler()


@pytest.fixture
def cluster(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, start_scheduler: StartScheduler
) -> Cluster:
    return Cluster(kube, namespace, cluster_objects, start_scheduler)


def job_gang(kube: Kube, namespace: str, name: str, size: int) -> tuple[list[str], str]:
    """An Indexed Job of `size` the Job controller makes a gang of: its pods' names and
    its PodGroup's."""
    kube.create(job(name, parallelism=size, completions=size), namespace)
    members = [p["metadata"]["name"] for p in job_pods(kube, namespace, name, size)]
    [made] = items(kube, scheduling(namespace, "podgroups"))
    return members, str(made["metadata"]["name"])


def group(kube: Kube, namespace: str, name: str) -> JSON:
    found: JSON = kube.get(f"{scheduling(namespace, 'podgroups')}/{name}").expect(200)
    return found


def condition(obj: JSON, type: str = "PodGroupScheduled") -> JSON | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type), None)


def shown(kube: Kube, namespace: str, name: str, status: str) -> JSON:
    """The group's PodGroupScheduled condition, once it has that status."""

    def written() -> JSON | None:
        found = condition(group(kube, namespace, name))
        return found if found is not None and found["status"] == status else None

    return eventually(written, timeout=60, what=f"PodGroup {name} PodGroupScheduled={status}")


def bound(kube: Kube, namespace: str, names: list[str]) -> dict[str, str]:
    def all_bound() -> dict[str, str] | None:
        where = placements(kube, namespace)
        found = {n: where.get(n) for n in names}
        return {n: w for n, w in found.items() if w} if all(found.values()) else None

    return eventually(all_bound, timeout=60, what=f"{names} bound")


def lone_pod_binds(kube: Kube, namespace: str) -> None:
    """Whatever waits, a pod of no group is still scheduled."""
    create(kube, namespace, pod("solo", CPU))
    bound(kube, namespace, ["solo"])


def waiting_with(kube: Kube, namespace: str, names: list[str], message: str) -> None:
    """The pods wait, each with a reason opening with `message` (kube-scheduler's)."""
    said: dict[str, str | None] = {}

    def told() -> bool:
        shown_pods = pods(kube, namespace)
        said.update((n, unschedulable_message(shown_pods[n])) for n in names)
        return all((m := said[n]) is not None and m.startswith(message) for n in names)

    try:
        eventually(told, timeout=60, what=f"{names} waiting with {message!r}")
    except AssertionError as error:
        raise AssertionError(f"{error}; they say {said}") from None
    assert not any(placements(kube, namespace)[n] for n in names)


def test_an_indexed_job_that_fits_is_bound_whole_and_its_podgroup_scheduled(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    cluster.scheduling(2)
    members, name = job_gang(kube, namespace, "train", 4)
    bound(kube, namespace, members)
    scheduled = shown(kube, namespace, name, "True")
    made = group(kube, namespace, name)
    assert (scheduled["reason"], scheduled["message"]) == ("Scheduled", "")
    # The API server gives a PodGroup no generation (until it is deleted), and
    # kube-scheduler's condition then none either.
    assert "generation" not in made["metadata"]
    assert "observedGeneration" not in scheduled
    # Only the status is written: the Job controller's spec and finalizer stay.
    assert made["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert made["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]


def test_an_indexed_job_too_big_for_the_cluster_binds_nothing_and_says_so(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    cluster.scheduling(2)
    members, name = job_gang(kube, namespace, "big", 5)
    refused = shown(kube, namespace, name, "False")
    assert refused["reason"] == "Unschedulable"
    assert refused["message"].startswith(f"{UNSCHEDULABLE}: "), refused
    # Every member told why (the group's message is written first, theirs after).
    waiting_with(kube, namespace, members, "")
    lone_pod_binds(kube, namespace)
    assert not any(placements(kube, namespace)[m] for m in members)


def test_a_pod_naming_a_podgroup_not_there_waits_saying_so_and_binds_once_it_is(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    cluster.scheduling(1)
    create(kube, namespace, member("early", "later", CPU))
    waiting_with(kube, namespace, ["early"], AWAITING_GROUP.format(name="later"))
    lone_pod_binds(kube, namespace)
    assert not placements(kube, namespace)["early"]

    create(kube, namespace, native_pod_group("later", 1))
    bound(kube, namespace, ["early"])
    assert shown(kube, namespace, "later", "True")["reason"] == "Scheduled"


def test_a_gang_waits_for_min_count_members_then_binds_them_in_one_decision(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    scheduler = cluster.scheduling(3)
    create(kube, namespace, native_pod_group("g", 4))
    first = [f"m{i}" for i in range(3)]
    for name in first:
        create(kube, namespace, member(name, "g", CPU))
    waiting_with(kube, namespace, first, AWAITING_MEMBERS)
    lone_pod_binds(kube, namespace)
    ticks_pass(scheduler, 2)
    assert not any(placements(kube, namespace)[n] for n in first)

    create(kube, namespace, member("m3", "g", CPU))
    bound(kube, namespace, [*first, "m3"])
    assert shown(kube, namespace, "g", "True")["reason"] == "Scheduled"


def test_a_gang_made_before_the_scheduler_starts_is_read_from_its_list(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """The API server lists a built-in kind's items without apiVersion: a PodGroup
    already there when the scheduler starts is read as the API it was listed from."""
    cluster.nodes(1)
    create(kube, namespace, native_pod_group("early", 2))
    names = ["early-0", "early-1"]
    for name in names:
        create(kube, namespace, member(name, "early", CPU))
    cluster.start_scheduler()
    bound(kube, namespace, names)
    shown(kube, namespace, "early", "True")


def test_a_gang_with_room_for_more_than_min_count_binds_what_fits_and_stays_scheduled(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """minCount 4, six pods, room for five (the lone pod takes the sixth slot): five
    bound, one waits, the group Scheduled. A seventh member that cannot fit, and a node
    gone, leave it Scheduled; members that find room later bind without the gang gating
    them again (its bound members count toward minCount)."""
    held = cluster.nodes(3)
    scheduler = cluster.start_scheduler()
    lone_pod_binds(kube, namespace)
    create(kube, namespace, native_pod_group("g", 4))
    names = [f"m{i}" for i in range(6)]
    for name in names:
        create(kube, namespace, member(name, "g", CPU))
    eventually(
        lambda: sum(bool(placements(kube, namespace)[n]) for n in names) == 5,
        timeout=60,
        what="five of six bound",
    )
    scheduled = shown(kube, namespace, "g", "True")
    assert scheduled["reason"] == "Scheduled"

    create(kube, namespace, member("m6", "g", CPU))
    waiting = [n for n in names if not placements(kube, namespace)[n]] + ["m6"]
    eventually(
        lambda: all(unschedulable_message(pods(kube, namespace)[n]) for n in waiting),
        timeout=60,
        what=f"{waiting} told they wait",
    )
    kube.delete(f"/api/v1/nodes/{held[0]}").expect(200)
    ticks_pass(scheduler, 2)
    assert condition(group(kube, namespace, "g")) == scheduled

    cluster.nodes(1, stem="extra")
    bound(kube, namespace, waiting)
    assert condition(group(kube, namespace, "g")) == scheduled


def test_a_basic_group_binds_pod_by_pod(kube: Kube, namespace: str, cluster: Cluster) -> None:
    cluster.scheduling(1, {"cpu": "100m", "memory": "1Gi"})
    create(kube, namespace, native_pod_group("b", None))
    create(kube, namespace, member("first", "b", CPU))
    bound(kube, namespace, ["first"])
    create(kube, namespace, member("second", "b", CPU))
    eventually(
        lambda: unschedulable_message(pods(kube, namespace)["second"]),
        timeout=60,
        what="the second member told it waits",
    )
    assert shown(kube, namespace, "b", "True")["reason"] == "Scheduled"


def test_a_group_whose_pods_name_different_schedulers_binds_none(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """kube-scheduler refuses such a group whole; so is it here, saying which field."""
    cluster.scheduling(2)
    create(kube, namespace, native_pod_group("g", 2))
    create(kube, namespace, member("ours", "g", CPU))
    create(kube, namespace, member("theirs", "g", CPU, scheduler="default-scheduler"))
    waiting_with(kube, namespace, ["ours"], "PodGroup ")
    assert "spec.schedulerName" in (unschedulable_message(pods(kube, namespace)["ours"]) or "")
    lone_pod_binds(kube, namespace)
    assert not any(placements(kube, namespace)[n] for n in ("ours", "theirs"))


def test_members_placed_before_a_pod_of_another_scheduler_joins_stay_and_the_rest_wait(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """The order objects arrive in decides, as in the simulator
    (tests/sim/test_native_groups.py, the same objects): a member joining the running
    gang is placed before the pod of another scheduler comes; once it has, the next
    member waits, naming the field, and what was placed stays."""
    cluster.scheduling(2)
    create(kube, namespace, native_pod_group("g", 2))
    for name in ("g-0", "g-1"):
        create(kube, namespace, member(name, "g", CPU))
    bound(kube, namespace, ["g-0", "g-1"])
    create(kube, namespace, member("g-2", "g", CPU))
    placed = bound(kube, namespace, ["g-0", "g-1", "g-2"])
    create(kube, namespace, member("theirs", "g", CPU, scheduler="default-scheduler"))
    create(kube, namespace, member("g-3", "g", CPU))
    waiting_with(kube, namespace, ["g-3"], "PodGroup ")
    assert "spec.schedulerName" in (unschedulable_message(pods(kube, namespace)["g-3"]) or "")
    lone_pod_binds(kube, namespace)
    assert {n: placements(kube, namespace)[n] for n in placed} == placed
    assert shown(kube, namespace, "g", "True")["reason"] == "Scheduled"


def test_a_member_and_a_pod_of_another_scheduler_seen_in_one_session_go_by_their_order(
    kube: Kube, namespace: str, cluster: Cluster, tmp_path: Path
) -> None:
    """A burst window long enough that one session sees the three pods: the member
    that came before the pod of another scheduler is placed, as a session between the
    two would have placed it (and the simulator does: tests/unit/cache/
    test_mixed_schedulers.py); the member after it waits, naming the field."""
    config = tmp_path / "config.yaml"
    config.write_text("schedulePeriod: 20s\nburstWindow: 3s\n")
    cluster.nodes(2)
    cluster.start_scheduler(config=config)
    create(kube, namespace, native_pod_group("g", None))
    create(kube, namespace, member("g-0", "g", CPU))
    create(kube, namespace, member("theirs", "g", CPU, scheduler="default-scheduler"))
    create(kube, namespace, member("g-1", "g", CPU))
    bound(kube, namespace, ["g-0"])
    waiting_with(kube, namespace, ["g-1"], "PodGroup ")
    assert "spec.schedulerName" in (unschedulable_message(pods(kube, namespace)["g-1"]) or "")
    lone_pod_binds(kube, namespace)


@pytest.mark.parametrize("goes", ["deleted", "failed"])
def test_a_group_refused_for_a_pod_of_another_scheduler_is_scheduled_once_that_pod_goes(
    kube: Kube, namespace: str, cluster: Cluster, goes: str
) -> None:
    """The refusal lasts while the odd pod is there: deleted, or finished (which
    kube-scheduler does not see), it no longer mixes the group."""
    cluster.scheduling(2)
    create(kube, namespace, native_pod_group("g", 2))
    create(kube, namespace, member("theirs", "g", CPU, scheduler="default-scheduler"))
    for name in ("g-0", "g-1"):
        create(kube, namespace, member(name, "g", CPU))
    waiting_with(kube, namespace, ["g-0", "g-1"], "PodGroup ")
    path = f"/api/v1/namespaces/{namespace}/pods/theirs"
    if goes == "deleted":
        kube.delete(path).expect(200)
    else:
        kube.patch(f"{path}/status", {"status": {"phase": "Failed"}}, merge=False).expect(200)
    bound(kube, namespace, ["g-0", "g-1"])
    assert shown(kube, namespace, "g", "True")["reason"] == "Scheduled"


def test_a_podgroup_deleted_while_its_pods_run_leaves_them_and_the_rest_scheduled(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    cluster.scheduling(2)
    members, name = job_gang(kube, namespace, "run", 2)
    placed = bound(kube, namespace, members)
    set_running(kube, namespace, members)
    shown(kube, namespace, name, "True")
    kube.delete(f"{scheduling(namespace, 'podgroups')}/{name}").expect(200)
    # Terminating while its pods run (the protection finalizer), and they stay put.
    assert group(kube, namespace, name)["metadata"]["deletionTimestamp"]
    lone_pod_binds(kube, namespace)
    assert {m: placements(kube, namespace)[m] for m in members} == placed
    assert condition(group(kube, namespace, name))["status"] == "True"  # type: ignore[index]


def test_a_preempted_native_gang_is_marked_a_disruption_target(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """A running gang of priority 0 fills the node; a pod of priority 1000 needs the
    room of one member, which would leave the gang short of minCount: both go, and the
    PodGroup says it was preempted, beside its PodGroupScheduled."""
    cluster.nodes(1)
    low = priority_class(cluster.objects, kube, f"low-{namespace}", 0)
    high = priority_class(cluster.objects, kube, f"high-{namespace}", 1000)
    cluster.start_scheduler()
    create(kube, namespace, native_pod_group("g", 2))
    victims = ["v0", "v1"]
    for name in victims:
        create(kube, namespace, member(name, "g", CPU, spec={"priorityClassName": low}))
    bound(kube, namespace, victims)
    set_running(kube, namespace, victims)
    scheduled = shown(kube, namespace, "g", "True")
    create(kube, namespace, pod("high", CPU, spec={"priorityClassName": high}))

    def marked() -> JSON | None:
        return condition(group(kube, namespace, "g"), "DisruptionTarget")

    target = eventually(marked, timeout=60, what="the gang's PodGroup a disruption target")
    assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert target["message"] == DISRUPTION
    assert condition(group(kube, namespace, "g")) == scheduled
    # The group is marked once the first of its evictions is accepted; the other follows.
    eventually(
        lambda: all(pods(kube, namespace)[v]["metadata"].get("deletionTimestamp") for v in victims),
        timeout=60,
        what="both members evicted",
    )


def test_a_gang_asking_one_rack_stays_in_it_as_it_grows(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """A PodGroup's spec.schedulingConstraints.topology (gate
    TopologyAwareWorkloadScheduling): racks with room for three and five members and an
    unlabelled node with room for all. A gang of four takes the rack of five, a gang of
    six no rack holds waits naming the key (never the unlabelled node); a member added
    once the gang runs goes to its rack, and the next, with the rack full, waits,
    although the other rack has room."""
    one = {"cpu": "1", "memory": "1Gi"}
    racks = cluster.racks({"r1": 3, "r2": 5})
    cluster.nodes(1, {"cpu": "16", "memory": "16Gi"}, stem="big")
    scheduler = cluster.start_scheduler()
    constraints = {"topology": [{"key": RACK}]}
    for name, size in (("g", 4), ("wide", 6)):
        create(kube, namespace, native_pod_group(name, size, schedulingConstraints=constraints))
        for i in range(size):
            create(kube, namespace, member(f"{name}-{i}", name, one))
    placed = bound(kube, namespace, [f"g-{i}" for i in range(4)])
    assert set(placed.values()) <= set(racks["r2"]), placed
    key = f"PodGroup {namespace}/wide.spec.schedulingConstraints.topology[0].key"
    waiting_with(kube, namespace, ["wide-0"], f"gang {namespace}/wide: {key}")
    assert not any(placements(kube, namespace)[f"wide-{i}"] for i in range(6))
    shown(kube, namespace, "g", "True")

    create(kube, namespace, member("g-4", "g", one))
    assert bound(kube, namespace, ["g-4"])["g-4"] in racks["r2"]
    create(kube, namespace, member("g-5", "g", one))
    eventually(
        lambda: unschedulable_message(pods(kube, namespace)["g-5"]),
        timeout=60,
        what="the member beyond its rack told it waits",
    )
    ticks_pass(scheduler, 2)
    assert placements(kube, namespace)["g-5"] is None
    lone_pod_binds(kube, namespace)


def test_a_basic_group_asking_one_rack_binds_what_fits_in_one_and_no_more(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """Kubernetes 1.36's topology-aware scheduling with the basic policy
    (concepts/workloads/workload-api/topology-aware-scheduling on kubernetes.io, and
    upstream's "basic podgroup cannot fit on a single rack, no pods get scheduled on a
    different rack"): where no rack holds the whole group, some of its pods may be
    bound, all on one rack; the pod left over waits although the other rack has room,
    and one added later goes to the group's rack once room is made there."""
    one = {"cpu": "1", "memory": "1Gi"}
    racks = cluster.racks({"r1": 2, "r2": 1})
    scheduler = cluster.start_scheduler()
    constraints = {"topology": [{"key": RACK}]}
    names = [f"p{i}" for i in range(3)]
    for name in names:
        create(kube, namespace, member(name, "pg", one))
    # The group comes last, so that its first session sees all its pods: a basic group
    # is placed with the pods seen, and one pod alone would take the one-node rack.
    eventually(
        lambda: all(unschedulable_message(pods(kube, namespace)[n]) for n in names),
        what="the pods waiting for their PodGroup",
    )
    create(kube, namespace, native_pod_group("pg", None, schedulingConstraints=constraints))

    def two_bound() -> dict[str, str] | None:
        where = {n: w for n, w in placements(kube, namespace).items() if w and n in names}
        return where if len(where) == 2 else None

    placed = eventually(two_bound, what="two of the three pods bound")
    assert set(placed.values()) == set(racks["r1"]), placed
    (left,) = set(names) - set(placed)
    eventually(
        lambda: unschedulable_message(pods(kube, namespace)[left]),
        what="the pod left over told why it waits",
    )
    ticks_pass(scheduler, 2)
    assert placements(kube, namespace)[left] is None
    # Room in the group's rack: the pod left over goes there.
    kube.delete(f"/api/v1/namespaces/{namespace}/pods/{sorted(placed)[0]}", grace_period_seconds=0)
    assert bound(kube, namespace, [left])[left] == placed[sorted(placed)[0]]


def test_a_native_gang_says_in_its_condition_where_it_waits_and_where_it_landed(
    kube: Kube, namespace: str, cluster: Cluster
) -> None:
    """Racks r1 and r2 of two and three 1-CPU nodes. A gang of four asking one rack by
    its topology key waits, its PodGroupScheduled=False message naming the key, the rack
    that came closest and the members it held there; a gang of two whose pods ask one
    rack by Kueue's pod-set annotation is placed, its PodGroupScheduled=True message
    naming the rack it landed in, as for a group's own key. A gang asking a key no node
    has waits, naming the field, and a lone pod is still scheduled."""
    one = {"cpu": "1", "memory": "1Gi"}
    racks = cluster.racks({"r1": 2, "r2": 3})
    cluster.start_scheduler()
    constraints = {"topology": [{"key": RACK}]}
    create(kube, namespace, native_pod_group("wide", 4, schedulingConstraints=constraints))
    for i in range(4):
        create(kube, namespace, member(f"wide-{i}", "wide", one))
    key = f"PodGroup {namespace}/wide.spec.schedulingConstraints.topology[0].key"
    waits = (
        f"{UNSCHEDULABLE}: gang {namespace}/wide: {key} asks its members in one domain of "
        f"{RACK} (hard); the best, {RACK} r2-{namespace}, holds 3 of 4; "
    )
    said: list[str] = []

    def told() -> bool:
        # Until all four pods exist it waits for them, in kube-scheduler's words.
        found = condition(group(kube, namespace, "wide")) or {}
        said[:] = [found.get("message", "")]
        return found.get("status") == "False" and said[0].startswith(waits)

    try:
        eventually(told, timeout=60, what="the waiting gang's PodGroupScheduled message")
    except AssertionError as error:
        raise AssertionError(f"{error}; it says {said}") from None

    notes = {"kueue.x-k8s.io/podset-required-topology": RACK}
    labels = {"kueue.x-k8s.io/podset": "workers"}
    create(kube, namespace, native_pod_group("kueue", 2))
    for i in range(2):
        create(
            kube, namespace, member(f"kueue-{i}", "kueue", one, annotations=notes, labels=labels)
        )
    placed = bound(kube, namespace, ["kueue-0", "kueue-1"])
    [rack] = [r for r, names in racks.items() if set(placed.values()) <= set(names)]
    message = shown(kube, namespace, "kueue", "True")["message"]
    assert message == f"scheduled in the topology domain {RACK}={rack}-{namespace}"
    assert not any(placements(kube, namespace)[f"wide-{i}"] for i in range(4))

    # A key no node has: the group waits naming its field, and a lone pod still binds.
    nowhere = {"topology": [{"key": "example.com/none"}]}
    create(kube, namespace, native_pod_group("nowhere", 1, schedulingConstraints=nowhere))
    create(kube, namespace, member("nowhere-0", "nowhere", CPU))
    field = f"PodGroup {namespace}/nowhere.spec.schedulingConstraints.topology[0].key"
    waiting_with(
        kube,
        namespace,
        ["nowhere-0"],
        f"gang {namespace}/nowhere: {field}: no node has the label example.com/none",
    )
    lone_pod_binds(kube, namespace)
