"""The seed documents' workloads as they wrote them, on the configuration a cluster
switching from their scheduler starts from: nothing in the workload is edited."""

from pathlib import Path

import pytest

from .harness import EXAMPLES, simulate

SEEDS = Path(__file__).resolve().parent / "seeds"
DROP_IN = str(EXAMPLES / "config" / "drop-in.yaml")


def test_kube_batch_tfjobs_run_whole_or_not_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    """Four one-GPU nodes; 3 workers and a PS, then 2 workers and a PS. The first job
    runs whole; the second binds nothing (the default scheduler started its PS and a
    worker, which then sat idle)."""
    run = simulate(capsys, SEEDS / "001-kube-batch-tfjobs.yaml", config=DROP_IN)
    assert run.code == 0, run.stderr
    first = {k for k in run.bound() if k.startswith("kubeflow/tfjob-gang-scheduling-")}
    assert len(first) == 4
    assert not any(k.startswith("kubeflow/tfjob-gang-scheduling2-") for k in run.bound())
    assert "hint" not in run.stderr


def test_tencent_race_runs_one_group(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Its pods name no scheduler: the configuration serves default-scheduler (with
    kube-scheduler stopped). 7.1 free CPUs hold one group of five, never parts of two."""
    config = tmp_path / "config.yaml"
    config.write_text("schedulerNames: [batch-scheduler, default-scheduler]\n")
    run = simulate(capsys, SEEDS / "002-tencent-race.yaml", config=str(config))
    assert run.code == 0, run.stderr
    bound = set(run.bound()) - {"kube-system/system-agent"}
    assert bound == {f"default/web-group-race1-{i}" for i in range(5)}


def test_the_seeds_under_the_default_configuration_say_why_nothing_binds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = simulate(capsys, SEEDS / "001-kube-batch-tfjobs.yaml")
    assert run.bound() == {}
    assert "hint: pods this configuration does not serve were left alone (7 name 'kube-batch')" in (
        run.stderr
    )
