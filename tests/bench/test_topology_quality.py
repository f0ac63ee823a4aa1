"""The quality bench's summary checks the issue's target per seed and pooled."""

from typing import Any

from bench.topology_quality import summarise


def run(
    ask: str, seed: int, share: float | None, fitting: int, allocation: float
) -> dict[str, Any]:
    return {
        "ask": ask,
        "seed": seed,
        "rack_fitting_multi_pod_gangs": fitting,
        "one_rack_share": share,
        "gpu_allocation": allocation,
        "wait_p50": 0.0,
    }


def test_the_target_is_met_by_seeds_at_the_share_and_within_a_point_and_pooled_by_gangs() -> None:
    """Seed 1 meets it (95 %, 1 point under); seed 2 misses on allocation (1.01 under),
    seed 3 on share (94 %), seed 4 has no rack-fitting gang. Pooled, every gang counts
    once: 19 + 20 + 47 of 20 + 20 + 50 is 95.56 %, not the mean of the shares."""
    runs = [
        run("off", 1, 30.0, 20, 80.0),
        run("off", 2, 30.0, 20, 80.0),
        run("off", 3, 30.0, 50, 80.0),
        run("off", 4, None, 0, 80.0),
        run("soft", 1, 95.0, 20, 79.0),
        run("soft", 2, 100.0, 20, 78.99),
        run("soft", 3, 94.0, 50, 85.0),
        run("soft", 4, None, 0, 80.0),
    ]
    target = summarise(runs)["against_today"]["soft"]
    assert target["seeds_meeting_target"] == [1]
    assert target["seeds"] == 4
    assert target["pooled_one_rack_share"] == 95.56
