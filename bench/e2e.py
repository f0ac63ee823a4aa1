"""End-to-end throughput of `batchsched run` on a real control plane, beside the raw bind
ceiling and the list-watch floor measured in the same run.

Usage: python -m bench.e2e [--nodes 1000] [--pods 5000] [--gang 8] [--concurrency 64]
                          [--rounds 6] [--control-plane-cpus 0|shared]
                          [--kinds ours|volcano|native] [--beside KIND[,KIND...]]
                          [--kube-scheduler] [--kube-scheduler-qps QPS] [--dra GPUS]
Needs KUBEBUILDER_ASSETS (see hack/envtest.sh; with --kube-scheduler, the directory
hack/kube-scheduler.sh prints). Prints one JSON object.

1. A fresh etcd + kube-apiserver, N Ready nodes. The API server and etcd run on a CPU
   of their own (the first; `--control-plane-cpus` names others, `shared` turns this
   off), and the bench, the operator and the floor on the rest. That is how the
   scheduler runs in a cluster: its Deployment runs on worker nodes (the control
   plane's are tainted, and managed clusters keep theirs apart), so none of its CPU
   comes out of the API server's. With every process sharing 2 cores, whatever a
   client spends is charged twice, as its own time and again as the API server's:
   raw binds beside a process busy 40 % of the time took 24-36 % longer, and the
   control plane spent 0.1 to 0.4 ms more per pod on the same requests.
2. Raw ceiling: P pods that no scheduler owns, bound to pre-chosen nodes by a plain
   async client with `--concurrency` requests in flight, timed until a watch has seen
   them all bound (as in 3); then deleted. The client is made as the phase starts, so
   it opens its connections (TLS handshakes, ~1 ms of client CPU each) inside the
   timed phase, as the operator does. Its Bindings are encoded as the operator's
   are (protobuf), so the ratio compares the scheduler with binding alone. When the
   watch saw the first bind is reported too: the end-to-end phase's comes later by
   the operator's start-up (imports, listing the cluster, the first decision).
3. End to end: the same P pods again, in PodGroups of `--gang`, created in bulk; then
   the operator is started as a user starts it, and timed from its start until every
   pod is bound, as seen by a watch; also from when its cache is synced (its log),
   which leaves out process start and listing the cluster. Latency is from each pod's
   creation (client clock, when its create call returned) to the watch event showing
   its node.
   The operator is stopped and the pods and PodGroups deleted. With `--kinds volcano`
   the gangs are written as a Volcano user writes them, on Volcano's released CRDs
   (hack/peer-crds.sh): PodGroups of scheduling.volcano.sh in a Volcano Queue `bench`
   under a `root` Queue, both created through the API server (so with the CRD's
   defaults), the pods joined by Volcano's `scheduling.k8s.io/group-name` annotation.
   With `--kinds native` they are Kubernetes' own (scheduling.k8s.io/v1alpha2, served
   with the feature gate GenericWorkload): PodGroups with a gang policy of minCount the
   gang's size, the pods naming theirs in spec.schedulingGroup. `--beside ours` adds an
   operator phase per kind named (`end_to_end_ours`), the same pods written in that
   API, each round, so kinds are compared within one round.
   With `--kube-scheduler`, kube-scheduler v1.36.3 (GenericWorkload and GangScheduling
   on, one profile, the release's defaults otherwise: client QPS 50, burst 100 unless
   `--kube-scheduler-qps`) gets a phase of its own on the same pods in native PodGroups,
   started and timed as the operator is (`kube_scheduler`).
   With `--dra GPUS`, every node also publishes GPUS GPUs through a ResourceSlice, and
   the pods of these phases ask 1 to GPUS of them (alike within a gang) through claims
   that kube-controller-manager's resource-claim controller makes from templates, all
   made before the phase is timed (bench/dra_e2e.py).
4. List-watch floor: P pods that no scheduler owns, bound by bench/floor.py, started
   and timed as the operator is. It lists the cluster, watches every pod and binds
   as the raw client does, deciding nothing: what any scheduler that lists and
   watches must do. `ratio_to_floor` is then what scheduling itself costs, and
   `floor_ratio_to_raw` what listing and watching cost on this machine.
5. Caught up (last round only): `--steady-gangs` more gangs arrive, one every half
   second; the mean session time while they are placed is read from the operator's
   /metrics.
Steps 2 to 4 (and the phases added) are repeated `--rounds` times on the same control
plane, so each ratio
compares runs made seconds apart on a shared, noisy machine; the medians are the
headline figures (single rounds have ranged from 0.5 to 1.5 on a 2-core VM, hence
six). Even the medians move with the machine's load by more than the margins that
matter: with the control plane on its own core, the same code gave 0.821, 0.825 and
0.779 in three runs on one day, and 0.889, 0.779 and 0.863 on another, while the floor
went from 0.87 to 0.94 of the ceiling. With the cores shared, a busy machine slowed
the API server's binding more than the operator's start-up (~0.5 s of imports and
listing the cluster before its first bind, a fixed cost), so the ratio rose with load:
0.68 with raw binds at 1,000-1,300 pods/s, 0.82 at 720-870 pods/s, on one day. Compare
versions in interleaved pairs, not by bench runs.
The operator's peak RSS is read from /proc (VmHWM) before it is stopped; its
sessions run in forked children, whose highest peak RSS it reports in its /metrics.
All phases start on equal terms:
- Each round starts the order of the phases one later than the round before, so that
  six rounds run each of three phases in each position twice (with more phases, make
  the rounds a multiple of their number). The API server keeps every pod
  event of the last minutes in its watch cache, so a phase that runs later works with
  a larger heap; always running the same one last would tilt the comparison.
- Before each phase the API server collects its heap (Go's GC, through the profiling
  endpoint) and goes quiet. Whether a collection of that heap (1-2 GB after a few
  rounds) fell inside a phase was the largest difference between rounds: phases
  without one spent 0.9-1.2 ms of control-plane CPU per pod, phases with one or two
  1.3-1.8 ms. This way no phase pays for garbage another one made.
Each phase reports its CPU milliseconds per pod, read from /proc: the control plane's,
and the client's (raw: the bench's binder and watch; end to end: the operator from its
start with its session processes, and the bench's watch; the floor likewise), and
how many garbage collections the API server ran in the phase.
The package's bytecode is compiled first, as the image build does, so that the operator's
start is not charged for compiling its own source.
"""

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from batchsched.api.groups import OUR_API
from batchsched.api.nativegroups import NATIVE_API
from batchsched.k8s.client import JSON, Api, with_retries
from batchsched.k8s.credentials import Credentials
from batchsched.k8s.protobuf import PROTOBUF

