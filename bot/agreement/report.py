"""The agreement report: how far a channel's grader can be trusted, per criterion.

From the team's stored reviews it gives, per criterion, the number of reviewed verdicts, the
share on which reviewer and grader agreed, Cohen's κ (quadratic-weighted for 1–5 scores,
unweighted for pass/fail) and the agreement of a constant majority-label grader, so agreement
can be told from luck; and, from the grader's own scores, dimension pairs so correlated they
likely measure one thing. The numbers come from :mod:`grading.agreement`; this module groups
the reviews and presents the result three ways: Block Kit, a terminal table and a PNG chart.
:func:`load_report` builds it from the bot's store.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from os import PathLike
from typing import IO, TYPE_CHECKING, Any

from slack_sdk.models.blocks import Block

from bot.agreement.charts import (
    criterion_axis,
    kappa_target_line,
    no_value_band,
    png_bytes,
    two_panel_figure,
    write_png,
)
from bot.agreement.presentation import (
    LIST_KIND,
    SCORED_KIND,
    TABLE_NAME_MAX,
    aligned_columns,
    clipped_name,
    criterion_kind,
    kappa_words,
    percent_words,
    period_words,
    shown_kappa,
    slack_name,
)
from bot.db.feedback import FeedbackTally
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.feedback.satisfaction import satisfaction_blocks, satisfaction_table
from bot.provenance.grouping import Coverage, Waiting, by_provenance, coverage, waiting_for_people
from bot.review.verdicts import grader_verdicts, is_judged, verdict_label
from bot.slack.blocks import block_dicts, context_block, header_block, plural, section_block, sections
from bot.slack.messages import SlackMessage
from bot.vocabulary.workspace import Workspace
from grading import RubricEvaluation
from grading.agreement import (
    CORRELATION_THRESHOLD,
    KAPPA_TARGET,
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    agreement_report,
    correlated_dimensions,
)
from grading.rubric import normalize_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CorrelatedPair",
    "Report",
    "build_report",
    "chart_figure",
    "chart_png",
    "chart_title",
    "chart_upload",
    "load_report",
    "period_start",
    "render_chart",
    "report_blocks",
    "report_table",
    "rows_by_criterion",
]

ANCHOR_ADVICE = (
    f"κ under {KAPPA_TARGET} means the grader and the team read the criterion differently: "
    "rewrite its anchors (what a 1, 3 and 5 look like) or its wording, then review again."
)
"""What to do about a criterion whose agreement is too low (the grader and the team read it
differently, so its wording or anchors need to change), said once per report."""

MERGE_ADVICE = "likely the same dimension — merge or drop one"
"""What a pair of dimensions whose grader scores correlate too strongly is flagged with."""

SLACK_PAIRS_MAX = 10
"""Most correlated pairs listed in Slack (strongest first); the rest are counted."""

KAPPA_COLOURS = {"ok": "#2e7d32", "flagged": "#c62828"}
"""Bar colours for a κ at or above the target and one below it."""

AGREEMENT_COLOURS = {"agreement with reviewers": "#1565c0", "always-majority baseline": "#b0bec5"}
"""Bar colours for percent agreement and the majority baseline."""

Label = bool | int
"""A verdict as agreement is computed on it: pass/fail as a bool, a score as an int."""


@dataclass(frozen=True)
class CorrelatedPair:
    """Two dimensions whose grader scores correlate above the threshold over ``answers`` answers."""

    first: str
    second: str
    r: float
    answers: int


@dataclass(frozen=True)
class Report:
    """A channel's agreement report; build it with :func:`build_report`."""

    criteria: list[CriterionAgreement]
    correlated: list[CorrelatedPair]
    reviews: int
    reviewers: int
    days: int | None
    min_reviews: int
    coverage: Coverage | None = None
    """How many criteria the grader judged of all it graded in the period (None: not worked out)."""
    waiting: tuple[Waiting, ...] = ()
    """Iterations whose criteria the grader could not tell still wait for a person's verdict."""
    parts: tuple[tuple[str, Report], ...] = ()
    """Set when the period's reviewed verdicts come from more than one rubric version or grader
    model: the report of each (label, report), since one κ over mixed versions would mean nothing."""
    satisfaction: FeedbackTally | None = None
    """The askers' 👍/👎 on the period's answers beside the grader's pass rate (`bot.feedback`)."""

    @property
    def flagged(self) -> list[CriterionAgreement]:
        """Criteria with enough reviews and κ under the target."""
        return [c for c in self.criteria if c.flagged]

    @property
    def period(self) -> str:
        """E.g. ``last 7 days`` or ``all time``."""
        return period_words(self.days)

    def summary(self) -> str:
        """E.g. ``14 reviews by 3 reviewers``."""
        return f"{plural(self.reviews, 'review')} by {plural(self.reviewers, 'reviewer')}"


