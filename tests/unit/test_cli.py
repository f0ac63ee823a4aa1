"""`batchsched run`'s flags, checked before anything connects to a cluster."""

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.cli import EXIT_BAD_INPUT, build_parser, leader_timing, main
from batchsched.k8s.operator import LeaderTiming


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
            ["--leader-elect-retry-period=10s"],
            "--leader-elect-renew-deadline: 10s must be longer than "
            "--leader-elect-retry-period (10s)",
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
