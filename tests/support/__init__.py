"""Test support: a real Kubernetes control plane on loopback, a raw REST client, the
peers' released CRDs, and (in `objects`) the object builders every test shares.

Shared by the tests and the benchmarks; it is not part of the package, so the wheel and
the image carry none of it.
"""

from tests.support.controlplane import (
    ControlPlane,
    ControlPlaneError,
    component_binary,
    find_assets,
)
from tests.support.kube import JSON, ClusterObjects, Kube, KubeError, Resource, Response
from tests.support.peers import PEERS, PeersUnavailable, peer_crds, peer_source

__all__ = [
    "JSON",
    "PEERS",
    "ClusterObjects",
    "ControlPlane",
    "ControlPlaneError",
    "Kube",
    "KubeError",
    "PeersUnavailable",
    "Resource",
    "Response",
    "component_binary",
    "find_assets",
    "peer_crds",
    "peer_source",
]
