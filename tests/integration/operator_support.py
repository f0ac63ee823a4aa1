"""Running `batchsched run` against the test control plane the way a user does, with
the least-privilege identity of manifests/rbac.yaml, and reading what it did.

The operator tests import the fixtures here (`*_fixture`, used by their names without
the suffix); `scheduler_accounts`, which they all share, is in conftest.py.

BATCHSCHED_TEST_SCHEDULER_PATH runs the schedulers from another checkout (put first on
their PYTHONPATH) while the tests stay these: to see a test fail on the code before a
change, e.g. from `git worktree add /tmp/before HEAD~1`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from batchsched.api.quantity import parse_quantity
from batchsched.k8s.volcano_queues import QUEUES_PATH, STARTING_QUEUES

from .faultproxy import FaultProxy
from tests.support import JSON, ClusterObjects, ControlPlane, Kube
from tests.support.objects import load_manifests, node, pod

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "manifests" / "rbac.yaml"
SCHEDULER_PATH_ENV = "BATCHSCHED_TEST_SCHEDULER_PATH"
# For FaultProxy: every pod's Binding, and every Lease by name.
BINDING_PATHS = "/api/v1/namespaces/*/pods/*/binding"
LEASE_PATHS = "/apis/coordination.k8s.io/v1/namespaces/*/leases/*"
# Leader election in seconds rather than client-go's 15 s lease, so a takeover takes a
# few seconds of a test; the renew deadline (3 s) is what fencing keys on.
FAST_LEADER_ELECTION = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=0.5s",
)
T = TypeVar("T")


def eventually(check: Callable[[], T | None], *, timeout: float = 60.0, what: str = "") -> T:
    """Poll `check` until it returns something truthy, and return that. The timeout only
    bounds a failing test: a busy machine may take many times longer than a quiet one."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what or check}")
        time.sleep(0.1)


def ticks_pass(
    scheduler: Scheduler,
    count: int = 3,
    *,
    meanwhile: Callable[[], object] = lambda: None,
    timeout: float = 60.0,
) -> None:
    """Wait until the scheduler's session loop has ticked `count` more times (sessions
    run and idle ticks alike), calling `meanwhile` at each poll: what a tick would have
    done by then it has done, so a check that nothing happened is made after the point
    where it would have happened, however busy the machine."""

    def ticked() -> float:
        metrics = scheduler.metrics()
        return sum(v for k, v in metrics.items() if k.startswith("batchsched_sessions_total{"))

    goal = ticked() + count
    deadline = time.monotonic() + timeout
    while ticked() < goal:
        meanwhile()
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {count} session-loop ticks")
        time.sleep(0.1)
    meanwhile()


def account_token(kube: Kube, namespace: str, name: str) -> str:
    """A token of ServiceAccount `name`, created in `namespace` first."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    kube.create(account, namespace)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    return str(kube.post(path, request).expect(201)["status"]["token"])


def cluster_role_binding(name: str, role: str, subject: JSON) -> JSON:
    """A ClusterRoleBinding `name` granting ClusterRole `role` to `subject`."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


