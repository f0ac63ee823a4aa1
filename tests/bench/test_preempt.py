"""bench/preempt.py runs at a tiny size and prints the keys its readers look for.

Its timings are not checked: they depend on the machine, and the figures that matter
come from running it at full size."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "preempt.py"


def bench(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--nodes", "8", "--repeat", "2", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize(
    ("pending", "action", "least"),
    [
        # A gang of 8 and two lone pods of high priority: each needs a running pod's room.
        (("--high-gangs", "1", "--high-pods", "2", "--reclaim-gangs", "0"), "preempt", 10),
        # The idle queue's gang of 4, with nothing to preempt for.
        (("--high-gangs", "0", "--high-pods", "0", "--reclaim-gangs", "1"), "reclaim", 4),
    ],
    ids=["preempt", "reclaim"],
)
def test_the_bench_prints_its_figures(pending: tuple[str, ...], action: str, least: int) -> None:
    report = bench(*pending)
    for key in ("snapshot_seconds", "session_seconds"):
        assert report[key].keys() == {"median", "min", "max"}
        assert report[key]["min"] <= report[key]["median"] <= report[key]["max"]
    assert report["action_seconds"].keys() >= {"allocate", "preempt", "reclaim"}
    assert (report["nodes"], report["running_pods"], report["repeat"]) == (8, 32, 2)
    assert report[f"evicted_{action}"] >= least
    assert report["nominations"] == report["pending_pods"] == least
    assert report["bindings"] == 0
    assert report["repeats_agree"] is True
    assert report["peak_rss_mb"] > 0
