"""The layers contract (pyproject.toml) names every module at the package's top: import-linter
says nothing of the imports of a module no layer names, so a new one must find its floor."""

import tomllib
from pathlib import Path

import batchsched

PACKAGE = Path(batchsched.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def floors() -> set[str]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return {name.strip().strip("()") for layer in layers for name in layer.split("|")}


def test_every_module_at_the_top_of_the_package_is_on_a_floor() -> None:
    modules = {
        f"batchsched.{path.stem}"
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    assert modules - floors() == set()
