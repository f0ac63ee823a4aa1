"""What the status writer sends: only changes, in the shape the API expects, after binds."""

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from batchsched.api.objects import GroupPhase, PodGroup, Queue, Task
from batchsched.api.unsupported import GATED_MESSAGE
from batchsched.k8s.client import ApiError
from batchsched.k8s.fence import Fenced
from batchsched.k8s.status import QueueUsage, StatusWriter, quantity
from batchsched.model.decisions import Binding, Condition, JobStatus, TopologyDomain
from batchsched.model.reasons import SESSION, Code, Reason

from .recording_api import RecordingApi, WaitedFor, drained, settle

OUR_API = "scheduling.batchsched.io/v1alpha1"


def writer(
    api: RecordingApi, binds_idle: asyncio.Event | None = None, *, lease: list[float] | None = None
) -> StatusWriter:
    """A status writer on `api`; with `lease`, leading for `lease[0]` more seconds, which
    a test changes as time passes."""
    idle = binds_idle or asyncio.Event()
    if binds_idle is None:
        idle.set()
    status = StatusWriter(api, scheduler_name="batch-scheduler", instance="i", binds_idle=idle)
    if lease is not None:
        status.valid_for = lambda: lease[0]
    return status


def waiting(message: str) -> Reason:
    """A pending pod's reason as a session gives it: no node fits."""
    return Reason(Code.UNSCHEDULABLE, SESSION, message)


NO_CPU = waiting("0/2 nodes are available: 2 Insufficient cpu.")


def refusing_once() -> Callable[[str, str, object], dict[str, object]]:
    """An API answer that refuses the first PATCH (422) and accepts every other request."""
    refused = [True]

    def answer(method: str, path: str, body: object) -> dict[str, object]:
        if method == "PATCH" and refused[0]:
            refused[0] = False
            raise ApiError(method, path, 422, {"message": "refused once"})
        return {}

    return answer


def group_status(phase: GroupPhase, scheduled: int, condition: Condition | None) -> JobStatus:
    return JobStatus(
        key="ns/g",
        namespace="ns",
        name="g",
        phase=phase,
        min_member=3,
        scheduled=scheduled,
        running=0,
        succeeded=0,
        failed=0,
        condition=condition,
    )


def pod_task(namespace: str, name: str, node: str | None = None) -> Task:
    return Task(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        scheduler_name="batch-scheduler",
        request={},
        creation=0,
        node_name=node,
    )


GROUPS = {"ns/g": PodGroup(namespace="ns", name="g", min_member=3, creation=0, api_version=OUR_API)}
WAITING = Condition("Unschedulable", "NotEnoughResources", "gang ns/g: 1/3 placed")


async def test_a_pending_pod_is_told_once_per_distinct_reason() -> None:
    api = RecordingApi()
    status = writer(api)
    for _ in range(3):
        status.pods({"ns/p": waiting("0/2 nodes are available: 2 Insufficient cpu.")}, {})
    await settle(status)
    [patch] = api.sent("PATCH", "/api/v1/namespaces/ns/pods/p/status")
    [condition] = patch["status"]["conditions"]
    assert condition["type"] == "PodScheduled"
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert "lastTransitionTime" in condition
    [event] = api.sent("POST", "/events")
    assert event["reason"] == "FailedScheduling"
    assert event["type"] == "Warning"
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p"}

    status.pods({"ns/p": waiting("0/3 nodes are available: 3 Insufficient cpu.")}, {})
    await settle(status)
    patches = api.sent("PATCH", "/pods/p/status")
    assert len(patches) == 2
    # The pod stays unschedulable: the merge keeps the time it became so.
    assert "lastTransitionTime" not in patches[1]["status"]["conditions"][0]


