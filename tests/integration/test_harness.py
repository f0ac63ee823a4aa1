"""Self-tests of the control-plane harness: the facts the scheduler's own
integration tests will lean on, checked against the real API server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from .faultproxy import FaultProxy
from .operator_support import eventually
from tests.support import ClusterObjects, ControlPlane, Kube, find_assets
from tests.support.objects import node, pod

pytestmark = pytest.mark.integration


def test_generated_client_reads_the_kubeconfig(
    api_client: Any, core_v1: Any, namespace: str
) -> None:
    version = k8s_client.VersionApi(api_client).get_code()
    assert version.major == "1"
    assert int(version.minor) >= 31
    assert core_v1.list_namespaced_pod(namespace).items == []


def _node_and_pod(
    kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> tuple[str, dict[str, Any]]:
    node_name = f"node-{namespace}"
    cluster_objects.create(node(node_name, cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "2"}))
    created = kube.create(pod("p0", {"cpu": "1", "memory": "1Gi"}), namespace)
    return node_name, created


def test_binding_sets_node_name_once(
    kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> None:
    node_name, created = _node_and_pod(kube, cluster_objects, namespace)
    uid = created["metadata"]["uid"]
    fetched = kube.get(f"/api/v1/nodes/{node_name}").expect(200)
    assert fetched["status"]["allocatable"]["nvidia.com/gpu"] == "2"

    # The uid is a precondition: a binding meant for an older pod of the same name fails.
    stale = kube.bind(namespace, "p0", "00000000-0000-0000-0000-000000000000", node_name)
    assert stale.status == 409, stale.body

    first = kube.bind(namespace, "p0", uid, node_name)
    assert first.status == 201, first.body
    assert first.body["kind"] == "Status"
    assert first.body["status"] == "Success"
    bound = kube.get(f"/api/v1/namespaces/{namespace}/pods/p0").expect(200)
    assert bound["spec"]["nodeName"] == node_name

    again = kube.bind(namespace, "p0", uid, node_name)
    assert again.status == 409, again.body


def test_audit_log_says_who_bound_what_and_when(
    control_plane: ControlPlane, kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> None:
    node_name, created = _node_and_pod(kube, cluster_objects, namespace)
    kube.bind(namespace, "p0", created["metadata"]["uid"], node_name).expect(201)

    def binding() -> list[dict[str, Any]]:
        return [
            e
            for e in control_plane.audit_events()
            if (e.get("objectRef") or {}).get("namespace") == namespace
            and e["objectRef"].get("subresource") == "binding"
        ]

    [event] = eventually(binding, what="the Binding audited")
    assert event["objectRef"]["name"] == "p0"
    assert event["user"]["username"] == "envtest-admin"
    assert event["responseStatus"]["code"] == 201
    assert event["requestReceivedTimestamp"] <= event["stageTimestamp"]


def test_fault_proxy_passes_requests_on_or_fails_or_holds_them(
    control_plane: ControlPlane, kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> None:
    node_name, created = _node_and_pod(kube, cluster_objects, namespace)
    uid = created["metadata"]["uid"]
    path = f"/api/v1/namespaces/{namespace}/pods/p0"
    bindings = "/api/v1/namespaces/*/pods/*/binding"
    cert, key = control_plane.serving_cert
    with FaultProxy(
        control_plane.server, ca_file=control_plane.ca_file, cert=cert, key=key
    ) as proxy:
        through = Kube(proxy.url, control_plane.token, control_plane.ca_file)
        assert through.get(path).expect(200)["metadata"]["uid"] == uid

        refused = proxy.fail(bindings)
        assert through.bind(namespace, "p0", uid, node_name).status == 500
        assert refused.failed == 1
        assert refused.paths == {f"{path}/binding": 1}
        refused.release()

        # A held request whose client gives up is dropped, never sent on later.
        held = proxy.hang(bindings)
        impatient = Kube(proxy.url, control_plane.token, control_plane.ca_file, timeout=1)
        with pytest.raises(TimeoutError):
            impatient.bind(namespace, "p0", uid, node_name)
        eventually(lambda: held.held == 0, what="the abandoned request dropped")
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(through.bind, namespace, "p0", uid, node_name)
            eventually(lambda: held.held == 1, what="the request held")
            assert not kube.get(path).expect(200)["spec"].get("nodeName")
            held.release()
            assert answer.result(timeout=30).status == 201
    assert kube.get(path).expect(200)["spec"]["nodeName"] == node_name


def test_bound_pod_is_only_deleted_with_grace_period_zero(
    kube: Kube, cluster_objects: ClusterObjects, namespace: str
) -> None:
    node_name, created = _node_and_pod(kube, cluster_objects, namespace)
    kube.bind(namespace, "p0", created["metadata"]["uid"], node_name).expect(201)
    path = f"/api/v1/namespaces/{namespace}/pods/p0"

    # No kubelet will ever confirm the graceful shutdown of a bound pod.
    kube.delete(path).expect(200)
    lingering = kube.get(path).expect(200)
    assert lingering["metadata"]["deletionTimestamp"]

    kube.delete(path, grace_period_seconds=0).expect(200)
    assert kube.get(path).status == 404


def _wait_gone(pids: list[int], timeout: float = 120.0) -> list[int]:
    """Pids still running (zombies count as gone) once they are all gone or `timeout`
    has passed: a bound for a failing test, far past the stop's own grace periods."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if _running(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_control_plane_restarts_cleanly(control_plane: ControlPlane) -> None:
    assets = find_assets()
    for _ in range(2):
        with ControlPlane.start(assets) as plane:
            assert plane.server != control_plane.server
            # A fresh etcd each time: the same name is free again.
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "restart"}}
            plane.kube().create(namespace)
            pids, workdir = plane.pids, plane.workdir
            print(f"warm start: {plane.startup_seconds:.1f}s")
        assert _wait_gone(pids, timeout=0) == []
        assert not workdir.exists()
    assert control_plane.kube().get("/readyz").status == 200


_RUNNER = textwrap.dedent(
    """
    import json, signal, sys, time
    from tests.support import ControlPlane, find_assets

    # A shell without job control starts background commands with SIGINT ignored, and
    # Python keeps it ignored then: Ctrl-C is what this runner stands for, so take it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    plane = ControlPlane.start(find_assets())
    print(json.dumps({"pids": plane.pids, "workdir": str(plane.workdir)}), flush=True)
    try:
        time.sleep(600)
    except KeyboardInterrupt:
        sys.exit(130)
    """
)


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_interrupted_runner_leaves_no_processes(control_plane: ControlPlane, signum: int) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert runner.stdout is not None
        started = json.loads(runner.stdout.readline())
        runner.send_signal(signum)
        # The runner stops the control plane first, each process given its grace period
        # (which a busy machine may use up): bounded only as a failing test must be.
        runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert _wait_gone(started["pids"]) == []
    workdir = Path(started["workdir"])
    if signum != signal.SIGINT:
        # No Python code ran as the runner died; the next start sweeps its files away.
        ControlPlane.start(find_assets()).stop()
    assert not workdir.exists()
