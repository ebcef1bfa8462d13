"""How a replayed grader agrees with the team, next to the grader it is compared with.

Per criterion and overall: both graders' agreement and κ with the team's verdicts on the same
cases — by the rules of the agreement report (:mod:`bot.agreement.report`: one pair per reviewer's
verdict, quadratic κ for 1–5 scores, unweighted for pass/fail, κ shown from
:data:`~grading.agreement.MIN_REVIEWS_FOR_KAPPA` verdicts) — with a bootstrap 95% interval on
each difference, and the verdicts that flipped. Shown three ways: a terminal table (or JSON), a
PNG chart, and a Block Kit message.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import IO, TYPE_CHECKING, Any, Literal

from langchain_core.messages.ai import UsageMetadata

from bot.agreement import charts
from bot.agreement import presentation as kit
from bot.agreement.pooling import rows_by_criterion
from bot.agreement.replay import Case, Regrade, Skipped, describe
from bot.rendering.results import usage_words
from bot.review.verdicts import is_judged, verdict_label
from bot.slack.blocks import block_dicts, context_block, header_block, plural, section_block, sections
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import escape
from grading.agreement import (
    KAPPA_TARGET,
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    agreement_report,
    difference_intervals,
)
from grading.rubric import normalize_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Comparison",
    "CriterionComparison",
    "Flip",
    "chart_figure",
    "chart_png",
    "compare",
    "comparison_blocks",
    "comparison_json",
    "comparison_table",
    "render_chart",
]

Effect = Literal["fixed", "broken", "changed"]
"""What a flipped verdict did: now matches every reviewer, no longer matches them, or neither
(a score moved but not onto the team's, or the reviewers disagree among themselves)."""

EFFECT_WORDS: Mapping[Effect, str] = {
    "fixed": "now matches the team",
    "broken": "no longer matches the team",
    "changed": "still not the team's verdict",
}
"""How a flip's effect reads."""

ALL_CRITERIA = "All criteria"
"""Name of the overall row when every criterion has one kind of verdict."""

ALL_OF_KIND = {kit.LIST_KIND: "All pass/fail criteria", kit.SCORED_KIND: "All 1–5 dimensions"}
"""Names of the overall rows when pass/fail criteria and scored dimensions are mixed: κ cannot
pool the two kinds of verdict."""

SLACK_FLIPS_MAX = 10
"""Most flipped verdicts listed in Slack; the rest are counted."""

SIDE_COLOURS = ("#b0bec5", "#1565c0")
"""Bar colours of the grader compared with (before) and the replayed one (after)."""

Triple = tuple[bool | int, bool | int, bool | int]
"""(team, before, after) labels of one reviewer's verdict on one criterion of one case."""


@dataclass(frozen=True)
class CriterionComparison:
    """Both graders' agreement with the team on one criterion (or overall), on the same verdicts."""

    criterion: str
    before: CriterionAgreement
    after: CriterionAgreement
    agreement_interval: tuple[float, float] | None
    """95% interval on after − before agreement; None until κ would be shown."""
    kappa_interval: tuple[float, float] | None
    """95% interval on after − before κ; None while κ is not shown on either side."""

    @property
    def kind(self) -> str:
        return kit.criterion_kind(self.before)

    @property
    def n(self) -> int:
        return self.before.n

    @property
    def agreement_difference(self) -> float | None:
        was, now = self.before.percent_agreement, self.after.percent_agreement
        return None if was is None or now is None else now - was

    @property
    def kappa_difference(self) -> float | None:
        was, now = kit.shown_kappa(self.before), kit.shown_kappa(self.after)
        return None if was is None or now is None else now - was


@dataclass(frozen=True)
class Flip:
    """A criterion of a case on which the replayed grader's verdict differs from the other's."""

    record_label: str
    grading_run_id: str
    iteration: int
    criterion: str
    before: str
    after: str
    team: tuple[str, ...]

    @property
    def effect(self) -> Effect:
        if all(verdict == self.after for verdict in self.team):
            return "fixed"
        if all(verdict == self.before for verdict in self.team):
            return "broken"
        return "changed"


@dataclass(frozen=True)
class Comparison:
    """A replay's outcome; build it with :func:`compare`."""

    before_label: str
    after_label: str
    criteria: list[CriterionComparison]
    overall: list[CriterionComparison]
    flips: list[Flip]
    compared: int
    """Cases both graders gave verdicts on."""
    planned: int
    """Cases there were to replay (more than were graded when the replay was interrupted)."""
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[Regrade] = field(default_factory=list)
    """Cases the replayed grader gave no verdicts on (grader errors), left out of the numbers."""
    usage: UsageMetadata | None = None
    interrupted: bool = False
    provenance: tuple[str, str] = ("", "")
    """What produced each side's verdicts (before, after): rubric versions and grader models, with
    how many cases each (see `bot.provenance.grouping.provenance_counts`); '' when not known."""
    stopped_at_budget: bool = False
    """A day's budget refused the replay's next grader call: it stopped with what it had."""
    left_out: int = 0
    """Reviewed cases beyond the replay's cap on cases (the oldest), not replayed."""

    def summary(self) -> str:
        """E.g. ``12 cases compared · 1 skipped · 2 failed``."""
        parts = [plural(self.compared, "case") + " compared"]
        if self.stopped_at_budget:
            graded = self.compared + len(self.failed)
            parts.append(f"stopped at the budget after {graded:,} of {self.planned:,} cases")
        elif self.interrupted:
            parts.append(f"stopped early: {self.compared + len(self.failed)} of {self.planned} graded")
        if self.left_out:
            parts.append(f"the latest {self.planned:,} of {self.planned + self.left_out:,} reviewed")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.failed:
            parts.append(f"{len(self.failed)} not graded (grader error)")
        return " · ".join(parts)


def compare(
    cases: Iterable[Case],
    before: Mapping[tuple[str, int], Mapping[str, str]],
    after: Mapping[tuple[str, int], Mapping[str, str]],
    *,
    labels: tuple[str, str],
    planned: int,
    skipped: Sequence[Skipped] = (),
    failed: Sequence[Regrade] = (),
    usage: UsageMetadata | None = None,
    interrupted: bool = False,
    provenance: tuple[str, str] = ("", ""),
    stopped_at_budget: bool = False,
    left_out: int = 0,
) -> Comparison:
    """Compare two graders' verdicts (per case key, criterion name → verdict) with the team's.

    Only cases and criteria both graders judged are counted, so both sides stand on the same
    reviewed verdicts. ``labels`` names the graders (before, after).
    """
    judged = [case for case in cases if before.get(case.key) and after.get(case.key)]
    triples: dict[str, list[tuple[tuple[str, int], Triple]]] = {}
    flips: list[Flip] = []
    rows = [row for case in judged for row in case.reviews]
    for name, criterion_rows in rows_by_criterion(rows).items():
        for row in criterion_rows:
            key = (row.grading_run_id, row.iteration)
            was, now = _verdict(before[key], row.criterion), _verdict(after[key], row.criterion)
            if was is None or now is None or not (is_judged(was) and is_judged(now)):
                continue
            labels_of = (verdict_label(row.reviewer_verdict), verdict_label(was), verdict_label(now))
            triples.setdefault(name, []).append((key, labels_of))
    for case in judged:
        flips += _flips(case, before[case.key], after[case.key])
    return Comparison(
        before_label=labels[0],
        after_label=labels[1],
        criteria=[_criterion(name, found) for name, found in triples.items()],
        overall=_overall(triples),
        flips=flips,
        compared=len(judged),
        planned=planned,
        skipped=list(skipped),
        failed=list(failed),
        usage=usage,
        interrupted=interrupted,
        provenance=provenance,
        stopped_at_budget=stopped_at_budget,
        left_out=left_out,
    )


def _verdict(verdicts: Mapping[str, str], criterion: str) -> str | None:
    wanted = normalize_name(criterion)
    return next((v for name, v in verdicts.items() if normalize_name(name) == wanted), None)


def _criterion(name: str, found: Sequence[tuple[tuple[str, int], Triple]]) -> CriterionComparison:
    """Both sides' agreement on the triples, and the intervals once there are enough of them."""
    (was,) = agreement_report({name: [(team, b) for _, (team, b, _) in found]})
    (now,) = agreement_report({name: [(team, a) for _, (team, _, a) in found]})
    groups: dict[tuple[str, int], list[Triple]] = {}
    for key, triple in found:
        groups.setdefault(key, []).append(triple)
    intervals = difference_intervals(list(groups.values())) if was.enough else None
    both_kappas = was.kappa is not None and now.kappa is not None
    return CriterionComparison(
        criterion=name,
        before=was,
        after=now,
        agreement_interval=intervals.agreement if intervals else None,
        kappa_interval=intervals.kappa if intervals and both_kappas else None,
    )


def _overall(triples: Mapping[str, Sequence[tuple[tuple[str, int], Triple]]]) -> list[CriterionComparison]:
    """All verdicts pooled, one row per kind of verdict (κ cannot mix pass/fail and scores).

    A kind with a single criterion gets no pooled row: its criterion's row already is that.
    """
    pooled: dict[str, list[list[tuple[tuple[str, int], Triple]]]] = {}
    for found in triples.values():
        kind = kit.LIST_KIND if isinstance(found[0][1][0], bool) else kit.SCORED_KIND
        pooled.setdefault(kind, []).append(list(found))
    if len(pooled) == 1:
        (criteria,) = pooled.values()
        return [_criterion(ALL_CRITERIA, list(itertools.chain(*criteria)))] if len(criteria) > 1 else []
    return [
        _criterion(ALL_OF_KIND[kind], list(itertools.chain(*criteria)))
        for kind, criteria in pooled.items()
        if len(criteria) > 1
    ]


def _flips(case: Case, before: Mapping[str, str], after: Mapping[str, str]) -> list[Flip]:
    team: dict[str, list[str]] = {}
    for row in case.reviews:
        team.setdefault(row.criterion, []).append(row.reviewer_verdict)
    flips = []
    for criterion, verdicts in team.items():
        was, now = _verdict(before, criterion), _verdict(after, criterion)
        if was is not None and now is not None and was != now:
            flips.append(
                Flip(
                    describe(case.record),
                    case.record.grading_run_id,
                    case.record.iteration,
                    criterion,
                    was,
                    now,
                    tuple(verdicts),
                )
            )
    return flips


# --- Shared wording ---------------------------------------------------------------------------


def _points(value: float) -> str:
    return f"{value * 100:+.0f} pts"


def _change(difference: float | None, interval: tuple[float, float] | None, *, percent: bool) -> str:
    """E.g. ``+33 pts [+8, +58]`` or ``+0.82 [+0.41, +1.00]``; ``—`` when undefined."""
    if difference is None:
        return "—"
    words = _points if percent else (lambda v: f"{v:+.2f}")
    text = words(difference)
    if interval is None:
        return text
    low, high = interval
    bounds = (f"{low * 100:+.0f}", f"{high * 100:+.0f}") if percent else (f"{low:+.2f}", f"{high:+.2f}")
    return f"{text} [{bounds[0]}, {bounds[1]}]"


def _flip_words(flip: Flip) -> str:
    team = "/".join(flip.team)
    return f"{flip.criterion}: {flip.before} → {flip.after} (team: {team}; {EFFECT_WORDS[flip.effect]})"


def _effect_counts(flips: Sequence[Flip]) -> str:
    fixed = sum(f.effect == "fixed" for f in flips)
    broken = sum(f.effect == "broken" for f in flips)
    return f"{fixed} now match the team, {broken} no longer do"


# --- Terminal ---------------------------------------------------------------------------------


def comparison_table(comparison: Comparison) -> str:
    """The comparison as plain text: a table, the flipped verdicts and the token count."""
    lines = [
        f"Replay: {comparison.after_label} vs {comparison.before_label}",
        comparison.summary(),
        *(
            f"{label} verdicts from: {found}"
            for label, found in zip(
                (comparison.before_label, comparison.after_label), comparison.provenance, strict=True
            )
            if found
        ),
        "",
    ]
    rows = [*comparison.criteria, *comparison.overall]
    if rows:
        lines += _table(rows)
    else:
        lines.append("No reviewed verdicts to compare.")
    if comparison.flips:
        lines += ["", f"Flipped verdicts ({len(comparison.flips)}: {_effect_counts(comparison.flips)}):"]
        lines += [f"  {flip.record_label} · {_flip_words(flip)}" for flip in comparison.flips]
    if comparison.skipped:
        lines += ["", "Skipped:"]
        lines += [f"  {describe(s.record)}: {s.reason}" for s in comparison.skipped]
    if comparison.failed:
        lines += ["", "Not graded by the replayed grader:"]
        lines += [f"  {describe(r.case.record)}: {r.error}" for r in comparison.failed]
    if comparison.usage is not None:
        lines += ["", f"Tokens: {usage_words(comparison.usage)}"]
    return "\n".join(lines)


def _table(rows: Sequence[CriterionComparison]) -> list[str]:
    header = ("Criterion", "Kind", "n", "Agree", "→", "Δ agree [95% CI]", "κ", "→", "Δ κ [95% CI]")
    cells = [
        (
            kit.clipped_name(row.criterion, kit.TABLE_NAME_MAX),
            row.kind,
            str(row.n),
            kit.percent_words(row.before.percent_agreement),
            kit.percent_words(row.after.percent_agreement),
            _change(row.agreement_difference, row.agreement_interval, percent=True),
            kit.kappa_words(kit.shown_kappa(row.before)),
            kit.kappa_words(kit.shown_kappa(row.after)),
            _change(row.kappa_difference, row.kappa_interval, percent=False),
        )
        for row in rows
    ]
    lines = kit.aligned_columns([header, *cells], numeric={2, 3, 4, 5, 6, 7, 8})
    lines.append(
        f"Agree and κ: before → after. κ and the intervals are shown once a criterion has "
        f"{MIN_REVIEWS_FOR_KAPPA} reviewed verdicts; κ is quadratic-weighted for 1–5 scores."
    )
    return lines


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain data for scripts (agreements as shares, κ as numbers)."""
    return {
        "before": comparison.before_label,
        "after": comparison.after_label,
        "cases": {
            "compared": comparison.compared,
            "planned": comparison.planned,
            "skipped": [
                {**_case_json(s.record.grading_run_id, s.record.iteration), "reason": s.reason}
                for s in comparison.skipped
            ],
            "failed": [{**_case_json(*r.case.key), "reason": r.error} for r in comparison.failed],
        },
        "interrupted": comparison.interrupted,
        "provenance": {"before": comparison.provenance[0], "after": comparison.provenance[1]},
        "criteria": [_row_json(row) for row in comparison.criteria],
        "overall": [_row_json(row) for row in comparison.overall],
        "flipped": [
            {
                **_case_json(flip.grading_run_id, flip.iteration),
                "case": flip.record_label,
                "criterion": flip.criterion,
                "before": flip.before,
                "after": flip.after,
                "team": list(flip.team),
                "effect": flip.effect,
            }
            for flip in comparison.flips
        ],
        "tokens": dict(comparison.usage) if comparison.usage is not None else None,
    }


def _case_json(grading_run_id: str, iteration: int) -> dict[str, Any]:
    return {"grading_run_id": grading_run_id, "iteration": iteration}


def _row_json(row: CriterionComparison) -> dict[str, Any]:
    def side(agreement: CriterionAgreement) -> dict[str, Any]:
        return {
            "agreement": agreement.percent_agreement,
            "kappa": kit.shown_kappa(agreement),
            "majority_baseline": agreement.baseline,
        }

    return {
        "criterion": row.criterion,
        "kind": row.kind,
        "n": row.n,
        "before": side(row.before),
        "after": side(row.after),
        "difference": {
            "agreement": row.agreement_difference,
            "agreement_interval": list(row.agreement_interval) if row.agreement_interval else None,
            "kappa": row.kappa_difference,
            "kappa_interval": list(row.kappa_interval) if row.kappa_interval else None,
        },
        "note": row.before.note,
    }


# --- Slack ------------------------------------------------------------------------------------


def comparison_blocks(comparison: Comparison, *, title: str, asked_by: str, channel: str) -> SlackMessage:
    """The comparison as one Block Kit message: ``{"text", "blocks"}``, naming who asked."""
    blocks = [
        header_block(title),
        context_block(
            f"Asked by <@{asked_by}> · <#{channel}> · {comparison.after_label} vs "
            f"{comparison.before_label} · {comparison.summary()}"
        ),
    ]
    rows = [*comparison.criteria, *comparison.overall]
    if rows:
        blocks += sections("\n".join(map(_slack_line, rows)))
    else:
        blocks.append(section_block("No reviewed verdicts could be replayed."))
    if comparison.flips:
        blocks.append(section_block(_slack_flips(comparison.flips)))
    blocks.append(
        context_block(
            f"Agreement: share of reviewed verdicts the grader matched. κ: agreement beyond chance "
            f"(quadratic-weighted for 1–5 scores), shown from {MIN_REVIEWS_FOR_KAPPA} verdicts, "
            f"with {KAPPA_TARGET} the bar. Brackets: bootstrap 95% interval on the change."
        )
    )
    return {"text": f"{title}: {_headline(comparison)}", "blocks": block_dicts(blocks)}


def _headline(comparison: Comparison) -> str:
    rows = comparison.overall or comparison.criteria
    overall = rows[0] if rows else None
    if overall is None or overall.agreement_difference is None:
        return "no reviewed verdicts to compare"
    return (
        f"agreement {kit.percent_words(overall.before.percent_agreement)} → "
        f"{kit.percent_words(overall.after.percent_agreement)} over {plural(comparison.compared, 'case')}"
    )


def _slack_line(row: CriterionComparison) -> str:
    """E.g. ``*Is polite* (pass/fail) — 12 verdicts · agree 58% → 92% (+33 pts [+8, +58]) · κ …``."""
    facts = [
        plural(row.n, "verdict"),
        f"agree {kit.percent_words(row.before.percent_agreement)} → "
        f"{kit.percent_words(row.after.percent_agreement)} "
        f"({_change(row.agreement_difference, row.agreement_interval, percent=True)})",
    ]
    if row.kappa_difference is not None:
        facts.append(
            f"κ {kit.kappa_words(kit.shown_kappa(row.before))} → "
            f"*{kit.kappa_words(kit.shown_kappa(row.after))}* "
            f"({_change(row.kappa_difference, row.kappa_interval, percent=False)})"
        )
    else:
        facts.append(f"_{row.before.note or 'κ undefined'}_")
    name = kit.slack_name(row.criterion)
    return f"*{name}* ({row.kind}) — {' · '.join(facts)}"


def _slack_flips(flips: Sequence[Flip]) -> str:
    lines = [f"*Flipped verdicts ({len(flips)})* — {_effect_counts(flips)}:"]
    lines += [
        f"• {escape(flip.record_label)} · {kit.slack_name(_flip_words(flip), kit.SLACK_NAME_MAX * 2)}"
        for flip in flips[:SLACK_FLIPS_MAX]
    ]
    if len(flips) > SLACK_FLIPS_MAX:
        lines.append(f"…and {plural(len(flips) - SLACK_FLIPS_MAX, 'more')}")
    return "\n".join(lines)


# --- Chart ------------------------------------------------------------------------------------


def chart_figure(comparison: Comparison) -> Figure:
    """The comparison as a figure: κ and agreement per criterion (and overall), both graders side by side.

    A κ that is not shown (too few verdicts, one label only) is a hatched band, never a bar at 0.
    """
    rows = [*comparison.criteria, *comparison.overall]
    labels = (comparison.before_label, comparison.after_label)

    def draw(kappa_axes: Any, agreement_axes: Any) -> None:
        kappas = [(kit.shown_kappa(r.before), kit.shown_kappa(r.after)) for r in rows]
        _draw_pairs(kappa_axes, rows, kappas, labels)
        charts.kappa_target_line(kappa_axes)
        kappa_axes.set_title("Cohen's κ with the team")
        kappa_axes.set_xlim(min([-0.2, *[v - 0.2 for r in rows for v in _kappas(r)]]), 1.15)
        pairs = [(r.before.percent_agreement, r.after.percent_agreement) for r in rows]
        _draw_pairs(agreement_axes, rows, pairs, labels, percent=True)
        agreement_axes.set_title("Share of the team's verdicts matched")
        agreement_axes.set_xlim(0, 1.15)

    return charts.two_panel_figure(
        title=f"Replay: {comparison.after_label} vs {comparison.before_label} — {comparison.summary()}",
        title_size=12,
        rows=len(rows),
        row_height=0.6,
        empty="No reviewed verdicts to compare",
        draw=draw,
    )


def render_chart(comparison: Comparison, path_or_buffer: str | PathLike[str] | IO[bytes]) -> None:
    """Write the comparison's chart (:func:`chart_figure`) as a PNG."""
    charts.write_png(chart_figure(comparison), path_or_buffer)


def chart_png(comparison: Comparison) -> bytes:
    """The comparison's chart as PNG bytes, e.g. for an upload."""
    return charts.png_bytes(chart_figure(comparison))


def _kappas(row: CriterionComparison) -> list[float]:
    return [v for v in (kit.shown_kappa(row.before), kit.shown_kappa(row.after)) if v is not None]


def _draw_pairs(
    axes: Any,
    rows: Sequence[CriterionComparison],
    values: Sequence[tuple[float | None, float | None]],
    labels: tuple[str, str],
    *,
    percent: bool = False,
) -> None:
    """Two bars per row (before above after); a value that is not shown is a hatched band."""
    fmt = (lambda v: f"{v:.0%}") if percent else (lambda v: f"{v:.2f}")
    for index, (row, pair) in enumerate(zip(rows, values, strict=True)):
        for side, (value, label, colour) in enumerate(zip(pair, labels, SIDE_COLOURS, strict=True)):
            y = index + (side - 0.5) * 0.4
            if value is None:
                note = (row.before, row.after)[side].note or "undefined"
                charts.no_value_band(axes, y, note, left=0, right=1, height=0.36)
                continue
            bars = axes.barh(y, value, height=0.36, color=colour, label=label)
            axes.bar_label(bars, fmt=fmt, padding=3, fontsize=8)
    charts.criterion_axis(axes, [r.criterion for r in rows])
