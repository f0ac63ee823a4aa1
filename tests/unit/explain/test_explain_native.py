"""`batchsched explain -f` on Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2):
each way such a gang waits is named with kube-scheduler's words and a remedy that fits
that API, and the group shows its policy and the Workload it was made from."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import main

from tests.support.objects import member, native_pod_group, node

CPU = {"cpu": "1", "memory": "1Gi"}
WORKLOAD = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "Workload",
    "metadata": {"name": "train-x"},
    "spec": {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroupTemplates": [
            {"name": "train-pgt-0", "schedulingPolicy": {"gang": {"minCount": 4}}}
        ],
    },
}
TEMPLATE_REF = {"workload": {"workloadName": "train-x", "podGroupTemplateName": "train-pgt-0"}}


def explain(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[Any], *args: str
) -> list[str]:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([node("n1", cpu=4, memory="16Gi"), *objects]))
    assert main(["explain", *args, "-f", str(path)]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_podgroup_that_does_not_exist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for target in ("pod/g-0", "pg/g"):
        lines = explain(capsys, tmp_path, [member("g-0", "g", CPU)], target)
        assert lines[1] == (
            'cause: waiting for pod\'s pod group "g" to appear in scheduling queue (PodGroup '
            "default/g, named by the pods' spec.schedulingGroup.podGroupName, does not exist)"
        )
        assert lines[2].startswith(
            "remedy: create PodGroup default/g of scheduling.k8s.io/v1alpha2"
        )


def test_a_gang_short_of_pods_is_told_how_many_to_create(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    objects = [WORKLOAD, native_pod_group("g", 4, podGroupTemplateRef=TEMPLATE_REF)]
    objects += [member(f"g-{i}", "g", CPU) for i in range(3)]
    lines = explain(capsys, tmp_path, objects, "pg/g")
    assert lines[0] == (
        "pg default/g: Pending; gang default/g has 0 of minCount 4 bound, 3 pending, "
        "1 missing; queue default"
    )
    assert lines[1] == (
        "cause: waiting for minCount pods from a gang to appear in scheduling queue "
        "(PodGroup default/g: 3 pods exist, spec.schedulingPolicy.gang.minCount is 4)"
    )
    assert lines[2].startswith("remedy: create 1 more pod(s) naming PodGroup default/g")
    assert (
        "group default/g (gang minCount 4, Workload train-x/train-pgt-0 of Job train): "
        "phase Pending, minMember 4: 0 bound, 3 pending, 1 missing"
    ) in lines


def test_json_carries_the_groups_origin(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = [native_pod_group("b", None), member("b-0", "b", {"cpu": "8"})]
    found = json.loads("\n".join(explain(capsys, tmp_path, objects, "pg/b", "-o", "json")))
    assert found["group"]["origin"] == "basic"