async def test_a_reason_replacing_one_not_sent_yet_keeps_when_the_pod_became_unschedulable() -> (
    None
):
    """A preemptor's first reason is still queued (writes wait for binds) when the next
    session says it waits for its victims: the one write sent is the pod's first
    PodScheduled=False, and says since when, as kube-scheduler's always does."""
    api = RecordingApi()
    status = writer(api)
    status.pods({"ns/p": waiting("0/2 nodes are available: 2 Insufficient cpu.")}, {})
    preempting = "preempt: evicting 2 pod(s) to make room on node(s) n0; waiting for them"
    status.pods({"ns/p": Reason(Code.PREEMPTING, SESSION, preempting)}, {})
    await settle(status)
    [patch] = api.sent("PATCH", "/api/v1/namespaces/ns/pods/p/status")
    [condition] = patch["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == ("Unschedulable", preempting)
    assert "lastTransitionTime" in condition

    status.pods({"ns/p": waiting("0/2 nodes are available: 2 Insufficient cpu.")}, {})
    await settle(status)
    # Sent once, the time stays as written: the pod is still unschedulable.
    assert (
        "lastTransitionTime"
        not in api.sent("PATCH", "/pods/p/status")[1]["status"]["conditions"][0]
    )


async def test_a_gated_pod_is_told_so_as_kube_scheduler_tells_it_without_an_event() -> None:
    api = RecordingApi()
    status = writer(api)
    status.pods({"ns/p": Reason(Code.GATED, SESSION, GATED_MESSAGE)}, {})
    await settle(status)
    [patch] = api.sent("PATCH", "/api/v1/namespaces/ns/pods/p/status")
    [condition] = patch["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == ("SchedulingGated", GATED_MESSAGE)
    assert api.sent("POST", "/events") == []


async def test_what_a_pod_already_shows_is_not_written_again() -> None:
    api = RecordingApi()
    status = writer(api)
    status.observe("Pod", "ns/p", "waiting")
    status.pods({"ns/p": waiting("waiting")}, {})
    await settle(status)
    assert api.requests == []


async def test_a_bound_pod_gets_a_scheduled_event_and_a_fresh_start() -> None:
    api = RecordingApi()
    status = writer(api)
    # The recorder's clock, moved by hand: the events are sent a minute after they happened.
    clock = [1_000_000.0]
    status.recorder.clock = lambda: clock[0]
    status.pods({"ns/p": waiting("waiting")}, {})
    raised = datetime.fromtimestamp(clock[0], UTC)
    status.bound(Binding(namespace="ns", name="p", uid="u1", node="n1", job="ns/g"))
    status.pods({"ns/p": waiting("waiting")}, {})
    clock[0] += 60
    await settle(status)
    reasons = [e["reason"] for e in api.sent("POST", "/events")]
    assert reasons.count("Scheduled") == 1
    # The second FailedScheduling about the same pod joins the first one's series,
    # which is created with both (the first was still queued).
    [failed] = [e for e in api.sent("POST", "/events") if e["reason"] == "FailedScheduling"]
    assert failed["series"]["count"] == 2
    [scheduled] = [e for e in api.sent("POST", "/events") if e["reason"] == "Scheduled"]
    assert scheduled["note"] == "Successfully assigned ns/p to n1"
    assert scheduled["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "p",
        "uid": "u1",
    }
    # Stamped when it happened, not when it was sent.
    stamp = datetime.strptime(scheduled["eventTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert stamp.replace(tzinfo=UTC) == raised


async def test_group_status_keeps_the_transition_time_while_the_condition_holds() -> None:
    api = RecordingApi()
    status = writer(api)
    status.groups({"ns/g": group_status("Inqueue", 0, WAITING)}, GROUPS)
    await settle(status)
    [first] = api.sent("PATCH", f"/apis/{OUR_API}/namespaces/ns/podgroups/g/status")
    since = first["status"]["conditions"][0]["lastTransitionTime"]
    assert first["status"]["phase"] == "Inqueue"

    status.groups({"ns/g": group_status("Inqueue", 0, WAITING)}, GROUPS)
    await settle(status)
    assert len(api.sent("PATCH", "/podgroups/g/status")) == 1

    moved = Condition("Unschedulable", "NotEnoughResources", "gang ns/g: 2/3 placed")
    status.groups({"ns/g": group_status("Inqueue", 0, moved)}, GROUPS)
    await settle(status)
    second = api.sent("PATCH", "/podgroups/g/status")[1]
    assert second["status"]["conditions"][0]["lastTransitionTime"] == since
    group_events = [e for e in api.sent("POST", "/events") if e["regarding"]["kind"] == "PodGroup"]
    # A changed condition is news: it joins the group's FailedScheduling series.
    assert [e["note"] for e in group_events] == [WAITING.message]
    [repeat] = api.sent("PATCH", "/events/")
    assert repeat["series"]["count"] == 2


async def test_a_group_failed_by_its_schedule_timeout_is_written_once() -> None:
    api = RecordingApi()
    status = writer(api)
    timed_out = Condition("Unschedulable", "ScheduleTimeout", "gang ns/g: did not reach minMember")
    for _ in range(2):
        status.groups({"ns/g": group_status("Failed", 1, timed_out)}, GROUPS)
        await settle(status)
    [patch] = api.sent("PATCH", f"/apis/{OUR_API}/namespaces/ns/podgroups/g/status")
    assert patch["status"]["phase"] == "Failed"
    [condition] = patch["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("Unschedulable", "ScheduleTimeout")
    [event] = api.sent("POST", "/events")
    assert (event["type"], event["reason"], event["note"]) == (
        "Warning",
        "FailedScheduling",
        timed_out.message,
    )


# The peers whose status has conditions, and those that record when scheduling began.
WITH_CONDITIONS = {"scheduling.volcano.sh", "scheduling.incubator.k8s.io", "scheduling.sigs.dev"}
WITH_START_TIME = {"scheduling.x-k8s.io", "scheduling.sigs.k8s.io", "batch.scheduler.tencent.com"}


def peer_group(api_version: str) -> dict[str, PodGroup]:
    return {
        "ns/g": PodGroup(
            namespace="ns", name="g", min_member=3, creation=0, api_version=api_version
        )
    }


def placed(running: int) -> JobStatus:
    """minMember placed, `running` of them running."""
    job = group_status("Running", 3, Condition("Scheduled", "Scheduled", "3/3 members scheduled"))
    job.running = running
    return job


@pytest.mark.parametrize(
    ("api_version", "job", "status"),
    [
        # Volcano: its phases, running/succeeded/failed, conditions; no Failed phase.
        (
            "scheduling.volcano.sh/v1beta1",
            group_status("Inqueue", 0, WAITING),
            {"phase": "Inqueue", "running": 0, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.volcano.sh/v1beta1",
            group_status("Failed", 0, None),
            {"phase": "Unknown", "running": 0, "succeeded": 0, "failed": 0},
        ),
        # kube-batch, both API groups: no Completed either.
        (
            "scheduling.incubator.k8s.io/v1alpha1",
            group_status("Completed", 0, None),
            {"phase": "Running", "running": 0, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.sigs.dev/v1alpha2",
            group_status("Pending", 0, None),
            {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0},
        ),
        # scheduler-plugins now: Scheduling until minMember run, then Running; Finished.
        (
            "scheduling.x-k8s.io/v1alpha1",
            placed(1),
            {"phase": "Scheduling", "running": 1, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.x-k8s.io/v1alpha1",
            placed(3),
            {"phase": "Running", "running": 3, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.x-k8s.io/v1alpha1",
            group_status("Inqueue", 0, WAITING),
            {"phase": "Pending", "running": 0, "succeeded": 0, "failed": 0},
        ),
        # Tencent's, and scheduler-plugins' first: PreScheduling, Scheduling, Scheduled.
        (
            "batch.scheduler.tencent.com/v1",
            group_status("Inqueue", 0, WAITING),
            {"phase": "PreScheduling", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0},
        ),
        (
            "batch.scheduler.tencent.com/v1",
            group_status("Pending", 1, WAITING),
            {"phase": "Scheduling", "scheduled": 1, "running": 0, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.sigs.k8s.io/v1alpha1",
            placed(0),
            {"phase": "Scheduled", "scheduled": 3, "running": 0, "succeeded": 0, "failed": 0},
        ),
        (
            "scheduling.sigs.k8s.io/v1alpha1",
            group_status("Completed", 0, None),
            {"phase": "Finished", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0},
        ),
    ],
)
async def test_a_peer_group_gets_the_status_its_project_writes(
    api_version: str, job: JobStatus, status: dict[str, object]
) -> None:
    api = RecordingApi()
    writer_ = writer(api)
    writer_.groups({"ns/g": job}, peer_group(api_version))
    await settle(writer_)
    group = api_version.partition("/")[0]
    # The PodGroup CRDs of Volcano and of scheduler-plugins' sigs.k8s.io API have no
    # status subresource: their status is patched on the object.
    object_path = f"/apis/{api_version}/namespaces/ns/podgroups/g"
    on_object = group in ("scheduling.volcano.sh", "scheduling.sigs.k8s.io")
    [patch] = api.sent("PATCH", object_path if on_object else f"{object_path}/status")
    assert not (on_object and api.sent("PATCH", f"{object_path}/status"))
    written = dict(patch["status"])
    conditions = written.pop("conditions", None)
    started = written.pop("scheduleStartTime", None)
    assert written == status
    assert (conditions is not None) == (group in WITH_CONDITIONS and job.condition is not None)
    assert (started is not None) == (group in WITH_START_TIME)


@pytest.mark.parametrize(
    ("api_version", "path"),
    [
        # Volcano's released CRD has no status subresource: .../status answers 404.
        ("scheduling.volcano.sh/v1beta1", "podgroups/g"),
        ("scheduling.incubator.k8s.io/v1alpha1", "podgroups/g/status"),
        ("scheduling.x-k8s.io/v1alpha1", "podgroups/g/status"),
    ],
)
async def test_a_peer_groups_status_goes_where_its_crd_takes_it(
    api_version: str, path: str
) -> None:
    api = RecordingApi()
    writer_ = writer(api)
    writer_.groups({"ns/g": placed(0)}, peer_group(api_version))
    await settle(writer_)
    assert [(m, p) for m, p, _ in api.requests if "/podgroups/" in p] == [
        ("PATCH", f"/apis/{api_version}/namespaces/ns/{path}")
    ]


async def test_a_schedule_start_time_is_written_once() -> None:
    api = RecordingApi()
    status = writer(api)
    api_version = "scheduling.x-k8s.io/v1alpha1"
    status.observe(f"PodGroup {api_version}", "ns/g", {"scheduleStartTime": "2020-01-01T00:00:00Z"})
    status.groups({"ns/g": placed(0)}, peer_group(api_version))
    await settle(status)
    [patch] = api.sent("PATCH")
    assert patch["status"]["scheduleStartTime"] == "2020-01-01T00:00:00Z"


async def test_peer_status_skip_leaves_peers_objects_alone() -> None:
    api = RecordingApi()
    idle = asyncio.Event()
    idle.set()
    status = StatusWriter(
        api,
        scheduler_name="batch-scheduler",
        instance="i",
        binds_idle=idle,
        write_peers=False,
        queue_apis={"q": "scheduling.volcano.sh/v1beta1"},
    )
    status.groups({"ns/g": placed(0)}, peer_group("scheduling.volcano.sh/v1beta1"))
    status.queues({"q": QueueUsage(running=1)}, {"q": Queue(name="q")})
    await settle(status)
    assert api.requests == []


async def test_a_volcano_queue_gets_its_counts_and_its_state_is_never_written() -> None:
    """Volcano's state is status.state, which its controller and vcctl set and we read:
    writing it would reopen a queue Volcano closed."""
    api = RecordingApi()
    idle = asyncio.Event()
    idle.set()
    api_version = "scheduling.volcano.sh/v1beta1"
    status = StatusWriter(
        api,
        scheduler_name="batch-scheduler",
        instance="i",
        binds_idle=idle,
        queue_apis={"q": api_version},
    )
    usage = {"q": QueueUsage(allocated={"cpu": 1000}, running=1, pending=2)}
    status.queues(usage, {"q": Queue(name="q", open=False)})
    await settle(status)
    [patch] = api.sent("PATCH", f"/apis/{api_version}/queues/q/status")
    assert patch["status"] == {"allocated": {"cpu": "1"}, "pending": 2, "inqueue": 0, "running": 1}


async def test_queue_status_lists_allocations_and_removes_the_ones_gone() -> None:
    api = RecordingApi()
    status = writer(api)
    status.observe("Queue", "q", {"allocated": {"cpu": "2", "nvidia.com/gpu": "1"}, "running": 1})
    usage = {"q": QueueUsage(allocated={"cpu": 1500, "memory": 2**30}, running=1, inqueue=2)}
    status.queues(usage, {"q": Queue(name="q")})
    await settle(status)
    [patch] = api.sent("PATCH", f"/apis/{OUR_API}/queues/q/status")
    assert patch["status"] == {
        "allocated": {"cpu": "1500m", "memory": str(2**30), "nvidia.com/gpu": None},
        "pending": 0,
        "inqueue": 2,
        "running": 1,
    }
    status.queues(usage, {"q": Queue(name="q")})
    await settle(status)
    assert len(api.sent("PATCH")) == 1


async def test_writes_wait_while_binds_are_in_flight() -> None:
    api = RecordingApi()
    binds_idle = WaitedFor()
    status = writer(api, binds_idle)
    status.pods({"ns/p": waiting("waiting")}, {})
    task = asyncio.create_task(status.run())
    # Every worker has taken up a write and stopped at the binds: none can send one.
    async with asyncio.timeout(30):
        while binds_idle.waiting < status.concurrency:
            await asyncio.sleep(0.001)
    assert api.requests == []
    binds_idle.set()
    await drained(status)
    task.cancel()
    assert len(api.requests) == 2


def test_quantities_are_written_in_kubernetes_form() -> None:
    assert [quantity("cpu", m) for m in (2000, 1500, 250)] == ["2", "1500m", "250m"]
    assert quantity("memory", 2**30) == str(2**30)


async def test_a_pod_placed_before_its_condition_went_out_is_not_told_it_waits() -> None:
    api = RecordingApi()
    status = writer(api)
    tasks = {"ns/p": pod_task("ns", "p")}
    status.pods({"ns/p": waiting("waiting")}, tasks)
    status.pods({"ns/q": waiting("waiting")}, tasks)
    tasks["ns/q"] = pod_task("ns", "q", node="n1")  # assumed by a later session
    status.bound(Binding(namespace="ns", name="p", uid="u", node="n1", job="ns/p"))
    await settle(status)
    assert api.sent("PATCH") == []


async def test_a_write_that_failed_is_sent_again_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Otherwise the pod would show what it showed before until its reason changed,
    which for a pod set aside may be minutes later."""
    monkeypatch.setattr("batchsched.k8s.status.RETRY_LATER_SECONDS", 0.05)
    api = RecordingApi(refusing_once())
    status = writer(api)
    status.pods({"ns/p": NO_CPU}, {})
    task = asyncio.create_task(status.run())
    async with asyncio.timeout(30):
        while len(api.sent("PATCH", "/pods/p/status")) < 2:
            await asyncio.sleep(0.001)
    task.cancel()
    first, again = api.sent("PATCH", "/pods/p/status")
    assert first == again


class LandingApi(RecordingApi):
    """An API server whose writes land when they are answered, and whose first write to
    pod p's status is slow: it is answered only once a request about pod q comes."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: dict[str, str] = {}
        self.landed = 0
        self._q_came = asyncio.Event()

    async def request(
        self, method: str, path: str, body: object = None, *, content_type: str = ""
    ) -> dict[str, object]:
        self.requests.append((method, path, body))
        if "/pods/q/" in path:
            self._q_came.set()
        elif path.endswith("/pods/p/status") and len(self.sent("PATCH", "/pods/p/")) == 1:
            await self._q_came.wait()
        if method == "PATCH" and path.endswith("/status") and isinstance(body, dict):
            self.shown[path] = body["status"]["conditions"][0]["message"]
            self.landed += 1
        return {}


async def test_a_newer_reason_waits_for_an_older_one_on_its_way_to_the_same_pod() -> None:
    """Two writes to one pod on their way at once may land in either order; the older,
    landing last, would stay for good, as what the writer remembers writing is the
    newer. So a gang member told it waits for its partner's claim kept those words after
    a later session (the claim made) found no node with room for their claims."""
    api = LandingApi()
    status = writer(api)
    claim = "gang ns/g: 1 of 2 members may be placed; ns/q: ResourceClaim not created yet"
    room = "0/3 nodes are available: 3 cannot allocate all claims."
    status.pods({"ns/p": waiting(claim)}, {})
    task = asyncio.create_task(status.run())
    async with asyncio.timeout(30):
        while not api.sent("PATCH", "/pods/p/status"):
            await asyncio.sleep(0.001)
        status.pods({"ns/p": waiting(room), "ns/q": waiting(room)}, {})
        while api.landed < 3:
            await asyncio.sleep(0.001)
    task.cancel()
    assert api.shown["/api/v1/namespaces/ns/pods/p/status"] == room
    sent = [body["status"]["conditions"][0]["message"] for body in api.sent("PATCH", "/pods/p/")]
    assert sent == [claim, room]


async def test_a_reason_whose_write_failed_is_written_again_once_leading_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write that failed waits to be sent again; the lease lost meanwhile, it is
    dropped, and the pod shows what it showed before: the same reason from a later
    session must be written, not taken for written."""
    monkeypatch.setattr("batchsched.k8s.status.RETRY_LATER_SECONDS", 3600.0)
    lease = [30.0]
    api = RecordingApi(refusing_once())
    status = writer(api, lease=lease)
    status.pods({"ns/p": NO_CPU}, {})
    await settle(status)
    lease[0] = 0.0
    status.pods({"ns/q": NO_CPU}, {})
    await settle(status)
    lease[0] = 30.0
    status.pods({"ns/p": NO_CPU}, {})
    await settle(status)
    assert len(api.sent("PATCH", "/pods/p/status")) == 2


async def test_a_reason_whose_write_was_fenced_on_its_way_is_written_again() -> None:
    """The lease ran out while the write was on its way, and the client refused to send
    it: leading again, the same reason is written."""
    lease = [30.0]

    def answer(method: str, path: str, body: object) -> dict[str, object]:
        if method == "PATCH" and len(api.sent("PATCH")) == 1:
            lease[0] = 0.0
            raise Fenced
        return {}

    api = RecordingApi(answer)
    status = writer(api, lease=lease)
    status.pods({"ns/p": NO_CPU}, {})
    await settle(status)
    lease[0] = 30.0
    status.pods({"ns/p": NO_CPU}, {})
    await settle(status)
    assert len(api.sent("PATCH", "/pods/p/status")) == 2


def writes(result: str) -> float:
    labels = {"kind": "podgroup_status", "result": result}
    return REGISTRY.get_sample_value("batchsched_api_writes_total", labels) or 0.0


@pytest.mark.parametrize("exists", [True, False])
async def test_a_status_write_answered_404_is_told_apart_by_reading_the_object(
    exists: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server answers a status subresource the CRD lacks as it answers a deleted
    object: 404 NotFound naming it. The object, listed by its name (the role grants list,
    not get), tells which: a write that can never land is logged and counted, not passed
    off as gone."""
    not_found = {"reason": "NotFound", "details": {"name": "g", "kind": "podgroups"}}
    listed = (
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups?fieldSelector=metadata.name%3Dg"
    )

    def answer(method: str, path: str, body: object) -> dict[str, object]:
        if method == "PATCH":
            raise ApiError(method, path, 404, not_found)
        assert (method, path) == ("GET", listed)
        return {"items": [{"metadata": {"name": "g"}}] if exists else []}

    api = RecordingApi(answer=answer)
    status = writer(api)
    before = {result: writes(result) for result in ("gone", "unwritable")}
    status.groups({"ns/g": placed(0)}, peer_group("scheduling.x-k8s.io/v1alpha1"))
    await settle(status)
    counted = {result: writes(result) - before[result] for result in before}
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    if exists:
        assert counted == {"gone": 0, "unwritable": 1}
        assert len(errors) == 1 and "cannot land" in errors[0], errors
    else:
        assert counted == {"gone": 1, "unwritable": 0}
        assert errors == []


# Kubernetes' own PodGroup (scheduling.k8s.io/v1alpha2): kube-scheduler's conditions.
NATIVE_API = "scheduling.k8s.io/v1alpha2"
NATIVE_STATUS = f"/apis/{NATIVE_API}/namespaces/ns/podgroups/g/status"
PLACED = Condition("Scheduled", "Scheduled", "3/3 members scheduled")


def native_group(error: str | None = None) -> dict[str, PodGroup]:
    group = PodGroup(namespace="ns", name="g", min_member=3, creation=0, api_version=NATIVE_API)
    group.error = error
    return {"ns/g": group}


def conditions_sent(api: RecordingApi) -> list[dict[str, object]]:
    """Every condition patched on the native group, without its transition time."""
    return [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for patch in api.sent("PATCH", NATIVE_STATUS)
        for c in patch["status"]["conditions"]
    ]


async def test_a_native_group_gets_kube_schedulers_condition_and_nothing_else() -> None:
    api = RecordingApi()
    status = writer(api)
    status.observe(f"PodGroup {NATIVE_API}", "ns/g", None, generation=2)
    status.groups({"ns/g": group_status("Inqueue", 0, WAITING)}, native_group())
    await settle(status)
    [patch] = api.sent("PATCH", NATIVE_STATUS)
    # No phase, no counts: v1alpha2 PodGroupStatus has conditions (and claims) only.
    assert list(patch["status"]) == ["conditions"]
    assert conditions_sent(api) == [
        {
            "type": "PodGroupScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": f"pod group is unschedulable: {WAITING.message}",
            "observedGeneration": 2,
        }
    ]

    status.groups({"ns/g": group_status("Running", 3, PLACED)}, native_group())
    await settle(status)
    assert conditions_sent(api)[1] == {
        "type": "PodGroupScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "",
        "observedGeneration": 2,
    }
    # Its members' events name it as kube-scheduler's do: FailedScheduling, then Scheduled.
    reasons = [e["reason"] for e in api.sent("POST", "/events")]
    assert reasons == ["FailedScheduling", "Scheduled"]


async def test_a_native_group_once_scheduled_is_never_told_it_is_not() -> None:
    api = RecordingApi()
    status = writer(api)
    status.groups({"ns/g": group_status("Running", 3, PLACED)}, native_group())
    status.groups({"ns/g": group_status("Inqueue", 3, WAITING)}, native_group())
    await settle(status)
    assert [c["status"] for c in conditions_sent(api)] == ["True"]

    # As the watch shows it after a restart: still never back to False.
    restarted = writer(api)
    shown = {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}]}
    restarted.observe(f"PodGroup {NATIVE_API}", "ns/g", shown, generation=1)
    restarted.groups({"ns/g": group_status("Inqueue", 3, WAITING)}, native_group())
    await settle(restarted)
    assert len(api.sent("PATCH", NATIVE_STATUS)) == 1


async def test_a_native_group_that_cannot_be_read_is_a_scheduler_error() -> None:
    api = RecordingApi()
    status = writer(api)
    invalid = Condition("Unschedulable", "Invalid", "spec.disruptionMode: 'PodGroup' ...")
    status.groups({"ns/g": group_status("Pending", 0, invalid)}, native_group(error="bad"))
    await settle(status)
    [condition] = conditions_sent(api)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SchedulerError",
        invalid.message,
    )


async def test_a_native_group_waiting_for_its_claims_keeps_what_it_shows() -> None:
    """A placed gang whose claims are being bound: kube-scheduler has moved it to
    binding, so nothing short of Scheduled is written."""
    api = RecordingApi()
    status = writer(api)
    claims = Condition("Scheduled", "WaitingForVolumeBinding", "2 member(s) placed", "False")
    status.groups({"ns/g": group_status("Inqueue", 1, claims)}, native_group())
    await settle(status)
    assert api.sent("PATCH", NATIVE_STATUS) == []


async def test_a_preempted_native_group_is_a_disruption_target_beside_its_schedule() -> None:
    api = RecordingApi()
    status = writer(api)
    [group] = native_group().values()
    status.groups({"ns/g": group_status("Running", 3, PLACED)}, native_group())
    status.group_disrupted(group, "podgroup")
    status.group_disrupted(group, "podgroup")
    await settle(status)
    # Two writes, neither replacing the other in the queue; the second not repeated.
    assert conditions_sent(api) == [
        {
            "type": "PodGroupScheduled",
            "status": "True",
            "reason": "Scheduled",
            "message": "",
        },
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "batch-scheduler: preempting to accommodate a higher priority podgroup",
        },
    ]
    # Written, the group shows both: a later session's status leaves the target alone.
    status.groups({"ns/g": group_status("Inqueue", 3, WAITING)}, native_group())
    await settle(status)
    assert len(api.sent("PATCH", NATIVE_STATUS)) == 2


async def test_peer_status_skip_still_writes_native_groups() -> None:
    """No peer scheduler writes them: with --peer-status=skip they are still ours."""
    api = RecordingApi()
    idle = asyncio.Event()
    idle.set()
    status = StatusWriter(
        api, scheduler_name="batch-scheduler", instance="i", binds_idle=idle, write_peers=False
    )
    status.groups({"ns/g": group_status("Running", 3, PLACED)}, native_group())
    await settle(status)
    assert len(api.sent("PATCH", NATIVE_STATUS)) == 1


# The topology domain holding a gang that asked for one, in each project's place.
RACK = TopologyDomain("rack", "r1")


def in_rack(domain: TopologyDomain | None = RACK) -> JobStatus:
    job = placed(3)
    job.domain = domain
    return job


async def test_our_group_shows_its_topology_domain_in_status_and_drops_it_when_gone() -> None:
    api = RecordingApi()
    status = writer(api)
    status.groups({"ns/g": in_rack()}, GROUPS)
    status.groups({"ns/g": in_rack()}, GROUPS)
    await settle(status)
    path = f"/apis/{OUR_API}/namespaces/ns/podgroups/g/status"
    [patch] = api.sent("PATCH", path)
    assert patch["status"]["topologyDomain"] == {"tier": "rack", "name": "r1"}
    status.groups({"ns/g": in_rack(None)}, GROUPS)
    await settle(status)
    assert api.sent("PATCH", path)[-1]["status"]["topologyDomain"] is None


async def test_a_volcano_group_gets_volcanos_allocated_hypernode_annotation() -> None:
    api = RecordingApi()
    status = writer(api)
    volcano = peer_group("scheduling.volcano.sh/v1beta1")
    status.groups({"ns/g": in_rack()}, volcano)
    status.groups({"ns/g": in_rack()}, volcano)
    await settle(status)
    [patch] = api.sent("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g")
    assert patch["metadata"] == {"annotations": {"volcano.sh/job-allocated-hypernode": "r1"}}
    assert patch["status"]["phase"] == "Running"


async def test_the_hypernode_annotation_survives_a_newer_status_queued_over_it() -> None:
    api = RecordingApi()
    status = writer(api)
    volcano = peer_group("scheduling.volcano.sh/v1beta1")
    status.groups({"ns/g": in_rack()}, volcano)
    more = in_rack()
    more.running = 2
    # Replaces the queued write, which carried the annotation, before it is sent.
    status.groups({"ns/g": more}, volcano)
    await settle(status)
    [patch] = api.sent("PATCH", "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g")
    assert patch["metadata"] == {"annotations": {"volcano.sh/job-allocated-hypernode": "r1"}}
    assert patch["status"]["running"] == 2


@pytest.mark.parametrize("failed", [False, True])
async def test_the_hypernode_annotation_is_written_again_when_its_write_was_dropped(
    failed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's status already shows what the session says, and only its domain is
    new: the write carrying the annotation is dropped with the lease, while queued or
    (`failed`) while waiting to be sent again. Leading again, the annotation is written,
    though the status did not change."""
    monkeypatch.setattr("batchsched.k8s.status.RETRY_LATER_SECONDS", 3600.0)
    lease = [30.0]
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g"

    def answer(method: str, path: str, body: object) -> dict[str, object]:
        if failed and method == "PATCH" and len(api.sent("PATCH", path)) == 2:
            raise ApiError(method, path, 422, {"message": "refused once"})
        return {}

    api = RecordingApi(answer)
    status = writer(api, lease=lease)
    volcano = peer_group("scheduling.volcano.sh/v1beta1")
    status.groups({"ns/g": in_rack(None)}, volcano)
    await settle(status)
    [first] = api.sent("PATCH", path)
    assert "metadata" not in first
    # The watch saw that write land.
    status.observe("PodGroup scheduling.volcano.sh/v1beta1", "ns/g", first["status"])
    status.groups({"ns/g": in_rack()}, volcano)
    if failed:
        await settle(status)
    lease[0] = 0.0
    # Something else to write, which finds the lease lost.
    status.pods({"ns/p": waiting("waiting")}, {})
    await settle(status)
    assert len(api.sent("PATCH", path)) == 1 + failed
    lease[0] = 30.0
    status.groups({"ns/g": in_rack()}, volcano)
    status.groups({"ns/g": in_rack()}, volcano)
    await settle(status)
    again = api.sent("PATCH", path)[-1]
    assert again["metadata"] == {"annotations": {"volcano.sh/job-allocated-hypernode": "r1"}}
    # Written, it is not written again.
    status.groups({"ns/g": in_rack()}, volcano)
    await settle(status)
    assert len(api.sent("PATCH", path)) == 2 + failed


async def test_a_native_group_names_its_domain_in_its_scheduled_message() -> None:
    api = RecordingApi()
    status = writer(api)
    domain = TopologyDomain("topology.kubernetes.io/rack", "r1")
    status.groups({"ns/g": in_rack(domain)}, native_group())
    await settle(status)
    [condition] = conditions_sent(api)
    assert condition["status"] == "True"
    assert condition["message"] == "scheduled in the topology domain topology.kubernetes.io/rack=r1"
