"""Our credential loading against a real API server: it must authenticate us as the
identity each form names, which the server tells through a SelfSubjectReview."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client import REGISTRY

from batchsched.k8s import client as client_module
from batchsched.k8s.client import Api
from batchsched.k8s.credentials import SERVICE_ACCOUNT_DIR_ENV, Credentials, load_credentials
from batchsched.k8s.leader import LeaderElection

from .operator_support import account_token
from tests.support import ControlPlane, Kube
from tests.support.controlplane import ADMIN_USER

pytestmark = pytest.mark.integration

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


async def whoami(credentials: Credentials, *, get: str | None = None) -> str:
    """The user name the API server sees, after a GET of `get` if given."""
    api = Api(credentials)
    try:
        if get is not None:
            await api.get(get)
        review = await api.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW)
    finally:
        await api.close()
    return str(review["status"]["userInfo"]["username"])


def rewrite_kubeconfig(
    control_plane: ControlPlane, path: Path, **edits: Mapping[str, object]
) -> Path:
    """The control plane's kubeconfig at `path`, its cluster and user updated by `edits`."""
    document = yaml.safe_load(control_plane.kubeconfig.read_text())
    document["clusters"][0]["cluster"].update(edits.get("cluster", {}))
    document["users"][0]["user"] = edits.get("user", document["users"][0]["user"])
    path.write_text(yaml.safe_dump(document))
    return path


async def test_the_control_planes_kubeconfig(control_plane: ControlPlane) -> None:
    credentials = load_credentials(str(control_plane.kubeconfig))
    assert credentials.server == control_plane.server
    assert await whoami(credentials, get="/api/v1/namespaces/default") == ADMIN_USER


async def test_exec_plugin_and_tls_server_name(control_plane: ControlPlane, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        f"#!{sys.executable}\nimport json\nprint(json.dumps({{"
        '"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
        f'"status": {{"token": {control_plane.token!r}}}}}))\n'
    )
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py"}}
    # The serving certificate names 127.0.0.1 and localhost.
    path = rewrite_kubeconfig(
        control_plane, tmp_path / "config", user=user, cluster={"tls-server-name": "localhost"}
    )
    assert await whoami(load_credentials(str(path))) == ADMIN_USER

    path = rewrite_kubeconfig(control_plane, path, cluster={"tls-server-name": "elsewhere.test"})
    with pytest.raises(ssl.SSLCertVerificationError):
        await whoami(load_credentials(str(path)))


async def test_in_cluster_with_a_rotated_token(
    control_plane: ControlPlane,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(control_plane.token)
    shutil.copy(control_plane.ca_file, directory / "ca.crt")
    server = urlsplit(control_plane.server)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))

    credentials = load_credentials(None, service_account=directory)
    assert await whoami(credentials, get=f"/api/v1/namespaces/{namespace}") == ADMIN_USER

    # What the kubelet does to a projected token: a new one for another identity here.
    (directory / "token").write_text(account_token(kube, namespace, "sched"))
    assert await whoami(credentials) == f"system:serviceaccount:{namespace}:sched"


def unauthorized_retries() -> float:
    labels = {"reason": "unauthorized"}
    return REGISTRY.get_sample_value("batchsched_api_request_retries_total", labels) or 0.0


async def eventually(condition: Callable[[], bool], what: str, *, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(0.1)


async def test_a_revoked_token_replaced_in_its_file_costs_the_leader_nothing(
    control_plane: ControlPlane,
    kube: Kube,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Service account tokens, which the API server revokes with their account.
    old = account_token(kube, namespace, "old")
    new = account_token(kube, namespace, "new")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "leases"},
        "rules": [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "create", "update"],
            }
        ],
    }
    kube.create(role, namespace)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "leases"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
        "subjects": [
            {"kind": "ServiceAccount", "name": name, "namespace": namespace}
            for name in ("old", "new")
        ],
    }
    kube.create(binding, namespace)
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(old)
    shutil.copy(control_plane.ca_file, directory / "ca.crt")
    server = urlsplit(control_plane.server)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setenv(SERVICE_ACCOUNT_DIR_ENV, str(directory))
    # Only a 401 may make the client read the file again within this test.
    monkeypatch.setattr(client_module, "REFRESH_SECONDS", 3600.0)

    api = Api(load_credentials(None))
    leader = LeaderElection(
        api,
        namespace=namespace,
        name="batch-scheduler",
        identity="me",
        lease_seconds=15,  # whole seconds, as the Lease stores them
        retry_seconds=0.2,
    )
    running = asyncio.create_task(leader.run())
    try:
        await asyncio.wait_for(leader.acquired.wait(), 30)
        before = unauthorized_retries()
        # What the kubelet does when it rotates a projected token, and its old one revoked.
        (directory / "token").write_text(new)
        kube.delete(f"/api/v1/namespaces/{namespace}/serviceaccounts/old").expect(200)
        # The API server keeps accepting a token it recently accepted for a few seconds.
        revoked = kube.with_token(old)
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        await eventually(lambda: revoked.get(path).status == 401, "the old token refused")
        await eventually(lambda: unauthorized_retries() > before, "a renewal refused")
        lease = f"{path}/batch-scheduler"
        refused_at = kube.get(lease).expect(200)["spec"]["renewTime"]
        await eventually(
            lambda: kube.get(lease).expect(200)["spec"]["renewTime"] != refused_at,
            "a renewal after the refused one",
        )
        assert not running.done()
        assert leader.leading()
        assert unauthorized_retries() == before + 1
        review = await api.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW)
        assert review["status"]["userInfo"]["username"] == (
            f"system:serviceaccount:{namespace}:new"
        )
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await api.close()
