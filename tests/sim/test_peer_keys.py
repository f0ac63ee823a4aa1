"""A gang written with any peer's keys and PodGroup API binds whole or not at all, and a
pod whose keys name two groups, or a label-only gang whose members disagree on its size,
waits saying so."""

from pathlib import Path

import pytest

from .harness import simulate_text

NODE = """---
apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{cpu: "{cpu}", memory: 8Gi}}}}
"""

# (where on the pod, key, the PodGroup apiVersion of the scheduler that reads the key).
PEER_KEYS = [
    ("annotations", "scheduling.batchsched.io/group-name", "scheduling.batchsched.io/v1alpha1"),
    ("labels", "scheduling.batchsched.io/group-name", "scheduling.batchsched.io/v1alpha1"),
    ("annotations", "scheduling.k8s.io/group-name", "scheduling.incubator.k8s.io/v1alpha1"),
    ("annotations", "scheduling.k8s.io/group-name", "scheduling.sigs.dev/v1alpha2"),
    ("annotations", "scheduling.x-k8s.io/group-name", "scheduling.sigs.dev/v1alpha2"),
    ("annotations", "scheduling.k8s.io/group-name", "scheduling.volcano.sh/v1beta1"),
    ("annotations", "scheduling.volcano.sh/group-name", "scheduling.volcano.sh/v1beta1"),
    ("labels", "scheduling.x-k8s.io/pod-group", "scheduling.x-k8s.io/v1alpha1"),
    ("labels", "pod-group.scheduling.sigs.k8s.io", "scheduling.sigs.k8s.io/v1alpha1"),
    ("labels", "group.batch.scheduler.tencent.com", "batch.scheduler.tencent.com/v1"),
]
LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"


def podgroup(api_version: str, name: str = "g", min_member: int = 3) -> str:
    return f"""---
apiVersion: {api_version}
kind: PodGroup
metadata: {{name: {name}, namespace: ml}}
spec: {{minMember: {min_member}}}
"""


def member(name: str, labels: dict[str, str], annotations: dict[str, str]) -> str:
    def flow(values: dict[str, str]) -> str:
        return "{" + ", ".join(f"{k}: '{v}'" for k, v in values.items()) + "}"

    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml, labels: {flow(labels)}, annotations: {flow(annotations)}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def keyed(name: str, where: str, key: str, group: str = "g") -> str:
    values = {key: group}
    return member(name, values if where == "labels" else {}, values if where != "labels" else {})


@pytest.mark.parametrize(("cpu", "bound"), [("2", 0), ("3", 3)])
@pytest.mark.parametrize(("where", "key", "api_version"), PEER_KEYS)
def test_a_gang_named_by_any_peer_key_binds_whole_or_not_at_all(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    where: str,
    key: str,
    api_version: str,
    cpu: str,
    bound: int,
) -> None:
    text = NODE.format(cpu=cpu) + podgroup(api_version)
    text += "".join(keyed(f"p{i}", where, key) for i in range(3))
    run = simulate_text(capsys, tmp_path, text)
    assert len(run.bound()) == bound
    assert {pod["group"] for pod in run.pods.values()} == {"ml/g"}
    assert run.podgroups["ml/g"]["scheduled"] == bound


@pytest.mark.parametrize(("cpu", "bound"), [("2", 0), ("3", 3)])
def test_a_label_only_gang_binds_whole_or_not_at_all(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cpu: str, bound: int
) -> None:
    labels = {LIGHTWEIGHT_NAME: "g", LIGHTWEIGHT_MIN: "3"}
    text = NODE.format(cpu=cpu) + "".join(member(f"p{i}", labels, {}) for i in range(3))
    run = simulate_text(capsys, tmp_path, text)
    assert len(run.bound()) == bound


def test_keys_naming_two_groups_leave_the_pod_pending_naming_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The pod joins neither gang, so the gang it was meant for stays whole or waits."""
    text = NODE.format(cpu="8") + podgroup("scheduling.volcano.sh/v1beta1")
    text += podgroup("scheduling.volcano.sh/v1beta1", name="h", min_member=1)
    text += keyed("p0", "annotations", "scheduling.volcano.sh/group-name")
    text += keyed("p1", "annotations", "scheduling.volcano.sh/group-name")
    text += member(
        "p2",
        {"scheduling.x-k8s.io/pod-group": "h"},
        {"scheduling.volcano.sh/group-name": "g"},
    )
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {}
    assert run.pods["ml/p2"]["reason"] == (
        "Pod ml/p2: names two groups, 'g' by annotation scheduling.volcano.sh/group-name "
        "and 'h' by label scheduling.x-k8s.io/pod-group; remove one key or make them agree"
    )


def test_keys_that_agree_join_one_gang(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = NODE.format(cpu="3") + podgroup("scheduling.volcano.sh/v1beta1")
    both = {"scheduling.k8s.io/group-name": "g", "scheduling.volcano.sh/group-name": "g"}
    text += "".join(member(f"p{i}", {}, both) for i in range(3))
    run = simulate_text(capsys, tmp_path, text)
    assert len(run.bound()) == 3


def test_label_only_members_disagreeing_on_min_available_wait_naming_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = NODE.format(cpu="8")
    for name, minimum in (("p0", "3"), ("p1", "3"), ("p2", "2")):
        text += member(name, {LIGHTWEIGHT_NAME: "g", LIGHTWEIGHT_MIN: minimum}, {})
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {}
    for pod in run.pods.values():
        assert (
            "gang ml/g: its pods' label pod-group.scheduling.sigs.k8s.io/min-available "
            "disagree: 3 (on ml/p0, ml/p1) and 2 (on ml/p2)"
        ) in pod["reason"]


def test_a_podgroup_key_beside_label_only_members_needs_the_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Whichever member the scheduler sees first, the group waits for its object."""
    text = NODE.format(cpu="8")
    text += "".join(
        member(f"p{i}", {LIGHTWEIGHT_NAME: "g", LIGHTWEIGHT_MIN: "3"}, {}) for i in range(2)
    )
    text += keyed("p2", "labels", "scheduling.x-k8s.io/pod-group")
    run = simulate_text(capsys, tmp_path, text)
    assert run.bound() == {}
    assert all("PodGroup ml/g does not exist" in p["reason"] for p in run.pods.values())
