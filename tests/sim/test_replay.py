"""`batchsched replay` on a small synthetic openb-style trace: the paper's method and output."""

import json
import random
from pathlib import Path

import pytest

from batchsched.api.gpu import gpu_demand
from batchsched.api.pods import task_from_pod
from batchsched.cli import main
from batchsched.config.load import default_config, read_config
from batchsched.sim.openb import read_nodes, read_pods
from batchsched.sim.replay import arrivals, replay

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "config"
SCHEDULER = "batch-scheduler"


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    """Six nodes (three 8-card G2, three 2-card T4, 30 GPUs) and 24 pods of every kind."""
    nodes = tmp_path / "nodes.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    rows += [f"g2-{i},96000,393216,8,G2" for i in range(3)]
    rows += [f"t4-{i},32000,131072,2,T4" for i in range(3)]
    nodes.write_text("\n".join(rows) + "\n")
    rng = random.Random(1)
    pods = tmp_path / "pods.csv"
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    for i in range(24):
        kind = rng.choice(["share", "share", "whole", "cpu", "multi"])
        cards, milli = {
            "share": (1, rng.choice([230, 460, 810])),
            "whole": (1, 1000),
            "cpu": (0, 0),
            "multi": (2, 1000),
        }[kind]
        spec = "T4" if kind == "whole" and rng.random() < 0.3 else ""
        rows.append(f"pod-{i:02},{rng.choice([1000, 4000, 8000])},4096,{cards},{milli},{spec}")
    pods.write_text("\n".join(rows) + "\n")
    return nodes, pods


def gpu_milli(pod: dict[str, object]) -> int:
    return gpu_demand(task_from_pod(pod).request).total


def test_arrivals_shuffle_the_trace_then_resample_up_to_the_inflation(
    trace: tuple[Path, Path],
) -> None:
    pods = read_pods(trace[1], scheduler_name=SCHEDULER)
    given = [p["metadata"]["name"] for p in pods]
    capacity = 30 * 1000
    order = arrivals(pods, seed=42, inflate=1.3, capacity=capacity)
    names = [p["metadata"]["name"] for p in order]
    # Copies are renamed, never the pods they copy.
    assert [p["metadata"]["name"] for p in pods] == given
    originals = sorted(given)
    assert sorted(names[: len(pods)]) == originals
    assert names[: len(pods)] != [p["metadata"]["name"] for p in pods]
    assert len(order) > len(pods)
    assert all("-copy" in name for name in names[len(pods) :])
    demand = [gpu_milli(p) for p in order]
    assert sum(demand) >= 1.3 * capacity > sum(demand[:-1])
    again = arrivals(pods, seed=42, inflate=1.3, capacity=capacity)
    assert [p["metadata"]["name"] for p in again] == names
    other = arrivals(pods, seed=43, inflate=1.3, capacity=capacity)
    assert [p["metadata"]["name"] for p in other] != names


def test_a_trace_without_gpus_is_not_resampled(trace: tuple[Path, Path]) -> None:
    pods = [p for p in read_pods(trace[1], scheduler_name=SCHEDULER) if not gpu_milli(p)]
    assert len(arrivals(pods, seed=1, inflate=1.3, capacity=1000)) == len(pods)


def test_curve_has_one_sample_per_percent_of_arrived_demand(trace: tuple[Path, Path]) -> None:
    nodes = read_nodes(trace[0])
    pods = read_pods(trace[1], scheduler_name=SCHEDULER)
    result = replay(nodes, pods, default_config(), seed=7, inflate=1.3)
    arrived = [p.arrived_gpu_pct for p in result.curve]
    assert arrived == sorted(arrived)
    crossed = [int(a) for a in arrived]
    # Each sample is the first at or past a new whole percent; a big pod may jump several.
    assert len(set(crossed)) == len(crossed)
    assert crossed[-1] >= 130 > crossed[-2]
    assert result.at_100 is not None and result.at_100.arrived_gpu_pct >= 100
    allocated = [p.allocated_gpu_pct for p in result.curve]
    assert allocated == sorted(allocated)
    for point in result.curve:
        assert point.allocated_gpu_pct <= min(point.arrived_gpu_pct, 100)
        assert 0 <= point.fragmented_gpu_pct <= 100 - point.allocated_gpu_pct + 1e-6
    assert result.gpu_cards == 30
    assert result.bound < result.pods


@pytest.mark.parametrize("config", ["binpack.yaml", "gpu-fragmentation.yaml"])
def test_shipped_configs_replay_and_fill_most_of_the_cluster(
    trace: tuple[Path, Path], config: str
) -> None:
    nodes = read_nodes(trace[0])
    pods = read_pods(trace[1], scheduler_name=SCHEDULER)
    result = replay(nodes, pods, read_config(str(CONFIGS / config)), seed=3, inflate=1.3)
    assert result.curve[-1].allocated_gpu_pct > 70


def test_cli_prints_the_json_contract_and_draws_the_plot(
    trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "curve.png"
    argv = ["replay", "--nodes", str(trace[0]), "--pods", str(trace[1]), "--seed", "5"]
    code = main([*argv, "--inflate", "1.2", "-o", "json", "--plot", str(plot)])
    captured = capsys.readouterr()
    assert code == 0
    report = json.loads(captured.out)
    assert set(report["curve"][0]) == {
        "arrived_gpu_pct",
        "allocated_gpu_pct",
        "fragmented_gpu_pct",
    }
    assert set(report["at_100"]) == {"allocated_gpu_pct", "fragmented_gpu_pct"}
    assert report["seed"] == 5 and report["inflate"] == 1.2
    assert isinstance(report["elapsed_seconds"], float)
    # Progress is shown on a terminal only, and capsys is none.
    assert captured.err == ""
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_cli_table_summarises_every_tenth(
    trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "--nodes", str(trace[0]), "--pods", str(trace[1])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ARRIVED%  ALLOCATED%  FRAGMENTED%")
    assert "pods bound on 30 GPUs (seed 42, inflate 1.3)" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--inflate", "0"], "--inflate must be positive"),
        (["--config", "/nonexistent.yaml"], "cannot read"),
    ],
)
def test_cli_refuses_bad_input(
    trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code = main(["replay", "--nodes", str(trace[0]), "--pods", str(trace[1]), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
