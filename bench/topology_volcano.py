"""Placement quality of `batchsched run` and Volcano's scheduler on one API server.

Usage: python -m bench.topology_volcano [--spines 2] [--racks-per-spine 2]
           [--nodes-per-rack 4] [--gangs 40] [--load 1.0] [--seeds 1]
           [--asks off,soft,hard] [--schedulers batchsched,volcano] [--scale 240]
           [--soft-wait 0]
Needs KUBEBUILDER_ASSETS (hack/envtest.sh); builds vc-scheduler and vc-controller-manager
on first use (hack/vc-scheduler.sh, hack/vc-controller-manager.sh). Prints one JSON
object, a table on stderr.

A scaled-down run of bench/topology_quality.py's workload on a real kube-apiserver
with Volcano's released CRDs (hack/peer-crds.sh): the nodes, the rack and spine
HyperNodes, Volcano's Queues `root` and `bench`, and each gang as a Volcano PodGroup
with its pods, asking `networkTopology` as bench/topology_workload.py says (or not,
ask `off`). Volcano's queue controller (vc-controller-manager) opens the Queues, as in
a Volcano cluster. Each phase is one scheduler and one ask on an empty cluster:
`batchsched run` (examples/config/binpack.yaml) or vc-scheduler with the configuration
Volcano's network-topology guide gives (VOLCANO_CONFIG: its plugins, node binpack and
the network-topology-aware plugin's HyperNode binpack both weighing nvidia.com/gpu).
Time runs `--scale` times faster than the workload's: gangs are created when they
arrive, and each gang's pods are deleted (grace period 0: no kubelet runs them) once
it has run its duration from its last member's bind; binds are seen by polling the
pods every POLL_SECONDS, so start times are known to POLL_SECONDS x scale. The figures
are bench/topology_workload.py's `measure`, over the arrivals' span. `--soft-wait` is
batchsched's `topology.softWait` in workload time (0, the default: none, as Volcano's soft
ask); batchsched is given it divided by `--scale`.
"""

import argparse
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batchsched.api.groups import VOLCANO_API

from bench.cluster import REPO, SCHEDULER, free_port
from bench.e2e import spawn
from bench.replay import seeds
from bench.topology_quality import summarise, table
from bench.topology_workload import (
    Ask,
    Cluster,
    Gang,
    Run,
    add_workload_arguments,
    cluster_objects,
    cluster_of,
    gang_objects,
    gangs,
    measure,
    print_report,
    soft_wait_of,
)
from tests.support import ControlPlane, find_assets, peer_crds
from tests.support.kube import Kube
from tests.support.objects import load_manifests

VOLCANO_SCHEDULER = "volcano"
BATCHSCHED_CONFIG = REPO / "examples" / "config" / "binpack.yaml"
POLL_SECONDS = 0.25
# Volcano's documented configuration with its network-topology-aware plugin
# (docs/user-guide/how_to_use_network_topology_aware_scheduling.md of the release built),
# its resources narrowed to the GPUs this cluster has, and node binpack weighing them
# as batchsched's binpack configuration does.
VOLCANO_CONFIG: dict[str, Any] = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {
            "plugins": [
                {"name": "drf"},
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder"},
                {
                    "name": "binpack",
                    "arguments": {
                        "binpack.resources": "nvidia.com/gpu",
                        "binpack.resources.nvidia.com/gpu": 1,
                    },
                },
                {
                    "name": "network-topology-aware",
                    "arguments": {
                        "weight": 10,
                        "hypernode.binpack.cpu": 5,
                        "hypernode.binpack.memory": 1,
                        "hypernode.binpack.resources": "nvidia.com/gpu",
                        "hypernode.binpack.resources.nvidia.com/gpu": 2,
                        "hypernode.binpack.normal-pod.enable": True,
                        "hypernode.binpack.normal-pod.fading": 0.8,
                    },
                },
            ]
        },
    ],
}
# What vc-controller-manager logs once its queue controller runs.
QUEUE_CONTROLLER_RUNNING = "Starting queue controller."


