"""Our credential loading against a real API server: it must authenticate us as the
identity each form names, which the server tells through a SelfSubjectReview."""

from __future__ import annotations

import shutil
import ssl
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from batchsched.k8s.client import Api
from batchsched.k8s.credentials import Credentials, load_credentials
from batchsched.testing import ControlPlane, Kube
from batchsched.testing.controlplane import ADMIN_USER

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
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sched"}}
    kube.create(account, namespace)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = kube.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/sched/token", request
    ).expect(201)["status"]["token"]
    (directory / "token").write_text(token)
    assert await whoami(credentials) == f"system:serviceaccount:{namespace}:sched"