def build_report(
    reviews: Sequence[ReviewRow],
    evaluations: Iterable[RubricEvaluation],
    *,
    days: int | None,
    min_reviews: int = MIN_REVIEWS_FOR_KAPPA,
) -> Report:
    """The report over the given reviews and grader evaluations of one channel.

    The caller picks the period (``days`` only names it): ``reviews`` are the stored review
    rows, ``evaluations`` the grader's evaluation dicts, whose scores feed the correlation
    check. A criterion is identified by its name (ignoring case and trailing punctuation), and
    by its kind when two rubrics use one name for a pass/fail criterion and a scored dimension.
    """
    criteria = agreement_report(_pairs_by_criterion(reviews), min_reviews=min_reviews)
    return Report(
        criteria=criteria,
        correlated=_correlated(evaluations),
        reviews=len({(r.reviewer, r.grading_run_id, r.iteration) for r in reviews}),
        reviewers=len({r.reviewer for r in reviews}),
        days=days,
        min_reviews=min_reviews,
    )


async def load_report(
    store: Store, *, workspace: Workspace | None, channel: str | None, days: int | None
) -> Report:
    """The report over the reviews and evaluations of a channel's last ``days`` days (None: all).

    ``None`` for ``workspace`` or ``channel`` spans every one. The numbers are worked out in a thread:
    scikit-learn's import and κ would otherwise hold up the event loop that answers Slack.
    """
    since = period_start(days)
    reviews = await store.reviews_in_channel(workspace, channel, since)
    satisfaction = await store.feedback_tally(workspace, channel, since)
    records = [record async for record in store.evaluation_records(workspace, channel, since)]

    def build() -> Report:
        report = build_report(reviews, [r.evaluation for r in records], days=days)
        groups = by_provenance(reviews, records)
        parts = (
            tuple((g.label, build_report(g.reviews, g.evaluations, days=days)) for g in groups)
            if len(groups) > 1
            else ()
        )
        return replace(
            report,
            coverage=coverage(r.evaluation for r in records),
            waiting=tuple(waiting_for_people(records, reviews)),
            parts=parts,
            satisfaction=satisfaction,
        )

    return await asyncio.to_thread(build)


def period_start(days: int | None) -> datetime | None:
    """When a report over the last ``days`` days begins; None for all time."""
    return datetime.now(UTC) - timedelta(days=days) if days is not None else None


def rows_by_criterion(reviews: Iterable[ReviewRow]) -> dict[str, list[ReviewRow]]:
    """The review rows of each criterion, named as first reviewed, in that order.

    A criterion is identified by its name (ignoring case and trailing punctuation) and the kind of
    its verdicts; a name used for both a pass/fail criterion and a scored dimension gets its kind
    added. Reviews of criteria the grader could not tell are left out: agreement is over judged ones.
    """
    rows: dict[tuple[str, str], list[ReviewRow]] = {}
    for row in reviews:
        if not is_judged(row.grader_verdict):
            continue  # the grader left it to the reviewer: their verdict, nothing to agree with
        judge = verdict_label(row.grader_verdict)
        key = (normalize_name(row.criterion), LIST_KIND if isinstance(judge, bool) else SCORED_KIND)
        rows.setdefault(key, []).append(row)
    kinds = Counter(name for name, _ in rows)
    return {
        found[0].criterion + (f" ({kind})" if kinds[name] > 1 else ""): found
        for (name, kind), found in rows.items()
    }


