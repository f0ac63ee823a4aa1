"""Where the API server is and how to prove who we are to it: a kubeconfig, as kubectl
reads it, or the service account of the pod we run in.

Read here rather than by the `kubernetes` package, whose import alone took about 0.15 s
of a 0.5 s start, while batchsched needs only a server, its CA, a client certificate and
a bearer token. Forms that client-go itself dropped, or that would silently act as an
identity other than the one the kubeconfig's owner expects, are refused with the file
and user named, rather than ignored.

Tokens are asked for asynchronously: an exec plugin runs as a subprocess the event loop
waits on, so that a slow plugin never stalls the lease or the watches.
"""

import abc
import asyncio
import base64
import binascii
import contextlib
import ipaddress
import json
import logging
import os
import ssl
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Where tests put a service account of their own instead.
SERVICE_ACCOUNT_DIR_ENV = "BATCHSCHED_SERVICE_ACCOUNT_DIR"

# How often a client asks for the token again. Token files are re-read that often, as
# client-go does, and plugin tokens are renewed that long before they expire, so that a
# token fetched at most this long ago is never sent after its expiry.
REFRESH_SECONDS = 60.0

# A plugin waiting for a login nobody will type would otherwise hang the scheduler; and
# shorter than the lease's renew deadline (10 s), so that a renewal that needs a new
# token can still be made in time after a plugin gave up.
EXEC_TIMEOUT_SECONDS = 5.0

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# The cluster extension handed to plugins that ask for cluster information.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")
# Auth providers client-go dropped in 1.26 in favour of exec plugins.
REMOVED_AUTH_PROVIDERS = {"gcp": "gke-gcloud-auth-plugin", "azure": "kubelogin"}
PROXY_SCHEMES = ("http", "https")


class CredentialsError(Exception):
    """No usable credentials; the message names the file, entry or plugin at fault."""


def service_account_dir() -> Path:
    """The mounted service account's directory: $BATCHSCHED_SERVICE_ACCOUNT_DIR when set,
    else the kubelet's standard path."""
    return Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR)


class TokenSource(abc.ABC):
    """Where bearer tokens come from; asked again every REFRESH_SECONDS, and with
    `fresh` at once when the server refused the last token (401), as client-go does."""

    @abc.abstractmethod
    async def token(self, *, fresh: bool = False) -> str | None:
        """The token to send now, or None to send none."""

    async def certificate(self) -> tuple[bytes, bytes] | None:
        """A client certificate and key the source gives besides tokens (a plugin's)."""
        return None


class StaticToken(TokenSource):
    def __init__(self, value: str) -> None:
        self._value = value

    async def token(self, *, fresh: bool = False) -> str:
        return self._value


class TokenFile(TokenSource):
    """A token that something else rotates in place: the kubelet renews projected
    service-account tokens, and a kubeconfig's tokenFile is there to be renewed."""

    def __init__(self, path: Path, *, where: str) -> None:
        self.path = path
        self._where = where
        self._token = self._read()

    def _read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except (OSError, ValueError) as error:
            raise CredentialsError(
                f"{self._where}: cannot read token file {self.path}: {_reason(error)}"
            ) from None
        if not token:
            raise CredentialsError(f"{self._where}: token file {self.path} is empty")
        return token

    async def token(self, *, fresh: bool = False) -> str:
        """The file read again (a few hundred bytes, not worth a thread); while it
        cannot be read, the token read before, as client-go does: a rotation caught
        halfway must not stop the scheduler."""
        try:
            self._token = self._read()
        except CredentialsError as error:
            log.warning("%s; still using the token read before", error)
        return self._token


@dataclass(frozen=True)
class ExecResult:
    """What a credential plugin printed, in its ExecCredential's status."""

    token: str | None = field(repr=False)
    client_certificate: bytes | None
    client_key: bytes | None = field(repr=False)
    expires: datetime | None


