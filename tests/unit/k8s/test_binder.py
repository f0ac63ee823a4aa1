"""How the binder settles each decided bind, and what a failure does to the rest of a gang."""

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from batchsched.api.placement import PLACEMENT_ANNOTATION, parse_placement
from batchsched.api.volumes import (
    BIND_COMPLETED_ANNOTATION,
    BINDING_SINCE_ANNOTATION,
    BOUND_BY_CONTROLLER_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
)
from batchsched.k8s.binder import Binder, VolumeWait
from batchsched.k8s.client import JSON, ApiError
from batchsched.k8s.events import rfc3339
from batchsched.k8s.watch import CLAIMS, PODS, VOLUMES, WATCHED
from batchsched.model.decisions import Binding, ClaimBinding, JobStatus

from .recording_api import RecordingApi, created, watch_over
from .recording_api import settle as settle_status
from tests.support.objects import node, pod


def setup(
    answer: Callable[[str, str, Any], JSON] = created,
    *,
    members: int = 3,
    leading: bool = True,
    concurrency: int = 1,
) -> tuple[Binder, RecordingApi, list[Binding]]:
    api = RecordingApi(answer)
    watch = watch_over(api, scheduler_name="s")
    bindings = []
    for i in range(members):
        manifest = pod(f"p{i}", requests={"cpu": "1"}, namespace="default")
        manifest["metadata"]["uid"] = f"uid-{i}"
        watch.apply(PODS, manifest)
        binding = Binding(namespace="default", name=f"p{i}", uid=f"uid-{i}", node="n1", job="g")
        watch.cache.assume(binding.key, binding.node)
        bindings.append(binding)
    idle = watch.status.binds_idle
    binder = Binder(
        api,
        watch,
        valid_for=lambda: 30.0 if leading else 0.0,
        idle=idle,
        concurrency=concurrency,
    )
    return binder, api, bindings


async def settle(binder: Binder, bindings: list[Binding]) -> None:
    """Submit and wait until every bind has settled. A failed bind asks for a session,
    which holds status writes back until it has run; the loop would run one, so an
    empty one is run here."""
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    async with asyncio.timeout(30):
        while not binder.idle.is_set():
            if binder.watch.changes.take():
                with binder.deciding():
                    pass
            await asyncio.sleep(0.001)
    task.cancel()


def refuse(
    status: int, *, times: int = 1_000, read_back: JSON | None = None
) -> Callable[[str, str, Any], JSON]:
    """Answer the first `times` Binding POSTs with `status`, later ones with success;
    reading the pod back finds `read_back`, or nothing."""
    failures = [0]

    def answer(method: str, path: str, body: Any) -> JSON:
        if method == "POST" and path.endswith("/binding") and failures[0] < times:
            failures[0] += 1
            raise ApiError(method, path, status, {"message": f"refused with {status}"})
        if method == "GET":
            if read_back is None:
                raise ApiError(method, path, 404, {"message": "gone"})
            return read_back
        return {}

    return answer