def token_kubeconfig(path: Path, client: Kube) -> Path:
    """A kubeconfig at `path` for `client`'s server, CA and token."""
    cluster = {
        "server": client.server,
        "certificate-authority-data": base64.b64encode(client.ca_file.read_bytes()).decode(),
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": client.token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class SchedulerAccounts:
    """ServiceAccounts with the scheduler's ClusterRole and lease Role from
    manifests/rbac.yaml, under names of their own so that the RBAC tests can create the
    manifest's objects undisturbed.

    The roles are granted to every ServiceAccount of one namespace (its group), so each
    replica of a test can run as an account of its own: the API server's audit log then
    tells their requests apart. The leader-election tests keep their Lease in each
    test's own namespace, which a module-wide grant cannot know: the lease Role's rules
    (its own lease by name, and create) are granted as a ClusterRole, in every namespace.
    """

    def __init__(self, control_plane: ControlPlane, kube: Kube, directory: Path) -> None:
        self.control_plane = control_plane
        self.kube = kube
        self.directory = directory
        suffix = secrets.token_hex(3)
        self.namespace = f"batchsched-test-{suffix}"
        manifests = load_manifests(RBAC)
        roles = [d for d in manifests if d["kind"] == "ClusterRole"]
        roles += [{**d, "kind": "ClusterRole"} for d in manifests if d["kind"] == "Role"]
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        self._cluster_scoped: list[JSON] = []
        for index, role in enumerate(roles):
            name = f"batchsched-test-{suffix}-{index}"
            role["metadata"] = {"name": name}
            group = {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": f"system:serviceaccounts:{self.namespace}",
            }
            binding = cluster_role_binding(name, name, group)
            self._cluster_scoped += [kube.create(role), kube.create(binding)]

    def username(self, account: str) -> str:
        """Who the API server (and its audit log) says `account` is."""
        return f"system:serviceaccount:{self.namespace}:{account}"

    def kubeconfig(self, account: str, *, server: str | None = None) -> Path:
        """A kubeconfig holding a token of `account` (created unless it exists), for the
        control plane or for `server` (a proxy in front of it that presents its certificate)."""
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
        self.kube.post(f"/api/v1/namespaces/{self.namespace}/serviceaccounts", sa).expect(201, 409)
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        token = self.kube.post(
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token", request
        ).expect(201)["status"]["token"]
        ca = base64.b64encode(self.control_plane.ca_file.read_bytes()).decode()
        cluster = {"server": server or self.control_plane.server, "certificate-authority-data": ca}
        path = self.directory / f"{account}-{secrets.token_hex(3)}.kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "test", "cluster": cluster}],
                    "users": [{"name": account, "user": {"token": token}}],
                    "contexts": [{"name": "test", "context": {"cluster": "test", "user": account}}],
                    "current-context": "test",
                }
            )
        )
        return path

    def delete(self) -> None:
        for obj in reversed(self._cluster_scoped):
            self.kube.delete_object(obj)
        self.kube.wipe_namespace(self.namespace)


@pytest.fixture(scope="module", name="scheduler_kubeconfig")
def scheduler_kubeconfig_fixture(scheduler_accounts: SchedulerAccounts) -> Path:
    """The kubeconfig of the `scheduler` account, for tests that run one identity."""
    return scheduler_accounts.kubeconfig("scheduler")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scheduler:
    """One `batchsched run` process. Its output goes to a file, shown when a test fails."""

    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        *,
        leader_elect: bool = False,
        lease_namespace: str | None = None,
        config: Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log = log
        self.port = _free_port()
        self.argv = [
            str(Path(sys.executable).parent / "batchsched"),
            "run",
            f"--kubeconfig={kubeconfig}",
            f"--metrics-port={self.port}",
            *(["--leader-elect"] if leader_elect else []),
            *([f"--config={config}"] if config else []),
            *extra_args,
        ]
        self.env = {**os.environ, **({"POD_NAMESPACE": lease_namespace} if lease_namespace else {})}
        other_tree = os.environ.get(SCHEDULER_PATH_ENV)
        if other_tree:
            self.env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [other_tree, os.environ.get("PYTHONPATH")])
            )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Scheduler:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        eventually(self._ready, what=f"{self.log.name} ready")
        return self

    def _ready(self) -> bool:
        self._check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"the scheduler exited ({self.process.returncode}):\n{self.output()}"
            )

    def metrics(self) -> dict[str, float]:
        """Samples by `name{labels}`, as /metrics shows them."""
        self._check_alive()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def metric(self, name: str) -> float:
        return self.metrics().get(name, 0.0)

    def stop(self) -> int:
        """SIGTERM, as Kubernetes stops a pod; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as on a node failure."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


# What the start_scheduler fixture hands a test: Scheduler's keyword options in.
StartScheduler = Callable[..., Scheduler]


def volcano_starting_queues(kube: Kube) -> set[str]:
    """Which of the Queues a scheduler serving Volcano's name creates exist now."""
    reply = kube.get(QUEUES_PATH)
    if reply.status == 404:  # Volcano's Queue kind is not served here
        return set()
    names = {q["metadata"]["name"] for q in reply.expect(200)["items"]}
    return names & {name for name, _ in STARTING_QUEUES}


