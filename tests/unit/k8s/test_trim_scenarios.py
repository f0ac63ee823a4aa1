"""Every scenario the repository holds parses alike whole and trimmed: what `batchsched
run` reads of an object (trimmed as its watch and `kubectl batchsched explain` trim it)
is what `batchsched simulate` reads of the whole object."""

from pathlib import Path

import pytest

from ..scenarios import label, outcome, scenario_ids, scenario_objects, trimmers

TRIMMERS = trimmers()


@pytest.mark.parametrize("scenario", scenario_ids())
def test_a_scenario_parses_alike_whole_and_trimmed(scenario: str, tmp_path: Path) -> None:
    differences = []
    for obj in scenario_objects(scenario, tmp_path):
        kind = str(obj["kind"])
        whole, trimmed = outcome(kind, obj), outcome(kind, TRIMMERS[kind](obj))
        if whole != trimmed:
            differences.append(f"{label(obj)}: whole {whole!r}, trimmed {trimmed!r}")
    assert differences == []


def test_every_kind_the_cache_reads_is_watched_and_trimmed() -> None:
    from ..scenarios import PARSERS

    assert set(TRIMMERS) == set(PARSERS)


def test_the_scenarios_are_found() -> None:
    ids = scenario_ids()
    assert {f"examples/{name}" for name in ("preemption.yaml", "zone-spread.yaml")} <= set(ids)
    assert any(i.startswith("tests/sim/seeds/") for i in ids)
    assert any(i.endswith(".py") is False and ".py:" in i for i in ids)
