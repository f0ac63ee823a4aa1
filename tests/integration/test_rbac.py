"""The scheduler's ClusterRole and lease Role from manifests/, enforced by the API
server's RBAC: a token bound only to them can do the scheduler's work and nothing more,
and of all Leases it can write only its own. With that token, `--metrics-auth` serves
/metrics to a caller bound to the metrics reader role and to nobody else."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from batchsched.k8s.client import Api
from batchsched.k8s.credentials import load_credentials
from batchsched.k8s.endpoints import MetricsAuth, serve

from .operator_support import account_token, cluster_role_binding, eventually, token_kubeconfig
from tests.support import JSON, ClusterObjects, Kube, KubeError
from tests.support.objects import load_manifests, native_pod_group, node, pod, pod_group

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RBAC_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
)
ROLE_NAME = "batchsched"
METRICS_READER = "batchsched-metrics-reader"
# The Lease is named after the scheduler (operator.py), as configured in the ConfigMap.
LEASE_NAME = "batch-scheduler"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
FOREIGN_GROUPS = (
    "scheduling.incubator.k8s.io",
    "scheduling.sigs.dev",
    "scheduling.sigs.k8s.io",
    "scheduling.volcano.sh",
    "scheduling.x-k8s.io",
    "batch.scheduler.tencent.com",
)
OBJECT_STATUS = ("scheduling.volcano.sh", "scheduling.sigs.k8s.io")


@pytest.fixture(scope="module")
def rbac_docs() -> list[JSON]:
    docs = [d for d in load_manifests(MANIFESTS) if d.get("kind") in RBAC_KINDS]
    if not any(d["kind"] == "ClusterRole" and d["metadata"]["name"] == ROLE_NAME for d in docs):
        pytest.skip(f"manifests/ has no ClusterRole {ROLE_NAME!r} yet")
    return docs


@pytest.fixture(scope="module")
def cluster_role(rbac_docs: list[JSON]) -> JSON:
    return next(
        d for d in rbac_docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == ROLE_NAME
    )


@pytest.fixture(scope="module")
def service_account(rbac_docs: list[JSON], cluster_role: JSON) -> JSON:
    """The ServiceAccount the ClusterRoleBinding grants the role to."""
    for binding in rbac_docs:
        if binding["kind"] == "ClusterRoleBinding" and binding["roleRef"]["name"] == ROLE_NAME:
            subject = next(s for s in binding["subjects"] if s["kind"] == "ServiceAccount")
            return next(
                d
                for d in rbac_docs
                if d["kind"] == "ServiceAccount"
                and d["metadata"]["name"] == subject["name"]
                and d["metadata"]["namespace"] == subject["namespace"]
            )
    raise AssertionError(f"no ClusterRoleBinding grants {ROLE_NAME!r} to a ServiceAccount")


@pytest.fixture(scope="module")
def scheduler(kube: Kube, rbac_docs: list[JSON], service_account: JSON) -> Iterator[Kube]:
    """A client holding a token of the scheduler's ServiceAccount and nothing else."""
    created: list[JSON] = []
    for doc in rbac_docs:
        try:
            created.append(kube.create(doc))
        except KubeError as err:
            # Several manifest files may declare the same namespace.
            if not (err.status == 409 and doc["kind"] == "Namespace"):
                raise
    meta = service_account["metadata"]
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    token = kube.post(
        f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{meta['name']}/token", request
    ).expect(201)["status"]["token"]
    yield kube.with_token(token)
    for obj in reversed(created):
        if obj["kind"] == "Namespace":
            kube.wipe_namespace(obj["metadata"]["name"])
        else:
            kube.delete_object(obj)


def test_role_has_no_wildcards_or_secrets(cluster_role: JSON) -> None:
    for rule in cluster_role["rules"]:
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert not any("*" in value for value in rule.get(key, [])), rule
        assert "secrets" not in rule.get("resources", []), rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), (
            rule
        )
        # Preemption deletes the victims a PodDisruptionBudget would keep, and a failed
        # bind the claim made for a pod's extended resources; nothing else.
        if "delete" in rule["verbs"]:
            deleted = (rule["apiGroups"], rule["resources"])
            assert deleted in (([""], ["pods"]), (["resource.k8s.io"], ["resourceclaims"])), rule


def _allowed(client: Kube, verb: str, group: str, resource: str, namespace: str = "") -> bool:
    resource, _, subresource = resource.partition("/")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                "subresource": subresource,
                "namespace": namespace,
            }
        },
    }
    answer = client.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review).expect(
        201
    )
    return bool(answer["status"].get("allowed"))