@pytest.fixture(name="start_scheduler")
def start_scheduler_fixture(
    scheduler_kubeconfig: Path, tmp_path: Path, kube: Kube
) -> Iterator[StartScheduler]:
    """Starts schedulers for one test; stops them after it and shows their logs on failure.
    Volcano's root and default Queues they created go too: a root Queue makes every
    Volcano Queue its child, which later tests on this control plane do not expect."""
    started: list[Scheduler] = []
    there = volcano_starting_queues(kube)

    def start(*, kubeconfig: Path | None = None, **options: Any) -> Scheduler:
        log = tmp_path / f"scheduler-{len(started)}.log"
        scheduler = Scheduler(kubeconfig or scheduler_kubeconfig, log, **options)
        started.append(scheduler)
        return scheduler.start()

    yield start
    for scheduler in started:
        if scheduler.process is not None and scheduler.process.poll() is None:
            scheduler.stop()
        # pytest shows what teardown writes only for a test that failed.
        sys.stderr.write(f"--- {scheduler.log.name}\n{scheduler.output()}\n")
    for name in volcano_starting_queues(kube) - there:
        kube.delete(f"{QUEUES_PATH}/{name}").expect(200, 404)


# What the start_proxy fixture hands a test: a new fault proxy in front of the API server.
StartProxy = Callable[[], FaultProxy]


@pytest.fixture(name="start_proxy")
def start_proxy_fixture(control_plane: ControlPlane) -> Iterator[StartProxy]:
    """Starts fault proxies (faultproxy.py) in front of the API server for one test, and
    closes them after it, dropping whatever they still hold."""
    with contextlib.ExitStack() as proxies:

        def start() -> FaultProxy:
            cert, key = control_plane.serving_cert
            proxy = FaultProxy(
                control_plane.server, ca_file=control_plane.ca_file, cert=cert, key=key
            )
            return proxies.enter_context(proxy)

        yield start


def ready_node(cluster_objects: ClusterObjects, kube: Kube, manifest: JSON) -> JSON:
    """Create a Node and lift the not-ready taint the API server puts on new nodes, as
    the node lifecycle controller (not running here) would once the node reports Ready."""
    created = cluster_objects.create(manifest)
    name = created["metadata"]["name"]
    taints = (manifest.get("spec") or {}).get("taints")
    kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}).expect(200)
    return created


def priority_class(cluster_objects: ClusterObjects, kube: Kube, name: str, value: int) -> str:
    """Create a PriorityClass (the API server sets its value on the pods naming it), and
    wait until the API server admits pods naming it.

    Its Priority admission plugin looks classes up in an informer's cache, with no read
    through on a miss: a pod created just after its class is refused ("no PriorityClass
    with name ... was found") until that cache has caught up, which on a busy machine
    takes a while. A pod created in dry run goes through admission, and stores nothing.
    """
    manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    created = str(cluster_objects.create(manifest)["metadata"]["name"])
    probe = pod(f"priority-probe-{secrets.token_hex(3)}", spec={"priorityClassName": created})

    def admitted() -> bool:
        reply = kube.post("/api/v1/namespaces/default/pods?dryRun=All", probe)
        if reply.status == 403 and "no PriorityClass with name" in str(reply.body):
            return False
        reply.expect(201)
        return True

    eventually(admitted, what=f"pods naming PriorityClass {created} admitted")
    return created