def built(script: str, binary: str) -> Path:
    done = subprocess.run(
        ["bash", str(REPO / "hack" / script)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"hack/{script} failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1]) / binary


@dataclass
class Phase:
    """One scheduler and one ask on the workload, as time passes."""

    kube: Kube
    cluster: Cluster
    workload: list[Gang]
    ask: Ask
    scheduler: str
    namespace: str
    scale: float
    nodes: dict[str, str] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float | None] = field(default_factory=dict)

    def run(self) -> Run:
        self.kube.post("/api/v1/namespaces", {"metadata": {"name": self.namespace}}).expect(201)
        until = max(g.arrival for g in self.workload)
        waiting = sorted(self.workload, key=lambda g: g.arrival)
        running: list[Gang] = []
        began = time.monotonic()
        while True:
            now = (time.monotonic() - began) * self.scale
            while waiting and waiting[0].arrival <= now:
                gang = waiting.pop(0)
                for obj in gang_objects(
                    self.cluster, gang, self.ask, scheduler=self.scheduler, namespace=self.namespace
                ):
                    self.kube.create(obj, self.namespace)
                running.append(gang)
            if now > until:
                break
            self._observe(now)
            for gang in list(running):
                members = [gang.member(i) for i in range(gang.pods)]
                if not all(m in self.started for m in members):
                    continue
                if now >= max(self.started[m] for m in members) + gang.duration:
                    self._finish(gang, members, now)
                    running.remove(gang)
            time.sleep(POLL_SECONDS)
        for name in self.started:
            self.ended.setdefault(name, None)
        self.kube.wipe_namespace(self.namespace)
        return Run(self.nodes, self.started, self.ended, until)

    def _observe(self, now: float) -> None:
        pods = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods").expect(200)
        for item in pods["items"]:
            name, node = item["metadata"]["name"], item["spec"].get("nodeName")
            if node and name not in self.started:
                self.nodes[name], self.started[name] = node, now

    def _finish(self, gang: Gang, members: list[str], now: float) -> None:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        for member in members:
            self.kube.delete(f"{base}/{member}", grace_period_seconds=0).expect(200, 404)
            self.ended[member] = now
        groups = f"/apis/{VOLCANO_API}/namespaces/{self.namespace}/podgroups/{gang.name}"
        self.kube.delete(groups).expect(200, 404)


def start_scheduler(
    scheduler: str, plane: ControlPlane, scratch: Path, vc_scheduler: Path | None, soft_wait: float
) -> subprocess.Popen[bytes]:
    log = scratch / f"{scheduler}.log"
    if scheduler == SCHEDULER:
        config = BATCHSCHED_CONFIG
        if soft_wait:
            config = scratch / "batchsched.yaml"
            settings = yaml.safe_load(BATCHSCHED_CONFIG.read_text())
            settings.setdefault("topology", {})["softWait"] = soft_wait
            config.write_text(yaml.safe_dump(settings))
        command = Path(sys.executable).parent / "batchsched"
        argv = [str(command), "run", "--kubeconfig", str(plane.kubeconfig)]
        argv += ["--config", str(config), f"--metrics-port={free_port()}"]
        process = spawn(argv, log)
        ready = "cache synced"
    else:
        assert vc_scheduler is not None
        conf = scratch / "volcano-scheduler.conf"
        conf.write_text(yaml.safe_dump(VOLCANO_CONFIG))
        argv = [
            str(vc_scheduler),
            f"--kubeconfig={plane.kubeconfig}",
            f"--scheduler-conf={conf}",
            f"--scheduler-name={VOLCANO_SCHEDULER}",
            "--leader-elect=false",
            f"--listen-address=127.0.0.1:{free_port()}",
            f"--healthz-address=127.0.0.1:{free_port()}",
            "--cache-dumper=false",
            "-v=2",
        ]
        process = spawn(argv, log)
        # Logged once its configuration is read; it then lists the cluster, which the
        # first phase's arrivals wait for as any pod would.
        ready = "Finished loading scheduler config"
    deadline = time.monotonic() + 120
    while ready not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(
                f"{scheduler} did not start:\n{log.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.2)
    return process


def prepare(plane: ControlPlane, cluster: Cluster, controller: Path) -> None:
    """The nodes, HyperNodes and Queues, and Volcano's queue controller opening them."""
    kube = plane.kube()
    for obj in cluster_objects(cluster):
        kube.create(obj)
        if obj["kind"] == "Node":
            # No node lifecycle controller runs here to lift the not-ready taint.
            kube.patch(f"/api/v1/nodes/{obj['metadata']['name']}", {"spec": {"taints": None}})
    plane.run(
        "vc-controller-manager",
        [
            str(controller),
            f"--kubeconfig={plane.kubeconfig}",
            "--leader-elect=false",
            f"--scheduler-name={VOLCANO_SCHEDULER}",
            "--controllers=queue-controller",
            "-v=3",
        ],
        started=lambda log: QUEUE_CONTROLLER_RUNNING in log,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, racks_per_spine=2, nodes_per_rack=4, gangs=40, seeds="1")
    parser.add_argument("--schedulers", default="batchsched,volcano")
    parser.add_argument("--scale", type=float, default=240.0)
    parser.add_argument(
        "--soft-wait", default="0", help="batchsched's topology.softWait in workload time; 0: none"
    )
    parser.add_argument("--log-dir", help="keep the schedulers' logs there (default: deleted)")
    args = parser.parse_args()
    cluster = cluster_of(args)
    soft_wait = soft_wait_of(args.soft_wait) / args.scale
    names = {"batchsched": SCHEDULER, "volcano": VOLCANO_SCHEDULER}
    schedulers = [names[s] for s in args.schedulers.split(",")]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in args.schedulers.split(",")}
    vc_scheduler = built("vc-scheduler.sh", "vc-scheduler") if "volcano" in runs else None
    controller = built("vc-controller-manager.sh", "vc-controller-manager")
    crds = load_manifests(REPO / "crds") + peer_crds("volcano")
    started = time.perf_counter()
    with (
        ControlPlane.start(find_assets(), crds=crds) as plane,
        tempfile.TemporaryDirectory() as tmp,
    ):
        prepare(plane, cluster, controller)
        for seed in seeds(args.seeds):
            workload = gangs(cluster, args.gangs, args.load, random.Random(seed))
            for shown, scheduler in zip(runs, schedulers, strict=True):
                process = start_scheduler(scheduler, plane, Path(tmp), vc_scheduler, soft_wait)
                try:
                    for ask in (Ask(a) for a in args.asks.split(",")):
                        namespace = f"{shown}-{ask}-{seed}"
                        phase = Phase(
                            plane.kube(), cluster, workload, ask, scheduler, namespace, args.scale
                        )
                        run = phase.run()
                        figures = measure(cluster, workload, run)
                        runs[shown].append({"ask": str(ask), "seed": seed, **figures})
                        print(f"{shown} {ask} seed {seed}: {figures}", file=sys.stderr)
                finally:
                    process.terminate()
                    process.wait(30)
    summaries = {shown: summarise(r) for shown, r in runs.items() if r}
    for shown, summary in summaries.items():
        print(f"--- {shown}\n{table(summary)}", file=sys.stderr)
    settings = {
        "cluster": cluster.report(),
        "gangs": args.gangs,
        "load": args.load,
        "scale": args.scale,
        "soft_wait_seconds": soft_wait * args.scale,
        "volcano_config": VOLCANO_CONFIG,
    }
    print_report(settings, summaries, runs, started)


if __name__ == "__main__":
    main()
