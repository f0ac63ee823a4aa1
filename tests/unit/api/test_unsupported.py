"""Every placement constraint the core does not honour yet blocks the pod, by name."""

from typing import Any

import pytest

from batchsched.api.podaffinity import PREFERRED
from batchsched.api.pods import ShapeMemo, task_from_pod
from batchsched.api.unsupported import GATED_MESSAGE

from tests.support.objects import pod

TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"resourceClaims": [{"name": "gpu"}]}, "spec.resourceClaims"),
        (
            {
                "volumes": [
                    {"name": "token", "projected": {"sources": []}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-1"}},
                ]
            },
            "spec.volumes[2].awsElasticBlockStore",
        ),
        ({"volumes": [{"name": "d", "iscsi": {"iqn": "x"}}]}, "spec.volumes[0].iscsi"),
    ],
)
def test_unhonoured_constraints_block_the_pod_by_name(spec: dict[str, Any], field: str) -> None:
    task = task_from_pod(pod("p", spec=spec))
    assert task.blocked == f"{field} is not supported yet"
    assert task.shape_key != task_from_pod(pod("q")).shape_key


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": {"podAntiAffinity": {}, "podAffinity": {PREFERRED: []}}},
        {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}},
        {"topologySpreadConstraints": [], "resourceClaims": [], "schedulingGates": []},
        {
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "cm", "configMap": {"name": "c"}},
                {"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io"}},
            ]
        },
    ],
    ids=["empty-pod-affinity", "empty-preferences", "empty-lists", "node-free-volumes"],
)
def test_empty_or_harmless_fields_do_not_block(spec: dict[str, Any]) -> None:
    task = task_from_pod(pod("p", spec=spec))
    assert task.blocked is None
    assert task.shape_key == task_from_pod(pod("q")).shape_key


def test_scheduling_gates_come_before_anything_unsupported() -> None:
    spec = {
        "schedulingGates": [{"name": "example.com/quota"}],
        "resourceClaims": [{"name": "gpu"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }
    assert task_from_pod(pod("p", spec=spec)).blocked == GATED_MESSAGE


def test_volumes_do_not_split_the_shape_memo() -> None:
    """Each pod's token volume has its own name; pods of one template share one shape."""
    memo = ShapeMemo()
    first, second = (
        task_from_pod(
            pod(name, spec={"volumes": [{"name": f"kube-api-access-{name}", "projected": {}}]}),
            shapes=memo,
        )
        for name in ("a", "b")
    )
    assert first.shape_key == second.shape_key
    assert first.blocked is None


def test_removing_the_last_gate_unblocks_the_pod() -> None:
    memo = ShapeMemo()
    gated = task_from_pod(pod("p", spec={"schedulingGates": [{"name": "g"}]}), shapes=memo)
    released = task_from_pod(pod("p", spec={"schedulingGates": []}), shapes=memo)
    assert (gated.blocked, released.blocked) == (GATED_MESSAGE, None)
