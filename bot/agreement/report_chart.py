"""The agreement report's chart: κ per criterion with its 95 % interval against the bar, and
agreement against the always-majority baseline, as a PNG for Slack and the terminal."""

from __future__ import annotations

from os import PathLike
from typing import IO, TYPE_CHECKING, Any

from bot.agreement.charts import (
    criterion_axis,
    kappa_target_line,
    no_value_band,
    png_bytes,
    two_panel_figure,
    write_png,
)
from bot.agreement.presentation import shown_kappa
from bot.agreement.report import Report, criterion_note

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KAPPA_COLOURS = {"ok": "#2e7d32", "flagged": "#c62828"}
"""Bar colours for a κ whose criterion is not flagged and one whose is."""

AGREEMENT_COLOURS = {"agreement with reviewers": "#1565c0", "always-majority baseline": "#b0bec5"}
"""Bar colours for percent agreement and the majority baseline."""

CHART_FILENAME = "grader-agreement.png"
"""File name of the agreement chart wherever it is uploaded to Slack."""


def chart_figure(report: Report) -> Figure:
    """The report as a figure: κ per criterion against the 0.6 line, and agreement vs baseline.

    Criteria without a κ (too few reviews, one label only) get a hatched band saying why,
    never a bar at 0.
    """

    def draw(kappa_axes: Any, agreement_axes: Any) -> None:
        _draw_kappa(kappa_axes, report)
        _draw_agreement(agreement_axes, report)

    return two_panel_figure(
        title=f"Grader agreement, {report.period} — {report.summary()}",
        title_size=13,
        rows=len(report.reviewed),
        row_height=0.42,
        empty="No reviews yet",
        draw=draw,
    )


def render_chart(report: Report, path_or_buffer: str | PathLike[str] | IO[bytes]) -> None:
    """Write the report's chart (:func:`chart_figure`) as a PNG."""
    write_png(chart_figure(report), path_or_buffer)


def chart_png(report: Report) -> bytes:
    """The report's chart as PNG bytes, e.g. for an upload."""
    return png_bytes(chart_figure(report))


def chart_title(report: Report) -> str:
    """The agreement chart's title in Slack: what it shows and over which period."""
    return f"Grader agreement, {report.period}"


def chart_upload(report: Report) -> dict[str, Any]:
    """``files_upload_v2`` arguments for the report's chart (rendering it: run off the event loop)."""
    return {"file": chart_png(report), "filename": CHART_FILENAME, "title": chart_title(report)}


def _draw_kappa(axes: Any, report: Report) -> None:
    values = [shown_kappa(c.agreement) for c in report.reviewed]
    left = min([-0.2, *[v - 0.3 for v in values if v is not None]])
    for row, (criterion, value) in enumerate(zip(report.reviewed, values, strict=True)):
        if value is None:
            note = criterion_note(criterion) or criterion.agreement.note
            label = "no κ (why is written in the band)"
            no_value_band(axes, row, note, left=left, right=1.1, height=0.6, label=label)
            continue
        colour = KAPPA_COLOURS["flagged" if criterion.flagged else "ok"]
        bars = axes.barh(row, value, height=0.6, color=colour)
        interval = criterion.agreement.kappa_interval
        if interval is not None:  # the 95 % interval as a whisker: where the flag is decided
            axes.errorbar(
                value, row, xerr=[[value - interval[0]], [interval[1] - value]], fmt="none", ecolor="#37474f"
            )
        axes.bar_label(bars, fmt="%.2f", padding=3, fontsize=9)
    kappa_target_line(axes)
    axes.set_xlim(left, 1.1)
    criterion_axis(axes, [c.name for c in report.reviewed])
    axes.set_title("Cohen's κ per criterion, with its 95% interval (red: flagged)")
    axes.set_xlabel("κ, quadratic-weighted for 1–5 scores")


def _draw_agreement(axes: Any, report: Report) -> None:
    from matplotlib.ticker import PercentFormatter

    rows = range(len(report.reviewed))
    series = (
        ("agreement with reviewers", [c.agreement.percent_agreement for c in report.reviewed], -0.2),
        ("always-majority baseline", [c.agreement.baseline for c in report.reviewed], 0.2),
    )
    for label, values, offset in series:
        bars = axes.barh(
            [r + offset for r in rows], values, height=0.38, color=AGREEMENT_COLOURS[label], label=label
        )
        axes.bar_label(bars, fmt=lambda v: f"{v:.0%}", padding=2, fontsize=8)
    axes.set_xlim(0, 1.12)
    axes.xaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_title("Agreement vs. a grader always giving the majority verdict")
    axes.set_xlabel("share of reviewed verdicts")
