"""`kubectl apply -f crds/ -f manifests/` is all a user needs: every document is accepted
by the real API server (server-side apply), in the order kubectl sends them.

kubectl applies the directories in the order given and each directory's files in name
order, one document after another; it does not sort by kind. So a namespaced object in
a file that sorts before its Namespace's is refused on a fresh cluster (the namespace
is not found), and the user has to apply twice. Namespaces are therefore created for
real, when their document comes up, and everything else is a dry run: a dry run of an
object in a namespace not yet created fails just as the real request would."""

from __future__ import annotations

import pytest

from .operator_support import REPO
from tests.support import Kube
from tests.support.objects import load_manifests

pytestmark = pytest.mark.integration

NAMESPACE = "batchsched-system"


def test_crds_and_manifests_apply_cleanly_in_kubectls_order(kube: Kube) -> None:
    docs = load_manifests(REPO / "crds", REPO / "manifests")  # kubectl's order
    namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    assert namespaces == {NAMESPACE}
    assert kube.get(f"/api/v1/namespaces/{NAMESPACE}").status == 404
    try:
        refused = []
        for doc in docs:
            res = kube.resource_for(doc["apiVersion"], doc["kind"])
            meta = doc["metadata"]
            path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"])
            query = {"fieldManager": "manifest-test", "force": "true"}
            if doc["kind"] != "Namespace":
                query["dryRun"] = "All"
            reply = kube.request(
                "PATCH", path, doc, query=query, content_type="application/apply-patch+yaml"
            )
            if reply.status not in (200, 201):
                refused.append((doc["kind"], meta["name"], reply.status, reply.body.get("message")))
        assert refused == []
    finally:
        kube.wipe_namespace(NAMESPACE)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "Namespace",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
