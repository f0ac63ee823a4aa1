"""Test support: a real Kubernetes control plane on loopback and a raw REST client.

Shared by the integration tests, operator tests and benchmarks; nothing in the
scheduler itself imports it.
"""

from batchsched.testing.controlplane import (
    ControlPlane,
    ControlPlaneError,
    component_binary,
    find_assets,
)
from batchsched.testing.kube import JSON, ClusterObjects, Kube, KubeError, Resource, Response
from batchsched.testing.peers import PEERS, PeersUnavailable, peer_crds, peer_source

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
