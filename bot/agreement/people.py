"""How far people agree with each other, beside the grader's agreement with them, and how reviews were given.

Where two people reviewed the same iteration (double review, `bot.review.modes`), their verdicts on a
criterion are a pair: the share on which they matched and κ over those pairs, with 95 % intervals
resampling whole runs as the grader's have, measure the ceiling any grader can be held to (no grader
agrees with people more than they agree with each other). Each criterion's line compares the grader
with it: *below* when the grader's whole agreement interval lies under the people's agreement, else
*within* (or *above*). Nothing is said under the minimum count. The report also says how many
reviews were one-click Agrees (which accept every verdict at once, so they lean towards the grader)
and how many were blind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from slack_sdk.models.blocks import Block

from bot.agreement.presentation import (
    TABLE_NAME_MAX,
    aligned_columns,
    clipped_name,
    interval_words,
    kappa_words,
    percent_words,
    shown_kappa,
    slack_name,
)
from bot.db.reviews import ReviewRow
from bot.review.verdicts import verdict_label
from bot.slack.blocks import context_block, plural, sections
from grading.agreement import CriterionAgreement, agreement_report

Comparison = Literal["below", "within", "above"]
"""Where the grader's agreement with people lies against the people's own: its whole interval under
it, around it, or over it."""

PEOPLE_WORDS = (
    "People's own agreement: where two people reviewed the same iteration, the share of criteria on "
    "which they gave the same verdict (κ beyond chance) — the ceiling any grader can be held to. "
    "Double review (`/rubric review double 0.2`) asks a second person for a share of iterations."
)
"""How to read the people's agreement, under its lines."""

COMPARISON_WORDS: dict[Comparison, str] = {
    "below": "grader below the people's own agreement",
    "within": "grader within the people's own agreement",
    "above": "grader above the people's own agreement",
}
"""How each comparison reads on a criterion's line."""


@dataclass(frozen=True)
class PeopleFigures:
    """One criterion's agreement between two people, and the grader's beside it."""

    criterion: str
    """As the report's line names it."""
    people: CriterionAgreement
    """Over the pairs of two people's verdicts on one iteration (κ's "human" is the first reviewer)."""
    grader: CriterionAgreement
    """The grader's agreement with the reviewers, as the report's line has it."""
    comparison: Comparison | None
    """Where the grader lies against the people; None until both have enough reviews."""

    @property
    def flagged(self) -> bool:
        """The grader's agreement lies below the people's own."""
        return self.comparison == "below"


@dataclass(frozen=True)
class Reviewing:
    """How the report's reviews were given, and the people's own agreement per criterion."""

    reviews: int
    """Reviews (one person's on one iteration)."""
    one_click: int
    """Of them, one-click Agrees."""
    blind: int
    """Of them, given in the blind form."""
    double_reviewed: int
    """Iterations two or more people reviewed."""
    people: list[PeopleFigures]
    """Per criterion with two people's verdicts on some iteration, in the report's order."""
    min_reviews: int
    """Pairs a criterion needs before the people's agreement on it is shown."""

    @property
    def flagged(self) -> list[PeopleFigures]:
        return [p for p in self.people if p.flagged]


def reviewing_figures(
    reviews: Sequence[ReviewRow],
    criteria: Sequence[tuple[str, Sequence[ReviewRow], CriterionAgreement]],
    *,
    min_reviews: int,
) -> Reviewing:
    """The figures over the report's ``reviews``; ``criteria``: each line's name, the reviews pooled
    on it (oldest first) and the grader's agreement."""
    given = {(r.reviewer, r.grading_run_id, r.iteration): r.via for r in reviews}
    iterations: dict[tuple[str, int], set[str]] = {}
    for row in reviews:
        iterations.setdefault((row.grading_run_id, row.iteration), set()).add(row.reviewer)
    pairs = {name: people_pairs(rows) for name, rows, _ in criteria}
    found = agreement_report(
        {name: [labels for _, labels in found] for name, found in pairs.items() if found},
        min_reviews=min_reviews,
        clusters={name: [run for run, _ in found] for name, found in pairs.items() if found},
    )
    graders = {name: grader for name, _, grader in criteria}
    return Reviewing(
        reviews=len(given),
        one_click=sum(via == "agree" for via in given.values()),
        blind=sum(via == "blind" for via in given.values()),
        double_reviewed=sum(len(people) > 1 for people in iterations.values()),
        people=[
            PeopleFigures(a.criterion, a, graders[a.criterion], compare(a, graders[a.criterion]))
            for a in found
        ],
        min_reviews=min_reviews,
    )


def compare(people: CriterionAgreement, grader: CriterionAgreement) -> Comparison | None:
    """Where the grader's agreement interval lies against the people's agreement (below: wholly
    under it); None until both have enough reviews for an interval."""
    ceiling, interval = people.percent_agreement, grader.agreement_interval
    if not people.enough or ceiling is None or interval is None:
        return None
    if interval[1] < ceiling:
        return "below"
    return "above" if interval[0] > ceiling else "within"


