"""The peers' released Go modules, as the Go toolchain downloads them (into its module
cache, outside the repository), and their CRD files installed unchanged.

`install_released_crds` stands in until the control plane installs the peers' released
CRDs itself; the tests that call it then take the CRDs from there instead.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from tests.support import JSON, Kube

SCHEDULER_PLUGINS = ("sigs.k8s.io/scheduler-plugins", "v0.34.7")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def module_dir(module: str, version: str) -> Path:
    """Where `go mod download` puts `module@version` (downloaded if not cached yet)."""
    # Outside any go.mod, so no module's requirements are consulted or changed.
    with tempfile.TemporaryDirectory() as neutral:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=neutral,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {module}@{version}: {done.stdout}{done.stderr}")
    return Path(json.loads(done.stdout)["Dir"])


def _established(crd: JSON) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def install_released_crds(kube: Kube, files: Iterable[Path]) -> list[JSON]:
    """Create the CRDs of `files`, or replace the ones of the same name, as written; wait
    until each is established and its objects can be listed. Returns the CRDs."""
    crds = [
        doc
        for path in files
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]
    for crd in crds:
        name = crd["metadata"]["name"]
        current = kube.get(f"{CRDS}/{name}")
        if current.status == 404:
            kube.post(CRDS, crd).expect(201)
        else:
            version = current.expect(200)["metadata"]["resourceVersion"]
            replacement = {**crd, "metadata": {**crd["metadata"], "resourceVersion": version}}
            kube.put(f"{CRDS}/{name}", replacement).expect(200)
    for crd in crds:
        spec = crd["spec"]
        kube.wait_for(f"{CRDS}/{crd['metadata']['name']}", _established)
        served = next(v["name"] for v in spec["versions"] if v["storage"])
        kube.wait_for(f"/apis/{spec['group']}/{served}/{spec['names']['plural']}", lambda _: True)
    return crds


@pytest.fixture(name="scheduler_plugins", scope="module")
def scheduler_plugins_fixture(kube: Kube) -> Path:
    """scheduler-plugins' released module, its coscheduling CRD installed as shipped."""
    directory = module_dir(*SCHEDULER_PLUGINS)
    install_released_crds(kube, [directory / "manifests" / "coscheduling" / "crd.yaml"])
    return directory