NEEDED = [
    *[(verb, "", "pods") for verb in ("get", "list", "watch")],
    *[(verb, "", "nodes") for verb in ("list", "watch")],
    # Their labels, for pod affinity's namespaceSelector.
    *[(verb, "", "namespaces") for verb in ("list", "watch")],
    ("create", "", "pods/binding"),
    ("patch", "", "pods/status"),
    # Preemption: victims are evicted, or deleted when a budget would refuse it.
    ("create", "", "pods/eviction"),
    ("delete", "", "pods"),
    *[(verb, "policy", "poddisruptionbudgets") for verb in ("list", "watch")],
    *[(verb, "events.k8s.io", "events") for verb in ("create", "patch")],
    # Claims and volumes: watched, and written to bind a claim before its pod.
    *[
        (verb, "", res)
        for res in ("persistentvolumeclaims", "persistentvolumes")
        for verb in ("list", "watch", "patch")
    ],
    *[
        (verb, "storage.k8s.io", res)
        for res in ("storageclasses", "csinodes", "csidrivers", "csistoragecapacities")
        for verb in ("list", "watch")
    ],
    *[(verb, "scheduling.k8s.io", "priorityclasses") for verb in ("list", "watch")],
    # Devices: watched; a pod's ResourceClaims allocated and reserved before it is bound.
    *[
        (verb, "resource.k8s.io", res)
        for res in ("resourceslices", "deviceclasses", "resourceclaimtemplates", "devicetaintrules")
        for verb in ("list", "watch")
    ],
    *[
        (verb, "resource.k8s.io", "resourceclaims")
        for verb in ("get", "list", "watch", "update", "create", "delete")
    ],
    *[
        ("patch", "resource.k8s.io", res)
        for res in ("resourceclaims/status", "resourceclaims/binding")
    ],
    # Kubernetes' own gangs: PodGroups scheduled, their status written; Workloads shown.
    *[
        (verb, "scheduling.k8s.io", res)
        for res in ("podgroups", "workloads")
        for verb in ("list", "watch")
    ],
    *[("patch", "scheduling.k8s.io", res) for res in ("podgroups", "podgroups/status")],
    *[
        (verb, "scheduling.batchsched.io", res)
        for res in ("podgroups", "queues")
        for verb in ("list", "watch")
    ],
    *[
        ("patch", "scheduling.batchsched.io", res)
        for res in ("podgroups", "podgroups/status", "queues/status")
    ],
    *[(verb, group, "podgroups") for group in FOREIGN_GROUPS for verb in ("list", "watch")],
    # --peer-status=write (the default): each peer's PodGroups in its own form.
    *[
        ("patch", group, "podgroups/status")
        for group in FOREIGN_GROUPS
        if group not in OBJECT_STATUS
    ],
    # The softWait clock's annotations on every kind's PodGroup; and the status of the
    # PodGroup CRDs without a status subresource, which goes on the object.
    *[("patch", group, "podgroups") for group in FOREIGN_GROUPS],
    # create: Volcano's root and default Queues, as its scheduler creates them.
    *[(verb, "scheduling.volcano.sh", "queues") for verb in ("list", "watch", "create")],
    ("patch", "scheduling.volcano.sh", "queues/status"),
    # Volcano's network topology, for gangs asking for a tier of it.
    *[(verb, "topology.volcano.sh", "hypernodes") for verb in ("list", "watch")],
    ("create", "authentication.k8s.io", "tokenreviews"),
    ("create", "authorization.k8s.io", "subjectaccessreviews"),
]

