"""The agreement report: how far a channel's grader can be trusted, per criterion.

Per criterion — pooled over the rubric versions in which its text is unchanged, per grader model
(:mod:`bot.agreement.pooling`) — it gives the reviewed verdicts and the runs they come from, the
share on which reviewer and grader agreed, Cohen's κ (quadratic-weighted for 1–5 scores, unweighted
for pass/fail) with 95 % intervals (cluster bootstrap by run: a run's iterations are alike), the
agreement of a constant majority-label grader, so agreement can be told from luck, and coverage
(the verdicts the grader judged of all it gave); and, from the grader's own scores, dimension pairs
so correlated they likely measure one thing. A criterion is flagged when κ's whole interval lies
under the bar or the grader judged under half of it. The numbers come from
:mod:`grading.agreement`; this module presents them as Block Kit and a terminal table
(:mod:`bot.agreement.report_chart` draws the chart). :func:`load_report` builds it from the store.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from slack_sdk.models.blocks import Block

from bot.agreement.people import Reviewing, reviewing_blocks, reviewing_figures, reviewing_table
from bot.agreement.pooling import PooledCriterion, pooled_criteria
from bot.agreement.presentation import (
    LIST_KIND,
    SCORED_KIND,
    TABLE_NAME_MAX,
    aligned_columns,
    clipped_name,
    interval_words,
    kappa_words,
    message_link,
    percent_words,
    period_words,
    shown_kappa,
    slack_name,
)
from bot.agreement.trust_figures import TrustFigures, load_trust, trust_blocks, trust_table
from bot.db.evaluations import EvaluationRecord
from bot.db.feedback import FeedbackTally
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.feedback.satisfaction import satisfaction_blocks, satisfaction_table
from bot.provenance.grouping import Coverage, Waiting, coverage, waiting_for_people
from bot.review.verdicts import grader_verdicts, verdict_label
from bot.slack.blocks import block_dicts, context_block, header_block, plural, section_block, sections
from bot.slack.messages import SlackMessage
from bot.vocabulary.provenance import UNKNOWN
from bot.vocabulary.workspace import Workspace
from grading import RubricEvaluation
from grading.agreement import (
    CORRELATION_THRESHOLD,
    KAPPA_TARGET,
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    Interval,
    agreement_report,
    correlated_dimensions,
    share_interval,
)
from grading.rubric import normalize_name

__all__ = [
    "CorrelatedPair",
    "CriterionFigures",
    "Report",
    "build_report",
    "load_report",
    "period_start",
    "report_blocks",
    "report_table",
]

ANCHOR_ADVICE = (
    f"κ under {KAPPA_TARGET} means the grader and the team read the criterion differently: "
    "rewrite its anchors (what a 1, 3 and 5 look like) or its wording, then review again."
)
"""What to do about a criterion whose agreement is too low (the grader and the team read it
differently, so its wording or anchors need to change), said once per report."""

MERGE_ADVICE = "likely the same dimension — merge or drop one"
"""What a pair of dimensions whose grader scores correlate too strongly is flagged with."""

COVERAGE_FLOOR = 0.5
"""Coverage under which a criterion is flagged: the grader leaves most of it to people, so a fine κ
over its few judged verdicts says little about it."""

COVERAGE_ADVICE = (
    f"Coverage under {COVERAGE_FLOOR:.0%} means the grader mostly answers “can't tell” on the criterion: "
    "make it checkable from the answer (or share the material it needs), or leave it to people."
)
"""What to do about a criterion the grader mostly cannot tell, said once per report."""

SLACK_PAIRS_MAX = 10
"""Most correlated pairs listed in Slack (strongest first); the rest are counted."""

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
class CriterionFigures:
    """One criterion's line: its agreement with the reviewers, its coverage and what was pooled."""

    agreement: CriterionAgreement
    pooled: PooledCriterion
    coverage_interval: Interval | None
    """Cluster-bootstrap interval on coverage, once the grader gave `min_reviews` verdicts on it."""
    min_reviews: int

    @property
    def name(self) -> str:
        return self.agreement.criterion

    @property
    def coverage(self) -> float | None:
        """Judged ÷ all the grader's verdicts on it; None when it graded none in the window."""
        graded = self.pooled.graded
        return self.pooled.judged / graded if graded else None

    @property
    def low_coverage(self) -> bool:
        """Enough verdicts to read, and the grader judged under COVERAGE_FLOOR of them."""
        share = self.coverage
        return self.pooled.graded >= self.min_reviews and share is not None and share < COVERAGE_FLOOR

    @property
    def flagged(self) -> bool:
        """κ's interval lies under the bar, or coverage is under the floor."""
        return self.agreement.flagged or self.low_coverage