class ExecPlugin(TokenSource):
    """A kubeconfig's `exec` credential plugin, first run when a token or certificate is
    first needed, and again when what it gave is about to expire or was refused.

    It runs as a subprocess the event loop waits on, for at most EXEC_TIMEOUT_SECONDS;
    concurrent askers share one run. A client certificate it gives is used for the life
    of the process; only its token is renewed.
    """

    def __init__(
        self, spec: Mapping[str, Any], *, base: Path, cluster: dict[str, Any] | None, where: str
    ) -> None:
        self._where = where
        api_version = _string(spec, "apiVersion", where)
        if api_version not in EXEC_API_VERSIONS:
            raise CredentialsError(
                f"{where}: exec apiVersion {api_version!r} is not one of "
                + ", ".join(EXEC_API_VERSIONS)
            )
        self.api_version = api_version
        command = _string(spec, "command", where)
        if command is None:
            raise CredentialsError(f"{where}: exec has no command")
        # Like kubectl: a bare name is looked up in PATH, a relative path is relative
        # to the kubeconfig.
        self.command = str(base / command) if os.sep in command else command
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise CredentialsError(f"{where}: exec args must be a list of strings")
        self.args: list[str] = args
        self.env: dict[str, str] = {}
        for variable in spec.get("env") or []:
            name = variable.get("name") if isinstance(variable, dict) else None
            value = variable.get("value") if isinstance(variable, dict) else None
            if not isinstance(name, str) or not isinstance(value, str):
                raise CredentialsError(f"{where}: exec env entries need a name and a value")
            self.env[name] = value
        if spec.get("interactiveMode") == "Always":
            raise CredentialsError(
                f"{where}: the exec plugin needs a terminal (interactiveMode: Always), "
                "which batchsched never gives it"
            )
        self._hint = _string(spec, "installHint", where)
        self._info: dict[str, Any] = {"interactive": False}
        if cluster is not None:
            self._info["cluster"] = cluster
        self.result: ExecResult | None = None
        self._lock = asyncio.Lock()

    async def token(self, *, fresh: bool = False) -> str | None:
        return (await self._current(fresh=fresh)).token

    async def certificate(self) -> tuple[bytes, bytes] | None:
        result = await self._current(fresh=False)
        if result.client_certificate is None or result.client_key is None:
            return None
        return result.client_certificate, result.client_key

    async def _current(self, *, fresh: bool) -> ExecResult:
        """What the plugin gave, run again when asked `fresh` or REFRESH_SECONDS before
        it expires. A failed run is only logged while there is a result that has not
        expired: a refused token then fails its request, not the scheduler."""
        async with self._lock:
            result = self.result
            now = datetime.now(UTC)
            expires = result.expires if result is not None else None
            renew = expires is not None and now >= expires - timedelta(seconds=REFRESH_SECONDS)
            if result is not None and not fresh and not renew:
                return result
            try:
                self.result = await self._run()
            except CredentialsError as error:
                if result is None or (expires is not None and now >= expires):
                    raise
                log.warning("%s; still using what it gave before", error)
                return result
            return self.result

    async def _run(self) -> ExecResult:
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": self._info}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        failed = f"{self._where}: exec plugin {self.command}"
        try:
            process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as error:
            hint = f" ({self._hint})" if self._hint else ""
            raise CredentialsError(f"{failed} cannot run: {_reason(error)}{hint}") from None
        try:
            async with asyncio.timeout(EXEC_TIMEOUT_SECONDS):
                stdout, raw_stderr = await process.communicate()
        except TimeoutError:
            raise CredentialsError(
                f"{failed} did not finish within {EXEC_TIMEOUT_SECONDS:g} s"
            ) from None
        finally:
            if process.returncode is None:  # timed out or cancelled
                process.kill()
                await process.wait()
        stderr = raw_stderr.decode(errors="replace").strip()
        if process.returncode != 0:
            raise CredentialsError(
                f"{failed} exited with status {process.returncode}"
                + (f": {stderr}" if stderr else "")
            )
        if stderr:
            log.warning("exec plugin %s: %s", self.command, stderr)
        return self._parse(stdout, failed)

    def _parse(self, stdout: bytes, failed: str) -> ExecResult:
        try:
            reply = json.loads(stdout)
        except ValueError as error:
            raise CredentialsError(f"{failed} printed no JSON: {error}") from None
        if not isinstance(reply, dict) or reply.get("kind") != "ExecCredential":
            raise CredentialsError(f"{failed} printed something other than an ExecCredential")
        if reply.get("apiVersion") != self.api_version:
            raise CredentialsError(
                f"{failed} answered in apiVersion {reply.get('apiVersion')!r}, "
                f"not the {self.api_version!r} the kubeconfig asks for"
            )
        status = reply.get("status")
        if not isinstance(status, dict):
            raise CredentialsError(f"{failed} printed an ExecCredential without a status")
        token = _string(status, "token", failed)
        certificate = _string(status, "clientCertificateData", failed)
        key = _string(status, "clientKeyData", failed)
        if (certificate is None) != (key is None):
            raise CredentialsError(f"{failed} gave a client certificate or key without the other")
        if token is None and certificate is None:
            raise CredentialsError(f"{failed} gave neither a token nor a client certificate")
        expires = _string(status, "expirationTimestamp", failed)
        return ExecResult(
            token=token,
            client_certificate=certificate.encode() if certificate else None,
            client_key=key.encode() if key else None,
            expires=_timestamp(expires, failed) if expires else None,
        )