async def test_each_bind_posts_a_binding_with_the_pods_uid() -> None:
    binder, api, bindings = setup(members=1)
    await settle(binder, bindings)
    [post] = api.sent("POST", "/binding")
    assert post["metadata"]["uid"] == "uid-0"
    assert post["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    assert "annotations" not in post["metadata"]
    assert binder.cache.tasks["default/p0"].node_name == "n1"


async def test_a_gangs_first_binding_records_the_whole_placement_before_the_rest() -> None:
    """The record is written by the first member's Binding; no member goes before it is
    bound, however many requests may be in flight."""
    binder, api, bindings = setup(members=3, concurrency=8)
    bindings[2].node = "n2"
    await settle(binder, bindings)
    posts = api.sent("POST", "/binding")
    assert [p["metadata"]["name"] for p in posts] == ["p0", "p1", "p2"]
    [record] = [p["metadata"]["annotations"][PLACEMENT_ANNOTATION] for p in posts[:1]]
    placement = parse_placement(record)
    assert placement is not None
    assert {name: placement.node_for(name, f"uid-{name[1]}") for name in ("p0", "p1", "p2")} == {
        "p0": "n1",
        "p1": "n1",
        "p2": "n2",
    }
    assert all("annotations" not in p["metadata"] for p in posts[1:])


async def test_chosen_gpu_cards_travel_in_the_binding() -> None:
    binder, api, bindings = setup(members=1)
    bindings[0].gpu_index = (0, 3)
    await settle(binder, bindings)
    [post] = api.sent("POST", "/binding")
    assert post["metadata"]["annotations"] == {"scheduling.batchsched.io/gpu-index": "0,3"}


async def test_a_failed_member_stops_the_rest_of_its_gang() -> None:
    binder, api, bindings = setup(refuse(404))
    await settle(binder, bindings)
    assert len(api.sent("POST", "/binding")) == 1
    assert binder.cache.assumed == {}
    # The pod that is gone is gone from the cache; its gang mates are pending again.
    assert "default/p0" not in binder.cache.tasks
    assert [binder.cache.tasks[f"default/p{i}"].node_name for i in (1, 2)] == [None, None]


async def test_throttling_and_server_errors_are_retried() -> None:
    binder, api, bindings = setup(refuse(429, times=2), members=1)
    await settle(binder, bindings)
    assert len(api.sent("POST", "/binding")) == 3
    assert binder.cache.tasks["default/p0"].node_name == "n1"


async def test_a_conflict_from_our_own_earlier_attempt_counts_as_bound() -> None:
    def answer(method: str, path: str, body: Any) -> JSON:
        if method == "POST":
            raise ApiError(method, path, 409, {"message": "already assigned"})
        return {"metadata": {"uid": "uid-0"}, "spec": {"nodeName": "n1"}}

    binder, api, bindings = setup(answer, members=1)
    await settle(binder, bindings)
    assert binder.cache.assumed == {"default/p0": ("n1", ())}
    assert [e["reason"] for e in api.sent("POST", "/events")] == []


async def test_a_replica_that_lost_the_lease_binds_nothing() -> None:
    binder, api, bindings = setup(leading=False)
    await settle(binder, bindings)
    assert api.sent("POST", "/binding") == []
    assert binder.cache.assumed == {}


async def test_a_bind_being_retried_is_not_sent_again_once_the_lease_is_lost() -> None:
    """Server errors keep the bind in its retry loop; the lease's renew deadline passes
    meanwhile, and no retry may go out after it."""
    lease = [30.0]

    def answer(method: str, path: str, body: Any) -> JSON:
        if method == "POST" and path.endswith("/binding"):
            lease[0] = 0.0  # the deadline passes while this attempt fails
            raise ApiError(method, path, 500, {"message": "internal error"})
        return {}

    binder, api, bindings = setup(answer, members=2)
    binder.valid_for = lambda: lease[0]
    await settle(binder, bindings)
    assert len(api.sent("POST", "/binding")) == 1
    assert binder.cache.assumed == {}


def terminating(method: str, path: str, body: Any) -> JSON:
    """The API server's answer to any create in a namespace being deleted."""
    if method == "POST":
        raise ApiError(
            method,
            path,
            403,
            {
                "reason": "Forbidden",
                "message": "unable to create new content in namespace default because it "
                "is being terminated",
                "details": {"causes": [{"reason": "NamespaceTerminating"}]},
            },
        )
    return {}


async def test_a_forbidden_bind_waits_with_its_reason_and_backs_off() -> None:
    binder, _, bindings = setup(terminating, members=1)
    await settle(binder, bindings)
    refusal = binder.cache.refusals["default/p0"]
    assert refusal.message == (
        "the API server refused to bind it: unable to create new content in namespace "
        "default because it is being terminated"
    )
    assert refusal.count == 1
    assert binder.cache.tasks["default/p0"].node_name is None
    binder.cache.assume(bindings[0].key, "n1")
    await settle(binder, bindings)
    assert binder.cache.refusals["default/p0"].count == 2
    # Every later refusal waits twice as long as the one before.
    first_wait = refusal.until
    assert binder.cache.refusals["default/p0"].until - first_wait > 0.9


async def test_no_event_is_sent_to_a_namespace_being_deleted() -> None:
    binder, api, bindings = setup(terminating, members=1)
    await settle(binder, bindings)
    await settle_status(binder.status)
    assert api.sent("POST", "/events") == []
    assert len(api.sent("POST", "/binding")) == 1


async def test_status_waits_after_a_failed_bind_until_a_session_decided_again() -> None:
    """The session that decided the bind counted the pod as scheduled in its group's
    status; that write must not go out before the next session has corrected it."""
    binder, _, bindings = setup(refuse(404), members=1)
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    async with asyncio.timeout(30):
        while not binder.watch.changes.take():
            await asyncio.sleep(0.001)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not binder.idle.is_set()
    with binder.deciding():
        pass
    assert binder.idle.is_set()
    task.cancel()


@pytest.mark.parametrize("status", [400, 422])
async def test_other_refusals_forget_the_bind(status: int) -> None:
    unbound = pod("p0", requests={"cpu": "1"}, namespace="default")
    unbound["metadata"]["uid"] = "uid-0"
    binder, api, bindings = setup(refuse(status, read_back=unbound), members=1)
    await settle(binder, bindings)
    assert len(api.sent("POST", "/binding")) == 1
    assert binder.cache.tasks["default/p0"].node_name is None


async def test_binds_are_not_idle_while_a_session_may_send_more() -> None:
    binder, api, bindings = setup(members=2)
    task = asyncio.create_task(binder.run())
    with binder.deciding():
        binder.submit(bindings[:1])
        for _ in range(50):  # every bind sent so far settles
            await asyncio.sleep(0)
        assert len(api.sent("POST", "/binding")) == 1
        assert not binder.idle.is_set(), "status writes would slip in before the next job"
        binder.submit(bindings[1:])
    await asyncio.wait_for(binder.idle.wait(), 30)
    task.cancel()
    assert len(api.sent("POST", "/binding")) == 2


async def test_a_session_that_sends_nothing_leaves_binds_idle() -> None:
    binder, _, _ = setup(members=1)
    with binder.deciding():
        assert not binder.idle.is_set()
    assert binder.idle.is_set()


# Claims: a job's pods are bound only once each of their claims is.

PATCHED = {"metadata": {"resourceVersion": "5"}}
NODES = next(w for w in WATCHED if w.kind == "Node")


def patched(method: str, path: str, body: Any) -> JSON:
    """The API server's reply to a write: the object at a newer resourceVersion."""
    return PATCHED if method == "PATCH" else {}


def claim(
    name: str,
    *,
    version: int = 1,
    node: str | None = None,
    volume: str = "",
    bound: bool = False,
    since: float | None = None,
) -> JSON:
    notes = {SELECTED_NODE_ANNOTATION: node} if node else {}
    if since is not None:
        notes[BINDING_SINCE_ANNOTATION] = rfc3339(since, micro=True)
    if bound:
        notes[BIND_COMPLETED_ANNOTATION] = "yes"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            "annotations": notes,
        },
        "spec": {
            "storageClassName": "wait",
            "volumeName": volume,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def volume(name: str, *, version: int = 1, claimed_by: str | None = None, node: str = "n1") -> JSON:
    """A volume reachable from `node` only."""
    term = {"matchExpressions": [{"key": "host", "operator": "In", "values": [node]}]}
    spec: JSON = {
        "storageClassName": "wait",
        "capacity": {"storage": "1Gi"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
    }
    if claimed_by is not None:
        spec["claimRef"] = {"namespace": "default", "name": claimed_by, "uid": f"uid-{claimed_by}"}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": str(version)},
        "spec": spec,
    }


def with_claims(
    answer: Callable[[str, str, Any], JSON] = patched, *, members: int = 2, static: bool = False
) -> tuple[Binder, RecordingApi, list[Binding]]:
    """A job whose member i mounts claim c<i>, to be provisioned on its node, or, when
    `static`, to be given the free volume v<i>."""
    binder, api, bindings = setup(answer, members=members)
    # Far longer than any test here waits: only the tests of the timeout shorten it.
    binder.bind_timeout = 3600.0
    binder.watch.apply(NODES, node("n1", labels={"host": "n1"}))
    for i, binding in enumerate(bindings):
        binder.watch.apply(CLAIMS, claim(f"c{i}"))
        if static:
            binder.watch.apply(VOLUMES, volume(f"v{i}"))
        chosen = f"v{i}" if static else ""
        binding.claims = (ClaimBinding("default", f"c{i}", f"uid-c{i}", "n1", chosen),)
    return binder, api, bindings


async def until(check: Callable[[], object]) -> None:
    async with asyncio.timeout(30):
        while not check():
            await asyncio.sleep(0.01)


async def polls(binder: Binder, count: int = 3) -> None:
    """Wait until the binder has looked at the cache for unbound claims `count` more
    times: what it would do on seeing the cache as it is now, it has done."""
    looked = 0
    unbound = binder._unbound

    def counted(
        members: list[Binding], claims: list[ClaimBinding], written: dict[str, int]
    ) -> list[str]:
        nonlocal looked
        looked += 1
        return unbound(members, claims, written)

    binder._unbound = counted  # type: ignore[method-assign]
    try:
        await until(lambda: looked >= count)
    finally:
        del binder._unbound


async def failed(binder: Binder, api: RecordingApi, fragment: str) -> None:
    """The whole job is dropped, with a FailedScheduling event on each pod naming why."""
    await until(lambda: not binder.cache.assumed)
    with binder.deciding():  # the session a failure asks for, which lets events out
        pass
    await settle_status(binder.status)
    notes = [e["note"] for e in api.sent("POST", "/events") if e["reason"] == "FailedScheduling"]
    assert len(notes) == 2 and all(fragment in note for note in notes), notes
    # As kube-scheduler says of a pod whose binding failed once it was placed.
    for i in (0, 1):
        [condition] = api.sent("PATCH", f"/pods/p{i}/status")[-1]["status"]["conditions"]
        assert (condition["reason"], condition["status"]) == ("SchedulerError", "False")
        assert fragment in condition["message"]
    assert api.sent("POST", "/binding") == []
    assert [binder.cache.tasks[f"default/p{i}"].node_name for i in (0, 1)] == [None, None]


async def test_a_job_binds_no_pod_before_the_provisioner_bound_its_claims() -> None:
    binder, api, bindings = with_claims()
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    patches = {p: body for m, p, body in api.requests if "/persistentvolumeclaims/" in p}
    for i in (0, 1):
        notes = patches[f"/api/v1/namespaces/default/persistentvolumeclaims/c{i}"]["metadata"]
        assert notes["uid"] == f"uid-c{i}"
        assert notes["annotations"][SELECTED_NODE_ANNOTATION] == "n1"
        # When it was asked, so that the bind timeout survives a change of leader.
        assert BINDING_SINCE_ANNOTATION in notes["annotations"]
    # Each pod says what it waits for, before any is bound.
    await until(lambda: len(api.sent("PATCH", "/status")) == 2)
    for i in (0, 1):
        [said] = api.sent("PATCH", f"/pods/p{i}/status")[0]["status"]["conditions"]
        assert (said["type"], said["status"]) == ("PodScheduled", "False")
        assert said["reason"] == "WaitingForVolumeBinding"
        assert f"claim default/c{i} waits for" in said["message"]
        assert "node n1" in said["message"]
    # The cache does not show the annotation yet (version 1 < 5): that is not a
    # provisioner giving up.
    await polls(binder)
    for i in (0, 1):
        binder.watch.apply(VOLUMES, volume(f"pv{i}", claimed_by=f"c{i}"))
    binder.watch.apply(CLAIMS, claim("c0", version=6, node="n1", volume="pv0", bound=True))
    await polls(binder)
    assert api.sent("POST", "/binding") == []
    assert binder.idle.is_set(), "a job waiting on its claims holds no status write back"
    binder.watch.apply(CLAIMS, claim("c1", version=7, node="n1", volume="pv1", bound=True))
    await until(lambda: len(api.sent("POST", "/binding")) == 2)
    first, second = api.sent("POST", "/binding")
    assert PLACEMENT_ANNOTATION in first["metadata"]["annotations"]
    assert "annotations" not in second["metadata"]
    task.cancel()


async def test_a_provisioner_that_gives_up_fails_the_whole_job() -> None:
    binder, api, bindings = with_claims()
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    binder.watch.apply(CLAIMS, claim("c0", version=6, node="n1"))
    binder.watch.apply(CLAIMS, claim("c1", version=7))  # the annotation taken away
    await failed(binder, api, "provisioning failed for claim default/c1")
    task.cancel()


async def test_a_volume_provisioned_for_another_node_fails_the_job() -> None:
    binder, api, bindings = with_claims()
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    binder.watch.apply(VOLUMES, volume("pv0", claimed_by="c0", node="n2"))
    binder.watch.apply(CLAIMS, claim("c0", version=6, node="n1", volume="pv0", bound=True))
    await failed(binder, api, "volume pv0 of claim default/c0 does not fit node n1")
    task.cancel()


async def test_a_chosen_volume_gets_the_claim_then_the_pods_are_bound() -> None:
    binder, api, bindings = with_claims(static=True)
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    [(_, path, body), _] = [r for r in api.requests if "/persistentvolumes/" in r[1]]
    assert path == "/api/v1/persistentvolumes/v0"
    assert BINDING_SINCE_ANNOTATION in body["metadata"]["annotations"]
    del body["metadata"]["annotations"][BINDING_SINCE_ANNOTATION]
    assert body == {
        "metadata": {
            "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"},
            "resourceVersion": "1",
        },
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "uid": "uid-c0",
                "namespace": "default",
                "name": "c0",
            }
        },
    }
    for i in (0, 1):
        binder.watch.apply(VOLUMES, volume(f"v{i}", version=6, claimed_by=f"c{i}"))
        binder.watch.apply(CLAIMS, claim(f"c{i}", version=6, volume=f"v{i}", bound=True))
    await until(lambda: len(api.sent("POST", "/binding")) == 2)
    task.cancel()


