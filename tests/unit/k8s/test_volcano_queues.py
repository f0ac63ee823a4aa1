"""What `batchsched run` sends to create Volcano's root and default Queues."""

import logging
from typing import Any

import pytest

from batchsched.k8s.client import JSON, ApiError
from batchsched.k8s.volcano_queues import QUEUES_PATH, create_volcano_queues

from .recording_api import RecordingApi

DISCOVERY = "/apis/scheduling.volcano.sh/v1beta1"
SERVED = {"resources": [{"name": "queues"}, {"name": "queues/status"}, {"name": "podgroups"}]}


def answering(*, discovery: JSON | None = SERVED, post: int = 201) -> RecordingApi:
    """Discovery answers `discovery` (404 when None); each create answers `post`."""

    def answer(method: str, path: str, body: Any) -> JSON:
        if method == "GET" and path == DISCOVERY:
            if discovery is None:
                raise ApiError(method, path, 404, {"reason": "NotFound"})
            return discovery
        if method == "POST" and path == QUEUES_PATH and post != 201:
            raise ApiError(method, path, post, {"message": f"answered {post}"})
        return body if isinstance(body, dict) else {}

    return RecordingApi(answer)


async def test_root_then_default_are_created_as_volcanos_scheduler_creates_them() -> None:
    api = answering()
    await create_volcano_queues(api, retry_seconds=0)
    assert api.sent("POST") == [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "root"},
            "spec": {"reclaimable": False, "weight": 1},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"reclaimable": True, "weight": 1},
        },
    ]


@pytest.mark.parametrize("discovery", [None, {"resources": [{"name": "podgroups"}]}])
async def test_nothing_is_created_where_volcanos_queue_kind_is_not_served(
    discovery: JSON | None,
) -> None:
    api = answering(discovery=discovery)
    await create_volcano_queues(api, retry_seconds=0)
    assert api.sent("POST") == []


@pytest.mark.parametrize("status", [409, 403])
async def test_a_queue_that_exists_or_cannot_be_created_does_not_stop_the_other(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    api = answering(post=status)
    with caplog.at_level(logging.INFO):
        await create_volcano_queues(api, retry_seconds=0)
    assert [q["metadata"]["name"] for q in api.sent("POST")] == ["root", "default"]
    said = {r.getMessage() for r in caplog.records}
    if status == 409:
        assert "Volcano's 'default' Queue exists: left as it is" in said
    else:
        assert "cannot create Volcano's 'default' Queue, as its scheduler would: " in str(said)
