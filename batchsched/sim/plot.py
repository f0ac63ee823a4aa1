"""Replay curves drawn with matplotlib, the optional `plot` extra.

matplotlib and its dependencies are large and only `replay --plot` needs them, so they
are not installed with the scheduler (`pip install batchsched[plot]` adds them) and are
imported only when a chart is written. `check_plot_path` lets the command refuse a bad
file name or a missing extra before a replay of several seconds, not after it.
"""

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from batchsched.sim.replay import CurvePoint

# Both are formats matplotlib writes without any further library.
SUFFIXES = (".png", ".svg")
EXTRA_HINT = "pip install 'batchsched[plot]'"


class PlotError(Exception):
    """A chart that cannot be written: its file name, or matplotlib is not installed."""


@dataclass(frozen=True, slots=True)
class Series:
    """One configuration's curve and the name its legend entries carry."""

    label: str
    curve: Sequence[CurvePoint]


def check_plot_path(path: str | Path) -> None:
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        allowed = " or ".join(SUFFIXES)
        raise PlotError(f"{path}: a plot is written as {allowed}, chosen by the file name")
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotError(f"--plot needs matplotlib, the 'plot' extra: {EXTRA_HINT}")


def write_curves(path: str | Path, *, series: Sequence[Series], title: str) -> None:
    """Allocation above and fragmentation below, against arrived GPU demand.

    Two panels sharing the x axis, because fragmentation stays within a few percent
    while allocation climbs to nearly 100: on one scale the fragmentation lines would lie
    flat along the bottom. Each configuration keeps one colour in both panels, keyed
    once, in the allocation panel.
    """
    check_plot_path(path)
    suffix = Path(path).suffix.lower()
    # Figure without pyplot: no GUI backend is chosen and no global figure is kept.
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    # Samples land just past each percent, so 130.01 still means a 0-130 axis.
    x_max = max([100.0, *(p.arrived_gpu_pct for s in series for p in s.curve)])
    x_max = -(-int(x_max) // 10) * 10
    # SVG keeps its text as text (searchable, and smaller) instead of glyph outlines, and
    # with a fixed salt for its element ids the same replay writes the same file.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "batchsched"}):
        figure = Figure(figsize=(8, 6.5), layout="constrained")
        allocation, fragmentation = figure.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]}
        )
        allocation.plot(
            [0, 100, x_max],
            [0, 100, 100],
            color="0.55",
            linestyle="--",
            linewidth=1.2,
            label="ideal: all arrived demand allocated",
        )
        # Below 100 % the curves cover the ideal line, so its flat part carries a label too.
        allocation.annotate(
            "ideal", (x_max, 100), xytext=(-6, 3), textcoords="offset points", ha="right"
        )
        for index, one in enumerate(series):
            color = f"C{index}"
            # Nothing is allocated before anything arrives.
            arrived = [0.0, *(p.arrived_gpu_pct for p in one.curve)]
            allocated = [0.0, *(p.allocated_gpu_pct for p in one.curve)]
            final = f" ({one.curve[-1].allocated_gpu_pct:.1f} % at end)" if one.curve else ""
            allocation.plot(arrived, allocated, color=color, label=f"{one.label}{final}")
            fragmentation.plot(
                [p.arrived_gpu_pct for p in one.curve],
                [p.fragmented_gpu_pct for p in one.curve],
                color=color,
            )
        allocation.set_title(title)
        allocation.set_ylabel("GPUs allocated (% of cluster)")
        allocation.set_ylim(0, 106)
        allocation.legend(loc="best")
        fragmentation.set_ylabel("GPUs fragmented (% of cluster)")
        fragmentation.set_xlabel("Arrived GPU demand (% of cluster GPUs)")
        fragmentation.set_xlim(0, x_max)
        fragmentation.set_ylim(bottom=0)
        for axes in (allocation, fragmentation):
            axes.grid(True, color="0.9")
        # Nor a creation date.
        metadata = {"Date": None} if suffix == ".svg" else {}
        figure.savefig(path, format=suffix[1:], dpi=100, metadata=metadata)
