"""Peers' own test cases as scenarios for `batchsched simulate`.

A case names the peer's test file, test function and table case it is translated from,
the objects it creates (nodes, pods with `spec.nodeName` for those already running,
groups, queues) and the pods the peer's assertion says are scheduled or not. The
expectation is the peer's, never batchsched's output; a case batchsched fails today
carries the defect, and runs as a strict xfail so that fixing it shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import main

JSON = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Case:
    source: str
    test: str
    name: str
    objects: tuple[JSON, ...]
    # "namespace/name" of the pods the peer asserts are, or are not, scheduled.
    scheduled: frozenset[str] = frozenset()
    unscheduled: frozenset[str] = frozenset()
    # batchsched's configuration, or a peer's (KubeSchedulerConfiguration, Volcano's).
    config: JSON | None = None
    # Why batchsched fails the case today, if it does.
    defect: str | None = None

    @property
    def id(self) -> str:
        return f"{self.test}/{self.name}"


def params(cases: Iterable[Case]) -> list[Any]:
    """`cases` as pytest parameters named by test and case, failing ones strict xfails."""
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.defect)] if case.defect else [],
        )
        for case in cases
    ]


def placements(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Simulate `case`; "namespace/name" -> node of every pod bound at the end."""
    inputs = tmp_path / "input.yaml"
    inputs.write_text(yaml.safe_dump_all(case.objects, sort_keys=False))
    argv = ["simulate", "-f", str(inputs), "-o", "json"]
    if case.config is not None:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(case.config, sort_keys=False))
        argv += ["--config", str(config)]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    return {f"{p['namespace']}/{p['name']}": p["node"] for p in report["pods"] if p["node"]}


def check(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The peer's assertion, on batchsched's placements of the case."""
    bound = set(placements(case, tmp_path, capsys))
    where = f"{case.source} {case.id}"
    assert not case.scheduled - bound, f"{where}: not scheduled {sorted(case.scheduled - bound)}"
    assert not case.unscheduled & bound, f"{where}: scheduled {sorted(case.unscheduled & bound)}"
