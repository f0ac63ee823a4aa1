"""Pods mounting PersistentVolumeClaims go where their volumes can be, all of a gang's
or none, and wait with kube-scheduler's words when they cannot."""

from pathlib import Path

import pytest

from batchsched.plugins.volumefilters import (
    BIND_CONFLICT,
    IMMEDIATE_UNBOUND,
    MAX_VOLUME_COUNT,
    NODE_CONFLICT,
    NOT_ENOUGH_SPACE,
    READ_WRITE_ONCE_POD_CONFLICT,
    VOLUME_MISSING,
    ZONE_CONFLICT,
)

from .harness import Run, group, simulate_text

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def nodes(count: int, *, zones: str = "ab") -> str:
    return "".join(
        f"""---
apiVersion: v1
kind: Node
metadata: {{name: n{i}, labels: {{{HOSTNAME}: n{i}, {ZONE}: {zones[i % len(zones)]}}}}}
status: {{allocatable: {{cpu: "4", memory: 8Gi}}}}
"""
        for i in range(count)
    )


def pod(name: str, *claims: str, group: str = "", uid: str = "") -> str:
    note = f"annotations: {{scheduling.batchsched.io/group-name: {group}}}, " if group else ""
    volumes = ", ".join(
        f"{{name: v{i}, persistentVolumeClaim: {{claimName: {c}}}}}" for i, c in enumerate(claims)
    )
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, {note}uid: {uid or name}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
  volumes: [{volumes}]
"""


def claim(name: str, *, storage_class: str = "", volume: str = "", notes: str = "") -> str:
    """A claim; with `volume`, one the PersistentVolume controller has bound to it."""
    if volume:
        notes = f"pv.kubernetes.io/bind-completed: 'yes', {notes}"
    bound = f"\n  volumeName: {volume}" if volume else ""
    return f"""---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, uid: {name}-uid, annotations: {{{notes}}}}}
spec:
  storageClassName: '{storage_class}'
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}{bound}
"""


def volume(
    name: str,
    *,
    host: str = "",
    zone: str = "",
    storage_class: str = "",
    claim_name: str = "",
    driver: str = "",
) -> str:
    """A 1Gi volume; with `claim_name`, bound to that claim."""
    spec = [f"storageClassName: '{storage_class}'", "capacity: {storage: 1Gi}"]
    spec.append("accessModes: [ReadWriteOnce, ReadWriteOncePod]")
    if host:
        term = f"{{matchExpressions: [{{key: {HOSTNAME}, operator: In, values: [{host}]}}]}}"
        spec.append(f"nodeAffinity: {{required: {{nodeSelectorTerms: [{term}]}}}}")
    if claim_name:
        spec.append(f"claimRef: {{namespace: default, name: {claim_name}}}")
    if driver:
        spec.append(f"csi: {{driver: {driver}, volumeHandle: {name}}}")
    lines = "".join(f"\n  {line}" for line in spec)
    return f"""---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {name}, labels: {{{f"{ZONE}: {zone}" if zone else ""}}}}}
spec:{lines}
status: {{phase: {"Bound" if claim_name else "Available"}}}
"""


def storage_class(
    name: str, *, provisioner: str = "example.com/csi", wait: bool = True, zones: str = ""
) -> str:
    topologies = (
        f"allowedTopologies: [{{matchLabelExpressions: [{{key: {ZONE}, values: [{zones}]}}]}}]\n"
        if zones
        else ""
    )
    mode = "WaitForFirstConsumer" if wait else "Immediate"
    return f"""---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {name}}}
