"""Test support: a real Kubernetes control plane on loopback and a raw REST client.

Shared by the integration tests, operator tests and benchmarks; nothing in the
scheduler itself imports it.
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