def _pairs_by_criterion(reviews: Iterable[ReviewRow]) -> dict[str, list[tuple[Label, Label]]]:
    """(reviewer, grader) label pairs per criterion (see :func:`rows_by_criterion`)."""
    return {
        name: [(verdict_label(r.reviewer_verdict), verdict_label(r.grader_verdict)) for r in rows]
        for name, rows in rows_by_criterion(reviews).items()
    }


def _correlated(evaluations: Iterable[RubricEvaluation]) -> list[CorrelatedPair]:
    """Dimension pairs whose scores, paired within each graded answer, correlate too strongly.

    Each pair is checked over the answers that scored both, so dimensions of different rubrics
    in one channel are compared only where they met.
    """
    answers: list[dict[str, int]] = []
    spelling: dict[str, str] = {}
    for evaluation in evaluations:
        if evaluation["kind"] != "scored":
            continue
        scores = {}
        for name, verdict in grader_verdicts(evaluation).items():
            spelling.setdefault(normalize_name(name), name)
            scores[normalize_name(name)] = int(verdict)
        answers.append(scores)
    found = []
    for a, b in itertools.combinations(spelling, 2):
        both = [(scores[a], scores[b]) for scores in answers if a in scores and b in scores]
        series = {spelling[a]: [x for x, _ in both], spelling[b]: [y for _, y in both]}
        found += [CorrelatedPair(x, y, r, len(both)) for x, y, r in correlated_dimensions(series)]
    return sorted(found, key=lambda pair: pair.r, reverse=True)


def _kappa_note(criterion: CriterionAgreement) -> str:
    """Why a criterion has no κ or is flagged ('' when its κ is fine)."""
    if criterion.flagged:
        return f"κ under {KAPPA_TARGET}: rewrite its anchors"
    return criterion.note


# --- Slack -------------------------------------------------------------------------------------


def report_blocks(report: Report, *, channel: str) -> SlackMessage:
    """The report as one compact Block Kit message.

    Names are shortened and correlated pairs capped so even 30 criteria fit Slack's limits.
    """
    title = f"Grader agreement · {report.period}"
    blocks: list[Block] = [header_block(title)]
    if report.criteria:
        blocks.append(
            context_block(
                f"<#{channel}> · {report.summary()} · κ is measured once a criterion has "
                f"{report.min_reviews} reviews; {KAPPA_TARGET} is the bar"
            )
        )
        if report.parts:
            blocks.append(section_block(f"⚠️ {_mixed_words(report)}"))
            for label, part in report.parts:
                lines = "\n".join(_slack_line(c) for c in part.criteria)
                blocks += sections(f"*{slack_name(label)}* — {part.summary()}\n{lines}")
        else:
            lines = "\n".join(_slack_line(c) for c in report.criteria)
            blocks += sections(lines)
    else:
        blocks.append(
            section_block(
                f"No reviews in <#{channel}> ({report.period}) yet. Review the grader with *Agree* "
                "or *Disagree…* on its messages in a thread."
            )
        )
    if report.flagged:
        blocks.append(section_block(f"⚠️ {ANCHOR_ADVICE}"))
    if report.correlated:
        blocks.append(section_block(_slack_pairs(report.correlated)))
    if report.coverage is not None and report.coverage.total:
        blocks.append(context_block(_coverage_words(report.coverage)))
    if report.waiting:
        blocks.append(section_block(_slack_waiting(report.waiting)))
    blocks += satisfaction_blocks(report.satisfaction)
    if report.criteria:
        blocks.append(
            context_block(
                "Agreement: share of verdicts where reviewer and grader matched. Baseline: what "
                "always giving the reviewers' most common verdict would score. κ: agreement beyond "
                "chance (quadratic-weighted for 1–5 scores)."
            )
        )
    return {"text": f"{title}: {_headline(report)}", "blocks": block_dicts(blocks)}


