"""`batchsched run`'s flags, checked before anything connects to a cluster, and how
the command ends when the scheduler fails."""

import asyncio
import importlib.util
import io
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cli import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    build_parser,
    leader_timing,
    main,
    metrics_address,
)
from batchsched.k8s import operator
from batchsched.k8s.client import ApiError
from batchsched.k8s.endpoints import BindAddress
from batchsched.k8s.leader import LeadershipLost
from batchsched.k8s.operator import LeaderTiming, Options

from tests.support.logs import restore_logging  # noqa: F401 (autouse fixture)


def timing(*flags: str) -> LeaderTiming:
    return leader_timing(build_parser().parse_args(["run", *flags]))


def test_leader_timing_defaults_are_client_gos() -> None:
    assert timing("--leader-elect") == LeaderTiming(
        lease_seconds=15, renew_seconds=10.0, retry_seconds=2.0
    )


def test_leader_timing_takes_go_durations_and_bare_fractional_seconds() -> None:
    got = timing(
        "--leader-elect",
        "--leader-elect-lease-duration=4",
        "--leader-elect-renew-deadline=2.5s",
        "--leader-elect-retry-period=500ms",
    )
    assert got == LeaderTiming(lease_seconds=4, renew_seconds=2.5, retry_seconds=0.5)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--leader-elect-renew-deadline=15s"],
            "--leader-elect-lease-duration: 15s must be longer than "
            "--leader-elect-renew-deadline (15s)",
        ),
        (
            ["--leader-elect-retry-period=9s"],
            "--leader-elect-renew-deadline: 10s must be longer than "
            "1.2 x --leader-elect-retry-period (9s)",
        ),
        (["--leader-elect-retry-period=0s"], "--leader-elect-retry-period: '0s' must be positive"),
        (["--leader-elect-retry-period=-1s"], "--leader-elect-retry-period: '-1s' is not a"),
        (["--leader-elect-renew-deadline=soon"], "--leader-elect-renew-deadline: 'soon' is not"),
        (
            ["--leader-elect-lease-duration=15.5s"],
            "--leader-elect-lease-duration: 15.5s is not a whole number of seconds",
        ),
    ],
)
def test_bad_leader_timing_is_refused_naming_the_flag(flags: list[str], message: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        timing("--leader-elect", *flags)
    assert str(refused.value).startswith(message)


def test_leader_timing_without_leader_elect_is_refused_not_ignored() -> None:
    with pytest.raises(InvalidObject, match="--leader-elect-retry-period needs --leader-elect"):
        timing("--leader-elect-retry-period=1s")


def test_run_exits_2_on_bad_leader_timing_before_reading_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--kubeconfig=/nonexistent", "--leader-elect"]
    assert main([*argv, "--leader-elect-renew-deadline=20s"]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        "batchsched: --leader-elect-lease-duration: 15s must be longer than "
        "--leader-elect-renew-deadline (20s)\n"
    )


def address(*flags: str) -> BindAddress | None:
    return metrics_address(build_parser().parse_args(["run", *flags]))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], BindAddress(host=None, port=8080)),
        (["--metrics-bind-address=127.0.0.1:9090"], BindAddress(host="127.0.0.1", port=9090)),
        (["--metrics-bind-address=[::1]:9090"], BindAddress(host="::1", port=9090)),
        (["--metrics-bind-address=0.0.0.0:9090"], BindAddress(host=None, port=9090)),
        (["--metrics-bind-address=[::]:9090"], BindAddress(host=None, port=9090)),
        (["--metrics-bind-address=0"], None),
        (["--metrics-port=9090"], BindAddress(host=None, port=9090)),
        (["--metrics-port=0"], None),
    ],
)
def test_metrics_bind_address_and_the_older_port_flag(
    flags: list[str], expected: BindAddress | None
) -> None:
    assert address(*flags) == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metrics-bind-address=8080"], "--metrics-bind-address: '8080' is not HOST:PORT"),
        (["--metrics-bind-address=:0"], "--metrics-bind-address: ':0' is not HOST:PORT"),
        (["--metrics-bind-address=:65536"], "--metrics-bind-address: ':65536' is not"),
        (["--metrics-bind-address=:http"], "--metrics-bind-address: ':http' is not"),
        (["--metrics-port=-1"], "--metrics-port: ':-1' is not HOST:PORT"),
        (
            ["--metrics-port=8080", "--metrics-bind-address=:8080"],
            "--metrics-port: give --metrics-bind-address alone",
        ),
        (["--metrics-bind-address=0", "--metrics-auth"], "--metrics-auth: the metrics server"),
        (["--metrics-port=0", "--metrics-auth"], "--metrics-auth: the metrics server"),
    ],
)
def test_bad_metrics_addresses_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        address(*flags)
    assert str(refused.value).startswith(message)