from bench.cluster import (
    CREATE_CONCURRENCY,
    NODE_ALLOCATABLE,
    POD_REQUESTS,
    REPO,
    SCHEDULER,
    add_cpus_argument,
    bounded,
    control_plane_cpus,
    create_namespace,
    create_nodes,
    free_port,
    plane_api,
    watch_bound,
)
from bench.dra_e2e import (
    CONTROLLERS,
    ask_devices,
    claims_made,
    claims_released,
    create_devices,
    create_templates,
    delete_templates,
)
from bench.gang_scenarios import (
    GATES,
    RUNTIME_CONFIG,
    SCHEDULER_GATES,
    Group,
    native_group,
)
from bench.parity_scenarios import KUBE_SCHEDULER
from tests.support import ControlPlane, component_binary, find_assets, peer_crds
from tests.support.objects import load_manifests, pod, pod_group

FLOOR = REPO / "bench" / "floor.py"
NOBODY = "no-scheduler"
DELETE_BATCH = 1000
BATCH_LABEL = "bench-batch"
END_TO_END = "end_to_end"
KUBE_PHASE = "kube_scheduler"


@dataclass(frozen=True)
class Kinds:
    """The API the gangs are written in: their PodGroups', the pod annotation naming the
    group (None: the pod's spec.schedulingGroup, Kubernetes' own), and the Queues
    created first (in that API) with the one the groups name."""

    api_version: str
    group_key: str | None
    queues: tuple[str, ...] = ()

    @property
    def queue(self) -> str | None:
        return self.queues[-1] if self.queues else None

    def group(self, name: str, size: int) -> JSON:
        if self.group_key is None:
            return native_group(Group(name, size))
        queue: dict[str, Any] = {"queue": self.queue} if self.queue else {}
        return pod_group(name, size, api_version=self.api_version, **queue)

    def join(self, manifest: JSON, group: str) -> None:
        if self.group_key is None:
            manifest["spec"]["schedulingGroup"] = {"podGroupName": group}
        else:
            manifest["metadata"]["annotations"] = {self.group_key: group}


