"""binpack: RequestedToCapacityRatio scores, and where they send pods."""

import pytest

from batchsched.config.load import load_config
from batchsched.framework.session import Session

from tests.support.objects import (
    Quantities,
    decide,
    node,
    pending_task,
    placements,
    pod,
    snapshot_of,
)

GPU = "nvidia.com/gpu"


def binpack_config(arguments: str) -> str:
    return (
        f"tiers:\n- plugins:\n  - name: predicates\n  - name: binpack\n    arguments: {arguments}\n"
    )


# The worked example's arguments, and the same written with the seed's legacy keys.
MODERN = binpack_config(
    "{shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}], "
    "resources: {nvidia.com/gpu: 5, cpu: 1, memory: 1}}"
)
LEGACY = binpack_config(
    "{functionshape: [{utilization: 0, score: 0}, {utilization: 100, score: 100}], "
    "resourcetoweightmap: {nvidia.com/gpu: 5, cpu: 1, memory: 1}}"
)
WORKED_POD = {GPU: 2, "cpu": "8", "memory": "32Gi"}


def score(config_text: str, *, used: Quantities, request: Quantities) -> int:
    """The binpack score of pod `p` on one 8 GPU / 64 CPU / 256Gi node already using `used`."""
    snapshot = snapshot_of(
        [
            node("gpu-node", cpu="64", memory="256Gi", extra={GPU: 8}),
            pod("running", requests=used, node_name="gpu-node", scheduler="other"),
            pod("p", requests=request),
        ]
    )
    session = Session(snapshot, tiers=load_config(config_text).tiers)
    [(scorer, weight)] = session.scorers
    assert weight == 1
    return int(scorer.score(pending_task(snapshot, "default/p"), session.all_nodes)[0])


@pytest.mark.parametrize("config_text", [MODERN, LEGACY], ids=["shape", "functionshape"])
@pytest.mark.parametrize(
    ("used", "asked", "expected"),
    [
        # u: gpu 75, cpu 37, memory 37 -> (75*5 + 37 + 37) / 7 = 64.1
        pytest.param({GPU: 4, "cpu": "16", "memory": "64Gi"}, WORKED_POD, 64, id="worked-64"),
        # u: gpu 25, cpu 18, memory 18 -> (25*5 + 18 + 18) / 7 = 23.0
        pytest.param({"cpu": "4", "memory": "16Gi"}, WORKED_POD, 23, id="worked-23"),
        # The pod requests no GPU: GPUs are not scored, (37 + 37) / 2.
        pytest.param(
            {GPU: 4, "cpu": "16", "memory": "64Gi"},
            {"cpu": "8", "memory": "32Gi"},
            37,
            id="unrequested-gpu-skipped",
        ),
        # u: cpu 36 (23.1 of 64), memory 37 -> 36.5 rounds half up, as Go's math.Round.
        pytest.param(
            {"cpu": "15100m", "memory": "64Gi"},
            {"cpu": "8", "memory": "32Gi"},
            37,
            id="round-half-up",
        ),
        # u: gpu 125 capped at 100 -> (100*5 + 37 + 37) / 7 = 82.0
        pytest.param({GPU: 8, "cpu": "16", "memory": "64Gi"}, WORKED_POD, 82, id="capped"),
        # Only memory is requested: cpu counts (u 0 scores 0 and is left out), memory 12.
        pytest.param({}, {"memory": "32Gi"}, 12, id="zero-points-left-out"),
    ],
)
def test_requested_to_capacity_ratio(
    config_text: str, used: Quantities, asked: Quantities, expected: int
) -> None:
    assert score(config_text, used=used, request=asked) == expected


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # Falling line (spread): 100 - 37 = 63 for cpu and memory alike.
        ("[{utilization: 0, score: 10}, {utilization: 100, score: 0}]", 63),
        # Broken line, truncating: u 37 on (0,0)-(50,30) -> 22.2 -> 22.
        (
            "[{utilization: 0, score: 0}, {utilization: 50, score: 3}, "
            "{utilization: 100, score: 10}]",
            22,
        ),
        # Flat after the last point and before the first.
        ("[{utilization: 40, score: 5}, {utilization: 60, score: 9}]", 50),
    ],
)
def test_shapes_are_interpolated(shape: str, expected: int) -> None:
    used = {"cpu": "16", "memory": "64Gi"}
    request = {"cpu": "8", "memory": "32Gi"}
    assert score(binpack_config(f"{{shape: {shape}}}"), used=used, request=request) == expected


@pytest.mark.parametrize(
    ("config_text", "chosen"),
    [
        (None, "half-full"),
        (
            binpack_config("{shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]}"),
            "empty",
        ),
    ],
    ids=["default-packs", "falling-shape-spreads"],
)
def test_pods_go_where_the_shape_prefers(config_text: str | None, chosen: str) -> None:
    decisions = decide(
        [
            node("empty", cpu="8", memory="32Gi"),
            node("half-full", cpu="8", memory="32Gi"),
            pod("agent", requests={"cpu": "4", "memory": "16Gi"}, node_name="half-full"),
            pod("p", requests={"cpu": "1", "memory": "1Gi"}),
        ],
        config_text,
    )
    assert placements(decisions) == {"default/p": chosen}


def test_gpu_weight_keeps_gpu_pods_together() -> None:
    """With GPUs weighted, a GPU pod joins the node whose GPUs are in use, even when
    another node's CPUs are fuller."""
    decisions = decide(
        [
            node("cpu-busy", cpu="32", memory="128Gi", extra={GPU: 4}),
            node("gpu-busy", cpu="32", memory="128Gi", extra={GPU: 4}),
            pod("cpu-job", requests={"cpu": "24", "memory": "96Gi"}, node_name="cpu-busy"),
            pod("gpu-job", requests={GPU: 2, "cpu": "1"}, node_name="gpu-busy"),
            pod("p", requests={GPU: 1, "cpu": "1"}),
        ],
        MODERN,
    )
    assert placements(decisions) == {"default/p": "gpu-busy"}


def test_pods_without_requests_count_as_kube_scheduler_counts_them() -> None:
    """Ten running pods that request nothing make n1 look used (100m and 200 MiB each),
    so a pod that requests nothing joins them there rather than on the empty n0."""
    idle = [pod(f"idle-{i}", node_name="n1", scheduler="other") for i in range(10)]
    objects = [node("n0", cpu="8"), node("n1", cpu="8"), *idle, pod("p")]
    assert placements(decide(objects, binpack_config("{}"))) == {"default/p": "n1"}


def test_a_pod_that_sets_its_requests_scores_them_alone() -> None:
    """Requests set for every container, even to zero, are scored as they are."""
    busy = [pod(f"busy-{i}", node_name="n1", scheduler="other") for i in range(10)]
    light = pod("p", requests={"cpu": "0", "memory": "0"})
    snapshot = snapshot_of([node("n0"), node("n1"), *busy, light])
    assert pending_task(snapshot, "default/p").pod.score_extra == (0, 0)
    assert snapshot.score_extra is not None
    assert snapshot.score_extra.tolist() == [[0, 0], [1000, 10 * 200 * 2**20]]
