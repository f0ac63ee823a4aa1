"""Reading kubeconfigs and service accounts as kubectl does, from files in tmp_path.

Exec plugins are a small Python script that answers with whatever `reply` holds and
records each run, so the tests can count how often the plugin was asked.
"""

import asyncio
import base64
import inspect
import json
import logging
import os
import ssl
import stat
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import EXIT_BAD_INPUT, main
from batchsched.k8s import credentials as credentials_module
from batchsched.k8s.client import USER_AGENT, Api
from batchsched.k8s.credentials import (
    EXEC_TIMEOUT_SECONDS,
    REFRESH_SECONDS,
    SERVICE_ACCOUNT_DIR,
    SERVICE_ACCOUNT_DIR_ENV,
    Credentials,
    CredentialsError,
    TokenSource,
    environment_proxy,
    load_credentials,
)
from batchsched.k8s.leader import LeaderElection

JSON = dict[str, Any]
EXEC_V1 = "client.authentication.k8s.io/v1"

PLUGIN = """\
#!{python}
import os, sys
from pathlib import Path

here = Path(__file__).parent
with open(here / "runs", "a") as runs:
    runs.write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
if (here / "fail").exists():
    sys.stderr.write("the session expired: log in again\\n")
    sys.exit(3)
sys.stdout.write((here / "reply").read_text())
"""


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the machine's kubeconfig nor a pod's environment may leak into a test."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key, good as a CA and as a client certificate."""
    work = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=batchsched-test",
         "-keyout", str(work / "key.pem"), "-out", str(work / "cert.pem")],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return (work / "cert.pem").read_bytes(), (work / "key.pem").read_bytes()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    path: Path,
    user: JSON | None = None,
    *,
    cluster: JSON | None = None,
    context: str = "test",
) -> Path:
    """A kubeconfig with one context `context` joining cluster `c` and user `u`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document: JSON = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://k8s.test:6443"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user or {}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(document))
    return path


async def test_a_token_and_inline_ca(tmp_path: Path, pem: tuple[bytes, bytes]) -> None:
    cluster = {"server": "https://k8s.test:6443/", "certificate-authority-data": b64(pem[0])}
    path = kubeconfig(tmp_path / "config", {"token": "abc"}, cluster=cluster)
    credentials = load_credentials(str(path))
    assert credentials.server == "https://k8s.test:6443"
    assert credentials.ca == pem[0]
    assert await credentials.token() == "abc"
    assert credentials.client_certificate is None
    assert credentials.ssl_context().verify_mode == ssl.CERT_REQUIRED


async def test_relative_files_are_found_next_to_the_kubeconfig(
    tmp_path: Path, pem: tuple[bytes, bytes]
) -> None:
    (tmp_path / "kube" / "pki").mkdir(parents=True)
    (tmp_path / "kube" / "pki" / "ca.crt").write_bytes(pem[0])
    (tmp_path / "kube" / "pki" / "me.crt").write_bytes(pem[0])
    (tmp_path / "kube" / "pki" / "me.key").write_bytes(pem[1])
    user = {"client-certificate": "pki/me.crt", "client-key": "pki/me.key"}
    cluster = {"server": "https://k8s.test", "certificate-authority": "pki/ca.crt"}
    credentials = load_credentials(
        str(kubeconfig(tmp_path / "kube" / "config", user, cluster=cluster))
    )
    assert credentials.ca == tmp_path / "kube" / "pki" / "ca.crt"
    assert credentials.client_certificate == tmp_path / "kube" / "pki" / "me.crt"
    assert credentials.client_key == tmp_path / "kube" / "pki" / "me.key"
    assert await credentials.token() is None
    credentials.ssl_context()


def test_inline_client_certificate_reaches_openssl_only_through_private_files(
    tmp_path: Path, pem: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    user = {"client-certificate-data": b64(pem[0]), "client-key-data": b64(pem[1])}
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", user)))
    assert (credentials.client_certificate, credentials.client_key) == pem
    assert b64(pem[1]) not in repr(credentials) and "PRIVATE" not in repr(credentials)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with credentials_module._files(tmp_path, pem[1]) as (unchanged, written):
        assert unchanged == tmp_path
        assert written.read_bytes() == pem[1]
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    credentials.ssl_context()
    assert list(scratch.iterdir()) == []


def test_insecure_skip_tls_verify_and_tls_server_name(tmp_path: Path) -> None:
    cluster = {
        "server": "https://10.1.2.3",
        "insecure-skip-tls-verify": True,
        "tls-server-name": "api.internal",
    }
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", cluster=cluster)))
    assert credentials.tls_server_name == "api.internal"
    context = credentials.ssl_context()
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_insecure_with_a_ca_is_refused_as_kubectl_does(
    tmp_path: Path, pem: tuple[bytes, bytes]
) -> None:
    cluster = {
        "server": "https://k8s.test",
        "insecure-skip-tls-verify": True,
        "certificate-authority-data": b64(pem[0]),
    }
    with pytest.raises(CredentialsError, match="insecure-skip-tls-verify together with a CA"):
        load_credentials(str(kubeconfig(tmp_path / "config", cluster=cluster)))


def test_unusable_pem_is_reported_by_what_it_is(tmp_path: Path) -> None:
    cluster = {"server": "https://k8s.test", "certificate-authority-data": b64(b"not pem")}
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", cluster=cluster)))
    with pytest.raises(CredentialsError, match=r"certificate authority \(inline data\)"):
        credentials.ssl_context()
    user = {"client-certificate-data": b64(b"x"), "client-key-data": b64(b"y")}
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", user)))
    with pytest.raises(CredentialsError, match=r"client certificate \(inline data\)"):
        credentials.ssl_context()


async def test_token_file_is_read_again_and_survives_a_missing_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "token").write_text("first\n")
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", {"tokenFile": "token"})))
    assert await credentials.token() == "first"
    (tmp_path / "token").write_text("second")
    assert await credentials.token() == "second"
    (tmp_path / "token").unlink()
    with caplog.at_level(logging.WARNING):
        assert await credentials.token() == "second"
    assert "cannot read token file" in caplog.text


async def test_kubeconfig_list_merges_first_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pem: tuple[bytes, bytes]
) -> None:
    first = kubeconfig(tmp_path / "a" / "config", {"token": "from-a"}, context="a")
    # The second file's context `a` and user `u` lose to the first file's; its cluster
    # `c` too. Only its own names (`b`, `u2`, `c2`) and nothing else come from it.
    second = tmp_path / "b" / "config"
    second.parent.mkdir()
    (second.parent / "ca.crt").write_bytes(pem[0])
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "b",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://loser.test"}},
                    {
                        "name": "c2",
                        "cluster": {"server": "https://b.test", "certificate-authority": "ca.crt"},
                    },
                ],
                "contexts": [{"name": "b", "context": {"cluster": "c2", "user": "u2"}}],
                "users": [
                    {"name": "u", "user": {"token": "loser"}},
                    {"name": "u2", "user": {"token": "from-b"}},
                ],
            }
        )
    )
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", f"{missing}:{first}::{second}")
    credentials = load_credentials(None)
    assert (credentials.server, await credentials.token()) == ("https://k8s.test:6443", "from-a")

    # The current-context comes from the first file that sets one.
    first.write_text(first.read_text().replace("current-context: a", "current-context: ''"))
    credentials = load_credentials(None)
    assert (credentials.server, await credentials.token()) == ("https://b.test", "from-b")
    assert credentials.ca == second.parent / "ca.crt"

    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(CredentialsError, match="none of the files in \\$KUBECONFIG exists"):
        load_credentials(None)


async def test_home_kubeconfig_is_the_last_resort(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match=r"home/\.kube/config does not exist"):
        load_credentials(None)
    kubeconfig(tmp_path / "home" / ".kube" / "config", {"token": "t"})
    assert (await load_credentials(None).token()) == "t"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("current-context"), "no current-context is set"),
        (
            lambda d: d.update({"current-context": "other"}),
            "current-context 'other' is not defined",
        ),
        (
            lambda d: d["contexts"][0]["context"].update(cluster="nope"),
            "cluster 'nope' is not defined",
        ),
        (lambda d: d["contexts"][0]["context"].update(user="nope"), "user 'nope' is not defined"),
        (lambda d: d["clusters"][0]["cluster"].pop("server"), "cluster 'c' has no server"),
        (lambda d: d["clusters"][0]["cluster"].update(server="k8s.test"), "is not an http"),
        (lambda d: d.update(users={"u": {}}), "users is not a list"),
        (
            lambda d: d["clusters"][0]["cluster"].update({"certificate-authority": "ca.crt"}),
            "certificate-authority .*ca.crt does not exist",
        ),
        (
            lambda d: d["users"][0]["user"].update({"client-certificate-data": "@@"}),
            "client-certificate-data is not base64",
        ),
        (
            lambda d: d["users"][0]["user"].update({"client-certificate-data": "eA=="}),
            "needs both certificate and key",
        ),
        (lambda d: d["users"][0]["user"].update(tokenFile="gone"), "cannot read token file"),
    ],
)
def test_problems_are_named(tmp_path: Path, edit: Any, message: str) -> None:
    path = kubeconfig(tmp_path / "config", {"token": "t"})
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(CredentialsError, match=message) as raised:
        load_credentials(str(path))
    assert str(path) in str(raised.value)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match=r"kubeconfig .*/absent: No such file"):
        load_credentials(str(tmp_path / "absent"))
    (tmp_path / "bad").write_text("clusters: [\n")
    with pytest.raises(CredentialsError, match=r"kubeconfig .*/bad is not valid YAML"):
        load_credentials(str(tmp_path / "bad"))
    (tmp_path / "list").write_text("- 1\n")
    with pytest.raises(CredentialsError, match=r"kubeconfig .*/list is not a mapping"):
        load_credentials(str(tmp_path / "list"))


@pytest.mark.parametrize(
    ("user", "message"),
    [
        (
            {"auth-provider": {"name": "oidc", "config": {}}},
            "auth-provider 'oidc' is not supported by batchsched \\(client-go still has it",
        ),
        (
            {"auth-provider": {"name": "gcp"}},
            "auth-provider 'gcp' was removed from client-go in 1.26; use its exec plugin, "
            "gke-gcloud-auth-plugin",
        ),
        (
            {"auth-provider": {"name": "azure"}},
            "auth-provider 'azure' was removed .* kubelogin",
        ),
        (
            {"auth-provider": {"name": "acme"}},
            "auth-provider 'acme' is not supported, nor known to client-go",
        ),
        ({"username": "admin", "password": "secret"}, "username and password are not supported"),
        ({"token": "t", "as": "someone-else"}, "impersonation"),
    ],
)
def test_refused_forms_name_file_and_user(tmp_path: Path, user: JSON, message: str) -> None:
    path = kubeconfig(tmp_path / "config", user)
    with pytest.raises(CredentialsError, match=message) as raised:
        load_credentials(str(path))
    assert f"kubeconfig {path}: user 'u'" in str(raised.value)


def test_run_reports_an_unusable_kubeconfig_as_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = kubeconfig(tmp_path / "config", {"auth-provider": {"name": "gcp"}})
    assert main(["run", "--kubeconfig", str(path), "--metrics-bind-address=0"]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert error.startswith(f"batchsched: kubeconfig {path}: user 'u': auth-provider")
    assert "Traceback" not in error


class Plugin:
    """The exec plugin script in `directory`, and what it answers."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        script = directory / "plugin.py"
        script.write_text(PLUGIN.format(python=sys.executable))
        script.chmod(0o755)

    def answer(self, status: JSON, *, api_version: str = EXEC_V1) -> None:
        reply = {"apiVersion": api_version, "kind": "ExecCredential", "status": status}
        (self.directory / "reply").write_text(json.dumps(reply))

    def fail(self) -> None:
        (self.directory / "fail").touch()

    @property
    def runs(self) -> list[JSON]:
        """The KUBERNETES_EXEC_INFO of each run so far."""
        lines = (self.directory / "runs").read_text().splitlines()
        return [json.loads(line) for line in lines]


