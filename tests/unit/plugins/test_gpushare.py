"""binpack on GPU-sharing clusters: shares fill cards, and pods without GPUs keep off idle ones."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.gpu import GPU_INDEX_ANNOTATION, GPU_MILLI
from batchsched.api.resources import GPU
from batchsched.config.load import load_config

from tests.support.objects import Obj, decide, node, placements, pod

GPU_BINPACK = """
tiers:
- plugins:
  - {name: predicates}
  - name: binpack
    arguments: {resources: {nvidia.com/gpu: 1}%s}
"""


def gpu_node(name: str, cards: int) -> Obj:
    return node(name, cpu="64", extra={GPU: str(cards), GPU_MILLI: str(cards * 1000)})


def busy(name: str) -> list[Obj]:
    """Two 2-card nodes; `name` has a share on card 0, the other is idle."""
    held = pod(
        "held",
        requests={GPU_MILLI: "500"},
        node_name=name,
        annotations={GPU_INDEX_ANNOTATION: "0"},
    )
    return [gpu_node("a", 2), gpu_node("b", 2), held]


def test_a_share_on_a_node_counts_towards_its_gpu_utilisation() -> None:
    decisions = decide([*busy("b"), pod("w", requests={GPU: "1"})], GPU_BINPACK % "")
    assert placements(decisions) == {"default/w": "b"}


def test_pods_without_gpus_ignore_gpus_by_default() -> None:
    decisions = decide([*busy("b"), pod("c", requests={"cpu": "1"})], GPU_BINPACK % "")
    assert placements(decisions) == {"default/c": "a"}


def test_always_scored_gpus_send_pods_without_gpus_to_busy_gpus() -> None:
    config = GPU_BINPACK % ", alwaysScored: [nvidia.com/gpu]"
    decisions = decide([*busy("b"), pod("c", requests={"cpu": "1"})], config)
    assert placements(decisions) == {"default/c": "b"}


def test_always_scored_resources_need_a_weight() -> None:
    with pytest.raises(InvalidObject, match="alwaysScored names 'cpu', which has no weight"):
        load_config(GPU_BINPACK % ", alwaysScored: [cpu]")
