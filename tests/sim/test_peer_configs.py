"""Peers' configuration files read unchanged by `batchsched simulate --config`: Volcano's
chart ConfigMap, and the binpack seed's KubeSchedulerConfiguration."""

from pathlib import Path

import pytest

from .harness import EXAMPLES, simulate

VOLCANO = str(EXAMPLES / "config" / "volcano-scheduler.yaml")
KUBE_SCHEDULER = str(EXAMPLES / "config" / "kube-scheduler-binpack.yaml")
BINPACK_SEED = str(EXAMPLES / "config" / "binpack-seed.yaml")


@pytest.mark.parametrize(
    "example", ["kube-batch-tfjobs.yaml", "tencent-race.yaml", "anti-affinity.yaml"]
)
def test_volcano_chart_places_as_the_default_configuration(
    capsys: pytest.CaptureFixture[str], example: str
) -> None:
    """Where resource scores do not decide (one node, or one GPU per node), Volcano's
    configuration places what batchsched's default does."""
    ours = simulate(capsys, EXAMPLES / example)
    volcano = simulate(capsys, EXAMPLES / example, config=VOLCANO)
    assert volcano.code == 0, volcano.stderr
    assert volcano.bound() == ours.bound()
    assert volcano.podgroups == ours.podgroups


def test_volcano_chart_spreads_the_seed_gang(capsys: pytest.CaptureFixture[str]) -> None:
    """nodeorder's least-requested and balanced scores (weight 1 each) outweigh binpack's
    (weight 1), as in Volcano: the gang binds whole, split over both GPU nodes, where
    binpack-seed.yaml packs it onto one."""
    run = simulate(capsys, EXAMPLES / "binpack-tfjob.yaml", config=VOLCANO)
    assert run.code == 0, run.stderr
    assert run.podgroups["default/tf-smoke-gpu"]["phase"] == "Running"
    assert sorted(set(run.bound().values()) - {"gpu-node-a", "gpu-node-b"}) == []
    gpus = {name: n["requested"]["nvidia.com/gpu"] for name, n in run.nodes.items()}
    assert gpus == {"gpu-node-a": 2, "gpu-node-b": 2}


def test_seed_kube_scheduler_configuration_read_unchanged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The seed's pods name no scheduler, and its KubeSchedulerConfiguration names none
    either: both are the default scheduler's, served here; the gang binds whole on one
    node, as under binpack-seed.yaml."""
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        (EXAMPLES / "binpack-tfjob.yaml").read_text().replace("schedulerName: batch-scheduler", "")
    )
    run = simulate(capsys, seed, config=KUBE_SCHEDULER)
    assert run.code == 0, run.stderr
    expected = simulate(capsys, EXAMPLES / "binpack-tfjob.yaml", config=BINPACK_SEED)
    gang = {pod: node for pod, node in run.bound().items() if pod.startswith("default/")}
    assert gang == expected.bound()
    assert set(gang.values()) == {"gpu-node-a"}
    assert run.podgroups == expected.podgroups