@dataclass(frozen=True)
class Report:
    """A channel's agreement report; build it with :func:`build_report`."""

    criteria: list[CriterionFigures]
    correlated: list[CorrelatedPair]
    reviews: int
    reviewers: int
    days: int | None
    min_reviews: int
    coverage: Coverage | None = None
    """How many criteria the grader judged of all it graded in the period (None: not worked out)."""
    waiting: tuple[Waiting, ...] = ()
    """Iterations whose criteria the grader could not tell still wait for a person's verdict."""
    versions: tuple[str, ...] = ()
    """The rubric versions the window's verdicts come from, oldest first."""
    models: tuple[str, ...] = ()
    """The grader models (as they answered) the window's verdicts come from."""
    satisfaction: FeedbackTally | None = None
    """The askers' 👍/👎 on the period's answers beside the grader's pass rate (`bot.feedback`)."""
    trust: TrustFigures | None = None
    """The channel's trust level and, per criterion, its threshold and what the period shows under it."""
    reviewing: Reviewing | None = None
    """How the reviews were given, and the people's own agreement beside the grader's (`people`)."""

    @property
    def flagged(self) -> list[CriterionFigures]:
        """Criteria whose κ interval lies under the bar or whose coverage is under the floor."""
        return [c for c in self.criteria if c.flagged]

    @property
    def reviewed(self) -> list[CriterionFigures]:
        """Criteria with reviews (the chart's rows: a criterion nobody reviewed has no agreement to draw)."""
        return [c for c in self.criteria if c.agreement.n]

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
    records: Sequence[EvaluationRecord] = (),
) -> Report:
    """The report over the given reviews and grader evaluations of one channel.

    The caller picks the period (``days`` only names it): ``reviews`` are the stored review rows,
    ``records`` the evaluations posted in the period (their rubric texts and provenance pool each
    criterion, see :func:`bot.agreement.pooling.pooled_criteria`), ``evaluations`` the grader's
    evaluation dicts, whose scores feed the correlation check. A review of an evaluation outside
    ``records`` pools by its criterion's name (ignoring case and trailing punctuation) and kind.
    """
    pooled = pooled_criteria(reviews, records)
    names = _line_names(pooled)
    pairs = {
        name: [(verdict_label(r.reviewer_verdict), verdict_label(r.grader_verdict)) for r in item.reviews]
        for name, item in zip(names, pooled, strict=True)
    }
    runs = {name: [r.grading_run_id for r in item.reviews] for name, item in zip(names, pooled, strict=True)}
    agreements = agreement_report(pairs, min_reviews=min_reviews, clusters=runs)
    criteria = [
        CriterionFigures(agreement, item, _coverage_interval(item, min_reviews), min_reviews)
        for agreement, item in zip(agreements, pooled, strict=True)
    ]
    provenance = [r.provenance for r in records if r.provenance]
    lines = [(c.name, c.pooled.reviews, c.agreement) for c in criteria]
    return Report(
        criteria=criteria,
        reviewing=reviewing_figures(reviews, lines, min_reviews=min_reviews),
        correlated=_correlated(evaluations),
        reviews=len({(r.reviewer, r.grading_run_id, r.iteration) for r in reviews}),
        reviewers=len({r.reviewer for r in reviews}),
        days=days,
        min_reviews=min_reviews,
        versions=tuple(dict.fromkeys(p["rubric_version"] for p in provenance)),
        models=tuple(dict.fromkeys(p["grader_model"] for p in provenance)),
    )


