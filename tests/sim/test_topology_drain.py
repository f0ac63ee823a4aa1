"""A gang waiting for a rack gets it sooner when a pod that could run elsewhere is
steered off that rack, through `batchsched simulate` (its pods end, none replace them)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from .harness import simulate
from tests.support.objects import node, pod, pod_group

RACK = "topology.kubernetes.io/rack"
CONFIG = f"topology: {{tiers: [{{name: rack, nodeLabel: {RACK}}}]}}\n"
DURATION = "simulation.batchsched.io/duration"


def test_a_gang_waiting_for_a_rack_gets_it_once_its_pods_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Racks r1 to r4 of two 4-CPU nodes, r3 and r4 full, r2-1 full. The gang (two pods
    of 4 CPUs, one rack) waits for r1, where r1-1 is empty and r1-0 runs a pod for
    100 s. A small pod arriving at 10 s scores alike on r1-1 and r2-0 and would take
    r1-1, r1 being the fuller rack (for 1,000 s, leaving no room there for the member);
    it goes to r2-0 instead, and the gang starts in r1 when the first pod ends."""
    objects: list[dict[str, Any]] = [
        node(f"{rack}-{i}", cpu="4", memory="8Gi", labels={RACK: rack})
        for rack in ("r1", "r2", "r3", "r4")
        for i in (0, 1)
    ]
    for name in ("r2-1", "r3-0", "r3-1", "r4-0", "r4-1"):
        objects.append(
            pod(f"hog-{name}", {"cpu": "4", "memory": "1Gi"}, node_name=name, scheduler="other")
        )
    first = pod(
        "first",
        {"cpu": "4", "memory": "7Gi"},
        created=0,
        annotations={DURATION: "100s"},
        spec={"nodeSelector": {"kubernetes.io/hostname": "r1-0"}},
    )
    objects += [first, pod_group("g", 2, created=1, networkTopology={"mode": "hard"})]
    objects += [pod(f"g-{i}", {"cpu": "4", "memory": "1Gi"}, group="g", created=1) for i in (0, 1)]
    objects.append(
        pod("small", {"cpu": "2", "memory": "1Gi"}, created=10, annotations={DURATION: "1000s"})
    )
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    result = simulate(capsys, path, config=str(config))
    assert result.code == 0, result.stderr
    pods = result.pods
    assert pods["default/small"]["node"] == "r2-0"
    assert {pods[f"default/g-{i}"]["node"] for i in (0, 1)} == {"r1-0", "r1-1"}
    assert {pods[f"default/g-{i}"]["bound_at"] for i in (0, 1)} == {100.0}
