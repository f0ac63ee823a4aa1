"""A replay curve as a small PNG, drawn with numpy and written with zlib.

A plotting library would be a heavy dependency for one chart, so this draws it directly:
GPU allocation (blue) and fragmentation (red) against arrived GPU demand, with the ideal
allocation (grey, allocation = arrival up to 100 %), a 10 % grid and labelled axes.
"""

import struct
import zlib
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import numpy.typing as npt

from batchsched.sim.replay import CurvePoint

Canvas = npt.NDArray[np.uint8]
Color = tuple[int, int, int]

WIDTH, HEIGHT = 720, 450
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 20, 60
GRID: Color = (225, 225, 225)
AXIS: Color = (60, 60, 60)
IDEAL: Color = (170, 170, 170)
ALLOCATED: Color = (31, 119, 180)
FRAGMENTED: Color = (214, 39, 40)

# 3x5 glyphs, one row per character of 3 bits (left pixel is the high bit).
GLYPHS = {
    "0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7), "%": (5, 1, 2, 4, 5), " ": (0, 0, 0, 0, 0),
    "A": (2, 5, 7, 5, 5), "C": (7, 4, 4, 4, 7), "D": (6, 5, 5, 5, 6), "E": (7, 4, 6, 4, 7),
    "F": (7, 4, 6, 4, 4), "G": (7, 4, 5, 5, 7), "I": (7, 2, 2, 2, 7), "L": (4, 4, 4, 4, 7),
    "M": (5, 7, 7, 5, 5), "N": (6, 5, 5, 5, 5), "O": (7, 5, 5, 5, 7), "P": (7, 5, 7, 4, 4),
    "R": (6, 5, 6, 5, 5), "T": (7, 2, 2, 2, 2), "U": (5, 5, 5, 5, 7), "V": (5, 5, 5, 5, 2),
}  # fmt: skip
SCALE = 2


def write_curve_png(path: str | Path, curve: Sequence[CurvePoint]) -> None:
    canvas = np.full((HEIGHT, WIDTH, 3), 255, dtype=np.uint8)
    # Samples land just past each percent, so 130.01 still means a 0-130 axis.
    x_max = max([100, *(int(p.arrived_gpu_pct) for p in curve)])
    x_max = -(-x_max // 10) * 10
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def to_pixel(x: float, y: float) -> tuple[int, int]:
        return LEFT + round(x / x_max * plot_w), TOP + plot_h - round(y / 100 * plot_h)

    for tick in range(0, int(x_max) + 1, 10):
        px, _ = to_pixel(tick, 0)
        _line(canvas, (px, TOP), (px, TOP + plot_h), GRID, 1)
        _text(canvas, str(tick), px - _text_width(str(tick)) // 2, TOP + plot_h + 8)
    for tick in range(0, 101, 10):
        _, py = to_pixel(0, tick)
        _line(canvas, (LEFT, py), (LEFT + plot_w, py), GRID, 1)
        _text(canvas, str(tick), LEFT - 8 - _text_width(str(tick)), py - 5)
    _line(canvas, (LEFT, TOP), (LEFT, TOP + plot_h), AXIS, 1)
    _line(canvas, (LEFT, TOP + plot_h), (LEFT + plot_w, TOP + plot_h), AXIS, 1)
    _line(canvas, to_pixel(0, 0), to_pixel(100, 100), IDEAL, 1)
    _line(canvas, to_pixel(100, 100), to_pixel(x_max, 100), IDEAL, 1)
    # Nothing is allocated before anything arrives; fragmentation starts at its first sample.
    for color, values in (
        (ALLOCATED, [(0.0, 0.0), *((p.arrived_gpu_pct, p.allocated_gpu_pct) for p in curve)]),
        (FRAGMENTED, [(p.arrived_gpu_pct, p.fragmented_gpu_pct) for p in curve]),
    ):
        points = [to_pixel(x, y) for x, y in values]
        for start, end in pairwise(points):
            _line(canvas, start, end, color, 2)
    label = "ARRIVED GPU %"
    _text(canvas, label, LEFT + (plot_w - _text_width(label)) // 2, HEIGHT - 28)
    _text(canvas, "ALLOCATED", LEFT + 10, TOP + 6, ALLOCATED)
    _text(canvas, "FRAGMENTED", LEFT + 10, TOP + 22, FRAGMENTED)
    Path(path).write_bytes(_png(canvas))


def _line(
    canvas: Canvas, start: tuple[int, int], end: tuple[int, int], color: Color, width: int
) -> None:
    (x0, y0), (x1, y1) = start, end
    steps = max(abs(x1 - x0), abs(y1 - y0), 1)
    xs = np.rint(np.linspace(x0, x1, steps + 1)).astype(np.int64)
    ys = np.rint(np.linspace(y0, y1, steps + 1)).astype(np.int64)
    for dx in range(width):
        for dy in range(width):
            canvas[np.clip(ys + dy, 0, HEIGHT - 1), np.clip(xs + dx, 0, WIDTH - 1)] = color


def _text_width(text: str) -> int:
    return len(text) * 4 * SCALE


def _text(canvas: Canvas, text: str, x: int, y: int, color: Color = AXIS) -> None:
    for index, char in enumerate(text):
        for row, bits in enumerate(GLYPHS[char]):
            for col in range(3):
                if bits >> (2 - col) & 1:
                    top, left = y + row * SCALE, x + (index * 4 + col) * SCALE
                    canvas[top : top + SCALE, left : left + SCALE] = color


def _png(canvas: Canvas) -> bytes:
    """An 8-bit RGB PNG: each row prefixed with filter type 0, deflated in one IDAT chunk."""
    height, width, _ = canvas.shape
    rows = np.concatenate(
        [np.zeros((height, 1), dtype=np.uint8), canvas.reshape(height, -1)], axis=1
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + chunk(b"IEND", b"")
    )