@dataclass(frozen=True)
class Credentials:
    """How to reach one API server and authenticate to it.

    PEM material is a `Path` when the kubeconfig names a file and `bytes` when it was
    inline or came from a plugin; nothing inline is written to disk except briefly,
    for OpenSSL, by `ssl_context`.
    """

    server: str
    ca: Path | bytes | None = None
    client_certificate: Path | bytes | None = None
    client_key: Path | bytes | None = field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    # The name to verify the server's certificate against, when not the server URL's.
    tls_server_name: str | None = None
    token_source: TokenSource | None = None
    # The kubeconfig's proxy-url; without it the environment's proxy, if any, is used.
    proxy_url: str | None = None

    async def token(self, *, fresh: bool = False) -> str | None:
        """The bearer token to send now (`fresh`: the last one was refused). It may read
        a file or run a plugin, so callers keep it for REFRESH_SECONDS."""
        return None if self.token_source is None else await self.token_source.token(fresh=fresh)

    def ssl_context(self) -> ssl.SSLContext:
        """The server's verification and our client certificate, for every connection."""
        try:
            context = ssl.create_default_context(
                cafile=self.ca if isinstance(self.ca, Path) else None,
                cadata=self.ca.decode("ascii") if isinstance(self.ca, bytes) else None,
            )
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
            raise CredentialsError(
                f"certificate authority {_describe(self.ca)}: {_reason(error)}"
            ) from None
        if self.client_certificate is not None and self.client_key is not None:
            load_client_certificate(context, self.client_certificate, self.client_key)
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def proxy(self) -> str | None:
        """The proxy to reach the server through: proxy-url, else the environment's."""
        return self.proxy_url or environment_proxy(self.server)


def load_client_certificate(
    context: ssl.SSLContext, certificate: Path | bytes, key: Path | bytes
) -> None:
    try:
        with _files(certificate, key) as (certificate_file, key_file):
            context.load_cert_chain(certificate_file, key_file)
    except (OSError, ValueError) as error:
        raise CredentialsError(
            f"client certificate {_describe(certificate)} "
            f"with key {_describe(key)}: {_reason(error)}"
        ) from None


def environment_proxy(server: str) -> str | None:
    """The proxy $HTTPS_PROXY (for an https server) or $HTTP_PROXY names, unless
    $NO_PROXY exempts the server, with Go's rules (golang.org/x/net/http/httpproxy),
    which client-go follows: upper case first, a proxy without a scheme is http, and
    localhost and loopback addresses are never proxied."""
    url = urlsplit(server)
    host = (url.hostname or "").lower()
    if host == "localhost" or _is_loopback(host):
        return None
    names = (
        ("HTTPS_PROXY", "https_proxy") if url.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    )
    proxy = next((os.environ[name] for name in names if os.environ.get(name)), None)
    if proxy is None:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    no_proxy = os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or ""
    if any(_exempts(entry.strip().lower(), host, port) for entry in no_proxy.split(",")):
        return None
    proxy = proxy if "://" in proxy else f"http://{proxy}"
    check_proxy(proxy, "the environment's proxy")
    return proxy


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exempts(entry: str, host: str, port: int) -> bool:
    """Whether one $NO_PROXY entry covers host:port: `*`, an address, a CIDR block, or a
    domain and its subdomains (a leading `.` or `*.`: only its subdomains), optionally
    with a port."""
    if entry == "*":
        return True
    if not entry:
        return False
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
    name, colon, entry_port = entry.rpartition(":") if entry.count(":") == 1 else ("", "", "")
    if colon:
        if entry_port != str(port):
            return False
        entry = name
    entry = entry.removeprefix("*")
    if entry.startswith("."):
        return host.endswith(entry)
    return host == entry or host.endswith(f".{entry}")