KINDS = {
    "ours": Kinds(OUR_API, "scheduling.batchsched.io/group-name"),
    "volcano": Kinds(
        "scheduling.volcano.sh/v1beta1", "scheduling.k8s.io/group-name", ("root", "bench")
    ),
    # Kubernetes 1.36's own gangs: a PodGroup with a gang policy of minCount the gang's
    # size, served with the feature gate GenericWorkload.
    "native": Kinds(NATIVE_API, None),
}


def pod_manifests(
    count: int, gang: int, scheduler: str, prefix: str = "job", kinds: Kinds = KINDS["ours"]
) -> list[JSON]:
    manifests = []
    for i in range(count):
        group = f"{prefix}-{i // gang:05d}"
        manifest = pod(f"{group}-{i % gang}", POD_REQUESTS, scheduler=scheduler)
        kinds.join(manifest, group)
        manifest["metadata"]["labels"] = {BATCH_LABEL: str(i // DELETE_BATCH)}
        manifests.append(manifest)
    return manifests


async def create_pods(api: Api, namespace: str, manifests: list[JSON]) -> dict[str, float]:
    """Create pods in bulk; returns name -> when its create call returned (monotonic)."""
    created: dict[str, float] = {}

    async def create(manifest: JSON) -> None:
        await api.post(f"/api/v1/namespaces/{namespace}/pods", manifest)
        created[manifest["metadata"]["name"]] = time.monotonic()

    await bounded(CREATE_CONCURRENCY, create, manifests)
    return created


async def uids_of(api: Api, namespace: str) -> dict[str, str]:
    uids: dict[str, str] = {}
    token = ""
    while True:
        query = f"limit=1000&continue={token}" if token else "limit=1000"
        page = await api.get(f"/api/v1/namespaces/{namespace}/pods?{query}")
        uids.update((p["metadata"]["name"], p["metadata"]["uid"]) for p in page["items"])
        token = page["metadata"].get("continue") or ""
        if not token:
            return uids


async def create_groups(
    api: Api, kinds: Kinds, namespace: str, count: int, gang: int, prefix: str = "job"
) -> None:
    path = f"/apis/{kinds.api_version}/namespaces/{namespace}/podgroups"
    sizes = Counter(f"{prefix}-{i // gang:05d}" for i in range(count))
    bodies = [kinds.group(g, sizes[g]) for g in sorted(sizes)]
    await bounded(CREATE_CONCURRENCY, lambda body: api.post(path, body), bodies)


async def delete_groups(api: Api, kinds: Kinds, namespace: str) -> None:
    """Delete the namespace's PodGroups: later rounds' schedulers would otherwise list
    and carry them all. Kubernetes' own carry a protection finalizer that only a
    controller not running here takes off; without it they go at once."""
    path = f"/apis/{kinds.api_version}/namespaces/{namespace}/podgroups"
    if kinds.api_version == NATIVE_API:
        names = [g["metadata"]["name"] for g in (await api.get(path))["items"]]

        async def release(name: str) -> None:
            await api.patch(f"{path}/{name}", {"metadata": {"finalizers": None}})

        await bounded(CREATE_CONCURRENCY, release, names)
    await api.request("DELETE", path)


async def raw_ceiling(
    api: Api,
    credentials: Credentials,
    nodes: list[str],
    pods: int,
    concurrency: int,
    namespace: str,
    server: list[int],
) -> JSON:
    await create_namespace(api, namespace)
    manifests = pod_manifests(pods, 1, NOBODY)
    await create_pods(api, namespace, manifests)
    uids = await uids_of(api, namespace)
    per_node = int(NODE_ALLOCATABLE["cpu"])
    # A client of its own, whose connections open as it binds (timed), as the operator's
    # do; the bench's own are warm from creating the pods.
    binder = Api(credentials, connections=concurrency, timeout=120)

    async def bind(numbered: tuple[int, str]) -> None:
        index, name = numbered
        target = nodes[(index // per_node) % len(nodes)]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uids[name]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": target},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
        await binder.post(path, body, content_type=PROTOBUF)

    names = sorted(uids)
    # Timed as the end-to-end run is: until a watch has seen every pod bound.
    bound: dict[str, float] = {}
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_bound(api, namespace, bound, expected=pods, done=done))
    await asyncio.sleep(1.0)
    collections = await settle(api, server)
    processes = {"control_plane": server, "client": [os.getpid()]}
    cpu_before = cpu_seconds(processes)
    started = time.monotonic()
    try:
        await bounded(concurrency, bind, enumerate(names))
    finally:
        await binder.close()
    await done.wait()
    await watcher
    seconds = time.monotonic() - started
    cpu = cpu_ms_per_pod(cpu_before, cpu_seconds(processes), pods)
    collections = await collections_so_far(api) - collections
    await delete_pods(api, namespace, pods)
    return {
        "seconds": round(seconds, 3),
        "pods_per_second": round(pods / seconds, 1),
        "first_bind_after_seconds": round(min(bound.values()) - started, 3),
        "cpu_ms_per_pod": cpu,
        "api_server_collections": collections,
    }


async def delete_pods(api: Api, namespace: str, pods: int) -> None:
    """Delete the namespace's pods and wait until they are gone, leaving the nodes free."""

    async def delete(batch: int) -> None:
        # A busy API server may answer 504 while it goes on deleting: asked again.
        await with_retries(
            lambda: api.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods?labelSelector={BATCH_LABEL}%3D{batch}",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            ),
            seconds=600,
        )

    # In batches: the API server gives up on deleting tens of thousands in one call.
    await bounded(4, delete, range(pods // DELETE_BATCH + 1))
    while (await api.get(f"/api/v1/namespaces/{namespace}/pods?limit=1"))["items"]:
        await asyncio.sleep(0.2)


def process_cpu(pids: list[int]) -> float:
    """User plus system CPU seconds these processes have used so far (/proc), their
    children that have ended included: the operator's sessions run in forked children."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds(processes: dict[str, list[int]]) -> dict[str, float]:
    return {name: process_cpu(pids) for name, pids in processes.items()}


async def settle(api: Api, server: list[int]) -> int:
    """Collect the API server's heap, then wait for the control plane to go quiet;
    returns its garbage collections so far."""
    # The heap profile is taken after a forced collection (`gc=1`); its text is unused.
    async with api.stream("/debug/pprof/heap?gc=1&debug=1", silence=60.0) as reply:
        await reply.read()
    await quiet(server)
    return await collections_so_far(api)


async def collections_so_far(api: Api) -> int:
    """The API server's garbage collections so far. One inside a phase adds its CPU to
    that phase's per-pod figure; phases without any still differ (by up to 0.26 ms per
    pod in one run), so a count of zero rules this cause out, no more."""
    text = (await api.get_raw("/metrics")).decode()
    for line in text.splitlines():
        if line.startswith("go_gc_duration_seconds_count "):
            return int(float(line.split()[1]))
    raise RuntimeError("the API server's /metrics has no go_gc_duration_seconds_count")


async def quiet(server: list[int], *, cores: float = 0.1, longest: float = 30.0) -> None:
    """Wait until the control plane idles (under `cores` for half a second), so that
    neither phase is timed while the server still works off earlier requests."""
    deadline = time.monotonic() + longest
    used = process_cpu(server)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = process_cpu(server)
        if now - used < cores * 0.5:
            return
        used = now


def cpu_ms_per_pod(before: dict[str, float], after: dict[str, float], pods: int) -> JSON:
    """Where the machine's CPU went in a phase: the cores are shared, so whatever the
    client spends per pod, the API server and etcd cannot."""
    return {name: round((after[name] - before[name]) * 1000 / pods, 3) for name in after}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM for pid {pid}")


def start_operator(kubeconfig: Path, log: Path, metrics_port: int) -> subprocess.Popen[bytes]:
    command = Path(sys.executable).parent / "batchsched"
    args = ["run", "--kubeconfig", str(kubeconfig), f"--metrics-port={metrics_port}"]
    return spawn([str(command), *args], log)


def start_floor(
    kubeconfig: Path, log: Path, namespace: str, concurrency: int
) -> subprocess.Popen[bytes]:
    args = ["--kubeconfig", str(kubeconfig), "--namespace", namespace]
    return spawn([sys.executable, str(FLOOR), *args, f"--concurrency={concurrency}"], log)


def spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


@dataclass(frozen=True)
class Timed:
    """A phase run by a process of its own, timed until the bench's watch saw every pod
    bound; the process still runs."""

    process: subprocess.Popen[bytes]
    started_wall: float
    seconds: float
    bound: dict[str, float]
    first_bind_after_seconds: float
    cpu_ms_per_pod: JSON
    api_server_collections: int

    def summary(self) -> JSON:
        pods = len(self.bound)
        return {
            "seconds": round(self.seconds, 3),
            "pods_per_second": round(pods / self.seconds, 1),
            "first_bind_after_seconds": round(self.first_bind_after_seconds, 3),
            "cpu_ms_per_pod": self.cpu_ms_per_pod,
            "api_server_collections": self.api_server_collections,
        }


@contextlib.asynccontextmanager
async def timed_process(
    api: Api,
    namespace: str,
    pods: int,
    start: Callable[[], subprocess.Popen[bytes]],
    *,
    name: str,
    server: list[int],
    timeout: float,
) -> AsyncIterator[Timed]:
    """Start the process on a quiet control plane and time it; stops it on leaving."""
    bound: dict[str, float] = {}
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_bound(api, namespace, bound, expected=pods, done=done))
    await asyncio.sleep(1.0)  # the watch is established before the process starts
    collections = await settle(api, server)
    processes = {"control_plane": server, "bench_watch": [os.getpid()]}
    cpu_before = {**cpu_seconds(processes), name: 0.0}
    started, started_wall = time.monotonic(), time.time()
    process = start()
    try:
        await asyncio.wait_for(_until_done(done, process, name), timeout)
        finished = time.monotonic()
        processes[name] = [process.pid]
        yield Timed(
            process=process,
            started_wall=started_wall,
            seconds=finished - started,
            bound=bound,
            first_bind_after_seconds=min(bound.values()) - started,
            cpu_ms_per_pod=cpu_ms_per_pod(cpu_before, cpu_seconds(processes), pods),
            api_server_collections=await collections_so_far(api) - collections,
        )
    finally:
        watcher.cancel()
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 30)


async def _until_done(done: asyncio.Event, process: subprocess.Popen[bytes], name: str) -> None:
    """Returns the moment `done` is set (a poll of its own would stop the clock up to a
    poll late, which the raw phase is not), checking the process is alive meanwhile."""
    while not done.is_set():
        if process.poll() is not None:
            raise RuntimeError(f"the {name} exited with code {process.returncode}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.1):
                await done.wait()


async def list_watch_floor(
    api: Api,
    kubeconfig: Path,
    args: argparse.Namespace,
    log: Path,
    *,
    namespace: str,
    server: list[int],
) -> JSON:
    """The same pods, bound by bench/floor.py: listing and watching, deciding nothing."""
    await create_namespace(api, namespace)
    await create_pods(api, namespace, pod_manifests(args.pods, 1, NOBODY))
    start = partial(start_floor, kubeconfig, log, namespace, args.concurrency)
    async with timed_process(
        api, namespace, args.pods, start, name="floor", server=server, timeout=args.timeout
    ) as timed:
        pass
    await delete_pods(api, namespace, args.pods)
    return timed.summary()


async def end_to_end(
    api: Api,
    kubeconfig: Path,
    args: argparse.Namespace,
    log: Path,
    *,
    kinds: Kinds,
    namespace: str,
    last: bool,
    server: list[int],
) -> JSON:
    pods, gang = args.pods, args.gang
    await create_namespace(api, namespace)
    await create_groups(api, kinds, namespace, pods, gang)
    manifests = pod_manifests(pods, gang, SCHEDULER, kinds=kinds)
    created = await create_workload(api, args, namespace, manifests)
    port = free_port()
    start = partial(start_operator, kubeconfig, log, port)
    async with timed_process(
        api, namespace, pods, start, name="operator", server=server, timeout=args.timeout
    ) as timed:
        synced = synced_after(log, timed.started_wall)
        steady = await steady_state(api, kinds, port, args.steady_gangs, gang) if last else None
        rss = peak_rss_mb(timed.process.pid)
        metrics = await asyncio.to_thread(scrape, port)
        session_rss = round(metrics["batchsched_session_peak_rss_bytes"] / 2**20, 1)
    await delete_workload(api, args, namespace)
    await delete_groups(api, kinds, namespace)
    return {
        **timed.summary(),
        "synced_after_seconds": round(synced, 3),
        "pods_per_second_once_synced": round(pods / (timed.seconds - synced), 1),
        **bind_phase(timed, created),
        "scheduler_peak_rss_mb": rss,
        "session_peak_rss_mb": session_rss,
        **({"caught_up": steady} if steady else {}),
    }


def bind_phase(timed: Timed, created: dict[str, float]) -> JSON:
    """Pods bound per second from the first bind on, and latencies from each pod's creation."""
    latencies = sorted(timed.bound[name] - created[name] for name in timed.bound)
    quantiles = statistics.quantiles(latencies, n=100)
    first = timed.first_bind_after_seconds
    return {
        "bind_phase_pods_per_second": round(len(timed.bound) / (timed.seconds - first), 1),
        "latency_p50_seconds": round(quantiles[49], 3),
        "latency_p99_seconds": round(quantiles[98], 3),
    }


async def kube_scheduler(
    api: Api,
    plane: ControlPlane,
    args: argparse.Namespace,
    log: Path,
    *,
    namespace: str,
    server: list[int],
) -> JSON:
    """The same pods in Kubernetes' own PodGroups, named to kube-scheduler, which is
    started (with GangScheduling) and timed as the operator is."""
    pods, gang, kinds = args.pods, args.gang, KINDS["native"]
    await create_namespace(api, namespace)
    await create_groups(api, kinds, namespace, pods, gang)
    manifests = pod_manifests(pods, gang, KUBE_SCHEDULER, kinds=kinds)
    created = await create_workload(api, args, namespace, manifests)
    connection: JSON = {"kubeconfig": str(plane.kubeconfig)}
    if args.kube_scheduler_qps:
        connection.update(qps=args.kube_scheduler_qps, burst=2 * args.kube_scheduler_qps)
    config = {"clientConnection": connection, "profiles": [{"schedulerName": KUBE_SCHEDULER}]}
    binary = component_binary(find_assets(), "kube-scheduler")
    command = plane.scheduler_command(binary, config, SCHEDULER_GATES)
    start = partial(spawn, command, log)
    async with timed_process(
        api, namespace, pods, start, name="kube_scheduler", server=server, timeout=args.timeout
    ) as timed:
        pass
    await delete_workload(api, args, namespace)
    await delete_groups(api, kinds, namespace)
    return {**timed.summary(), **bind_phase(timed, created)}


async def create_workload(
    api: Api, args: argparse.Namespace, namespace: str, manifests: list[JSON]
) -> dict[str, float]:
    """A scheduler phase's pods; with --dra, asking for GPUs through claims, which are
    all made before the phase is timed (bench/dra_e2e.py)."""
    if args.dra:
        await create_templates(api, namespace, args.dra)
        ask_devices(manifests, args.gang, args.dra)
    created = await create_pods(api, namespace, manifests)
    if args.dra:
        await claims_made(api, namespace, len(manifests))
    return created


async def delete_workload(api: Api, args: argparse.Namespace, namespace: str) -> None:
    """The phase's pods, and with --dra their claims (once the controller has released
    them, freeing their devices for the next phase) and templates."""
    await delete_pods(api, namespace, args.pods)
    if args.dra:
        await claims_released(api, namespace)
        await delete_templates(api, namespace)


def synced_after(log: Path, started_wall: float) -> float:
    """Seconds from the operator's start until its cache was synced, from its log."""
    for line in log.read_text().splitlines():
        if "cache synced" in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return stamp - started_wall
    raise RuntimeError("the operator never logged its cache as synced")


def scrape(port: int) -> dict[str, float]:
    """The operator's /metrics, sample name (with labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = (line.rsplit(" ", 1) for line in text.splitlines() if line[:1] != "#")
    return {name: float(value) for name, value in samples}


def session_totals(port: int) -> tuple[float, float]:
    """(seconds, count) of the operator's sessions so far."""
    values = scrape(port)
    name = "batchsched_session_duration_seconds"
    return values[f"{name}_sum"], values[f"{name}_count"]


async def steady_state(api: Api, kinds: Kinds, port: int, gangs: int, gang: int) -> JSON:
    """Once the backlog is bound, new gangs keep arriving: how long do sessions take?"""
    namespace = "steady"
    await create_namespace(api, namespace)
    spent, sessions = await asyncio.to_thread(session_totals, port)
    started = time.monotonic()
    for index in range(gangs):
        await create_groups(api, kinds, namespace, gang, gang, prefix=f"steady-{index}")
        manifests = pod_manifests(gang, gang, SCHEDULER, prefix=f"steady-{index}", kinds=kinds)
        await create_pods(api, namespace, manifests)
        await asyncio.sleep(0.5)
    unbound = f"/api/v1/namespaces/{namespace}/pods?fieldSelector=spec.nodeName%3D&limit=1"
    while (await api.get(unbound))["items"]:
        await asyncio.sleep(0.1)
    seconds = time.monotonic() - started
    spent_after, sessions_after = await asyncio.to_thread(session_totals, port)
    return {
        "pods": gangs * gang,
        "seconds": round(seconds, 3),
        "sessions": int(sessions_after - sessions),
        "session_mean_seconds": round((spent_after - spent) / max(sessions_after - sessions, 1), 3),
    }


async def run(args: argparse.Namespace) -> JSON:
    compileall.compile_dir(REPO / "batchsched", quiet=1)
    crds = load_manifests(REPO / "crds")
    kinds = {name: KINDS[name] for name in (args.kinds, *args.beside)}
    if "volcano" in kinds:
        crds += peer_crds("volcano")
    native = "native" in kinds or args.kube_scheduler
    # Kubernetes' own gangs are alpha in 1.36: served only with the gate and the version on.
    plane = await asyncio.to_thread(
        ControlPlane.start,
        find_assets(),
        crds=crds,
        feature_gates=GATES if native else None,
        runtime_config=RUNTIME_CONFIG if native else None,
    )
    with plane, tempfile.TemporaryDirectory() as scratch:
        cpus = control_plane_cpus(args.control_plane_cpus)
        log = Path(scratch) / "operator.log"
        rounds: list[JSON] = []
        async with plane_api(plane, cpus, log) as api:
            nodes = await create_nodes(api, args.nodes)
            if args.dra:
                await create_devices(api, nodes, args.dra)
                manager = component_binary(find_assets(), "kube-controller-manager")
                await asyncio.to_thread(
                    plane.start_controller_manager, manager, controllers=CONTROLLERS
                )
            for kind in kinds.values():
                for name in kind.queues:
                    queue = {"apiVersion": kind.api_version, "kind": "Queue"}
                    await api.post(
                        f"/apis/{kind.api_version}/queues", {**queue, "metadata": {"name": name}}
                    )
            for index in range(args.rounds):
                phases: dict[str, Callable[[], Awaitable[JSON]]] = {
                    "raw_bind": partial(
                        raw_ceiling,
                        api,
                        api.credentials,
                        nodes,
                        args.pods,
                        args.concurrency,
                        f"raw-{index}",
                        plane.pids,
                    ),
                    "list_watch_floor": partial(
                        list_watch_floor,
                        api,
                        plane.kubeconfig,
                        args,
                        log,
                        namespace=f"floor-{index}",
                        server=plane.pids,
                    ),
                }
                for name, kind in kinds.items():
                    main = name == args.kinds
                    phases[END_TO_END if main else f"{END_TO_END}_{name}"] = partial(
                        end_to_end,
                        api,
                        plane.kubeconfig,
                        args,
                        log,
                        kinds=kind,
                        namespace=f"e2e-{name}-{index}",
                        last=main and index == args.rounds - 1,
                        server=plane.pids,
                    )
                if args.kube_scheduler:
                    phases[KUBE_PHASE] = partial(
                        kube_scheduler,
                        api,
                        plane,
                        args,
                        log,
                        namespace=f"kube-{index}",
                        server=plane.pids,
                    )
                names = list(phases)
                shift = index % len(names)
                order = names[shift:] + names[:shift]
                done = {name: await phases[name]() for name in order}
                rounds.append({"order": order, **done, **ratios(done)})
    return {
        "nodes": args.nodes,
        "pods": args.pods,
        "gang": args.gang,
        "kinds": args.kinds,
        "beside": args.beside,
        "cpus": os.cpu_count(),
        "control_plane_cpus": sorted(cpus) or "shared",
        "rounds": rounds,
        "median": {
            key: round(statistics.median(r[key] for r in rounds), 3)
            for key in rounds[0]
            if "ratio" in key
        },
        # Each phase's pods per second over the rounds: its median and its spread.
        "pods_per_second": {
            name: spread([r[name]["pods_per_second"] for r in rounds])
            for name in rounds[0]["order"]
        },
        **{
            key: max(r[END_TO_END][key] for r in rounds)
            for key in ("scheduler_peak_rss_mb", "session_peak_rss_mb")
        },
        "caught_up": rounds[-1][END_TO_END]["caught_up"],
    }


def ratios(done: dict[str, JSON]) -> JSON:
    """A round's ratios: the operator's to the raw ceiling and the floor, the floor's to
    the ceiling, and each other scheduler phase's to the ceiling and to the operator's
    main phase (so kinds, or schedulers, are compared within one round)."""
    raw, e2e, floor = done["raw_bind"], done[END_TO_END], done["list_watch_floor"]
    found = {
        "ratio_to_raw": ratio(e2e["pods_per_second"], raw),
        "ratio_to_raw_once_synced": ratio(e2e["pods_per_second_once_synced"], raw),
        "floor_ratio_to_raw": ratio(floor["pods_per_second"], raw),
        "ratio_to_floor": ratio(e2e["pods_per_second"], floor),
    }
    for name, phase in done.items():
        if name not in ("raw_bind", END_TO_END, "list_watch_floor"):
            found[f"{name}_ratio_to_raw"] = ratio(phase["pods_per_second"], raw)
            found[f"{name}_ratio_to_{END_TO_END}"] = ratio(phase["pods_per_second"], e2e)
    return found


def spread(values: list[float]) -> JSON:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def ratio(pods_per_second: float, baseline: JSON) -> float:
    return round(pods_per_second / float(baseline["pods_per_second"]), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--gang", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=64, help="raw binds in flight")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--steady-gangs", type=int, default=10, help="gangs arriving after")
    parser.add_argument("--rounds", type=int, default=6, help="times the three phases run")
    parser.add_argument(
        "--beside",
        type=lambda text: [k for k in text.split(",") if k],
        default=[],
        metavar="KIND[,KIND...]",
        help="more operator phases, the gangs written in these APIs (e.g. ours)",
    )
    parser.add_argument(
        "--kube-scheduler",
        action="store_true",
        help="a phase of kube-scheduler v1.36.3 with GangScheduling on native PodGroups "
        "(needs KUBEBUILDER_ASSETS=$(bash hack/kube-scheduler.sh))",
    )
    parser.add_argument(
        "--kube-scheduler-qps",
        type=float,
        help="kube-scheduler's client QPS (burst twice that); default: the release's",
    )
    parser.add_argument(
        "--kinds", choices=sorted(KINDS), default="ours", help="the API the gangs are written in"
    )
    parser.add_argument(
        "--dra",
        type=int,
        default=0,
        metavar="GPUS",
        help="every node publishes GPUS GPUs through a ResourceSlice, and the schedulers' pods "
        "ask 1 to GPUS of them through claims from templates (bench/dra_e2e.py; needs "
        "kube-controller-manager in KUBEBUILDER_ASSETS)",
    )
    add_cpus_argument(parser)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