async def test_a_volume_that_lets_go_of_the_claim_fails_the_job() -> None:
    binder, api, bindings = with_claims(static=True)
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    binder.watch.apply(VOLUMES, volume("v0", version=6))
    await failed(binder, api, "volume v0 let go of claim default/c0")
    task.cancel()


async def test_a_volume_another_claim_took_is_not_written() -> None:
    binder, api, bindings = with_claims(static=True)
    binder.watch.apply(VOLUMES, volume("v1", claimed_by="other"))
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await failed(binder, api, "volume v1 was bound to claim default/other instead")
    claimed = [path for m, path, _ in api.requests if "/persistentvolume" in path]
    assert claimed == ["/api/v1/persistentvolumes/v0"]
    task.cancel()


async def test_claims_already_done_are_not_written_again() -> None:
    binder, api, bindings = with_claims(static=True)
    binder.watch.apply(VOLUMES, volume("v0", claimed_by="c0"))
    binder.watch.apply(CLAIMS, claim("c0", volume="v0", bound=True))
    bindings[1].claims = (ClaimBinding("default", "c1", "uid-c1", "n1"),)
    binder.watch.apply(CLAIMS, claim("c1", node="n1", volume="pv1", bound=True))
    binder.watch.apply(VOLUMES, volume("pv1", claimed_by="c1"))
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("POST", "/binding")) == 2)
    assert api.sent("PATCH") == []
    task.cancel()


