"""The agreement feature's shared wording: how a criterion, a share, a κ and a period read in Slack
and in the terminal, and the terminal's aligned table. The report and the replay comparison both
present agreement with it, so a number reads the same wherever it is shown."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from bot.slack.mrkdwn import escape, truncate
from grading.agreement import CriterionAgreement

SCORED_KIND, LIST_KIND = "1–5", "pass/fail"
"""How a criterion's kind of verdict reads: a scored dimension's, or a pass/fail criterion's."""

SLACK_NAME_MAX = 60
"""Longest criterion name in a Slack message; 30 criteria must share one message."""

TABLE_NAME_MAX = 40
"""Width of the criterion column in a terminal table."""


def criterion_kind(criterion: CriterionAgreement) -> str:
    """The kind of verdict a criterion's agreement was computed on (unweighted κ: pass/fail)."""
    return LIST_KIND if criterion.weights is None else SCORED_KIND


def shown_kappa(criterion: CriterionAgreement) -> float | None:
    """κ as reported: only once there are enough reviewed verdicts, so a noisy number is never shown."""
    return criterion.kappa if criterion.enough else None


def percent_words(value: float | None) -> str:
    """A share as reported, e.g. ``83%``; ``—`` when undefined."""
    return "—" if value is None else f"{value:.0%}"


def kappa_words(value: float | None) -> str:
    """A κ as reported, e.g. ``0.72``; ``—`` when not shown."""
    return "—" if value is None else f"{value:.2f}"


def interval_words(interval: tuple[float, float] | None, *, percent: bool = False) -> str:
    """A 95 % interval as reported, e.g. ``0.41–0.93`` or ``71–96%``; ``—`` when there is none."""
    if interval is None:
        return "—"
    low, high = interval
    if percent:
        return f"{low:.0%}".removesuffix("%") + f"–{high:.0%}"
    return f"{low:.2f}–{high:.2f}"


def period_words(days: int | None) -> str:
    """A period of the last ``days`` days in words: ``last 7 days``, ``last day``, ``all time``."""
    if days is None:
        return "all time"
    return "last day" if days == 1 else f"last {days} days"


def clipped_name(name: str, width: int) -> str:
    """A name on one line, at most ``width`` characters, cut at a space when one is near the end."""
    flat = " ".join(name.split())
    if len(flat) <= width:
        return flat
    head = flat[: width - 1]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip() + "…"


def slack_name(name: str, width: int = SLACK_NAME_MAX) -> str:
    """A criterion's (or any user-given) name for mrkdwn: escaped and shortened to ``width``."""
    return truncate(escape(name), width)


def message_link(channel: str, message_ts: str, thread_ts: str) -> str:
    """A link to a message in its thread (Slack redirects it to the workspace)."""
    return f"https://slack.com/archives/{channel}/p{message_ts.replace('.', '')}?thread_ts={thread_ts}"


def aligned_columns(rows: Sequence[Sequence[str]], *, numeric: Collection[int]) -> list[str]:
    """Rows of cells as lines of aligned columns; the ``numeric`` columns are right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