def people_pairs(rows: Sequence[ReviewRow]) -> list[tuple[str, tuple[bool | int, bool | int]]]:
    """Per iteration two people reviewed (``rows`` of one criterion, oldest first): its run and the
    first two people's verdicts on it. A third reviewer adds no pair: each iteration counts once."""
    first_two: dict[tuple[str, int], dict[str, ReviewRow]] = {}
    for row in rows:
        people = first_two.setdefault((row.grading_run_id, row.iteration), {})
        if len(people) < 2:
            people.setdefault(row.reviewer, row)
    return [
        (run, (verdict_label(a.reviewer_verdict), verdict_label(b.reviewer_verdict)))
        for (run, _), people in first_two.items()
        if len(people) == 2
        for a, b in [tuple(people.values())]
    ]


def _people_figure(agreement: CriterionAgreement, min_reviews: int) -> str:
    """E.g. ``people agree 90% (75–100%) on 12 double-reviewed verdicts from 12 runs, κ 0.78 (0.50–1.00)``."""
    count = f"{plural(agreement.n, 'double-reviewed verdict')} from {plural(agreement.clusters, 'run')}"
    if not agreement.enough:
        return f"{count} so far; people's agreement is shown from {min_reviews}"
    shown = f"people agree {percent_words(agreement.percent_agreement)}"
    shown += f" ({interval_words(agreement.agreement_interval, percent=True)}) on {count}"
    kappa = shown_kappa(agreement)
    if kappa is not None:
        shown += f", κ {kappa_words(kappa)} ({interval_words(agreement.kappa_interval)})"
    return shown


def _grader_figure(figures: PeopleFigures) -> str:
    """E.g. ``grader 88% (80–95%): grader within the people's own agreement``."""
    grader = figures.grader
    shown = f"grader {percent_words(grader.percent_agreement)}"
    if grader.agreement_interval is not None:
        shown += f" ({interval_words(grader.agreement_interval, percent=True)})"
    comparison = figures.comparison
    return shown + (f": {COMPARISON_WORDS[comparison]}" if comparison else "")


def reviewing_blocks(reviewing: Reviewing | None) -> list[Block]:
    """The report's lines on the people's own agreement, and how the reviews were given."""
    if reviewing is None or not reviewing.reviews:
        return []
    blocks: list[Block] = [context_block(_given_words(reviewing))]
    if not reviewing.people:
        return blocks
    lines = ["👥 *People's own agreement* (iterations two people reviewed), beside the grader's:"]
    for figures in reviewing.people:
        mark = "⚠️ " if figures.flagged else ""
        people = _people_figure(figures.people, reviewing.min_reviews)
        lines.append(f"• {mark}*{slack_name(figures.criterion)}* — {people} · {_grader_figure(figures)}")
    return [*blocks, *sections("\n".join(lines)), context_block(PEOPLE_WORDS)]


def _given_words(reviewing: Reviewing) -> str:
    """E.g. ``Of 40 reviews, 25 (62%) were one-click Agrees (…) and 5 blind; 6 iterations reviewed by
    two people.``"""
    one_click = f"{reviewing.one_click} ({percent_words(reviewing.one_click / reviewing.reviews)})"
    return (
        f"Of {plural(reviewing.reviews, 'review')}, {one_click} were one-click Agrees (each accepts every "
        f"verdict at once, so it leans towards the grader) and {reviewing.blind} blind; "
        f"{plural(reviewing.double_reviewed, 'iteration')} reviewed by two people."
    )


def reviewing_table(reviewing: Reviewing | None) -> list[str]:
    """The terminal's lines: how the reviews were given, then the people's agreement per criterion."""
    if reviewing is None or not reviewing.reviews:
        return []
    lines = ["", _given_words(reviewing)]
    if not reviewing.people:
        return lines
    header = (
        "People agree on",
        "n",
        "Runs",
        "Agree",
        "95% CI",
        "κ",
        "95% CI",
        "Grader",
        "95% CI",
        "Compared",
    )
    rows = [_table_row(figures) for figures in reviewing.people]
    lines += ["", *aligned_columns([header, *rows], numeric=set(range(1, 9)))]
    if reviewing.flagged:
        lines.append(
            "Grader below the people's own agreement: " + ", ".join(p.criterion for p in reviewing.flagged)
        )
    return lines


def _table_row(figures: PeopleFigures) -> tuple[str, ...]:
    people, grader = figures.people, figures.grader
    enough = people.enough
    kappa = shown_kappa(people)
    comparison = figures.comparison
    return (
        clipped_name(figures.criterion, TABLE_NAME_MAX),
        str(people.n),
        str(people.clusters),
        percent_words(people.percent_agreement if enough else None),
        interval_words(people.agreement_interval, percent=True),
        kappa_words(kappa),
        interval_words(people.kappa_interval if kappa is not None else None),
        percent_words(grader.percent_agreement),
        interval_words(grader.agreement_interval, percent=True),
        ("⚠ " if figures.flagged else "")
        + (COMPARISON_WORDS[comparison] if comparison else "too few to compare"),
    )