def exec_user(**spec: Any) -> JSON:
    return {"exec": {"apiVersion": EXEC_V1, "command": "./plugin.py", **spec}}


def expiring(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


async def test_exec_token_is_kept_until_it_nears_expiry(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "one", "expirationTimestamp": expiring(3600)})
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", exec_user())))
    assert [await credentials.token() for _ in range(3)] == ["one"] * 3
    assert plugin.runs == [
        {"apiVersion": EXEC_V1, "kind": "ExecCredential", "spec": {"interactive": False}}
    ]


async def test_exec_plugin_runs_when_first_asked_and_then_keeps_a_token_without_expiry(
    tmp_path: Path,
) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "forever"})
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", exec_user())))
    assert not (tmp_path / "runs").exists()
    assert await credentials.token() == "forever"
    plugin.answer({"token": "never asked for"})
    assert await credentials.token() == "forever"
    assert len(plugin.runs) == 1


async def test_exec_plugin_runs_again_when_its_token_was_refused(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "one", "expirationTimestamp": expiring(3600)})
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", exec_user())))
    assert await credentials.token() == "one"
    plugin.answer({"token": "two", "expirationTimestamp": expiring(3600)})
    assert await credentials.token(fresh=True) == "two"
    assert await credentials.token() == "two"
    assert len(plugin.runs) == 2