def _headline(report: Report) -> str:
    """E.g. ``5 criteria, 1 below κ 0.6`` (the notification text)."""
    if not report.criteria:
        return "no reviews yet"
    flagged = len(report.flagged)
    text = plural(len(report.criteria), "criterion", "criteria")
    return text + (f", {flagged} below κ {KAPPA_TARGET}" if flagged else "")


def _slack_line(criterion: CriterionAgreement) -> str:
    """E.g. ``⚠️ *Tone* (1–5) — 28 reviews · agree 25% (baseline 25%) · *κ 0.33*``."""
    value = shown_kappa(criterion)
    agree = (
        f"agree {percent_words(criterion.percent_agreement)} (baseline {percent_words(criterion.baseline)})"
    )
    if value is not None:
        mark = "⚠️" if criterion.flagged else "✅"
        facts = [plural(criterion.n, "review"), agree, f"*κ {kappa_words(value)}*"]
    elif not criterion.enough:
        mark, facts = "⏳", [f"_{criterion.note}_", agree]
    else:
        mark, facts = "➖", [plural(criterion.n, "review"), agree, f"_{criterion.note}_"]
    name = slack_name(criterion.criterion)
    return f"{mark} *{name}* ({criterion_kind(criterion)}) — {' · '.join(facts)}"


def _mixed_words(report: Report) -> str:
    """The one line saying the period's verdicts come from several versions, so κ is given per each."""
    return (
        f"These verdicts come from {len(report.parts)} rubric versions or grader models: agreement "
        "is given for each, never pooled."
    )


def _coverage_words(found: Coverage) -> str:
    """E.g. ``Coverage: the grader judged 18 of 20 criteria (90%); 2 left to a person.``"""
    share = percent_words(found.share) if found.share is not None else "–"
    left = found.total - found.judged
    total = plural(found.total, "criterion", "criteria")
    text = f"Coverage: the grader judged {found.judged} of {total} ({share})"
    return text + (
        f"; {left} left to a person (can't tell). Agreement is over the judged ones." if left else "."
    )


WAITING_SHOWN = 10
"""Most iterations waiting for a person's verdict listed in Slack (oldest first); the rest are counted."""


def _slack_waiting(waiting: Sequence[Waiting]) -> str:
    lines = ["❔ *Waiting for a person's verdict* (the grader could not tell):"]
    for item in waiting[:WAITING_SHOWN]:
        names = "; ".join(slack_name(name) for name in item.criteria)
        link = _message_link(item)
        lines.append(f"• <{link}|iteration {item.iteration + 1}> in <#{item.thread.channel}>: {names}")
    if len(waiting) > WAITING_SHOWN:
        lines.append(f"…and {plural(len(waiting) - WAITING_SHOWN, 'more iteration')}")
    return "\n".join(lines)


def _message_link(item: Waiting) -> str:
    """A link to the evaluation message in its thread (Slack redirects it to the workspace)."""
    ts = item.message_ts.replace(".", "")
    return f"https://slack.com/archives/{item.thread.channel}/p{ts}?thread_ts={item.thread.thread_ts}"


def _slack_pairs(pairs: Sequence[CorrelatedPair]) -> str:
    lines = [
        f"🔗 *{MERGE_ADVICE.capitalize()}* — their grader scores correlate above {CORRELATION_THRESHOLD}:"
    ]
    for pair in pairs[:SLACK_PAIRS_MAX]:
        first = slack_name(pair.first)
        second = slack_name(pair.second)
        lines.append(f"• *{first}* & *{second}* (r = {pair.r:.2f} over {pair.answers} answers)")
    if len(pairs) > SLACK_PAIRS_MAX:
        lines.append(f"…and {plural(len(pairs) - SLACK_PAIRS_MAX, 'more pair')}")
    return "\n".join(lines)


# --- Terminal --------------------------------------------------------------------------------