NOT_NEEDED = [
    *[(verb, "", "secrets") for verb in ("get", "list", "watch", "create")],
    ("list", "", "configmaps"),
    *[(verb, "", "namespaces") for verb in ("get", "create", "update", "delete")],
    ("create", "", "events"),
    ("update", "", "pods/status"),
    ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("create", "", "pods"),
    ("update", "", "pods"),
    ("patch", "", "pods"),
    ("deletecollection", "", "pods"),
    ("create", "", "pods/exec"),
    *[(verb, "policy", "poddisruptionbudgets") for verb in ("get", "create", "update", "delete")],
    ("patch", "policy", "poddisruptionbudgets/status"),
    ("create", "", "nodes"),
    ("patch", "", "nodes"),
    ("delete", "", "nodes"),
    ("patch", "", "nodes/status"),
    ("create", "", "serviceaccounts/token"),
    ("delete", "", "events"),
    ("create", "scheduling.batchsched.io", "podgroups"),
    ("delete", "scheduling.batchsched.io", "podgroups"),
    ("create", "scheduling.batchsched.io", "queues"),
    ("delete", "scheduling.batchsched.io", "queues"),
    ("patch", "scheduling.volcano.sh", "queues"),
    ("delete", "scheduling.volcano.sh", "queues"),
    ("update", "scheduling.x-k8s.io", "podgroups/status"),
    ("create", "scheduling.k8s.io", "priorityclasses"),
    # The Job controller makes them; only their status and the softWait clock's
    # annotations are the scheduler's.
    *[(verb, "scheduling.k8s.io", "podgroups") for verb in ("create", "update", "delete")],
    ("update", "scheduling.k8s.io", "podgroups/status"),
    *[(verb, "scheduling.k8s.io", "workloads") for verb in ("create", "patch")],
    *[
        (verb, "", res)
        for res in ("persistentvolumeclaims", "persistentvolumes")
        for verb in ("create", "delete")
    ],
    ("update", "", "persistentvolumeclaims/status"),
    ("patch", "storage.k8s.io", "storageclasses"),
    # Drivers publish slices and write a claim's status.devices.
    ("patch", "resource.k8s.io", "resourceclaims"),
    ("update", "resource.k8s.io", "resourceclaims/status"),
    ("patch", "resource.k8s.io", "resourceclaims/driver"),
    *[(verb, "resource.k8s.io", "resourceslices") for verb in ("create", "update", "delete")],
    ("update", "resource.k8s.io", "deviceclasses"),
    ("create", "resource.k8s.io", "resourceclaimtemplates"),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions"),
    # Leases only in the scheduler's own namespace (test_lease_access), not this one.
    *[(verb, "coordination.k8s.io", "leases") for verb in ("get", "create", "update", "list")],
    ("delete", "coordination.k8s.io", "leases"),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
    ("impersonate", "", "users"),
    ("list", "apps", "deployments"),
]


def test_access_review_matrix(scheduler: Kube, namespace: str) -> None:
    refused = [
        need for need in NEEDED if not _allowed(scheduler, need[0], need[1], need[2], namespace)
    ]
    granted = [
        extra
        for extra in NOT_NEEDED
        if _allowed(scheduler, extra[0], extra[1], extra[2], namespace)
    ]
    assert refused == [], "the scheduler needs these"
    assert granted == [], "the scheduler does not need these"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_scheduler_requests_succeed(
    kube: Kube,
    scheduler: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    service_account: JSON,
) -> None:
    cluster_objects.create(node("rbac-node", cpu="4", memory="8Gi"))
    uid = kube.create(pod("p0", {"cpu": "1"}), namespace)["metadata"]["uid"]
    group_path = f"/apis/scheduling.batchsched.io/v1alpha1/namespaces/{namespace}/podgroups/pg"
    kube.create(pod_group("pg", 1), namespace)
    cluster_objects.create(
        {
            "apiVersion": "scheduling.batchsched.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "rbac-q"},
            "spec": {},
        }
    )

    for path in (
        "/api/v1/pods",
        "/api/v1/nodes",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/api/v1/persistentvolumeclaims",
        "/api/v1/persistentvolumes",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/storage.k8s.io/v1/csinodes",
        "/apis/storage.k8s.io/v1/csidrivers",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        "/apis/scheduling.batchsched.io/v1alpha1/podgroups",
        "/apis/scheduling.batchsched.io/v1alpha1/queues",
        "/apis/scheduling.incubator.k8s.io/v1alpha1/podgroups",
        "/apis/scheduling.sigs.dev/v1alpha2/podgroups",
        "/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
        "/apis/scheduling.volcano.sh/v1beta1/podgroups",
        "/apis/scheduling.volcano.sh/v1beta1/queues",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
        "/apis/batch.scheduler.tencent.com/v1/podgroups",
        "/apis/policy/v1/poddisruptionbudgets",
        # The session's control plane serves Kubernetes' own gang API.
        "/apis/scheduling.k8s.io/v1alpha2/podgroups",
        "/apis/scheduling.k8s.io/v1alpha2/workloads",
        *(
            f"/apis/resource.k8s.io/v1/{plural}"
            for plural in (
                "resourceslices",
                "deviceclasses",
                "resourceclaims",
                "resourceclaimtemplates",
            )
        ),
    ):
        scheduler.get(path).expect(200)
    scheduler.get(f"/api/v1/namespaces/{namespace}/pods/p0").expect(200)

    # A claim allocated and reserved for the pod before it is bound, as the binder does.
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "c"}}]}},
    }
    claim_path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/gpu"
    kube.create(claim, namespace)
    read = scheduler.get(claim_path).expect(200)
    read["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    written = scheduler.put(claim_path, read).expect(200)
    result = {"request": "g", "driver": "gpu.example.com", "pool": "rbac-node", "device": "d"}
    allocation = {"devices": {"results": [result]}, "allocationTimestamp": _now()}
    reserved = [{"resource": "pods", "name": "p0", "uid": uid}]
    version = written["metadata"]["resourceVersion"]
    scheduler.patch(
        f"{claim_path}/status",
        {
            "metadata": {"resourceVersion": version},
            "status": {"allocation": allocation, "reservedFor": reserved},
        },
        merge=False,
    ).expect(200)

    scheduler.bind(namespace, "p0", uid, "rbac-node").expect(201)
    condition = {"type": "PodScheduled", "status": "True", "reason": "Scheduled"}
    scheduler.patch(
        f"/api/v1/namespaces/{namespace}/pods/p0/status",
        {"status": {"conditions": [condition]}},
        merge=False,
    ).expect(200)
    scheduler.patch(
        f"{group_path}/status", {"status": {"phase": "Running", "scheduled": 1}}
    ).expect(200)
    native_path = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups/native"
    kube.create(native_pod_group("native", 1), namespace)
    scheduled = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}
    scheduled |= {"message": "", "lastTransitionTime": _now().split(".")[0] + "Z"}
    scheduler.patch(
        f"{native_path}/status", {"status": {"conditions": [scheduled]}}, merge=False
    ).expect(200)
    scheduler.patch(
        "/apis/scheduling.batchsched.io/v1alpha1/queues/rbac-q/status",
        {"status": {"running": 1, "allocated": {"cpu": "1"}}},
    ).expect(200)

    regarding = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": namespace,
        "name": "p0",
        "uid": uid,
    }
    new_event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p0.binding"},
        "eventTime": _now(),
        "reportingController": "batchsched.io/scheduler",
        "reportingInstance": "batchsched-0",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": regarding,
        "note": "bound to rbac-node",
        "type": "Normal",
    }
    scheduler.post(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", new_event).expect(201)

    # Preemption: a victim evicted, and one deleted where a budget would refuse it.
    for victim in ("v0", "v1"):
        kube.create(pod(victim, {"cpu": "1"}), namespace)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "v0", "namespace": namespace},
    }
    scheduler.post(f"/api/v1/namespaces/{namespace}/pods/v0/eviction", eviction).expect(201)
    scheduler.delete(f"/api/v1/namespaces/{namespace}/pods/v1").expect(200)


