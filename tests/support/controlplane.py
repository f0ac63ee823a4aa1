"""A throwaway etcd + kube-apiserver on loopback for integration tests and benchmarks.

batchsched must be tested against the real API server, not a fake; the binaries
come from hack/envtest.sh (or any envtest-style KUBEBUILDER_ASSETS directory).
Each control plane lives in its own temporary directory, listens on free loopback
ports and is torn down with its whole process group. Children are also killed
when the Python process exits or dies outright, so an interrupted test run leaves
no etcd or kube-apiserver behind.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml

from tests.support.kube import JSON, Kube

log = logging.getLogger(__name__)

ASSETS_ENV = "KUBEBUILDER_ASSETS"
BINARIES = ("etcd", "kube-apiserver")
ADMIN_USER = "envtest-admin"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

_WORKDIR_PREFIX = "batchsched-envtest-"
_AUDIT_LOG = "audit.log"
_OWNER_FILE = "owner.pid"
_STOP_GRACE_SECONDS = 10.0
# kube-controller-manager's log lines (klog's text format) for a controller it starts
# and for one its feature gates leave out.
_CONTROLLER_STARTING = re.compile(r'"Controller starting\.\.\." controller="([^"]+)"')
_CONTROLLER_GATED = re.compile(
    r'"Controller is disabled by a feature gate" controller="([^"]+)" requiredFeatureGates=(\S+)'
)
_START_ATTEMPTS = 3


class ControlPlaneError(RuntimeError):
    """The control plane could not be found, started or reached."""


def find_assets(environ: Mapping[str, str] = os.environ) -> Path:
    """The directory holding etcd and kube-apiserver, named by KUBEBUILDER_ASSETS."""
    hint = (
        "run `export KUBEBUILDER_ASSETS=$(bash hack/envtest.sh)` (builds them once), "
        "or set BATCHSCHED_SKIP_INTEGRATION=1 to skip the integration tests"
    )
    value = environ.get(ASSETS_ENV, "")
    if not value:
        raise ControlPlaneError(f"{ASSETS_ENV} is not set: {hint}")
    assets = Path(value)
    missing = [name for name in BINARIES if not os.access(assets / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{ASSETS_ENV}={value} has no {' or '.join(missing)}: {hint}")
    return assets


def component_binary(assets: Path, name: str) -> Path:
    """The binary of a Kubernetes component other than the API server and etcd, which
    its own script (hack/NAME.sh) builds into the same directory as they are."""
    binary = assets / name
    if not os.access(binary, os.X_OK):
        raise ControlPlaneError(
            f"no {name} in {assets}: run `bash hack/envtest.sh && "
            f"export {ASSETS_ENV}=$(bash hack/{name}.sh)` (builds it once)"
        )
    return binary


# Runs beside each control plane and holds the read end of a pipe whose only writer
# is the test process. When that process is gone, however it died (even SIGKILL),
# the pipe reaches end-of-file and the watchdog kills every process group it was told of.
_WATCHDOG = """
import os, signal, sys
for line in sys.stdin.read().split():
    try:
        os.killpg(int(line), signal.SIGKILL)
    except ProcessLookupError:
        pass
