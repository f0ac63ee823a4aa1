"""bench/preempt.py runs at a tiny size and prints the keys its readers look for.

Its timings are not checked: they depend on the machine, and the figures that matter
come from running it at full size."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "preempt.py"
SIZE = ["--nodes", "8", "--repeat", "2", "--high-gangs", "1", "--high-pods", "2"]


def test_the_bench_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), *SIZE, "--reclaim-gangs", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    for key in ("snapshot_seconds", "session_seconds"):
        assert report[key].keys() == {"median", "min", "max"}
        assert report[key]["min"] <= report[key]["median"] <= report[key]["max"]
    assert report["action_seconds"].keys() >= {"allocate", "preempt", "reclaim"}
    assert (report["nodes"], report["running_pods"], report["repeat"]) == (8, 32, 2)
    # Every pending pod needs a running one's room: preempt takes it for the high gang
    # and pods, reclaim for the idle queue's gang.
    assert report["evicted_preempt"] >= 8 + 2
    assert report["evicted_reclaim"] >= 4
    assert report["nominations"] == report["pending_pods"] == 8 + 2 + 4
    assert report["bindings"] == 0
    assert report["repeats_agree"] is True
    assert report["peak_rss_mb"] > 0