def _line_names(pooled: Sequence[PooledCriterion]) -> list[str]:
    """Each pooled criterion's name on its line: its own, with its kind when a name is used for a
    pass/fail criterion and a scored dimension, the grader model when there are several, and where
    its figures start when its text changed (so that no two lines read alike)."""
    kinds = Counter(name for _, name in {(p.key.kind, normalize_name(p.name)) for p in pooled})
    models = {p.key.grader_model for p in pooled}
    names = []
    for item in pooled:
        name = item.name
        if kinds[normalize_name(name)] > 1:
            name += f" ({SCORED_KIND if item.key.kind == 'scored' else LIST_KIND})"
        if len(models) > 1:
            name += f" · grader {item.key.grader_model}"
        if item.since is not None:
            name += f" · since {item.since} ({item.change})"
        names.append(name)
    return names


def _coverage_interval(item: PooledCriterion, min_reviews: int) -> Interval | None:
    if item.graded < min_reviews:
        return None
    return share_interval([(run.judged, run.total) for run in item.coverage.values()])


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
    trust = await load_trust(store, workspace, channel, since, records)

    def build() -> Report:
        report = build_report(reviews, [r.evaluation for r in records], days=days, records=records)
        return replace(
            report,
            coverage=coverage(r.evaluation for r in records),
            waiting=tuple(waiting_for_people(records, reviews)),
            satisfaction=satisfaction,
            trust=trust,
        )

    return await asyncio.to_thread(build)


def period_start(days: int | None) -> datetime | None:
    """When a report over the last ``days`` days begins; None for all time."""
    return datetime.now(UTC) - timedelta(days=days) if days is not None else None


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


def criterion_note(figures: CriterionFigures) -> str:
    """Why a criterion has no κ or is flagged ('' when its figures are fine)."""
    agreement = figures.agreement
    notes = []
    if agreement.flagged:
        notes.append(f"κ's interval under {KAPPA_TARGET}: rewrite its anchors")
    elif agreement.n:
        notes.append(agreement.note)
    if figures.low_coverage:
        notes.append(f"coverage under {COVERAGE_FLOOR:.0%}")
    return "; ".join(note for note in notes if note)


def _kind(figures: CriterionFigures) -> str:
    return SCORED_KIND if figures.pooled.key.kind == "scored" else LIST_KIND


def _coverage_figure(figures: CriterionFigures) -> str:
    """E.g. ``coverage 45% (30–61%) of 40`` or, under the minimum, ``judged 3 of 4``."""
    pooled = figures.pooled
    if figures.coverage_interval is None or figures.coverage is None:
        return f"judged {pooled.judged} of {pooled.graded}"
    interval = interval_words(figures.coverage_interval, percent=True)
    return f"coverage {percent_words(figures.coverage)} ({interval}) of {pooled.graded}"


def _agreement_figure(agreement: CriterionAgreement) -> str:
    """E.g. ``agree 88% (71–96%), baseline 60%``."""
    interval = agreement.agreement_interval
    shown = percent_words(agreement.percent_agreement)
    if interval is not None:
        shown += f" ({interval_words(interval, percent=True)})"
    return f"agree {shown}, baseline {percent_words(agreement.baseline)}"


def _kappa_figure(agreement: CriterionAgreement) -> str | None:
    """E.g. ``κ 0.72 (0.41–0.93)``; None when κ is not shown."""
    value = shown_kappa(agreement)
    if value is None:
        return None
    interval = agreement.kappa_interval
    return f"κ {kappa_words(value)}" + (f" ({interval_words(interval)})" if interval else "")


def _reviews_figure(agreement: CriterionAgreement) -> str:
    """E.g. ``24 reviews from 9 runs``."""
    return f"{plural(agreement.n, 'review')} from {plural(agreement.clusters, 'run')}"


# --- Slack -------------------------------------------------------------------------------------


