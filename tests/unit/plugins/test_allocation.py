"""leastallocated and balancedallocation: kube-scheduler's LeastAllocated and
BalancedAllocation scores, worked by hand."""

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


def score(plugin: str, *, used: Quantities, request: Quantities, arguments: str = "{}") -> int:
    """The plugin's score of pod `p` on one 4 CPU / 8Gi / 4 GPU node already using `used`."""
    snapshot = snapshot_of(
        [
            node("n1", cpu="4", memory="8Gi", extra={GPU: 4}),
            pod("running", requests=used, node_name="n1", scheduler="other"),
            pod("p", requests=request),
        ]
    )
    config = (
        f"tiers:\n- plugins: [{{name: predicates}}, {{name: {plugin}, arguments: {arguments}}}]\n"
    )
    session = Session(snapshot, tiers=load_config(config).tiers)
    [(scorer, _)] = session.scorers
    return int(scorer.score(pending_task(snapshot, "default/p"), session.all_nodes)[0])


@pytest.mark.parametrize(
    ("used", "asked", "arguments", "expected"),
    [
        # cpu (4 - 2) * 100 / 4 = 50, memory (8 - 2) * 100 / 8 = 75: (50 + 75) / 2 = 62.
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, "{}", 62),
        # Weighted 3:1: (150 + 75) / 4 = 56.
        (
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "1", "memory": "1Gi"},
            "{resources: {cpu: 3, memory: 1}}",
            56,
        ),
        # Pods without requests count as 100m and 200Mi, both of them: cpu 95, memory 95.
        ({}, {}, "{}", 95),
        # Over the node: that resource scores 0; memory (8 - 4) * 100 / 8 = 50: 25.
        ({"cpu": "4", "memory": "3Gi"}, {"cpu": "1", "memory": "1Gi"}, "{}", 25),
        # GPUs are scored only for pods that request them: gpu (4 - 2) / 4 = 50; the running
        # pod requests no CPU or memory, so counts 100m and 200Mi: cpu 72, memory 85: 69.
        (
            {GPU: 1},
            {"cpu": "1", "memory": "1Gi", GPU: 1},
            f"{{resources: {{cpu: 1, memory: 1, {GPU}: 1}}}}",
            69,
        ),
        # The same pod without a GPU: (72 + 85) / 2 = 78.
        (
            {GPU: 1},
            {"cpu": "1", "memory": "1Gi"},
            f"{{resources: {{cpu: 1, memory: 1, {GPU}: 1}}}}",
            78,
        ),
    ],
    ids=["worked", "weighted", "non-zero-defaults", "over", "gpu-requested", "gpu-not-requested"],
)
def test_least_allocated(
    used: Quantities, asked: Quantities, arguments: str, expected: int
) -> None:
    assert score("leastallocated", used=used, request=asked, arguments=arguments) == expected


@pytest.mark.parametrize(
    ("used", "asked", "expected"),
    [
        # cpu 2/4 = 0.5, memory 2/8 = 0.25: std 0.125, (1 - 0.125) * 100 = 87.
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, 87),
        # Alike: 100.
        ({"cpu": "1", "memory": "2Gi"}, {"cpu": "1", "memory": "2Gi"}, 100),
        # Plain requests (no non-zero defaults): nothing requested, all fractions 0.
        ({}, {}, 100),
        # Three resources, the pod asking for a GPU: 0.5, 0.25, 0.5: mean 5/12, std 0.1179: 88.
        ({"cpu": "1", "memory": "1Gi", GPU: 1}, {"cpu": "1", "memory": "1Gi", GPU: 1}, 88),
    ],
    ids=["worked", "alike", "nothing-requested", "three-resources"],
)
def test_balanced_allocation(used: Quantities, asked: Quantities, expected: int) -> None:
    arguments = f"{{resources: {{cpu: 1, memory: 1, {GPU}: 1}}}}"
    assert score("balancedallocation", used=used, request=asked, arguments=arguments) == expected


def test_least_allocated_spreads_where_binpack_packs() -> None:
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        pod("busy", requests={"cpu": "2"}, node_name="n1", scheduler="other"),
        pod("p", requests={"cpu": "1"}),
    ]
    spread = "tiers:\n- plugins: [{name: predicates}, {name: leastallocated}]\n"
    assert placements(decide(objects, spread)) == {"default/p": "n2"}
    assert placements(decide(objects)) == {"default/p": "n1"}
