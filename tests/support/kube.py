"""A small synchronous REST client for the test control plane.

Tests need to see the API server's exact status codes (201 vs 409 on a binding,
403 from RBAC) and to work with any resource, including custom ones, without
depending on the generated client's models, which change between releases and
cannot decode some replies (a Binding's `Status` body). So requests here are
plain JSON over HTTPS and every call hands back the status code to check.
"""

from __future__ import annotations

import datetime
import http.client
import json
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

# How long after a CRD becomes Established the API server delays creates of its objects.
_CRD_CREATE_HOLD_SECONDS = 2.1

# One request for every group's resources instead of one per group version.
_AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)


class KubeError(RuntimeError):
    """An API call answered with a status code the caller did not expect."""

    def __init__(self, method: str, path: str, status: int, body: JSON) -> None:
        self.status = status
        self.body = body
        reason = body.get("message") or body.get("reason") or json.dumps(body)[:500]
        super().__init__(f"{method} {path}: HTTP {status}: {reason}")


@dataclass(frozen=True)
class Response:
    method: str
    path: str
    status: int
    body: JSON

    def expect(self, *statuses: int) -> JSON:
        """Return the body, or raise if the status is not one of `statuses`."""
        if self.status not in statuses:
            raise KubeError(self.method, self.path, self.status, self.body)
        return self.body


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API, as discovery reports it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: frozenset[str]

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.kind} is namespaced: a namespace is needed")
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return base if name is None else f"{base}/{name}"


