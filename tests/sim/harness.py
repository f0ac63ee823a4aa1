"""Running `batchsched simulate` in-process, the way users and checks run it."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from batchsched.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        parsed = json.loads(self.stdout)
        assert isinstance(parsed, dict)
        return parsed

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        """The report's pods by "ns/name"."""
        return {f"{p['namespace']}/{p['name']}": p for p in self.report["pods"]}

    @property
    def podgroups(self) -> dict[str, dict[str, Any]]:
        return {f"{g['namespace']}/{g['name']}": g for g in self.report["podgroups"]}

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["name"]: n for n in self.report["nodes"]}

    def bound(self) -> dict[str, str]:
        """ "ns/name" -> node of every bound pod."""
        return {key: pod["node"] for key, pod in self.pods.items() if pod["node"]}


def simulate(
    capsys: pytest.CaptureFixture[str], *files: Path | str, config: str | None = None
) -> Run:
    argv = ["simulate", *(arg for f in files for arg in ("-f", str(f))), "-o", "json"]
    if config is not None:
        argv += ["--config", config]
    code = main(argv)
    captured = capsys.readouterr()
    return Run(code=code, stdout=captured.out, stderr=captured.err)


def simulate_text(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Run:
    """Simulate one input file holding `text`, which must be read without error."""
    path = tmp_path / "input.yaml"
    path.write_text(text)
    run = simulate(capsys, path)
    assert run.code == 0, run.stderr
    return run


def group(name: str, min_member: int) -> str:
    """A YAML document: our PodGroup `name` in the default namespace."""
    return f"""---
apiVersion: scheduling.batchsched.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: {min_member}}}
"""


def web_pod(name: str, spec: str) -> str:
    """A YAML document: a pod of ours labelled app=web, with `spec` lines appended to
    its spec (indented by two spaces)."""
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: web}}}}
spec:
  schedulerName: batch-scheduler
  containers: [{{name: c}}]
{spec}"""
