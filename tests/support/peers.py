"""The released CRDs and sources of the schedulers batchsched stands in for.

`hack/peer-crds.sh` downloads each peer's Go module at the version pinned in
`hack/peers/<peer>/go.mod` and copies the CRD files its `crds` list names, unchanged,
into a cache directory; this module reads that directory. Tests install these files
as they are (defaults, enums, validation), never a copy written by hand.
"""

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.support.kube import JSON
from tests.support.objects import load_manifests

PEERS_ENV = "BATCHSCHED_PEER_CRDS"
SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "peer-crds.sh"
# The peers served by a released module: Volcano v1.15.1, scheduler-plugins v0.34.7
# (scheduling.x-k8s.io) and v0.22.6 (its last release serving scheduling.sigs.k8s.io).
PEERS = ("volcano", "scheduler-plugins", "scheduler-plugins-sigs")


class PeersUnavailable(Exception):
    """The peers' modules could not be downloaded (no Go toolchain, no proxy)."""


def peers_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The directory `hack/peer-crds.sh` prints: BATCHSCHED_PEER_CRDS if set (as
    `make test` sets it), else the script's output (it answers from its cache at once
    once the modules are downloaded)."""
    value = environ.get(PEERS_ENV)
    if value:
        return Path(value)
    done = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, check=False, timeout=600
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise PeersUnavailable(f"{SCRIPT} failed:\n{done.stderr.strip()}")
    return Path(lines[-1])


def peer_crds(peer: str, environ: Mapping[str, str] = os.environ) -> list[JSON]:
    """The CRDs of `peer` (one of PEERS), as its release ships them."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; one of {', '.join(PEERS)}")
    return load_manifests(peers_dir(environ) / peer / "crds")


def peer_source(peer: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The released source tree of `peer` (read-only), for its documented examples."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; one of {', '.join(PEERS)}")
    return (peers_dir(environ) / peer / "source").resolve()