def report_blocks(report: Report, *, channel: str) -> SlackMessage:
    """The report as one compact Block Kit message.

    Names are shortened and correlated pairs capped so even 30 criteria fit Slack's limits.
    """
    title = f"Grader agreement · {report.period}"
    blocks: list[Block] = [header_block(title)]
    if report.reviews:
        blocks.append(
            context_block(
                f"<#{channel}> · {report.summary()} · κ is measured once a criterion has "
                f"{report.min_reviews} reviews; {KAPPA_TARGET} is the bar, and a criterion is flagged "
                f"when κ's 95% interval lies under it or coverage is under {COVERAGE_FLOOR:.0%}"
            )
        )
        blocks.append(context_block(slack_name(_source_words(report), SOURCE_WORDS_MAX)))
        blocks += sections("\n".join(_slack_line(c) for c in report.criteria))
        blocks += reviewing_blocks(report.reviewing)
    else:
        blocks.append(
            section_block(
                f"No reviews in <#{channel}> ({report.period}) yet. Review the grader with *Agree* "
                "or *Disagree…* on its messages in a thread."
            )
        )
    if any(c.agreement.flagged for c in report.criteria):
        blocks.append(section_block(f"⚠️ {ANCHOR_ADVICE}"))
    if any(c.low_coverage for c in report.criteria):
        blocks.append(section_block(f"⚠️ {COVERAGE_ADVICE}"))
    if report.correlated:
        blocks.append(section_block(_slack_pairs(report.correlated)))
    if report.coverage is not None and report.coverage.total:
        blocks.append(context_block(_coverage_words(report.coverage)))
    if report.waiting:
        blocks.append(section_block(_slack_waiting(report.waiting)))
    blocks += trust_blocks(report.trust)
    blocks += satisfaction_blocks(report.satisfaction)
    if report.reviews:
        blocks.append(context_block(FIGURES_WORDS))
    return {"text": f"{title}: {_headline(report)}", "blocks": block_dicts(blocks)}


FIGURES_WORDS = (
    "Agreement: share of verdicts where reviewer and grader matched. Baseline: what always giving the "
    "reviewers' most common verdict would score. κ: agreement beyond chance (quadratic-weighted for 1–5 "
    "scores). Coverage: the grader's verdicts it judged rather than left to a person. In brackets: 95% "
    "intervals, resampling whole runs (a run's iterations are alike)."
)
"""How to read a criterion's figures, under every report."""

SOURCE_WORDS_MAX = 600
"""Longest line naming the rubric versions and grader models a report covers."""


def _headline(report: Report) -> str:
    """E.g. ``5 criteria, 1 flagged`` (the notification text)."""
    if not report.reviews:
        return "no reviews yet"
    flagged = len(report.flagged)
    text = plural(len(report.criteria), "criterion", "criteria")
    return text + (f", {flagged} flagged" if flagged else "")


def _slack_line(figures: CriterionFigures) -> str:
    """E.g. ``⚠️ *Tone* (1–5) — 28 reviews from 12 runs · agree 25% (10–40%), baseline 25% ·
    *κ 0.33 (0.05–0.52)* · coverage 90% (80–97%) of 40``."""
    agreement = figures.agreement
    kappa = _kappa_figure(agreement)
    if kappa is not None:
        mark = "⚠️" if figures.flagged else "✅"
        facts = [_reviews_figure(agreement), _agreement_figure(agreement), f"*{kappa}*"]
    elif not agreement.enough:
        mark = "⚠️" if figures.flagged else "⏳"
        facts = [f"_{agreement.note}_", _agreement_figure(agreement)] if agreement.n else ["_no reviews yet_"]
    else:
        mark = "⚠️" if figures.flagged else "➖"
        facts = [_reviews_figure(agreement), _agreement_figure(agreement), f"_{agreement.note}_"]
    if figures.pooled.graded:
        facts.append(_coverage_figure(figures) + (" ⚠️" if figures.low_coverage else ""))
    name = slack_name(figures.name)
    return f"{mark} *{name}* ({_kind(figures)}) — {' · '.join(facts)}"


