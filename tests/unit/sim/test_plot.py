"""replay's chart: PNG or SVG by the file name, titled axes, a keyed legend with the ideal
line, one colour per configuration, and a clear refusal before any replay runs."""

import importlib.util
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from batchsched.sim.plot import PlotError, Series, check_plot_path, write_curves
from batchsched.sim.replay import CurvePoint

TITLES = (
    "GPUs allocated (% of cluster)",
    "GPUs fragmented (% of cluster)",
    "Arrived GPU demand (% of cluster GPUs)",
    "ideal: all arrived demand allocated",
)


def curve(*, ceiling: float, fragmented: float) -> list[CurvePoint]:
    """Allocation follows arrival up to `ceiling`, then stays; 1 % steps to 130 %."""
    return [
        CurvePoint(
            arrived_gpu_pct=x + 0.01,
            allocated_gpu_pct=min(x, ceiling),
            fragmented_gpu_pct=fragmented,
        )
        for x in range(1, 131)
    ]


BINPACK = Series(label="binpack.yaml", curve=curve(ceiling=88, fragmented=12.5))
FGD = Series(label="gpu-fragmentation.yaml", curve=curve(ceiling=95.5, fragmented=4.4))


def test_a_png_is_written(tmp_path: Path) -> None:
    path = tmp_path / "curve.png"
    write_curves(path, series=[FGD], title="one")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


def test_an_svg_keeps_axis_titles_and_legend_labels_as_text(tmp_path: Path) -> None:
    path = tmp_path / "curve.svg"
    write_curves(path, series=[FGD], title="Replay of trace.csv")
    svg = path.read_text()
    assert svg.lstrip().startswith("<?xml")
    for text in (*TITLES, "Replay of trace.csv", "gpu-fragmentation.yaml (95.5 % at end)"):
        assert text in svg


def test_a_comparison_keys_every_configuration(tmp_path: Path) -> None:
    svg, png = tmp_path / "both.svg", tmp_path / "both.png"
    for path in (svg, png):
        write_curves(path, series=[BINPACK, FGD], title="compared")
    assert png.stat().st_size > 10_000
    text = svg.read_text()
    for label in ("binpack.yaml (88.0 % at end)", "gpu-fragmentation.yaml (95.5 % at end)"):
        assert label in text
    assert all(title in text for title in TITLES)


def test_the_same_curves_write_the_same_svg(tmp_path: Path) -> None:
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    write_curves(first, series=[BINPACK, FGD], title="t")
    write_curves(second, series=[BINPACK, FGD], title="t")
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("name", ["curve.SVG", "curve.Png"])
def test_the_suffix_is_read_without_regard_to_case(tmp_path: Path, name: str) -> None:
    write_curves(tmp_path / name, series=[FGD], title="t")
    assert (tmp_path / name).stat().st_size > 0


@pytest.mark.parametrize("name", ["curve.jpg", "curve.pdf", "curve"])
def test_other_suffixes_are_refused_naming_the_allowed_ones(tmp_path: Path, name: str) -> None:
    with pytest.raises(PlotError, match=r"written as \.png or \.svg"):
        write_curves(tmp_path / name, series=[FGD], title="t")
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "matplotlib" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(PlotError, match=r"pip install 'batchsched\[plot\]'"):
        check_plot_path("curve.png")
