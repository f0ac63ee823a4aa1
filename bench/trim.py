"""Cost of the watch's first step on every event: trimming the object and hashing what
is kept (batchsched/k8s/trim.py, fingerprint_of in batchsched/k8s/watch.py).

Usage: python -m bench.trim [--events 20000] [--repeat 9]
Prints one JSON object: microseconds per event for a pod and for a node, each as the
API server sends them once running (a bound pod with its status, containers'
statuses and token volume; a node with its kubelet's conditions, images and info,
managedFields cut as the informers cut them), median and min/max over the repeats.
An unchanged heartbeat costs this and nothing more; any other change adds its parse.
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from batchsched.k8s.trim import trim_node, trim_pod
from batchsched.k8s.watch import fingerprint_of

JSON = dict[str, Any]
STAMP = "2026-01-01T00:00:00Z"


def running_pod() -> JSON:
    met = {"status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-3",
            "namespace": "research",
            "uid": "6b1f0c1e-2f5a-4d2e-9a51-0c7d1e4f9b21",
            "resourceVersion": "184467",
            "creationTimestamp": STAMP,
            "labels": {"app": "train", "job-name": "train", "batch.kubernetes.io/job-name": "t"},
            "annotations": {
                "scheduling.batchsched.io/group-name": "train",
                "scheduling.batchsched.io/gpu-index": "0",
                "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 600 + "}",
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train"}],
        },
        "spec": {
            "schedulerName": "batch-scheduler",
            "nodeName": "node-17",
            "priority": 100,
            "priorityClassName": "batch",
            "preemptionPolicy": "PreemptLowerPriority",
            "restartPolicy": "Never",
            "serviceAccountName": "default",
            "tolerations": [
                {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/train:v3",
                    "command": ["python", "train.py"],
                    "env": [{"name": f"VAR_{i}", "value": str(i)} for i in range(8)],
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                        "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
                    },
                    "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run"}],
                }
            ],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"sources": []}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{**met, "type": t} for t in ("PodScheduled", "Initialized", "Ready")],
            "hostIP": "10.0.0.17",
            "podIP": "10.1.17.3",
            "startTime": STAMP,
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example.com/train:v3",
                    "imageID": "registry.example.com/train@sha256:" + "0" * 64,
                    "containerID": "containerd://" + "1" * 64,
                    "state": {"running": {"startedAt": STAMP}},
                }
            ],
        },
    }


def kubelet_node() -> JSON:
    conditions = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": STAMP,
            "lastTransitionTime": STAMP,
            "reason": f"Kubelet{t}",
            "message": f"kubelet reports {t}",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-17",
            "uid": "0d6c8c2e-5b8e-4f0e-8d3a-1f2e3d4c5b6a",
            "resourceVersion": "184470",
            "labels": {
                "kubernetes.io/hostname": "node-17",
                "topology.kubernetes.io/zone": "zone-b",
                "node.kubernetes.io/instance-type": "gpu-8x",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.1.17.0/24", "providerID": "cloud://node-17"},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "10.0.0.17"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.36.3", "osImage": "Linux", "machineID": "m"},
            "images": [
                {"names": [f"registry.example.com/image-{i}:v1"], "sizeBytes": 10**8}
                for i in range(20)
            ],
        },
    }


def per_event(trim: Callable[[JSON], JSON], obj: JSON, events: int) -> float:
    """Microseconds per event to trim `obj` and hash what is kept."""
    start = time.perf_counter()
    for _ in range(events):
        fingerprint_of(trim(obj))
    return (time.perf_counter() - start) / events * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    cases = {"pod": (trim_pod, running_pod()), "node": (trim_node, kubelet_node())}
    runs: dict[str, list[float]] = {name: [] for name in cases}
    # Interleaved, so that a busy moment of the machine falls on both alike.
    for _ in range(args.repeat):
        for name, (trim, obj) in cases.items():
            runs[name].append(per_event(trim, obj, args.events))
    report = {
        f"{name}_us_per_event": {
            "median": round(statistics.median(times), 2),
            "min": round(min(times), 2),
            "max": round(max(times), 2),
        }
        for name, times in runs.items()
    }
    print(json.dumps({"events": args.events, "repeat": args.repeat, **report}))


if __name__ == "__main__":
    main()