class Kube:
    """Authenticated JSON requests to one API server with one bearer token."""

    def __init__(self, server: str, token: str, ca_file: Path, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or parsed.hostname is None or parsed.port is None:
            raise ValueError(f"expected https://host:port, got {server!r}")
        self.server = server
        self.token = token
        self.ca_file = ca_file
        self._host = parsed.hostname
        self._port = parsed.port
        self._timeout = timeout
        self._tls = ssl.create_default_context(cafile=str(ca_file))
        self._known: list[Resource] = []

    def with_token(self, token: str) -> Kube:
        """The same server seen by another identity (RBAC checks)."""
        return Kube(self.server, token, self.ca_file, self._timeout)

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        query: Mapping[str, str | int] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Response:
        target = path if not query else f"{path}?{urllib.parse.urlencode(query)}"
        headers = {"Authorization": f"Bearer {self.token}", "Accept": accept}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection(
            self._host, self._port, context=self._tls, timeout=self._timeout
        )
        try:
            conn.request(method, target, body=payload, headers=headers)
            reply = conn.getresponse()
            raw = reply.read()
        finally:
            conn.close()
        return Response(method, target, reply.status, _decode(raw))

    def get(self, path: str, *, query: Mapping[str, str | int] | None = None) -> Response:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: object) -> Response:
        return self.request("POST", path, body)

    def put(self, path: str, body: object) -> Response:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: object, *, merge: bool = True) -> Response:
        kind = "merge-patch" if merge else "strategic-merge-patch"
        return self.request("PATCH", path, body, content_type=f"application/{kind}+json")

    def delete(self, path: str, *, grace_period_seconds: int | None = None) -> Response:
        options: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return self.request("DELETE", path, options)

    def resources(self) -> list[Resource]:
        """Top-level resources of every served group version, CRDs included."""
        found: list[Resource] = []
        for root in ("/api", "/apis"):
            listing = self.request("GET", root, accept=_AGGREGATED_DISCOVERY).expect(200)
            # Fields may be null as well as absent.
            for group in listing.get("items") or []:
                group_name = (group.get("metadata") or {}).get("name") or ""
                for version in group.get("versions") or []:
                    for res in version.get("resources") or []:
                        found.append(
                            Resource(
                                group=group_name,
                                version=version["version"],
                                kind=(res.get("responseKind") or {}).get("kind") or "",
                                plural=res["resource"],
                                namespaced=res.get("scope") == "Namespaced",
                                verbs=frozenset(res.get("verbs") or []),
                            )
                        )
        return found

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """Look a kind up in the last discovery, discovering again if it is not there."""
        group, _, version = api_version.rpartition("/")
        for refresh in (False, True):
            if refresh or not self._known:
                self._known = self.resources()
            for res in self._known:
                if (res.group, res.version, res.kind) == (group, version, kind):
                    return res
        raise LookupError(f"the API server does not serve {kind} in {api_version}")

    def create(self, obj: Mapping[str, Any], namespace: str | None = None) -> JSON:
        """Create any object from its manifest; `namespace` fills in a missing one."""
        res = self.resource_for(obj["apiVersion"], obj["kind"])
        ns = obj.get("metadata", {}).get("namespace", namespace) if res.namespaced else None
        return self.post(res.path(ns), obj).expect(201)

    def delete_object(self, obj: Mapping[str, Any]) -> None:
        """Delete an object at once, whether or not it still exists."""
        res = self.resource_for(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"])
        self.delete(path, grace_period_seconds=0).expect(200, 202, 404)

    def bind(self, namespace: str, pod: str, uid: str, node: str) -> Response:
        """POST a Binding the way a scheduler does; the caller checks the status."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.post(f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", binding)

    def wipe_namespace(self, namespace: str) -> None:
        """Delete a namespace and everything in it, standing in for the namespace
        controller, which this control plane does not run.

        Left alone, a deleted namespace stays Terminating with its pods still bound to
        nodes, and a scheduler listing the whole cluster would keep counting them.
        """
        for res in self.resources():
            if res.namespaced and "deletecollection" in res.verbs:
                self.delete(res.path(namespace), grace_period_seconds=0).expect(200, 404)
        ns_path = f"/api/v1/namespaces/{namespace}"
        self.delete(ns_path).expect(200, 202, 404)
        if self.get(ns_path).status == 200:
            finalize = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace},
                "spec": {"finalizers": []},
            }
            self.put(f"{ns_path}/finalize", finalize).expect(200, 404)

    def wait_for(self, path: str, ready: Callable[[JSON], bool], timeout: float = 30.0) -> JSON:
        """Poll `path` until `ready` holds for its body."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.get(path)
            if reply.status == 200 and ready(reply.body):
                return reply.body
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} not ready after {timeout:.0f}s: {reply.body}")
            time.sleep(0.05)

    def apply_crds(self, manifests: Iterable[JSON]) -> None:
        """Create CRDs and wait until their objects can be listed and created.

        Established is not enough: for a moment after it the resource still answers
        429 "storage is (re)initializing", and discovery may not list it yet. Also,
        the API server holds every create of a custom object for 2 s while its CRD
        has been Established for less than 2 s; waiting that out here keeps the
        delay out of the first test's (or benchmark's) timings.
        """
        crds = [self.create(crd) for crd in manifests]
        settled = 0.0
        for crd in crds:
            name, spec = crd["metadata"]["name"], crd["spec"]
            served = self.wait_for(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                lambda crd: _established_at(crd) is not None,
            )
            settled = max(settled, (_established_at(served) or 0.0) + _CRD_CREATE_HOLD_SECONDS)
            version = next(v["name"] for v in spec["versions"] if v["storage"])
            self.wait_for(f"/apis/{spec['group']}/{version}/{spec['names']['plural']}", _any)
        wanted = {crd["metadata"]["name"] for crd in crds}
        deadline = time.monotonic() + 30
        while not wanted.issubset(f"{r.plural}.{r.group}" for r in self.resources()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRDs missing from discovery: {sorted(wanted)}")
            time.sleep(0.05)
        time.sleep(max(0.0, settled - time.time()))


class ClusterObjects:
    """Creates cluster-scoped objects (Nodes, Queues, ...) and deletes them later,
    since no namespace deletion will."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._created: list[JSON] = []

    def create(self, obj: JSON) -> JSON:
        created = self._kube.create(obj)
        self._created.append(created)
        return created

    def delete_all(self) -> None:
        for obj in reversed(self._created):
            self._kube.delete_object(obj)
        self._created.clear()


def _decode(raw: bytes) -> JSON:
    """JSON bodies as they are; anything else (/readyz says "ok") under "text"."""
    if not raw.strip():
        return {}
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        return {"text": raw.decode(errors="replace")}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _any(_: JSON) -> bool:
    return True


def condition(obj: JSON, kind: str) -> JSON | None:
    """The object's status condition of type `kind`, if it has one."""
    # An object just created may show `conditions: null` until the server fills them in.
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            found: JSON = entry
            return found
    return None


def _established_at(crd: JSON) -> float | None:
    """Unix time (whole seconds, as the server keeps it) the CRD became Established."""
    established = condition(crd, "Established")
    if established is None or established.get("status") != "True":
        return None
    return datetime.datetime.fromisoformat(established["lastTransitionTime"]).timestamp()