@pytest.mark.parametrize("status", [404, 409, 422])
async def test_a_refused_claim_write_fails_the_job(status: int) -> None:
    def answer(method: str, path: str, body: Any) -> JSON:
        if method == "PATCH":
            raise ApiError(method, path, status, {"message": f"refused with {status}"})
        return {}

    binder, api, bindings = with_claims(answer)
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await failed(binder, api, f"claim default/c0: refused with {status}")
    assert len(api.sent("PATCH", "/persistentvolume")) == 1
    task.cancel()


async def test_claims_not_bound_in_time_fail_the_job() -> None:
    binder, api, bindings = with_claims()
    binder.bind_timeout = 0.3
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await failed(binder, api, "default/c0, default/c1 not bound within 0.3s")
    task.cancel()


async def test_a_deleted_claim_or_pod_ends_the_wait() -> None:
    for deleted in ("c0", "p1"):
        binder, api, bindings = with_claims()
        task = asyncio.create_task(binder.run())
        binder.submit(bindings)
        await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)  # noqa: B023 (awaited here)
        binder.watch.delete(CLAIMS if deleted == "c0" else PODS, f"default/{deleted}")
        await until(lambda: not binder.cache.assumed)  # noqa: B023
        assert api.sent("POST", "/binding") == []
        task.cancel()


