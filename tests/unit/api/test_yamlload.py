"""libyaml's loader, which reads input in bulk, makes exactly the objects PyYAML's own
safe loader makes, document for document, on every YAML file in the repository (Helm
templates, which are not YAML until rendered, are refused by both alike)."""

import logging
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.api import yamlload

REPO = Path(__file__).resolve().parents[3]
FILES = sorted(
    path
    for pattern in ("*.yaml", "*.yml")
    for path in REPO.rglob(pattern)
    if not {".venv", ".git"} & set(path.relative_to(REPO).parts)
)


def _read(text: str, loader: type[Any]) -> list[Any] | type[yaml.YAMLError]:
    try:
        return list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError:
        return yaml.YAMLError


def _same(a: Any, b: Any) -> bool:
    """Equal, with types compared too (1 and 1.0 and True are not the same value read)
    and NaN equal to itself."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def test_the_repository_has_yaml_to_compare() -> None:
    assert len(FILES) > 50
    assert any(path.parts[-2] == "examples" for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_libyaml_reads_what_the_pure_python_loader_reads(path: Path) -> None:
    text = path.read_text()
    assert _same(_read(text, yaml.CSafeLoader), _read(text, yaml.SafeLoader))


def test_the_fast_loader_is_used_and_the_slow_one_stands_in_out_loud(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert yamlload.safe_loader() is yaml.CSafeLoader
    yamlload.safe_loader.cache_clear()
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    try:
        with caplog.at_level(logging.WARNING):
            assert yamlload.load_all("a: 1\n---\n- b\n") == [{"a": 1}, ["b"]]
    finally:
        yamlload.safe_loader.cache_clear()
    assert "pure-Python loader" in caplog.text
