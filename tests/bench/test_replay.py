"""bench/replay.py on tiny pod lists: the leave-one-out runs, and the derived lists.

Timings and allocations are not checked: they matter only at the trace's full size."""

import csv
import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batchsched.api.gpu import GpuDemand
from batchsched.api.objects import Constraints
from batchsched.plugins.fragmentation import TaskClass
from batchsched.plugins.gpufragmentation import GpuFragmentation

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replay.py"
POD_HEADER = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"]


def write(path: Path, header: list[str], rows: Sequence[Sequence[object]]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def trace(tmp_path: Path) -> Path:
    nodes = [[f"n{i}", 32000, 65536, 2, "T4" if i % 2 else "P100"] for i in range(4)]
    write(
        tmp_path / "openb_node_list_gpu_node.csv", ["sn", *POD_HEADER[1:3], "gpu", "model"], nodes
    )
    lists = {
        "a": [[f"a{i}", 4000, 1024, 1, 500 if i % 2 else 1000, ""] for i in range(6)],
        "b": [[f"b{i}", 2000, 1024, 1, 300, "T4" if i % 3 == 0 else ""] for i in range(6)],
    }
    for name, rows in lists.items():
        write(tmp_path / f"openb_pod_list_{name}.csv", POD_HEADER, rows)
    return tmp_path


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, check=True, timeout=120
    )


def test_fragmentation_is_also_scored_with_the_other_lists_mix(tmp_path: Path) -> None:
    done = bench(
        "--trace-dir", str(trace(tmp_path)), "--traces", "a,b", "--seeds", "42", "--workers", "1"
    )
    report: dict[str, Any] = json.loads(done.stdout)
    policies = {(r["trace"], r["policy"]) for r in report["runs"]}
    assert ("a", "gpu-fragmentation, leave-one-out") in policies
    assert ("b", "binpack") in policies
    rows = {(r["trace"], r["policy"]): r for r in report["summary"]}
    assert rows["a", "gpu-fragmentation"]["loo_at_130"] is not None
    assert rows["a", "binpack"]["loo_at_130"] is None
    assert "LOO 130%" in done.stderr


def test_derived_lists_constrain_or_share_the_fraction_asked(tmp_path: Path) -> None:
    source = trace(tmp_path)
    out = tmp_path / "derived"
    bench("--trace-dir", str(source), "--derive-spec", "0.5", "--from", "b", "--out", str(out))
    bench("--trace-dir", str(source), "--derive-share", "1.0", "--from", "a", "--out", str(out))
    with open(out / "openb_pod_list_gpuspec50x.csv", newline="") as handle:
        specs = [row["gpu_spec"] for row in csv.DictReader(handle)]
    assert specs.count("T4") == 3 and len(specs) == 6
    with open(out / "openb_pod_list_gpushare100x.csv", newline="") as handle:
        shares = [int(row["gpu_milli"]) for row in csv.DictReader(handle)]
    assert shares == [500] * 6


def test_leave_one_out_starts_from_the_other_lists_and_never_looks_ahead(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("replay_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = trace(tmp_path)
    nodes = str(source / "openb_node_list_gpu_node.csv")
    config = module.configure("gpu-fragmentation", nodes, (str(source / "openb_pod_list_a.csv"),))
    (plugin,) = [p for tier in config.tiers for p in tier if isinstance(p, GpuFragmentation)]
    # A replay holds the pods still to arrive pending: counting them would see ahead.
    assert plugin.lookahead is False
    assert plugin.prior == {
        TaskClass(4000, GpuDemand(1, 500), Constraints()): 3,
        TaskClass(4000, GpuDemand(1, 1000), Constraints()): 3,
    }
    own = module.configure("gpu-fragmentation", nodes, ())
    (plain,) = [p for tier in own.tiers for p in tier if isinstance(p, GpuFragmentation)]
    assert plain.lookahead is True and not plain.prior