provisioner: {provisioner}
volumeBindingMode: {mode}
{topologies}"""


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *documents: str) -> Run:
    return simulate_text(capsys, tmp_path, "".join(documents))


def test_claims_that_cannot_be_used_yet_keep_the_pod_waiting_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(
        capsys,
        tmp_path,
        nodes(2),
        storage_class("now", wait=False),
        claim("pending", storage_class="now"),
        claim("gone", volume="missing-pv"),
        pod("no-claim", "absent"),
        pod("immediate", "pending"),
        pod("lost-volume", "gone"),
        pod("plain"),
    )
    pods = result.pods
    assert list(result.bound()) == ["default/plain"]
    assert pods["default/no-claim"]["reason"] == (
        '0/2 nodes are available: persistentvolumeclaim "absent" not found.'
    )
    assert pods["default/immediate"]["reason"] == f"0/2 nodes are available: {IMMEDIATE_UNBOUND}."
    assert pods["default/lost-volume"]["reason"] == f"0/2 nodes are available: 2 {VOLUME_MISSING}."


def test_a_bound_volume_takes_its_pod_to_the_nodes_it_reaches(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(
        capsys,
        tmp_path,
        nodes(4),
        volume("local", host="n2", claim_name="data"),
        volume("zonal", zone="b", claim_name="logs"),
        volume("far", host="n9", claim_name="far"),
        claim("data", volume="local"),
        claim("logs", volume="zonal"),
        claim("far", volume="far"),
        pod("on-local", "data"),
        pod("in-zone", "logs"),
        pod("nowhere", "far"),
    )
    bound = result.bound()
    assert bound["default/on-local"] == "n2"
    assert bound["default/in-zone"] in ("n1", "n3")
    assert (
        result.pods["default/nowhere"]["reason"] == f"0/4 nodes are available: 4 {NODE_CONFLICT}."
    )


def test_a_gang_takes_a_local_volume_per_member_or_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    local = storage_class("local", provisioner="kubernetes.io/no-provisioner")
    members = [pod(f"w{i}", f"data-{i}", group="train") for i in range(3)]
    claims = [claim(f"data-{i}", storage_class="local") for i in range(3)]
    two = [volume(f"pv{i}", host=f"n{i}", storage_class="local") for i in range(2)]
    short = run(capsys, tmp_path, nodes(4), local, group("train", 3), *claims, *two, *members)
    assert short.bound() == {}
    assert BIND_CONFLICT in short.pods["default/w0"]["reason"]

    three = [*two, volume("pv2", host="n3", storage_class="local")]
    whole = run(capsys, tmp_path, nodes(4), local, group("train", 3), *claims, *three, *members)
    placed = whole.bound()
    assert sorted(placed.values()) == ["n0", "n1", "n3"]


def test_provisioning_follows_the_class_topology_and_a_shared_claim_its_first_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(
        capsys,
        tmp_path,
        nodes(4),
        storage_class("zonal", zones="b"),
        claim("shared", storage_class="zonal"),
        claim("own", storage_class="zonal"),
        group("pair", 2),
        pod("first", "shared", group="pair"),
        pod("second", "shared", "own", group="pair"),
    )
    placed = result.bound()
    assert set(placed.values()) <= {"n1", "n3"}
    assert placed["default/first"] == placed["default/second"]


def test_a_selected_node_holds_an_unbound_claim_to_that_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(
        capsys,
        tmp_path,
        nodes(4),
        storage_class("fast"),
        claim(
            "data",
            storage_class="fast",
            notes="volume.kubernetes.io/selected-node: n3",
        ),
        pod("worker", "data"),
    )
    assert result.bound() == {"default/worker": "n3"}


def test_a_read_write_once_pod_claim_serves_one_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    once = claim("once", volume="pv").replace("[ReadWriteOnce]", "[ReadWriteOncePod]")
    result = run(
        capsys,
        tmp_path,
        nodes(2),
        volume("pv", claim_name="once"),
        once,
        pod("a", "once"),
        pod("b", "once"),
    )
    assert list(result.bound()) == ["default/a"]
    assert result.pods["default/b"]["reason"] == (
        f"0/2 nodes are available: {READ_WRITE_ONCE_POD_CONFLICT}."
    )


def test_csi_attach_limits_count_distinct_volumes_per_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    limits = "".join(
        f"""---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {{name: n{i}}}