async def test_exec_token_is_renewed_before_it_expires(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "one", "expirationTimestamp": expiring(30)})
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", exec_user())))
    assert await credentials.token() == "one"
    plugin.answer({"token": "two", "expirationTimestamp": expiring(3600)})
    assert await credentials.token() == "two"
    assert await credentials.token() == "two"
    assert len(plugin.runs) == 2


async def test_failed_renewal_keeps_a_valid_token_and_reports_an_expired_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "one", "expirationTimestamp": expiring(30)})
    valid = load_credentials(str(kubeconfig(tmp_path / "valid", exec_user())))
    assert await valid.token() == "one"
    plugin.answer({"token": "old", "expirationTimestamp": expiring(-1)})
    expired = load_credentials(str(kubeconfig(tmp_path / "expired", exec_user())))
    assert await expired.token() == "old"
    plugin.fail()
    with caplog.at_level(logging.WARNING):
        assert await valid.token() == "one"
    assert "the session expired" in caplog.text
    with pytest.raises(CredentialsError, match="exited with status 3: the session expired"):
        await expired.token()


async def test_exec_gets_args_env_and_cluster_info(
    tmp_path: Path, pem: tuple[bytes, bytes]
) -> None:
    plugin = Plugin(tmp_path / "bin")
    plugin.answer({"token": "t"})
    # The script records KUBERNETES_EXEC_INFO only; a wrapper checks args and env.
    wrapper = tmp_path / "bin" / "wrapper.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        '[ "$1 $2" = "--region eu" ] && [ "$REGION" = eu ] && exec "$(dirname "$0")/plugin.py"\n'
        "exit 9\n"
    )
    wrapper.chmod(0o755)
    cluster = {
        "server": "https://k8s.test",
        "certificate-authority-data": b64(pem[0]),
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "k8s"}}
        ],
    }
    user = exec_user(
        command="bin/wrapper.sh",
        args=["--region", "eu"],
        env=[{"name": "REGION", "value": "eu"}],
        provideClusterInfo=True,
    )
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", user, cluster=cluster)))
    assert await credentials.token() == "t"
    assert plugin.runs[0]["spec"] == {
        "interactive": False,
        "cluster": {
            "server": "https://k8s.test",
            "certificate-authority-data": b64(pem[0]),
            "config": {"audience": "k8s"},
        },
    }


