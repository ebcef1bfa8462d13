"""Reading a chart back from its matplotlib figure, before it is rendered: what a reader would see on
it (titles, row labels, bars and their printed values, the notes in hatched bands, the legend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""The first bytes of every PNG file: what a written or uploaded chart must start with."""


@dataclass(frozen=True)
class Bar:
    """A horizontal bar: its row's centre, where it starts and ends; hatched: a band with no value."""

    row: float
    left: float
    width: float
    colour: tuple[float, ...]
    hatched: bool


def panels(figure: Figure) -> list[Any]:
    """The figure's panels (κ, then agreement), left to right."""
    return list(figure.axes)


def title(figure: Figure) -> str:
    return figure.get_suptitle()


def row_labels(axes: Any) -> list[str]:
    return [label.get_text() for label in axes.get_yticklabels()]


def bars(axes: Any) -> list[Bar]:
    """Every bar and hatched band, top row first (rows run down the y axis)."""
    found = [
        Bar(
            round(patch.get_y() + patch.get_height() / 2, 6),
            patch.get_x(),
            patch.get_width(),
            tuple(patch.get_facecolor()),
            bool(patch.get_hatch()),
        )
        for patch in axes.patches
        if isinstance(patch, Rectangle)
    ]
    return sorted(found, key=lambda bar: bar.row)


def value_labels(axes: Any) -> list[str]:
    """The values printed at the bars' ends, in the order they were drawn."""
    return [text.get_text() for text in axes.texts if isinstance(text, Annotation)]


def notes(axes: Any) -> list[str]:
    """The words written in hatched bands (why a row has no value)."""
    return [text.get_text() for text in axes.texts if not isinstance(text, Annotation)]


def legend_labels(figure: Figure) -> list[str]:
    (legend,) = figure.legends
    return [text.get_text() for text in legend.get_texts()]
