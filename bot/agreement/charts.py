"""The agreement feature's charts: one two-panel figure (κ beside agreement, a row per criterion) and
its pieces, drawn with matplotlib's Agg canvas (no display needed). The report and the replay
comparison each draw their bars into it; :func:`write_png` and :func:`png_bytes` render it."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from os import PathLike
from typing import IO, TYPE_CHECKING, Any

from bot.agreement.presentation import clipped_name
from grading.agreement import KAPPA_TARGET

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure

CHART_NAME_MAX = 38
"""Longest criterion label on a chart's axis."""

NO_VALUE_COLOUR = "#bdbdbd"
"""Edge colour of the hatched band drawn where a value is not shown (never a bar at 0)."""


def two_panel_figure(
    *,
    title: str,
    title_size: int,
    rows: int,
    row_height: float,
    empty: str,
    draw: Callable[[Any, Any], None],
) -> Figure:
    """Two panels side by side sharing their ``rows`` rows (κ, then agreement), drawn by
    ``draw(kappa_axes, agreement_axes)``, with one legend below for both; ``empty`` in their place
    when there are no rows."""
    # Imported here: matplotlib takes a while to import and only charts need it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, max(3.5, 2 + row_height * rows)), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(title, fontsize=title_size)
    if not rows:
        axes = figure.subplots()
        axes.set_axis_off()
        axes.text(0.5, 0.5, empty, ha="center", va="center", fontsize=14)
        return figure
    panels = figure.subplots(1, 2, sharey=True)
    draw(*panels)
    legend: dict[str, Artist] = {}
    for axes in panels:
        handles, labels = axes.get_legend_handles_labels()
        legend.update(zip(labels, handles, strict=True))
    figure.legend(list(legend.values()), list(legend.keys()), loc="outside lower center", ncols=len(legend))
    return figure


def write_png(figure: Figure, path_or_buffer: str | PathLike[str] | IO[bytes]) -> None:
    """Write ``figure`` as a PNG file (or into a buffer)."""
    figure.savefig(path_or_buffer, format="png")


def png_bytes(figure: Figure) -> bytes:
    """``figure`` as PNG bytes, e.g. for an upload."""
    buffer = io.BytesIO()
    write_png(figure, buffer)
    return buffer.getvalue()


def criterion_axis(axes: Any, names: Sequence[str]) -> None:
    """Label the rows with the criteria's names (first at the top) and draw the zero line."""
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_yticks(range(len(names)), [clipped_name(name, CHART_NAME_MAX) for name in names])
    axes.invert_yaxis()


def kappa_target_line(axes: Any) -> None:
    """The dashed line at the κ a criterion should reach."""
    axes.axvline(KAPPA_TARGET, linestyle="--", color="#616161", label=f"κ target {KAPPA_TARGET}")


def no_value_band(
    axes: Any, y: float, note: str, *, left: float, right: float, height: float, label: str | None = None
) -> None:
    """A hatched band from ``left`` to ``right`` saying why a row has no value (``note``)."""
    axes.barh(
        y,
        right - left,
        left=left,
        height=height,
        fill=False,
        hatch="//",
        edgecolor=NO_VALUE_COLOUR,
        **({"label": label} if label else {}),
    )
    axes.text(
        0.02,
        y,
        note,
        va="center",
        fontsize=8,
        color="#424242",
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
    )