def _lease(name: str, holder: str) -> JSON:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


@pytest.fixture
def foreign_leases(kube: Kube, service_account: JSON) -> Iterator[dict[str, str]]:
    """Leases the scheduler must not touch, by path, as the cluster has them: another
    leader lease beside its own, kube-system's scheduler lease and an API server's
    identity lease. The API server keeps its own identity lease; one is made if not."""
    own = LEASES.format(namespace=service_account["metadata"]["namespace"])
    system = LEASES.format(namespace="kube-system")
    identities = kube.get(
        system, query={"labelSelector": "apiserver.kubernetes.io/identity=kube-apiserver"}
    ).expect(200)["items"]
    made = [kube.post(own, _lease("kube-scheduler", "other")).expect(201)]
    made.append(kube.post(system, _lease("kube-scheduler", "kube-system-holder")).expect(201))
    if identities:
        identity = identities[0]["metadata"]["name"]
    else:
        identity = "apiserver-0123456789abcdef"
        made.append(kube.post(system, _lease(identity, "kube-apiserver")).expect(201))
    yield {
        "own namespace": f"{own}/kube-scheduler",
        "kube-system leader": f"{system}/kube-scheduler",
        "API server identity": f"{system}/{identity}",
    }
    for lease in made:
        kube.delete_object(lease)