def add_nodes(
    cluster_objects: ClusterObjects, kube: Kube, names: Iterable[str], allocatable: dict[str, str]
) -> None:
    for name in names:
        ready_node(cluster_objects, kube, node(name, extra=allocatable))


def create(kube: Kube, namespace: str, obj: JSON) -> JSON:
    """Create a namespaced object without a discovery round trip per call."""
    api_version = obj["apiVersion"]
    root = "/api" if "/" not in api_version else "/apis"
    plural = {"Pod": "pods", "PodGroup": "podgroups"}[obj["kind"]]
    path = f"{root}/{api_version}/namespaces/{namespace}/{plural}"
    return kube.post(path, obj).expect(201)


def pods(kube: Kube, namespace: str) -> dict[str, JSON]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/pods").expect(200)["items"]
    return {p["metadata"]["name"]: p for p in items}


def placements(kube: Kube, namespace: str) -> dict[str, str | None]:
    """Pod name -> its node, None while unbound."""
    return {name: p["spec"].get("nodeName") for name, p in pods(kube, namespace).items()}


def overcommitted(kube: Kube, namespace: str) -> dict[str, str]:
    """Nodes whose CPU, as the API server shows them, is less than the requests of the
    pods of `namespace` bound to them: "requested of allocatable", by node name."""
    requested: dict[str, Decimal] = {}
    for bound in pods(kube, namespace).values():
        node_name = bound["spec"].get("nodeName")
        for container in bound["spec"]["containers"] if node_name else ():
            cpu = container.get("resources", {}).get("requests", {}).get("cpu", 0)
            asked = parse_quantity(cpu, where=bound["metadata"]["name"])
            requested[node_name] = requested.get(node_name, Decimal(0)) + asked
    crowded = {}
    for node_name, asked in requested.items():
        shown = kube.get(f"/api/v1/nodes/{node_name}").expect(200)["status"]["allocatable"]
        allocatable = parse_quantity(shown["cpu"], where=node_name)
        if asked > allocatable:
            crowded[node_name] = f"{asked} of {allocatable}"
    return crowded


def set_running(kube: Kube, namespace: str, names: Iterable[str]) -> None:
    """What the kubelet (not running here) reports once a bound pod's containers run."""
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    for name in names:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        kube.patch(path, {"status": status}, merge=False).expect(200)


def unschedulable_message(pod: JSON) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message"))
    return None


def waiting_saying(kube: Kube, namespace: str, reasons: dict[str, str]) -> None:
    """Until each pod named by a key waits with its value in its reason; on timeout, the
    error says what they said."""
    said: dict[str, str | None] = {}

    def told() -> bool:
        shown = pods(kube, namespace)
        said.update((name, unschedulable_message(shown[name])) for name in reasons)
        return all(reason in (said[name] or "") for name, reason in reasons.items())

    try:
        eventually(told, what="each pod's reason")
    except AssertionError as error:
        raise AssertionError(f"{error}; they say {said}") from None


def events(kube: Kube, namespace: str, reason: str | None = None) -> list[JSON]:
    items = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").expect(200)
    return [e for e in items["items"] if reason is None or e["reason"] == reason]


def events_about(kube: Kube, namespace: str, reason: str, names: Collection[str]) -> list[JSON]:
    """The `reason` events in `namespace`, once there is one about each of `names`.

    The operator writes an event after the change it reports (a bind, a condition), so
    a test that has just seen the change may still be ahead of the event.
    """

    def written() -> list[JSON] | None:
        found = events(kube, namespace, reason)
        return found if set(names) <= {e["regarding"]["name"] for e in found} else None

    return eventually(written, what=f"{reason} events about {sorted(names)}")


def get_pod_group(kube: Kube, namespace: str, name: str) -> JSON:
    path = f"/apis/scheduling.batchsched.io/v1alpha1/namespaces/{namespace}/podgroups/{name}"
    return kube.get(path).expect(200)