def _source_words(report: Report) -> str:
    """The versions and models the window covers and, when several, what was pooled: e.g. ``Rubric v1,
    v2 · grader gpt-4o-mini. Each criterion pools the versions in which its text is unchanged, per
    grader model: Is polite v1–v2; Cites a source since v2 (text changed).``"""
    versions = ", ".join(report.versions) or UNKNOWN
    models = ", ".join(report.models) or UNKNOWN
    text = f"Rubric {versions} · grader {models}."
    if len(report.versions) < 2 and len(report.models) < 2:
        return text
    pooled = "; ".join(
        f"{c.pooled.name} {', '.join(c.pooled.versions)}" for c in report.criteria if c.pooled.since is None
    )
    return (
        f"{text} Each criterion pools the versions in which its text is unchanged, per grader model"
        + (f": {pooled}" if pooled else "")
        + "; one whose text changed starts afresh (“since …”)."
    )


def _coverage_words(found: Coverage) -> str:
    """E.g. ``Coverage: the grader judged 18 of 20 criteria (90%); 2 left to a person.``"""
    share = percent_words(found.share) if found.share is not None else "–"
    left = found.total - found.judged
    total = plural(found.total, "criterion", "criteria")
    text = f"Overall, the grader judged {found.judged} of {total} ({share})"
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
    """A link to the evaluation message in its thread."""
    return message_link(item.thread.channel, item.message_ts, item.thread.thread_ts)


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
    if report.reviews:
        lines += [_source_words(report), *_table(report), *reviewing_table(report.reviewing)]
    else:
        lines.append("No reviews yet.")
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
        names = ", ".join(c.name for c in report.flagged)
        lines += ["", f"Flagged: {names}"]
        lines += [ANCHOR_ADVICE] if any(c.agreement.flagged for c in report.flagged) else []
        lines += [COVERAGE_ADVICE] if any(c.low_coverage for c in report.flagged) else []
    if report.correlated:
        lines += [
            "",
            f"Dimension pairs whose grader scores correlate above {CORRELATION_THRESHOLD} ({MERGE_ADVICE}):",
        ]
        lines += [
            f"  {p.first} & {p.second}: r = {p.r:.2f} over {p.answers} answers" for p in report.correlated
        ]
    lines += trust_table(report.trust)
    lines += satisfaction_table(report.satisfaction)
    return "\n".join(lines)


def _table(report: Report) -> list[str]:
    """One aligned line per criterion under a header line, and a note on when κ is shown."""
    header = (
        "Criterion",
        "Kind",
        "n",
        "Runs",
        "Agree",
        "95% CI",
        "Baseline",
        "κ",
        "95% CI",
        "Coverage",
        "95% CI",
        "Flag",
    )
    rows = [_table_row(c) for c in report.criteria]
    lines = aligned_columns([header, *rows], numeric=set(range(2, 11)))
    lines.append(
        f"κ is shown once a criterion has {report.min_reviews} reviews; quadratic-weighted for 1–5 scores. "
        "Intervals: 95%, resampling whole runs."
    )
    return lines


def _table_row(figures: CriterionFigures) -> tuple[str, ...]:
    agreement = figures.agreement
    pooled = figures.pooled
    kappa = shown_kappa(agreement)
    return (
        clipped_name(figures.name, TABLE_NAME_MAX),
        _kind(figures),
        str(agreement.n),
        str(agreement.clusters),
        percent_words(agreement.percent_agreement),
        interval_words(agreement.agreement_interval, percent=True),
        percent_words(agreement.baseline),
        kappa_words(kappa),
        interval_words(agreement.kappa_interval if kappa is not None else None),
        f"{pooled.judged}/{pooled.graded}"
        + (f" {percent_words(figures.coverage)}" if figures.coverage_interval else ""),
        interval_words(figures.coverage_interval, percent=True),
        ("⚠ " if figures.flagged else "") + criterion_note(figures),
    )