def test_lease_access(
    scheduler: Kube, service_account: JSON, foreign_leases: dict[str, str]
) -> None:
    """With its own token: its lease can be created, read and renewed; no other lease,
    in its namespace or in kube-system, can be read, renewed or taken over."""
    own = LEASES.format(namespace=service_account["metadata"]["namespace"])
    scheduler.post(own, _lease(LEASE_NAME, "replica-a")).expect(201)
    held = scheduler.get(f"{own}/{LEASE_NAME}").expect(200)
    held["spec"]["holderIdentity"] = "replica-b"
    scheduler.put(f"{own}/{LEASE_NAME}", held).expect(200)

    taken = _lease("x", "batchsched")
    refused = {}
    for what, path in foreign_leases.items():
        name = path.rsplit("/", 1)[1]
        refused[f"get {what}"] = scheduler.get(path).status
        refused[f"update {what}"] = scheduler.put(
            path, {**taken, "metadata": {"name": name}}
        ).status
    system = LEASES.format(namespace="kube-system")
    for name in ("kube-scheduler", "apiserver-fedcba9876543210"):
        refused[f"create kube-system/{name}"] = scheduler.post(system, _lease(name, "x")).status
    assert refused == dict.fromkeys(refused, 403)


def test_scheduler_requests_refused(scheduler: Kube, namespace: str) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "stringData": {"k": "v"},
    }
    forbidden = [
        scheduler.get("/api/v1/secrets"),
        scheduler.get(f"/api/v1/namespaces/{namespace}/secrets"),
        scheduler.get(f"/api/v1/namespaces/{namespace}/secrets/anything"),
        scheduler.post(f"/api/v1/namespaces/{namespace}/secrets", secret),
        scheduler.get(f"/api/v1/namespaces/{namespace}/configmaps"),
        scheduler.post(f"/api/v1/namespaces/{namespace}/pods", pod("sneaky", {"cpu": "1"})),
        scheduler.delete(f"/api/v1/namespaces/{namespace}/pods"),
        scheduler.delete(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/anything"),
        scheduler.post("/api/v1/nodes", node("sneaky", cpu="1")),
        scheduler.delete("/api/v1/nodes/anything"),
        scheduler.delete(
            f"/apis/scheduling.batchsched.io/v1alpha1/namespaces/{namespace}/podgroups/pg"
        ),
        scheduler.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
        scheduler.get("/apis/rbac.authorization.k8s.io/v1/clusterroles"),
        scheduler.get("/apis/apps/v1/deployments"),
    ]
    assert [(r.method, r.path, r.status) for r in forbidden if r.status != 403] == []


def _may_read_metrics(client: Kube) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    return bool(client.post(path, review).expect(201)["status"].get("allowed"))


async def test_metrics_auth_with_the_schedulers_token(
    kube: Kube,
    scheduler: Kube,
    namespace: str,
    cluster_objects: ClusterObjects,
    rbac_docs: list[JSON],
    tmp_path: Path,
) -> None:
    """The scheduler's token may send the reviews; a caller bound to the reader role
    gets /metrics, one without it 403, a token the API server does not know 401."""
    assert any(d["metadata"]["name"] == METRICS_READER for d in rbac_docs)
    reader = kube.with_token(account_token(kube, namespace, "prometheus"))
    stranger = kube.with_token(account_token(kube, namespace, "stranger"))
    prometheus = {"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}
    cluster_objects.create(cluster_role_binding(f"{namespace}-metrics", METRICS_READER, prometheus))
    # RBAC takes a moment to see a new binding: once it lets the reader in, it has seen
    # it, and what it says of the scheduler is its verdict with the binding in place.
    eventually(lambda: _may_read_metrics(reader), what="the reader's binding seen by RBAC")
    assert not _may_read_metrics(scheduler)

    api = Api(load_credentials(str(token_kubeconfig(tmp_path / "kubeconfig", scheduler))))
    endpoints = await serve(0, host="127.0.0.1", ready=lambda: True, auth=MetricsAuth(api))
    base = f"http://127.0.0.1:{endpoints.port}"
    statuses = {}
    try:
        async with aiohttp.ClientSession() as http:
            callers = {
                "reader": reader.token,
                "stranger": stranger.token,
                "unknown": "not-a-token",
                "scheduler": scheduler.token,
            }
            for who, token in callers.items():
                headers = {"Authorization": f"Bearer {token}"}
                async with http.get(f"{base}/metrics", headers=headers) as reply:
                    statuses[who] = reply.status
                    if who == "unknown":
                        # Not "a token is needed": one was sent, and the API server refused it.
                        said = await reply.text()
                        assert said.startswith("the bearer token was not accepted"), said
            for path in ("/metrics", "/readyz", "/livez", "/healthz"):
                async with http.get(f"{base}{path}") as reply:
                    statuses[f"no token {path}"] = reply.status
    finally:
        await endpoints.close()
        await api.close()
    assert statuses == {
        "reader": 200,
        "stranger": 403,
        "unknown": 401,
        "scheduler": 403,
        "no token /metrics": 401,
        "no token /readyz": 200,
        "no token /livez": 200,
        "no token /healthz": 200,
    }