def report_table(report: Report) -> str:
    """The report as plain text for a terminal: a table, then the advice and correlated pairs."""
    lines = [f"Grader agreement, {report.period}: {report.summary()}"]
    if report.parts:
        lines.append(_mixed_words(report))
        for label, part in report.parts:
            lines += ["", f"{label}: {part.summary()}", *_table(part)]
    else:
        lines += _table(report) if report.criteria else ["No reviews yet."]
    if report.coverage is not None and report.coverage.total:
        lines += ["", _coverage_words(report.coverage)]
    if report.waiting:
        lines += ["", "Waiting for a person's verdict (the grader could not tell):"]
        lines += [
            f"  {w.thread.channel} thread {w.thread.thread_ts}, iteration {w.iteration + 1}: "
            + "; ".join(w.criteria)
            for w in report.waiting
        ]
    if report.flagged:
        names = ", ".join(c.criterion for c in report.flagged)
        lines += ["", f"Flagged: {names}", ANCHOR_ADVICE]
    if report.correlated:
        lines += [
            "",
            f"Dimension pairs whose grader scores correlate above {CORRELATION_THRESHOLD} ({MERGE_ADVICE}):",
        ]
        lines += [
            f"  {p.first} & {p.second}: r = {p.r:.2f} over {p.answers} answers" for p in report.correlated
        ]
    lines += satisfaction_table(report.satisfaction)
    return "\n".join(lines)


def _table(report: Report) -> list[str]:
    """One aligned line per criterion under a header line, and a note on when κ is shown."""
    header = ("Criterion", "Kind", "n", "Agree", "Baseline", "κ", "Flag")
    rows = [
        (
            clipped_name(c.criterion, TABLE_NAME_MAX),
            criterion_kind(c),
            str(c.n),
            percent_words(c.percent_agreement),
            percent_words(c.baseline),
            kappa_words(shown_kappa(c)),
            ("⚠ " if c.flagged else "") + _kappa_note(c),
        )
        for c in report.criteria
    ]
    lines = aligned_columns([header, *rows], numeric={2, 3, 4, 5})
    lines.append(
        f"κ is shown once a criterion has {report.min_reviews} reviews; quadratic-weighted for 1–5 scores."
    )
    return lines


# --- Chart -----------------------------------------------------------------------------------


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
        rows=len(report.criteria),
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


CHART_FILENAME = "grader-agreement.png"
"""File name of the agreement chart wherever it is uploaded to Slack."""


def chart_title(report: Report) -> str:
    """The agreement chart's title in Slack: what it shows and over which period."""
    return f"Grader agreement, {report.period}"


def chart_upload(report: Report) -> dict[str, Any]:
    """``files_upload_v2`` arguments for the report's chart (rendering it: run off the event loop)."""
    return {"file": chart_png(report), "filename": CHART_FILENAME, "title": chart_title(report)}


def _draw_kappa(axes: Any, report: Report) -> None:
    values = [shown_kappa(c) for c in report.criteria]
    left = min([-0.2, *[v - 0.3 for v in values if v is not None]])
    for row, (criterion, value) in enumerate(zip(report.criteria, values, strict=True)):
        if value is None:
            note = _kappa_note(criterion)
            label = "no κ (why is written in the band)"
            no_value_band(axes, row, note, left=left, right=1.1, height=0.6, label=label)
            continue
        colour = KAPPA_COLOURS["flagged" if criterion.flagged else "ok"]
        bars = axes.barh(row, value, height=0.6, color=colour)
        axes.bar_label(bars, fmt="%.2f", padding=3, fontsize=9)
    kappa_target_line(axes)
    axes.set_xlim(left, 1.1)
    criterion_axis(axes, [c.criterion for c in report.criteria])
    axes.set_title("Cohen's κ per criterion (red: under the target)")
    axes.set_xlabel("κ, quadratic-weighted for 1–5 scores")


def _draw_agreement(axes: Any, report: Report) -> None:
    from matplotlib.ticker import PercentFormatter

    rows = range(len(report.criteria))
    series = (
        ("agreement with reviewers", [c.percent_agreement for c in report.criteria], -0.2),
        ("always-majority baseline", [c.baseline for c in report.criteria], 0.2),
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
