"""Every object a simulated scenario hands the cache parses alike whole and trimmed as
the operator trims it: the scenarios tests write out in code, which
tests/unit/k8s/test_trim_scenarios.py cannot read from files, are checked too."""

from collections.abc import Iterator
from typing import Any

import pytest

from batchsched.cache.cluster import ClusterCache

from tests.unit.scenarios import label, outcome, trimmers

TRIMMERS = trimmers()


@pytest.fixture(autouse=True)
def parsed_alike_trimmed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    differences: list[str] = []
    apply = ClusterCache.apply

    def compared(cache: ClusterCache, obj: Any, *, deleted: bool = False) -> None:
        kind = obj.get("kind")
        if not deleted and kind in TRIMMERS:
            whole, trimmed = outcome(kind, obj), outcome(kind, TRIMMERS[kind](obj))
            if whole != trimmed:
                differences.append(f"{label(obj)}: whole {whole!r}, trimmed {trimmed!r}")
        apply(cache, obj, deleted=deleted)

    monkeypatch.setattr(ClusterCache, "apply", compared)
    yield
    assert differences == []