async def test_a_job_waiting_on_claims_is_dropped_once_the_lease_is_lost() -> None:
    lease = [30.0]
    binder, api, bindings = with_claims()
    binder.valid_for = lambda: lease[0]
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/persistentvolume")) == 2)
    lease[0] = 0.0
    await until(lambda: not binder.cache.assumed)
    assert api.sent("POST", "/binding") == []
    task.cancel()


async def test_a_job_waiting_on_claims_does_not_hold_up_other_jobs() -> None:
    binder, api, bindings = with_claims(members=3)
    bindings[2].job, bindings[2].claims = "other", ()
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: api.sent("POST", "/binding"))
    [post] = api.sent("POST", "/binding")
    assert post["metadata"]["name"] == "p2"
    assert "default/p0" in binder.cache.assumed
    task.cancel()


async def test_a_wait_taken_over_from_another_leader_keeps_its_clock() -> None:
    """The claims were asked for by a leader since gone: recently, so the wait goes on
    without asking again; or longer ago than the bind timeout, so it has timed out, is
    said to have, and the next attempt is timed afresh."""
    binder, api, bindings = with_claims()
    for i in (0, 1):
        binder.watch.apply(CLAIMS, claim(f"c{i}", node="n1", since=time.time() - 1))
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await until(lambda: len(api.sent("PATCH", "/status")) == 2)
    assert api.sent("PATCH", "/persistentvolume") == []
    task.cancel()

    binder, api, bindings = with_claims()
    for i in (0, 1):
        stale = time.time() - binder.bind_timeout - 1
        binder.watch.apply(CLAIMS, claim(f"c{i}", node="n1", since=stale))
    task = asyncio.create_task(binder.run())
    binder.submit(bindings)
    await failed(binder, api, "binding volumes: context deadline exceeded")
    cleared = api.sent("PATCH", "/persistentvolumeclaims/")
    assert cleared == [{"metadata": {"annotations": {BINDING_SINCE_ANNOTATION: None}}}] * 2
    task.cancel()


def test_a_gang_whose_claims_are_being_bound_is_inqueue_and_says_why() -> None:
    running = JobStatus(
        key="ns/g",
        namespace="ns",
        name="g",
        phase="Running",
        min_member=2,
        scheduled=2,
        running=0,
        succeeded=0,
        failed=0,
    )
    wait = VolumeWait({"ns/p0": "claim ns/c0 waits for X", "ns/p1": "claim ns/c1 waits for X"})
    status = wait.status(running)
    assert (status.phase, status.scheduled) == ("Inqueue", 0)
    assert status.condition is not None
    assert (status.condition.type, status.condition.status) == ("Scheduled", "False")
    assert status.condition.reason == "WaitingForVolumeBinding"
    assert "claim ns/c0 waits for X; claim ns/c1 waits for X" in status.condition.message
    # A member beyond minMember waiting does not stop the gang running.
    beyond = VolumeWait({"ns/p2": "claim ns/c2 waits for X"}).status(replace(running, scheduled=3))
    assert (beyond.phase, beyond.scheduled, beyond.condition) == ("Running", 2, None)