def test_bind_addresses_read_back_as_written() -> None:
    assert str(BindAddress(host=None, port=80)) == ":80"
    assert str(BindAddress(host="::1", port=80)) == "[::1]:80"
    assert str(BindAddress(host="10.0.0.1", port=80)) == "10.0.0.1:80"


def test_the_older_port_flag_still_works_and_says_it_is_deprecated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    given: list[Options] = []

    async def run(options: Options) -> None:
        given.append(options)

    monkeypatch.setattr(operator, "run", run)
    assert main(["run", "--metrics-port=9090"]) == 0
    assert given[0].metrics_address == BindAddress(host=None, port=9090)
    assert "--metrics-port is deprecated: use --metrics-bind-address=:9090" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("verbosity", ["-1", "x", "1.5"])
def test_verbosity_is_a_whole_number(verbosity: str) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", f"--v={verbosity}"])
    assert exited.value.code == EXIT_BAD_INPUT


async def forever() -> None:
    await asyncio.Event().wait()


async def lose_the_lease() -> None:
    await asyncio.sleep(0)
    raise LeadershipLost("lease ns/batch-scheduler not renewed for 10s")


async def fail_unexpectedly() -> None:
    await asyncio.sleep(0)
    raise ValueError("a bug")


def run_with(
    monkeypatch: pytest.MonkeyPatch, *jobs: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """`batchsched run` with `jobs` as its tasks, run as the operator runs its own."""

    async def run(options: Options) -> None:
        await operator._run_until_stopped([job() for job in jobs])

    monkeypatch.setattr(operator, "run", run)


def test_losing_the_lease_ends_with_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_with(monkeypatch, forever, lose_the_lease, forever)
    assert main(["run", "--leader-elect"]) == EXIT_FAILED
    assert capsys.readouterr().err == (
        "batchsched: lost the leader lease, exiting to start over: "
        "lease ns/batch-scheduler not renewed for 10s\n"
    )


def test_an_unexpected_error_ends_with_one_line_naming_where_it_was_raised(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_with(monkeypatch, forever, fail_unexpectedly)
    assert main(["run"]) == EXIT_FAILED
    line = fail_unexpectedly.__code__.co_firstlineno + 2
    assert capsys.readouterr().err == (
        f"batchsched: stopped by an unexpected error at test_cli.py:{line}: ValueError: a bug\n"
    )


def test_with_verbosity_the_traceback_comes_before_the_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_with(monkeypatch, fail_unexpectedly)
    assert main(["run", "-v", "1"]) == EXIT_FAILED
    *before, last = capsys.readouterr().err.splitlines()
    assert "Traceback (most recent call last):" in before
    assert "ExceptionGroup" not in "\n".join(before)
    assert last.startswith("batchsched: stopped by an unexpected error at test_cli.py:")


def test_the_exit_line_in_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_with(monkeypatch, lose_the_lease)
    assert main(["run", "--leader-elect", "--log-format=json"]) == EXIT_FAILED
    [line] = capsys.readouterr().err.splitlines()
    assert json.loads(line) == {
        "time": ANY,
        "level": "ERROR",
        "logger": "batchsched.exit",
        "message": "lost the leader lease, exiting to start over: "
        "lease ns/batch-scheduler not renewed for 10s",
    }


def test_a_stop_signal_ends_with_status_0_and_no_exit_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def terminate() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await forever()

    run_with(monkeypatch, forever, terminate)
    assert main(["run"]) == 0
    assert "batchsched:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            ApiError("GET", "/api/v1/pods", 403, {"message": "forbidden"}),
            "GET /api/v1/pods: HTTP 403: forbidden",
        ),
        (TimeoutError(), "the API server cannot be reached: TimeoutError"),
        (
            operator.CannotServe("cannot serve metrics on :8080: Address already in use"),
            "cannot serve metrics on :8080: Address already in use",
        ),
        (KeyError("x"), "stopped by an unexpected error: KeyError: 'x'"),
    ],
)
def test_exit_reasons_say_what_happened(error: Exception, line: str) -> None:
    assert operator.exit_reason(error) == line