"""


@dataclass(eq=False)
class _Group:
    """Processes (by binary name), watchdog and scratch space of one control plane,
    kept where the exit hook can find them."""

    workdir: Path
    watchdog: subprocess.Popen[bytes]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @classmethod
    def create(cls) -> _Group:
        workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
        (workdir / _OWNER_FILE).write_text(str(os.getpid()))
        watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        group = cls(workdir, watchdog)
        _live.add(group)
        return group

    def spawn(self, name: str, argv: list[str]) -> None:
        """Start a process in its own process group (so stopping it stops all it forked)."""
        with open(self.workdir / f"{name}.log", "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = proc
        assert self.watchdog.stdin is not None
        self.watchdog.stdin.write(f"{proc.pid}\n".encode())
        self.watchdog.stdin.flush()

    def stop(self) -> None:
        # An orderly stop needs no watchdog, and must not race one.
        self.watchdog.kill()
        self.watchdog.wait()
        if self.watchdog.stdin is not None:
            self.watchdog.stdin.close()
        # The API server goes first so it does not spend its shutdown retrying etcd.
        for proc in reversed(self.processes.values()):
            _terminate(proc)
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)
        _live.discard(self)


_live: set[_Group] = set()
_atexit_lock = threading.Lock()
_atexit_registered = False


def _register_atexit() -> None:
    """Stop live control planes when Python exits normally, Ctrl-C included.

    Deaths no Python code sees (SIGTERM without a handler, SIGKILL) are the
    watchdog's business; their scratch directories are swept by the next start.
    """
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_stop_all)
            _atexit_registered = True


def _stop_all() -> None:
    for group in list(_live):
        group.stop()


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=_STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()


def _free_ports(count: int) -> list[int]:
    # All sockets stay open until every port is chosen, so the ports are distinct.
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _openssl(*args: str) -> None:
    try:
        subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise ControlPlaneError("the openssl command (3.0 or newer) is needed") from None
    except subprocess.CalledProcessError as failed:
        raise ControlPlaneError(f"openssl {args[0]} failed: {failed.stderr.strip()}") from None


def _write_pki(pki: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1 signed by it, and a service-account key pair.

    Our own CA (instead of kube-apiserver's self-signed default) lets clients verify
    TLS from the moment the server listens.
    """
    pki.mkdir()
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "7"]
    _openssl(
        "req", "-x509", *curve,
        "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"),
        "-subj", "/CN=batchsched-envtest-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _openssl(
        "req", "-x509", *curve,
        "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
        "-keyout", str(pki / "apiserver.key"), "-out", str(pki / "apiserver.crt"),
        "-subj", "/CN=kube-apiserver",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "extendedKeyUsage=serverAuth",
    )  # fmt: skip
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-out", str(pki / "service-account.key"),
    )  # fmt: skip
    _openssl(
        "pkey", "-in", str(pki / "service-account.key"),
        "-pubout", "-out", str(pki / "service-account.pub"),
    )  # fmt: skip


# Who wrote what and when, for tests that must prove an order of writes (a deposed
# leader binding after its successor's first lease write, claims before a Binding).
# Only the writes those tests reason about, at Metadata level, so the rest of the
# suite and the benchmarks pay little for it.
_AUDIT_POLICY: JSON = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch", "delete"],
            "resources": [
                {"group": "", "resources": ["pods/binding", "pods/status"]},
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {
                    "group": "scheduling.batchsched.io",
                    "resources": ["podgroups", "podgroups/status"],
                },
                # A pod's ResourceClaims are written before its Binding.
                {
                    "group": "resource.k8s.io",
                    "resources": ["resourceclaims", "resourceclaims/status"],
                },
            ],
        },
        {"level": "None"},
    ],
}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, but another user's
    return True