def check_proxy(proxy: str, where: str) -> None:
    """Refuses a proxy URL the transport cannot use, naming it."""
    url = urlsplit(proxy)
    if url.scheme not in PROXY_SCHEMES:
        raise CredentialsError(
            f"{where} {proxy!r}: only {' and '.join(PROXY_SCHEMES)} proxies are supported"
            + (", not socks5" if url.scheme.startswith("socks") else "")
        )
    if not url.hostname:
        raise CredentialsError(f"{where} {proxy!r} names no host")


def load_credentials(kubeconfig: str | None, *, service_account: Path | None = None) -> Credentials:
    """`kubeconfig` if given; else the service account inside a pod (in
    `service_account`, default service_account_dir()); else $KUBECONFIG or
    ~/.kube/config, as kubectl does."""
    if kubeconfig is not None:
        return _from_kubeconfig(_Kubeconfig.read([Path(kubeconfig)]))
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster(service_account or service_account_dir())
    listed = [Path(name) for name in os.environ.get("KUBECONFIG", "").split(os.pathsep) if name]
    if not listed:
        default = Path.home() / ".kube" / "config"
        if not default.exists():
            raise CredentialsError(
                f"no credentials: {default} does not exist, $KUBECONFIG is not set and "
                "this is not a pod ($KUBERNETES_SERVICE_HOST is not set)"
            )
        return _from_kubeconfig(_Kubeconfig.read([default]))
    # As in kubectl, files in the list that do not exist are passed over.
    existing = [path for path in dict.fromkeys(listed) if path.exists()]
    if not existing:
        raise CredentialsError(
            f"none of the files in $KUBECONFIG exists: {os.environ['KUBECONFIG']}"
        )
    return _from_kubeconfig(_Kubeconfig.read(existing))


def _in_cluster(directory: Path) -> Credentials:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    where = f"in-cluster service account ({directory})"
    if not port:
        raise CredentialsError(f"{where}: KUBERNETES_SERVICE_HOST is set but not _PORT")
    ca = directory / "ca.crt"
    if not ca.is_file():
        raise CredentialsError(f"{where}: {ca} does not exist")
    return Credentials(
        server=f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}",
        ca=ca,
        token_source=TokenFile(directory / "token", where=where),
    )


@dataclass(frozen=True)
class _Named:
    """A cluster, context or user, and the file that defined it: paths in it are
    relative to that file's directory."""

    body: Mapping[str, Any]
    file: Path


