"""Topology spread in the simulator: bad constraints are named, the rest is placed."""

from pathlib import Path

import pytest

from .harness import simulate, web_pod

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n0, labels: {topology.kubernetes.io/zone: z0}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: z1}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
"""


def spread_pod(name: str, constraint: str) -> str:
    return web_pod(
        name,
        f"""  topologySpreadConstraints:
  - {{topologyKey: topology.kubernetes.io/zone, labelSelector: {{matchLabels: {{app: web}}}},
     {constraint}}}
""",
    )


@pytest.mark.parametrize(
    ("constraint", "problem"),
    [
        ("maxSkew: 0, whenUnsatisfiable: DoNotSchedule", "maxSkew: 0 must be greater than zero"),
        (
            "maxSkew: 1, whenUnsatisfiable: Sometimes",
            "whenUnsatisfiable: 'Sometimes' is not one of DoNotSchedule, ScheduleAnyway",
        ),
    ],
    ids=["max-skew-0", "unknown-when-unsatisfiable"],
)
def test_a_bad_constraint_leaves_its_pod_pending_by_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, constraint: str, problem: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        CLUSTER
        + spread_pod("bad", constraint)
        + spread_pod("good", "maxSkew: 1, whenUnsatisfiable: DoNotSchedule")
    )
    run = simulate(capsys, path)
    assert run.code == 0
    assert run.bound() == {"default/good": "n0"}
    message = f"Pod default/bad.spec.topologySpreadConstraints[0].{problem}"
    assert run.pods["default/bad"]["reason"] == message
    assert message in run.stderr


def test_default_constraints_from_the_configuration(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two replicas with no constraint of their own, room for both on n0: the default
    (maxSkew 1 over zones, peers by `app`) sends the second to n1."""
    config = tmp_path / "sched.yaml"
    config.write_text(
        """tiers:
- plugins: [{name: gang}]
- plugins:
  - {name: predicates}
  - {name: binpack}
  - name: podtopologyspread
    arguments:
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone,
         whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}
"""
    )
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER + web_pod("a", "") + web_pod("b", ""))
    assert sorted(simulate(capsys, path, config=str(config)).bound().values()) == ["n0", "n1"]
    assert sorted(simulate(capsys, path).bound().values()) == ["n0", "n0"]