spec: {{drivers: [{{name: disk.example.com, nodeID: n{i}, allocatable: {{count: 1}}}}]}}
"""
        for i in range(2)
    )
    documents = [nodes(2), limits]
    for i in range(3):
        documents += [
            volume(f"pv{i}", claim_name=f"c{i}", driver="disk.example.com"),
            claim(f"c{i}", volume=f"pv{i}"),
            pod(f"p{i}", f"c{i}"),
        ]
    documents.append(pod("reader", "c0"))
    result = run(capsys, tmp_path, *documents)
    placed = result.bound()
    assert sorted(placed.values()) == ["n0", "n0", "n1"]
    assert placed["default/reader"] == placed["default/p0"]
    assert result.pods["default/p2"]["reason"] == f"0/2 nodes are available: 2 {MAX_VOLUME_COUNT}."


def test_a_zone_labelled_volume_keeps_its_pod_in_the_zone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(
        capsys,
        tmp_path,
        nodes(2, zones="a"),
        volume("pv", zone="c", claim_name="data"),
        claim("data", volume="pv"),
        pod("worker", "data"),
    )
    assert result.pods["default/worker"]["reason"] == f"0/2 nodes are available: 2 {ZONE_CONFLICT}."


def test_an_ephemeral_claim_must_belong_to_its_pod(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ephemeral = pod("job", "x").replace(
        "persistentVolumeClaim: {claimName: x}", "ephemeral: {volumeClaimTemplate: {spec: {}}}"
    )
    result = run(capsys, tmp_path, nodes(1), claim("job-v0"), ephemeral)
    assert result.pods["default/job"]["reason"] == (
        "0/1 nodes are available: "
        "PVC default/job-v0 was not created for pod default/job (pod is not owner)."
    )


def test_a_driver_that_tracks_capacity_provisions_only_where_there_is_room(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tracking = f"""---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: example.com/csi}}
spec: {{storageCapacity: true}}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {{name: zone-b, namespace: kube-system}}
storageClassName: fast
nodeTopology: {{matchLabels: {{{ZONE}: b}}}}
capacity: 100Gi
maximumVolumeSize: 5Gi
"""
    large = claim("large", storage_class="fast").replace("storage: 1Gi", "storage: 10Gi")
    result = run(
        capsys,
        tmp_path,
        nodes(4),
        tracking,
        storage_class("fast"),
        claim("small", storage_class="fast"),
        large,
        pod("fits", "small"),
        pod("too-big", "large"),
    )
    assert result.bound()["default/fits"] in ("n1", "n3")
    assert (
        result.pods["default/too-big"]["reason"]
        == f"0/4 nodes are available: 4 {NOT_ENOUGH_SPACE}."
    )


def test_stateful_set_claim_templates_and_ephemeral_volumes_get_their_claims(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As the StatefulSet and ephemeral volume controllers would: a claim per replica
    (data-db-0, data-db-1) on the local volumes of n1 and n3, and one per ephemeral
    volume, provisioned where its pod goes."""
    stateful = """---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  template:
    spec:
      schedulerName: batch-scheduler
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      storageClassName: local
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""
    scratch = pod("job", "x").replace(
        "persistentVolumeClaim: {claimName: x}",
        "ephemeral: {volumeClaimTemplate: {spec: {storageClassName: fast, "
        "accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}",
    )
    result = run(
        capsys,
        tmp_path,
        nodes(4),
        storage_class("local", provisioner="kubernetes.io/no-provisioner"),
        storage_class("fast"),
        volume("pv-a", host="n1", storage_class="local"),
        volume("pv-b", host="n3", storage_class="local"),
        stateful,
        scratch,
    )
    placed = result.bound()
    assert sorted([placed["default/db-0"], placed["default/db-1"]]) == ["n1", "n3"]
    assert "default/job" in placed