@dataclass
class _Kubeconfig:
    files: list[Path]
    current_context: str | None = None
    clusters: dict[str, _Named] = field(default_factory=dict)
    contexts: dict[str, _Named] = field(default_factory=dict)
    users: dict[str, _Named] = field(default_factory=dict)

    @classmethod
    def read(cls, files: list[Path]) -> "_Kubeconfig":
        """Merged as kubectl merges $KUBECONFIG: the first file to set the
        current-context, or to define a name, wins; entries are never combined."""
        merged = cls(files)
        for path in files:
            document = _read_yaml(path)
            where = f"kubeconfig {path}"
            if merged.current_context is None:
                merged.current_context = _string(document, "current-context", where)
            for section, kind, names in (
                ("clusters", "cluster", merged.clusters),
                ("contexts", "context", merged.contexts),
                ("users", "user", merged.users),
            ):
                entries = document.get(section) or []
                if not isinstance(entries, list):
                    raise CredentialsError(f"{where}: {section} is not a list")
                for entry in entries:
                    name = entry.get("name") if isinstance(entry, dict) else None
                    body = (entry.get(kind) or {}) if isinstance(entry, dict) else None
                    if not isinstance(name, str) or not isinstance(body, dict):
                        raise CredentialsError(
                            f"{where}: every entry of {section} needs a name and a {kind}"
                        )
                    names.setdefault(name, _Named(body, path))
        return merged


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        with path.open("rb") as stream:  # so that YAML errors name the file
            document = yaml.safe_load(stream)
    except OSError as error:
        raise CredentialsError(f"kubeconfig {path}: {_reason(error)}") from None
    except yaml.YAMLError as error:
        raise CredentialsError(f"kubeconfig {path} is not valid YAML: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise CredentialsError(f"kubeconfig {path} is not a mapping")
    return document


def _from_kubeconfig(config: _Kubeconfig) -> Credentials:
    files = ", ".join(map(str, config.files))
    name = config.current_context
    if name is None:
        raise CredentialsError(f"kubeconfig {files}: no current-context is set")
    context = config.contexts.get(name)
    if context is None:
        raise CredentialsError(f"kubeconfig {files}: current-context {name!r} is not defined")
    where = f"kubeconfig {context.file}: context {name!r}"
    cluster_name = _string(context.body, "cluster", where)
    if cluster_name is None:
        raise CredentialsError(f"{where} names no cluster")
    cluster = config.clusters.get(cluster_name)
    if cluster is None:
        raise CredentialsError(f"kubeconfig {files}: cluster {cluster_name!r} is not defined")
    credentials = _cluster(cluster_name, cluster)
    user_name = _string(context.body, "user", where)
    if user_name is None:
        return credentials
    user = config.users.get(user_name)
    if user is None:
        raise CredentialsError(f"kubeconfig {files}: user {user_name!r} is not defined")
    return _user(user_name, user, credentials, cluster)


def _cluster(name: str, cluster: _Named) -> Credentials:
    where = f"kubeconfig {cluster.file}: cluster {name!r}"
    body = cluster.body
    server = _string(body, "server", where)
    if server is None:
        raise CredentialsError(f"{where} has no server")
    if not server.startswith(("https://", "http://")):
        raise CredentialsError(f"{where}: server {server!r} is not an http(s) URL")
    ca = _pem(body, "certificate-authority", cluster.file, where)
    insecure = body.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise CredentialsError(f"{where}: insecure-skip-tls-verify is not true or false")
    if insecure and ca is not None:
        # client-go refuses this too: which of the two was meant is anyone's guess.
        raise CredentialsError(f"{where}: insecure-skip-tls-verify together with a CA")
    proxy = _string(body, "proxy-url", where)
    if proxy is not None:
        check_proxy(proxy, f"{where}: proxy-url")
    return Credentials(
        server=server.rstrip("/"),
        ca=ca,
        insecure_skip_tls_verify=insecure,
        tls_server_name=_string(body, "tls-server-name", where),
        proxy_url=proxy,
    )


def _user(name: str, user: _Named, cluster: Credentials, cluster_entry: _Named) -> Credentials:
    """`cluster` with this user's certificate and token added."""
    where = f"kubeconfig {user.file}: user {name!r}"
    body = user.body
    provider = body.get("auth-provider")
    if provider:
        raise CredentialsError(f"{where}: {_auth_provider_refusal(provider)}")
    if body.get("username") or body.get("password"):
        raise CredentialsError(
            f"{where}: username and password are not supported; "
            "use a token, a client certificate or an exec plugin"
        )
    if any(body.get(key) for key in IMPERSONATION):
        raise CredentialsError(
            f"{where}: impersonation ({', '.join(IMPERSONATION)}) is not supported"
        )
    certificate = _pem(body, "client-certificate", user.file, where)
    key = _pem(body, "client-key", user.file, where)
    if (certificate is None) != (key is None):
        raise CredentialsError(f"{where}: a client certificate needs both certificate and key")
    source: TokenSource | None = None
    token_file = _string(body, "tokenFile", where)
    token = _string(body, "token", where)
    exec_spec = body.get("exec")
    if token_file is not None:
        source = TokenFile(user.file.parent / token_file, where=where)
    elif token is not None:
        source = StaticToken(token)
    elif exec_spec and certificate is None:
        # client-go, too, runs the plugin only when no token or certificate is given.
        if not isinstance(exec_spec, dict):
            raise CredentialsError(f"{where}: exec is not a mapping")
        info = (
            _exec_cluster(cluster, cluster_entry) if exec_spec.get("provideClusterInfo") else None
        )
        source = ExecPlugin(exec_spec, base=user.file.parent, cluster=info, where=where)
    return replace(cluster, client_certificate=certificate, client_key=key, token_source=source)


def _auth_provider_refusal(provider: object) -> str:
    """Why an auth-provider is refused, true to what client-go still does with it."""
    name = provider.get("name") if isinstance(provider, dict) else None
    if name in REMOVED_AUTH_PROVIDERS:
        return (
            f"auth-provider {name!r} was removed from client-go in 1.26; use its exec "
            f"plugin, {REMOVED_AUTH_PROVIDERS[name]}"
        )
    if name == "oidc":
        return (
            "auth-provider 'oidc' is not supported by batchsched (client-go still has it "
            "built in); use an exec plugin such as kubelogin (kubectl oidc-login)"
        )
    return f"auth-provider {name!r} is not supported, nor known to client-go"


def _exec_cluster(cluster: Credentials, entry: _Named) -> dict[str, Any]:
    """The cluster as a plugin that asks for it sees it (ExecCredential spec.cluster)."""
    info: dict[str, Any] = {"server": cluster.server}
    if cluster.tls_server_name:
        info["tls-server-name"] = cluster.tls_server_name
    if cluster.insecure_skip_tls_verify:
        info["insecure-skip-tls-verify"] = True
    if cluster.ca is not None:
        try:
            ca = cluster.ca.read_bytes() if isinstance(cluster.ca, Path) else cluster.ca
        except OSError as error:
            raise CredentialsError(
                f"certificate authority {_describe(cluster.ca)}: {_reason(error)}"
            ) from None
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    for extension in entry.body.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _string(mapping: Mapping[str, Any], key: str, where: str) -> str | None:
    """`mapping[key]`, None when absent or empty, as Go reads an omitted string."""
    value = mapping.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise CredentialsError(f"{where}: {key} is not a string")
    return value


def _pem(body: Mapping[str, Any], key: str, file: Path, where: str) -> Path | bytes | None:
    """Inline `<key>-data` (base64) if set, as in client-go, else the file `key` names,
    relative to the kubeconfig `file`."""
    data = _string(body, f"{key}-data", where)
    if data is not None:
        try:
            return base64.b64decode("".join(data.split()), validate=True)
        except binascii.Error as error:
            raise CredentialsError(f"{where}: {key}-data is not base64: {error}") from None
    name = _string(body, key, where)
    if name is None:
        return None
    path = file.parent / name
    if not path.is_file():
        raise CredentialsError(f"{where}: {key} {path} does not exist")
    return path


def _timestamp(text: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise CredentialsError(f"{where}: expirationTimestamp {text!r} is not an RFC 3339 time")
    return moment


@contextlib.contextmanager
def _files(*sources: Path | bytes) -> Iterator[list[Path]]:
    """Each source as a file: inline data goes to a private directory (mode 0700, files
    0600) that is removed as soon as the caller is done."""
    with tempfile.TemporaryDirectory(prefix="batchsched-") as private:
        paths = []
        for number, source in enumerate(sources):
            if isinstance(source, bytes):
                path = Path(private, f"{number}.pem")
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "wb") as file:
                    file.write(source)
                source = path
            paths.append(source)
        yield paths


def _describe(source: Path | bytes | None) -> str:
    if source is None:
        return "(the system's)"
    return "(inline data)" if isinstance(source, bytes) else str(source)


def _reason(error: Exception) -> str:
    """An OSError without the errno and file name the message already gives."""
    return str(error.strerror) if isinstance(error, OSError) and error.strerror else str(error)
