"""The site's diagrams, drawn at build time from the small descriptions below (matplotlib, SVG, no CDN at view time).

A diagram is nested boxes: a box has a title, a line of detail and rows of child boxes laid side by side, so a
description reads like the thing it draws (the machine holds the pods, a pod its namespace, cgroup and broker).
Arrows join boxes by key. Sizes come from the text, so a longer name grows its box instead of overflowing it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

CHAR_W = 0.07  # inches per character at FONT_SIZE (DejaVu Sans, a little generous)
LINE_H = 0.2  # inches per text line
PAD = 0.1
GAP = 0.12
WIDE_GAP = 0.85
FONT_SIZE = 8
STYLES = {  # fill, edge
    "machine": ("#f5f5f5", "#9e9e9e"),
    "cluster": ("#e8eaf6", "#5c6bc0"),
    "pod": ("#e3f2fd", "#1e88e5"),
    "lead": ("#e8f5e9", "#43a047"),
    "part": ("#ffffff", "#78909c"),
    "object": ("#fff8e1", "#ffa000"),
    "control": ("#fce4ec", "#d81b60"),
    "faint": ("#fafafa", "#bdbdbd"),
}


@dataclass
class Box:
    title: str
    detail: str = ""
    rows: list[list[Box]] = field(default_factory=list)
    style: str = "part"
    key: str = ""
    wide_rows: tuple[int, ...] = ()  # rows whose children stand WIDE_GAP apart: room for an arrow and its label
    # laid out by _measure and _place, inches from the bottom left
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0

    def text_lines(self) -> list[str]:
        return [self.title, *(line for line in self.detail.split("\n") if line)]


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    label: str = ""


@dataclass(frozen=True)
class Diagram:
    name: str  # the file: diagrams/<name>.svg
    title: str
    root: Box
    arrows: tuple[Arrow, ...] = ()


def _gap(box: Box, row: int) -> float:
    return WIDE_GAP if row in box.wide_rows else GAP


def _measure(box: Box) -> None:
    """The box's size: its text, then its rows of children side by side, rows stacked."""
    lines = box.text_lines()
    text_w = max(len(line) for line in lines) * CHAR_W
    text_h = len(lines) * LINE_H
    rows_w, rows_h = 0.0, 0.0
    for number, row in enumerate(box.rows):
        for child in row:
            _measure(child)
        rows_w = max(rows_w, sum(child.w for child in row) + _gap(box, number) * (len(row) - 1))
        rows_h += max(child.h for child in row) + GAP
    box.w = max(text_w, rows_w) + 2 * PAD
    box.h = text_h + rows_h + 2 * PAD


def _place(box: Box, x: float, y_top: float) -> None:
    """Put the box's top left at (x, y_top); children under its text, each row centred, equal-height cells."""
    box.x, box.y = x, y_top - box.h
    cursor = y_top - PAD - len(box.text_lines()) * LINE_H - GAP / 2
    for number, row in enumerate(box.rows):
        gap = _gap(box, number)
        row_w = sum(child.w for child in row) + gap * (len(row) - 1)
        row_h = max(child.h for child in row)
        left = x + (box.w - row_w) / 2
        if len(row) == 1 and not row[0].rows:  # a lone leaf takes the row's whole width
            row[0].w = box.w - 2 * PAD
            left = x + PAD
        for child in row:
            child.h = row_h
            _place(child, left, cursor)
            left += child.w + gap
        cursor -= row_h + GAP


def _walk(box: Box) -> Iterator[Box]:
    yield box
    for row in box.rows:
        for child in row:
            yield from _walk(child)


def _draw_box(ax: Axes, box: Box) -> None:
    fill, edge = STYLES[box.style]
    dashed = box.style == "faint"
    ax.add_patch(
        FancyBboxPatch(
            (box.x, box.y),
            box.w,
            box.h,
            boxstyle="round,pad=0,rounding_size=0.06",
            facecolor=fill,
            edgecolor=edge,
            linewidth=1.0,
            linestyle="--" if dashed else "-",
        )
    )
    top = box.y + box.h - PAD
    for index, line in enumerate(box.text_lines()):
        ax.text(
            box.x + box.w / 2,
            top - (index + 0.5) * LINE_H,
            line,
            ha="center",
            va="center",
            fontsize=FONT_SIZE,
            fontweight="bold" if index == 0 else "normal",
            color="#212121" if index == 0 else "#424242",
        )


def _draw_arrow(ax: Axes, source: Box, target: Box, label: str) -> None:
    start = (source.x + source.w / 2, source.y + source.h)
    end = (target.x + target.w / 2, target.y)
    if source.y > target.y + target.h:  # the source is above the target
        start, end = (source.x + source.w / 2, source.y), (target.x + target.w / 2, target.y + target.h)
    elif abs(source.y - target.y) < 1e-6:  # side by side
        left, right = (source, target) if source.x < target.x else (target, source)
        start = (left.x + left.w, left.y + left.h / 2) if left is source else (right.x, right.y + right.h / 2)
        end = (right.x, right.y + right.h / 2) if left is source else (left.x + left.w, left.y + left.h / 2)
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="#455a64", linewidth=1.0))
    if label:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        box = {"facecolor": "white", "edgecolor": "none", "pad": 1.0}
        ax.text(*mid, label, fontsize=FONT_SIZE - 1, ha="center", va="center", color="#37474f", bbox=box)


def render_svg(diagram: Diagram, fmt: str = "svg") -> bytes:
    """The diagram as SVG: text kept as text (small, searchable), no date or random ids, so a rebuild is identical.
    (`fmt="png"` draws the same picture as a PNG, to look at it.)"""
    root = diagram.root
    _measure(root)
    _place(root, 0.0, root.h)
    by_key = {box.key: box for box in _walk(root) if box.key}
    title_h = 0.35
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "miniclusters", "font.family": "DejaVu Sans"})
    figure = plt.figure(figsize=(root.w + 0.1, root.h + title_h + 0.1))
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.05, root.w + 0.05)
    ax.set_ylim(-0.05, root.h + title_h + 0.05)
    ax.axis("off")
    ax.text(0, root.h + title_h / 2, diagram.title, fontsize=FONT_SIZE + 2, fontweight="bold", va="center")
    for box in _walk(root):
        _draw_box(ax, box)
    for arrow in diagram.arrows:
        _draw_arrow(ax, by_key[arrow.source], by_key[arrow.target], arrow.label)
    out = io.BytesIO()
    metadata = {"Date": None, "Creator": None} if fmt == "svg" else {"Software": None}
    figure.savefig(out, format=fmt, metadata=metadata, dpi=110)
    plt.close(figure)
    return out.getvalue()