async def test_exec_client_certificate(tmp_path: Path, pem: tuple[bytes, bytes]) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer(
        {"clientCertificateData": pem[0].decode(), "clientKeyData": pem[1].decode()},
        api_version="client.authentication.k8s.io/v1beta1",
    )
    user = exec_user(apiVersion="client.authentication.k8s.io/v1beta1")
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", user)))
    assert credentials.token_source is not None
    assert await credentials.token_source.certificate() == pem
    assert await credentials.token() is None
    assert len(Plugin(tmp_path).runs) == 1, "the certificate and the token come from one run"


async def test_a_static_token_wins_over_exec_as_in_client_go(tmp_path: Path) -> None:
    user = {"token": "static", **exec_user(command="/nonexistent/plugin")}
    assert (await load_credentials(str(kubeconfig(tmp_path / "config", user))).token()) == "static"


@pytest.mark.parametrize(
    ("reply", "user", "message"),
    [
        ("not json", {}, "printed no JSON"),
        ('{"kind": "Other"}', {}, "printed something other than an ExecCredential"),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"}',
            {},
            "answered in apiVersion 'client.authentication.k8s.io/v1beta1'",
        ),
        (f'{{"apiVersion": "{EXEC_V1}", "kind": "ExecCredential"}}', {}, "without a status"),
        (
            f'{{"apiVersion": "{EXEC_V1}", "kind": "ExecCredential", "status": {{}}}}',
            {},
            "neither a token nor a client certificate",
        ),
        (
            f'{{"apiVersion": "{EXEC_V1}", "kind": "ExecCredential",'
            ' "status": {"token": "t", "expirationTimestamp": "tomorrow"}}',
            {},
            "expirationTimestamp 'tomorrow' is not an RFC 3339 time",
        ),
        ("", {"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "exec apiVersion"),
        ("", {"interactiveMode": "Always"}, "needs a terminal"),
        (
            "",
            {"command": "no-such-plugin-anywhere", "installHint": "brew install it"},
            "no-such-plugin-anywhere cannot run: No such file or directory \\(brew install it\\)",
        ),
    ],
)
async def test_exec_problems_are_named(
    tmp_path: Path, reply: str, user: JSON, message: str
) -> None:
    Plugin(tmp_path)
    (tmp_path / "reply").write_text(reply)
    path = kubeconfig(tmp_path / "config", exec_user(**user))
    with pytest.raises(CredentialsError, match=message) as raised:
        await load_credentials(str(path)).token()
    assert f"kubeconfig {path}: user 'u'" in str(raised.value)


async def test_exec_failure_carries_the_plugin_error_output(tmp_path: Path) -> None:
    Plugin(tmp_path).fail()
    with pytest.raises(CredentialsError) as raised:
        await load_credentials(str(kubeconfig(tmp_path / "config", exec_user()))).token()
    assert str(raised.value) == (
        f"kubeconfig {tmp_path / 'config'}: user 'u': exec plugin {tmp_path / 'plugin.py'} "
        "exited with status 3: the session expired: log in again"
    )


def service_account(directory: Path, token: str = "sa-token") -> Path:
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_text("ca")
    return directory


async def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = service_account(tmp_path / "sa")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    credentials = load_credentials(None, service_account=directory)
    assert credentials.server == "https://10.96.0.1:443"
    assert credentials.ca == directory / "ca.crt"
    assert await credentials.token() == "sa-token"
    (directory / "token").write_text("rotated\n")
    assert await credentials.token() == "rotated"

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1")
    assert load_credentials(None, service_account=directory).server == "https://[fd00:10:96::1]:443"


async def test_an_explicit_kubeconfig_wins_over_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    path = kubeconfig(tmp_path / "config", {"token": "mine"})
    assert (
        await load_credentials(str(path), service_account=tmp_path / "absent").token()
    ) == "mine"


def test_in_cluster_problems_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = service_account(tmp_path / "sa", token="")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    with pytest.raises(CredentialsError, match="KUBERNETES_SERVICE_HOST is set but not _PORT"):
        load_credentials(None, service_account=directory)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(CredentialsError, match=f"token file {directory / 'token'} is empty"):
        load_credentials(None, service_account=directory)
    (directory / "ca.crt").unlink()
    with pytest.raises(CredentialsError, match=r"in-cluster service account .*ca\.crt does not"):
        load_credentials(None, service_account=directory)


class Counting(TokenSource):
    def __init__(self) -> None:
        self.asked = 0

    async def token(self, *, fresh: bool = False) -> str:
        self.asked += 1
        return f"token-{self.asked}"


async def test_api_sends_the_token_and_asks_for_it_once_per_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    source = Counting()
    api = Api(Credentials(server="https://k8s.test/", token_source=source))
    try:
        assert api.server == "https://k8s.test"
        assert (await api.headers())["Authorization"] == "Bearer token-1"
        now[0] += REFRESH_SECONDS / 2
        assert (await api.headers())["Authorization"] == "Bearer token-1"
        now[0] += REFRESH_SECONDS
        assert (await api.headers()) == {
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": USER_AGENT,
            "Authorization": "Bearer token-2",
        }
    finally:
        monkeypatch.undo()  # the event loop's own clock must move again for close()
        await api.close()


SLOW_PLUGIN = """\
#!{python}
import time

time.sleep(600)
"""


async def test_a_plugin_past_its_timeout_is_killed_without_holding_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The leader must be able to ask for a token again before its renew deadline.
    renew_deadline = inspect.signature(LeaderElection).parameters["renew_seconds"].default
    assert renew_deadline > EXEC_TIMEOUT_SECONDS
    monkeypatch.setattr(credentials_module, "EXEC_TIMEOUT_SECONDS", 0.5)
    script = tmp_path / "plugin.py"
    script.write_text(SLOW_PLUGIN.format(python=sys.executable))
    script.chmod(0o755)
    # The plugin is known by the process the scheduler started, not by anything the
    # plugin does: on a busy machine its interpreter may not even be up when it is killed.
    started: list[asyncio.subprocess.Process] = []
    spawned = asyncio.Event()
    spawn = asyncio.create_subprocess_exec

    async def recording(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        started.append(await spawn(*args, **kwargs))
        spawned.set()
        return started[-1]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", exec_user())))
    asking = asyncio.create_task(credentials.token())
    # The loop runs other work while the plugin runs: here, this very wait, which wakes
    # before the plugin's timeout can fire.
    await asyncio.wait_for(spawned.wait(), timeout=60)
    assert not asking.done()
    with pytest.raises(CredentialsError, match=r"plugin\.py did not finish within 0\.5 s"):
        await asyncio.wait_for(asking, timeout=60)
    with pytest.raises(ProcessLookupError):
        os.kill(started[0].pid, 0)


async def test_the_service_account_directory_can_be_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = service_account(tmp_path / "sa", token="from-the-variable")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv(SERVICE_ACCOUNT_DIR_ENV, str(directory))
    credentials = load_credentials(None)
    assert credentials.ca == directory / "ca.crt"
    assert await credentials.token() == "from-the-variable"
    monkeypatch.delenv(SERVICE_ACCOUNT_DIR_ENV)
    with pytest.raises(CredentialsError, match=str(SERVICE_ACCOUNT_DIR)):
        load_credentials(None)


@pytest.mark.parametrize(
    ("server", "environment", "proxy"),
    [
        ("https://k8s.test", {"HTTPS_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
        ("https://k8s.test", {"https_proxy": "proxy:3128"}, "http://proxy:3128"),
        ("https://k8s.test", {"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:1"}, "http://a:1"),
        ("https://k8s.test", {"HTTP_PROXY": "http://proxy:3128"}, None),
        ("http://k8s.test", {"HTTP_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
        ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://127.0.0.2:6443", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
        ("https://k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "a, k8s.test"}, None),
        ("https://api.k8s.test", {"HTTPS_PROXY": "http://p:1", "no_proxy": "k8s.test"}, None),
        ("https://k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".k8s.test"}, "http://p:1"),
        ("https://a.k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.k8s.test"}, None),
        ("https://k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.k8s.test"}, "http://p:1"),
        ("https://notk8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "k8s.test"}, "http://p:1"),
        ("https://k8s.test", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "k8s.test:443"}, None),
        ("https://k8s.test:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "k8s.test:443"}, "http://p:1"),
        ("https://10.1.2.3", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://11.1.2.3", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, "http://p:1"),
        ("https://10.1.2.3", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3"}, None),
    ],
)  # fmt: skip
def test_the_environments_proxy_with_gos_rules(
    monkeypatch: pytest.MonkeyPatch, server: str, environment: dict[str, str], proxy: str | None
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(server) == proxy
    assert Credentials(server=server).proxy() == proxy


def test_proxy_url_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://from-the-environment:3128")
    cluster = {"server": "https://k8s.test", "proxy-url": "https://proxy.test:8443"}
    credentials = load_credentials(str(kubeconfig(tmp_path / "config", cluster=cluster)))
    assert credentials.proxy() == "https://proxy.test:8443"


@pytest.mark.parametrize(
    ("proxy", "message"),
    [
        ("socks5://proxy.test:1080", "only http and https proxies are supported, not socks5"),
        ("ftp://proxy.test", "only http and https proxies are supported"),
        ("http://", "names no host"),
    ],
)
def test_unusable_proxies_are_refused_by_their_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proxy: str, message: str
) -> None:
    cluster = {"server": "https://k8s.test", "proxy-url": proxy}
    path = kubeconfig(tmp_path / "config", cluster=cluster)
    with pytest.raises(CredentialsError, match=message) as raised:
        load_credentials(str(path))
    assert f"kubeconfig {path}: cluster 'c': proxy-url {proxy!r}" in str(raised.value)

    monkeypatch.setenv("HTTPS_PROXY", proxy)
    with pytest.raises(CredentialsError, match=message) as raised:
        Credentials(server="https://k8s.test").proxy()
    assert f"the environment's proxy {proxy!r}" in str(raised.value)


async def test_opening_a_client_runs_the_plugin_and_reports_its_failure(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answer({"token": "t"})
    api = Api(load_credentials(str(kubeconfig(tmp_path / "config", exec_user()))))
    try:
        await api.open()
        assert len(plugin.runs) == 1
        assert (await api.headers())["Authorization"] == "Bearer t"
    finally:
        await api.close()
    plugin.fail()
    api = Api(load_credentials(str(kubeconfig(tmp_path / "other", exec_user()))))
    try:
        with pytest.raises(CredentialsError, match="exited with status 3"):
            await api.open()
    finally:
        await api.close()
