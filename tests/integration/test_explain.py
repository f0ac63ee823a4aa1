"""`kubectl batchsched explain` on the real control plane: the installed plugin
executable (what kubectl runs for `kubectl batchsched`) reads the cluster through a
kubeconfig and names why a gang cannot fit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .operator_support import add_nodes, create
from tests.support import ClusterObjects, ControlPlane, Kube
from tests.support.objects import pod, pod_group

pytestmark = pytest.mark.integration

# Installed beside the interpreter by `pip install -e .` (the console script).
PLUGIN = Path(sys.executable).parent / "kubectl-batchsched"
GROUP_KEY = "scheduling.batchsched.io/group-name"


def plugin(*args: str) -> subprocess.CompletedProcess[str]:
    if not PLUGIN.exists():
        pytest.fail(f"{PLUGIN} is missing: run `pip install -e .` to install the entry points")
    return subprocess.run(
        [str(PLUGIN), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_kubectl_batchsched_explains_a_gang_too_big_for_the_nodes(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, control_plane: ControlPlane
) -> None:
    add_nodes(cluster_objects, kube, [f"small-{namespace}"], {"cpu": "2", "memory": "4Gi"})
    create(kube, namespace, pod_group("big", 2))
    for i in range(2):
        create(
            kube,
            namespace,
            pod(f"big-{i}", {"cpu": "4", "memory": "1Gi"}, annotations={GROUP_KEY: "big"}),
        )
    kubeconfig = str(control_plane.kubeconfig)
    done = plugin("explain", "pg/big", "-n", namespace, "--kubeconfig", kubeconfig)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"pg {namespace}/big: ")
    assert "0 of minMember 2 bound, 2 pending" in lines[0]
    assert lines[1].startswith("cause: needs room for 2 members at once, each 4 cpu"), lines
    assert any("Insufficient cpu" in line for line in lines[3:]), lines

    done = plugin("explain", "pod/big-0", "-n", namespace, "--kubeconfig", kubeconfig, "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["group"]["key"] == f"{namespace}/big"
    assert report["cause"].startswith("needs room for 2 members at once, each 4 cpu")

    done = plugin("explain", "pg/nope", "-n", namespace, "--kubeconfig", kubeconfig)
    assert done.returncode == 1
    assert done.stdout.splitlines()[1] == f"cause: PodGroup {namespace}/nope does not exist"


def test_kubectl_finds_the_plugin_and_runs_it(
    kube: Kube, namespace: str, cluster_objects: ClusterObjects, control_plane: ControlPlane
) -> None:
    """Through kubectl itself, where the machine has one: it finds `kubectl-batchsched`
    on PATH, as it finds every plugin, and `kubectl batchsched explain` runs it."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl on this machine; the plugin executable is tested above")
    create(kube, namespace, pod_group("lonely", 3))
    create(kube, namespace, pod("lonely-0", {"cpu": "1"}, annotations={GROUP_KEY: "lonely"}))
    env = {**os.environ, "PATH": f"{PLUGIN.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    args = ["batchsched", "explain", "pg/lonely", "-n", namespace]
    done = subprocess.run(
        [kubectl, *args, "--kubeconfig", str(control_plane.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(f"pg {namespace}/lonely: "), done.stdout