def _sweep_stale_workdirs() -> None:
    """Delete scratch directories left by runs that were killed outright.

    Their processes died with them (see `_WATCHDOG`); only the files remain.
    """
    for workdir in Path(tempfile.gettempdir()).glob(f"{_WORKDIR_PREFIX}*"):
        try:
            owner = int((workdir / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # being set up right now, or not ours
        if not _pid_alive(owner):
            shutil.rmtree(workdir, ignore_errors=True)


def _switches(values: Mapping[str, bool]) -> str:
    """`A=true,B=false`, the form --feature-gates and --runtime-config take."""
    return ",".join(f"{key}={str(on).lower()}" for key, on in sorted(values.items()))


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class _PortTaken(Exception):
    """Another process bound one of our ports between choosing and listening."""


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver; `start` returns one that answers /readyz.

    `token` belongs to a member of system:masters; the API server authorizes with
    RBAC, so other identities (service-account tokens) see only what they are granted.
    `feature_gates` are the API server's, and the default of the components a test
    starts beside it: one cluster's components normally share their gates.
    """

    server: str
    token: str
    ca_file: Path
    kubeconfig: Path
    # From the call to `start` until CRDs are usable: what a test session waits for.
    startup_seconds: float
    feature_gates: Mapping[str, bool]
    _group: _Group

    @classmethod
    def start(
        cls,
        assets: Path,
        *,
        crds: Iterable[JSON] = (),
        timeout: float = 60.0,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Mapping[str, bool] | None = None,
    ) -> ControlPlane:
        """Start a fresh control plane and create `crds` in it.

        `feature_gates` and `runtime_config` (API group versions to serve or not, e.g.
        `{"scheduling.k8s.io/v1alpha2": True}`) become kube-apiserver's flags of those
        names; left out, the release's defaults hold.
        """
        began = time.monotonic()
        _register_atexit()
        _sweep_stale_workdirs()
        gates = dict(feature_gates or {})
        flags = [f"--feature-gates={_switches(gates)}"] if gates else []
        if runtime_config:
            flags.append(f"--runtime-config={_switches(runtime_config)}")
        for attempt in range(1, _START_ATTEMPTS + 1):
            group = _Group.create()
            try:
                plane = cls._launch(assets, group, began + timeout, gates, flags)
                plane.kube().apply_crds(crds)
            except _PortTaken:
                group.stop()
                log.warning("a loopback port was taken (attempt %d); retrying", attempt)
                continue
            except BaseException:
                group.stop()
                raise
            plane.startup_seconds = time.monotonic() - began
            log.info("control plane at %s ready in %.1fs", plane.server, plane.startup_seconds)
            return plane
        raise ControlPlaneError(f"no free loopback ports after {_START_ATTEMPTS} attempts")

    @classmethod
    def _launch(
        cls,
        assets: Path,
        group: _Group,
        deadline: float,
        feature_gates: Mapping[str, bool],
        flags: list[str],
    ) -> ControlPlane:
        work = group.workdir
        pki = work / "pki"
        _write_pki(pki)
        token = secrets.token_urlsafe(32)
        (work / "tokens.csv").write_text(f"{token},{ADMIN_USER},{ADMIN_USER},system:masters\n")
        (work / "audit-policy.yaml").write_text(yaml.safe_dump(_AUDIT_POLICY))
        client_port, peer_port, secure_port = _free_ports(3)
        etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        server = f"https://127.0.0.1:{secure_port}"

        group.spawn(
            "etcd",
            [
                str(assets / "etcd"),
                "--name=envtest",
                f"--data-dir={work / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=envtest={peer_url}",
                # The data dies with the test run; fsync would only slow it down.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        group.spawn(
            "kube-apiserver",
            [
                str(assets / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={secure_port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--token-auth-file={work / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki / 'service-account.pub'}",
                f"--service-account-signing-key-file={pki / 'service-account.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                # A loopback address is not a valid endpoint of the `kubernetes` Service.
                "--endpoint-reconciler-type=none",
                # It refuses pods until their namespace has a `default` ServiceAccount,
                # which only kube-controller-manager creates.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                f"--audit-policy-file={work / 'audit-policy.yaml'}",
                f"--audit-log-path={work / _AUDIT_LOG}",
                # Each event is written as its request ends, not in delayed batches.
                "--audit-log-mode=blocking",
                *flags,
            ],
        )
        ca_file = pki / "ca.crt"
        kube = Kube(server, token, ca_file)
        cls._wait_ready(group, kube, deadline)
        plane = cls(
            server=server,
            token=token,
            ca_file=ca_file,
            kubeconfig=work / "kubeconfig",
            startup_seconds=0.0,
            feature_gates=feature_gates,
            _group=group,
        )
        plane._write_kubeconfig()
        return plane

    @staticmethod
    def _wait_ready(group: _Group, kube: Kube, deadline: float) -> None:
        while True:
            for name, proc in group.processes.items():
                if proc.poll() is not None:
                    logfile = group.workdir / f"{name}.log"
                    if "address already in use" in logfile.read_text(errors="replace"):
                        raise _PortTaken
                    raise ControlPlaneError(
                        f"{name} exited with code {proc.returncode}:\n{_tail(logfile)}"
                    )
            try:
                if kube.get("/readyz").status == 200:
                    return
            except OSError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    "kube-apiserver not ready in time:\n"
                    + _tail(group.workdir / "kube-apiserver.log")
                )
            time.sleep(0.1)

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(
                            self.ca_file.read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": ADMIN_USER, "user": {"token": self.token}}],
            "contexts": [
                {"name": "envtest", "context": {"cluster": "envtest", "user": ADMIN_USER}}
            ],
            "current-context": "envtest",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    @property
    def workdir(self) -> Path:
        return self._group.workdir

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._group.processes.values()]

    @property
    def serving_cert(self) -> tuple[Path, Path]:
        """The API server's certificate (for 127.0.0.1, signed by `ca_file`) and its key:
        a test's own proxy can present them to clients that trust `ca_file`."""
        pki = self.workdir / "pki"
        return pki / "apiserver.crt", pki / "apiserver.key"

    def audit_events(self) -> list[JSON]:
        """Every audit event written so far, oldest first (see `_AUDIT_POLICY`).

        Rotated files (the API server's default rotates at 100 MB) come first, by name,
        which holds their rotation time.
        """
        logs = [*sorted(self.workdir.glob("audit-*.log")), self.workdir / _AUDIT_LOG]
        events: list[JSON] = []
        for path in logs:
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue  # nothing audited yet
            # Only whole lines: the last one may be half written while the server is busy.
            complete = text[: text.rfind("\n") + 1]
            events.extend(json.loads(line) for line in complete.splitlines())
        return events

    def start_scheduler(
        self, binary: Path, config: JSON, *, feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        """Run kube-scheduler (hack/kube-scheduler.sh builds it) against this control plane
        as the admin, stopped with it; `config` is merged into its
        KubeSchedulerConfiguration, which turns leader election off, and
        `feature_gates` (by default the API server's) become its flag.

        It serves nothing of its own (no health port to collide with others'): callers
        learn it is working from the pods it places.
        """
        # Logged once its flags and configuration are accepted, before it lists anything.
        self.run(
            "kube-scheduler",
            self.scheduler_command(binary, config, feature_gates),
            started=lambda log: "Starting Kubernetes Scheduler" in log,
        )

    def scheduler_command(
        self, binary: Path, config: JSON, feature_gates: Mapping[str, bool] | None = None
    ) -> list[str]:
        """kube-scheduler's command line for `start_scheduler`, with its configuration
        written beside the control plane's files; for callers that start and stop it
        themselves (a benchmark timing it from its start)."""
        settings: JSON = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "leaderElection": {"leaderElect": False},
            **config,
        }
        path = self.workdir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(settings))
        gates = self.feature_gates if feature_gates is None else feature_gates
        argv = [str(binary), f"--config={path}", "--secure-port=0", "-v=1"]
        if gates:
            argv.append(f"--feature-gates={_switches(gates)}")
        return argv

    def start_controller_manager(
        self,
        binary: Path,
        *,
        controllers: Sequence[str],
        feature_gates: Mapping[str, bool] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Run kube-controller-manager (hack/kube-controller-manager.sh builds it) against
        this control plane, stopped with it, with only `controllers` (its canonical
        names, e.g. `job-controller`, `garbage-collector-controller`) and
        `feature_gates` (by default the API server's), without leader election; return
        once each of them has started.

        Each controller acts as its own ServiceAccount in kube-system, as in a cluster,
        so it has only the rights the API server's bootstrap roles give it (those
        depend on the API server's feature gates). A controller its gates leave out
        is an error here: kube-controller-manager itself would only log it.
        """
        gates = self.feature_gates if feature_gates is None else feature_gates
        name = "kube-controller-manager"
        argv = [
            str(binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(controllers)}",
            "--leader-elect=false",
            "--secure-port=0",
            "--use-service-account-credentials=true",
            # The token controller always runs; it signs with the key the API server checks.
            f"--service-account-private-key-file={self.workdir / 'pki' / 'service-account.key'}",
            f"--root-ca-file={self.ca_file}",
            # Level 1 logs each controller as it starts, which is what is waited for.
            "-v=1",
        ]
        if gates:
            argv.append(f"--feature-gates={_switches(gates)}")
        waiting = set(controllers)

        def started(log: str) -> bool:
            gated = [f"{c} (needs {g})" for c, g in _CONTROLLER_GATED.findall(log) if c in waiting]
            if gated:
                raise ControlPlaneError(
                    f"{name} left out {', '.join(gated)}; its feature gates: "
                    + (_switches(gates) or "the release's defaults")
                )
            waiting.difference_update(_CONTROLLER_STARTING.findall(log))
            return not waiting

        self.run(name, argv, started=started, timeout=timeout)

    def run(
        self,
        name: str,
        argv: list[str],
        *,
        started: Callable[[str], bool],
        timeout: float = 60.0,
    ) -> None:
        """Run a component of the cluster (a scheduler, a controller) against this control
        plane in a process group of its own, stopped with it; its output goes to
        `name`.log in `workdir`. Returns once `started` holds for that log, which the
        component writes once it has accepted its flags and configuration: a bad one
        ends it first, which raises here however long the exit takes on a busy machine;
        anything later shows in what it does."""
        # A second one would take the first's place in the group, which then outlives it.
        running = self._group.processes.get(name)
        if running is not None and running.poll() is None:
            raise ControlPlaneError(f"{name} already runs against this control plane")
        self._group.spawn(name, argv)
        logfile = self.workdir / f"{name}.log"
        deadline = time.monotonic() + timeout
        while True:
            self._check_running(name)
            if started(logfile.read_text(errors="replace")):
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{name} not started in {timeout:g}s:\n{_tail(logfile)}")
            time.sleep(0.1)

    def _check_running(self, name: str) -> None:
        proc = self._group.processes[name]
        if proc.poll() is not None:
            raise ControlPlaneError(
                f"{name} exited with code {proc.returncode}:\n"
                + _tail(self.workdir / f"{name}.log")
            )

    def kube(self, token: str | None = None) -> Kube:
        """A REST client for the admin, or for whoever holds `token`."""
        return Kube(self.server, token or self.token, self.ca_file)

    def stop(self) -> None:
        """Stop both processes and delete the data; safe to call twice."""
        self._group.stop()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
