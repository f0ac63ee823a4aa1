"""`kubectl apply -f crds/ -f manifests/` is all a user needs: every document is accepted
by the real API server (server-side apply, dry run), in that order."""

from __future__ import annotations

import pytest

from batchsched.testing import Kube
from batchsched.testing.objects import load_manifests

from .operator_support import REPO

pytestmark = pytest.mark.integration


def test_crds_and_manifests_apply_cleanly(kube: Kube) -> None:
    docs = load_manifests(REPO / "crds", REPO / "manifests")
    namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert namespaces == {"batchsched-system"}
    made = []
    for name in namespaces:
        if kube.get(f"/api/v1/namespaces/{name}").status == 404:
            # A dry run of namespaced objects needs their namespace to exist.
            kube.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
            made.append(name)
    try:
        refused = []
        for doc in docs:
            res = kube.resource_for(doc["apiVersion"], doc["kind"])
            meta = doc["metadata"]
            path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"])
            reply = kube.request(
                "PATCH",
                path,
                doc,
                query={"dryRun": "All", "fieldManager": "manifest-test", "force": "true"},
                content_type="application/apply-patch+yaml",
            )
            if reply.status not in (200, 201):
                refused.append((doc["kind"], meta["name"], reply.status, reply.body.get("message")))
        assert refused == []
    finally:
        for name in made:
            kube.wipe_namespace(name)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "Namespace",
            "Service",
            "ServiceAccount",
        ]
    )