# `batchsched replay`: several configurations on the same pods, the plot, and progress.

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "config"


@pytest.fixture
def trace(tmp_path: Path) -> list[str]:
    """replay's arguments for two 4-card nodes and pods of whole cards and shares."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\na,32000,65536,4,G2\nb,32000,65536,4,G2\n")
    pods = tmp_path / "pods.csv"
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    rows += [f"p{i},1000,1024,1,{(250, 500, 1000)[i % 3]}," for i in range(9)]
    pods.write_text("\n".join(rows) + "\n")
    return ["replay", "--nodes", str(nodes), "--pods", str(pods), "--seed", "3"]


FGD_CONFIG = str(CONFIGS / "gpu-fragmentation.yaml")


def test_replay_with_one_config_prints_one_object(
    trace: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*trace, "--config", FGD_CONFIG, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert isinstance(report, dict)
    assert "config" not in report and report["seed"] == 3


def test_replay_compares_configs_on_the_same_pods(
    trace: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*trace, "--config", "default", "--config", FGD_CONFIG, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [one["config"] for one in report] == ["default", FGD_CONFIG]
    assert len({one["pods"] for one in report}) == 1
    assert all(one["curve"] and one["seed"] == 3 for one in report)


def test_replay_table_heads_each_config(
    trace: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*trace, "--config", "default", "--config", FGD_CONFIG]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== default\nARRIVED%")
    assert f"\n\n== {FGD_CONFIG}\nARRIVED%" in out


def test_replay_plot_compares_configs_in_one_chart(trace: list[str], tmp_path: Path) -> None:
    plot = tmp_path / "both.svg"
    assert main([*trace, "--config", "default", "--config", FGD_CONFIG, "--plot", str(plot)]) == 0
    svg = plot.read_text()
    assert "Replay of pods.csv (seed 3, inflate 1.3)" in svg
    assert "default (" in svg and "gpu-fragmentation.yaml (" in svg


def test_replay_plot_legend_keeps_paths_apart_when_file_names_are_alike(
    trace: list[str], tmp_path: Path
) -> None:
    copy = tmp_path / "other" / "gpu-fragmentation.yaml"
    copy.parent.mkdir()
    copy.write_text(Path(FGD_CONFIG).read_text())
    plot = tmp_path / "same.svg"
    assert main([*trace, "--config", FGD_CONFIG, "--config", str(copy), "--plot", str(plot)]) == 0
    svg = plot.read_text()
    assert f"{FGD_CONFIG} (" in svg and f"{copy} (" in svg


@pytest.mark.parametrize(
    ("plot", "message"),
    [
        ("curve.jpg", "curve.jpg: a plot is written as .png or .svg, chosen by the file name"),
        ("curve.png", "--plot needs matplotlib, the 'plot' extra: pip install 'batchsched[plot]'"),
    ],
)
def test_replay_refuses_a_plot_it_cannot_write_before_replaying(
    trace: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plot: str,
    message: str,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "matplotlib" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.chdir(trace[2].rsplit("/", 1)[0])
    assert main([*trace, "--plot", plot]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert captured.err == f"batchsched: {message}\n"
    assert captured.out == ""
    assert not Path(plot).exists()


def test_replay_writes_no_progress_when_stderr_is_not_a_terminal(
    trace: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*trace, "--config", "default", "--config", FGD_CONFIG]) == 0
    assert capsys.readouterr().err == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_replay_shows_progress_per_config_on_a_terminal(
    trace: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*trace, "--config", "default", "--config", FGD_CONFIG]) == 0
    shown = terminal.getvalue()
    assert "replay default: 100%" in shown
    assert "replay gpu-fragmentation.yaml: 100%" in shown
