"""GPUs as individual cards: how pods ask for whole cards or a share of one.

A node's GPUs are cards of CARD_MILLI each. A pod asks for
- whole cards with `nvidia.com/gpu: k` (the NVIDIA device plugin's resource), or
- a share of one card with `scheduling.batchsched.io/gpu-milli: m` (1 <= m <= 1000), an
  extended resource in the style of Aliyun's `aliyun.com/gpu-mem` and Volcano's
  `volcano.sh/gpu-memory`: a sharing device plugin advertises 1000 per card on the node.
At bind time the scheduler records the chosen cards on the pod in the annotation
`scheduling.batchsched.io/gpu-index` ("2", or "0,1" for two whole cards), which the
device plugin reads to expose exactly those cards; the scheduler also reads it back so
that per-card usage survives across sessions and restarts.
"""

from typing import NamedTuple

from batchsched.api.errors import InvalidObject
from batchsched.api.resources import GPU, ResourceList

GPU_MILLI = "scheduling.batchsched.io/gpu-milli"
GPU_INDEX_ANNOTATION = "scheduling.batchsched.io/gpu-index"
# GPU feature discovery's label for the card model; the openb trace's gpu_spec maps onto it.
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
CARD_MILLI = 1000


class GpuDemand(NamedTuple):
    """`cards` cards with at least `milli` free on each; (0, 0) for a pod without GPUs."""

    cards: int
    milli: int

    @property
    def total(self) -> int:
        return self.cards * self.milli

    @property
    def shared(self) -> bool:
        return self.cards == 1 and self.milli < CARD_MILLI


NO_GPU = GpuDemand(0, 0)


def gpu_demand(request: ResourceList) -> GpuDemand:
    """The card demand of a request that `check_gpu_request` accepted."""
    whole = request.get(GPU, 0)
    if whole:
        return GpuDemand(whole, CARD_MILLI)
    share = request.get(GPU_MILLI, 0)
    return GpuDemand(1, share) if share else NO_GPU


def check_gpu_request(request: ResourceList, *, where: str) -> None:
    share = request.get(GPU_MILLI, 0)
    if share and request.get(GPU, 0):
        raise InvalidObject(
            f"{where}: ask for either whole cards ({GPU}) or a share of one card "
            f"({GPU_MILLI}), not both"
        )
    if share > CARD_MILLI:
        raise InvalidObject(
            f"{where}: {GPU_MILLI} is a share of one card, from 1 to {CARD_MILLI}; "
            f"ask for whole cards with {GPU}"
        )


def node_cards(allocatable: ResourceList) -> int:
    """Cards on a node: what the NVIDIA device plugin advertises, else the sharing plugin's."""
    return allocatable.get(GPU, 0) or allocatable.get(GPU_MILLI, 0) // CARD_MILLI


def format_gpu_index(cards: tuple[int, ...]) -> str:
    return ",".join(str(card) for card in cards)


def parse_gpu_index(text: str, *, where: str) -> tuple[int, ...]:
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise InvalidObject(
            f"{where}: annotation {GPU_INDEX_ANNOTATION}={text!r} must list card numbers "
            "like 0 or 0,1"
        )
    return tuple(int(part) for part in parts)
