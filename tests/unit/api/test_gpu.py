"""How pods ask for GPU cards and how the chosen cards are written back."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.gpu import (
    GPU_INDEX_ANNOTATION,
    GPU_MILLI,
    NO_GPU,
    GpuDemand,
    format_gpu_index,
    gpu_demand,
    node_cards,
    parse_gpu_index,
)
from batchsched.api.pods import task_from_pod
from batchsched.api.resources import GPU

from tests.support.objects import pod


@pytest.mark.parametrize(
    ("request_", "demand", "shared"),
    [
        ({"cpu": 1000}, NO_GPU, False),
        ({GPU: 2}, GpuDemand(2, 1000), False),
        ({GPU_MILLI: 460}, GpuDemand(1, 460), True),
        ({GPU_MILLI: 1000}, GpuDemand(1, 1000), False),
    ],
)
def test_demand_of_a_request(request_: dict[str, int], demand: GpuDemand, shared: bool) -> None:
    assert gpu_demand(request_) == demand
    assert demand.shared is shared


def test_a_share_is_parsed_from_the_extended_resource() -> None:
    task = task_from_pod(pod("p", requests={"cpu": "1", GPU_MILLI: "460"}))
    assert gpu_demand(task.request) == GpuDemand(1, 460)
    assert task.gpu_index == ()


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ({GPU: "1", GPU_MILLI: "500"}, "not both"),
        ({GPU_MILLI: "1500"}, "a share of one card, from 1 to 1000"),
    ],
)
def test_bad_gpu_requests_name_the_pod(requests: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidObject, match=message) as error:
        task_from_pod(pod("p", requests=requests))
    assert "Pod default/p" in str(error.value)


def test_bound_pod_keeps_its_cards_from_the_annotation() -> None:
    bound = pod("p", requests={GPU: "2"}, node_name="n", annotations={GPU_INDEX_ANNOTATION: "1,3"})
    assert task_from_pod(bound).gpu_index == (1, 3)


def test_unreadable_card_annotation_is_rejected() -> None:
    bad = pod("p", requests={GPU: "1"}, annotations={GPU_INDEX_ANNOTATION: "first"})
    with pytest.raises(InvalidObject, match="must list card numbers"):
        task_from_pod(bad)


def test_card_index_round_trip() -> None:
    assert format_gpu_index((0, 2)) == "0,2"
    assert parse_gpu_index("0, 2", where="x") == (0, 2)


@pytest.mark.parametrize(
    ("allocatable", "cards"),
    [({GPU: 4}, 4), ({GPU_MILLI: 2000}, 2), ({GPU: 2, GPU_MILLI: 2000}, 2), ({"cpu": 8000}, 0)],
)
def test_cards_of_a_node(allocatable: dict[str, int], cards: int) -> None:
    assert node_cards(allocatable) == cards
