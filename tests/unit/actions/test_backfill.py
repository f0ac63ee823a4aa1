"""backfill: pods that request nothing still get a node, even a full one."""

import pytest

from tests.support.objects import decide, gang, node, placements, pod

FULL = [node("n1", cpu="2"), pod("hog", requests={"cpu": "2"}, node_name="n1", scheduler="other")]


@pytest.mark.parametrize(
    ("actions", "reason"),
    [("enqueue, allocate, backfill", None), ("enqueue, allocate", "not attempted in this session")],
)
def test_zero_request_pod_is_backfilled(actions: str, reason: str | None) -> None:
    decisions = decide(
        [*FULL, pod("best-effort"), pod("needs-cpu", requests={"cpu": "1"})], f"actions: {actions}"
    )
    assert placements(decisions) == ({} if reason else {"default/best-effort": "n1"})
    assert decisions.pending["default/needs-cpu"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert decisions.pending.get("default/best-effort") == reason


@pytest.mark.parametrize(("max_pods", "bound"), [(4, 3), (3, 0)])
def test_zero_request_gang_is_still_a_gang(max_pods: int, bound: int) -> None:
    """The node has room for max_pods - 1 more pods; a gang of three needs three."""
    decisions = decide(
        [node("n1", cpu="2", extra={"pods": max_pods}), FULL[1], *gang("g", 3, requests={})]
    )
    assert len(decisions.bindings) == bound
    if not bound:
        assert decisions.pending["default/g-0"] == (
            "gang default/g: room for 2 of 3; 0/1 nodes are available: 1 Too many pods."
        )
