"""The shadow grader's report: per shadow model and criterion, its agreement with people beside the
live grader's on the same reviewed iterations, and how often it flips the live grader's verdict.

Agreement is with trusted reviews only (as calibration trusts them, `bot.agreement.trust_figures`),
one pair per reviewer's latest verdict, counted where both graders judged the criterion, so both
sides stand on the same verdicts: percent agreement and κ with cluster-bootstrap 95 % intervals by
run, from `MIN_REVIEWS_FOR_KAPPA` reviews (`grading.agreement_report`). A flip is a shadowed
iteration where both graders judged the criterion and their verdicts differ; its share of those
iterations is shown with a cluster-bootstrap 95 % interval by run, from `MIN_REVIEWS_FOR_KAPPA`
iterations. Under the minimum, only the count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.agreement.presentation import interval_words, kappa_words, percent_words, shown_kappa, slack_name
from bot.agreement.report import period_start
from bot.agreement.trust_figures import trusted_reviews
from bot.db.reviews import ReviewRow
from bot.db.shadow import ShadowTally, ShadowVerdictRow
from bot.db.store import Store
from bot.limits.prices import dollars
from bot.review.verdicts import is_judged, verdict_label
from bot.slack.blocks import block_dicts, context_block, plural, section_block
from bot.slack.messages import BlockJson
from bot.vocabulary.workspace import Workspace
from grading.agreement import (
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    Interval,
    agreement_report,
    share_interval,
)
from grading.rubric import normalize_name

Key = tuple[str, int, str]
"""A criterion of a graded iteration: grading run id, iteration, normalized criterion name."""


@dataclass(frozen=True)
class ShadowCriterion:
    """One criterion as one shadow model graded it: agreement with people beside the live grader's,
    and its flips against the live grader."""

    model: str
    """The shadow model as it answered."""
    criterion: str
    shadow: CriterionAgreement | None
    """The shadow grader's agreement with trusted reviews; None when none reviewed its iterations."""
    live: CriterionAgreement | None
    """The live grader's, on the same reviewed verdicts."""
    compared: int
    """Shadowed iterations where both graders judged the criterion."""
    flips: int
    """Of them, those where the verdicts differ."""
    flip_interval: Interval | None
    """95 % interval on the flip share (by run); None under `MIN_REVIEWS_FOR_KAPPA` iterations."""

    @property
    def flip_share(self) -> float | None:
        return self.flips / self.compared if self.compared >= MIN_REVIEWS_FOR_KAPPA else None


@dataclass(frozen=True)
class ShadowFigures:
    """The shadow grades of a channel (or of every one) over a period, and their criteria's figures."""

    tally: ShadowTally
    criteria: list[ShadowCriterion] = field(default_factory=list)


async def load_shadow(
    store: Store, *, workspace: Workspace | None, channel: str | None, days: int | None
) -> ShadowFigures:
    """The shadow figures of the channel (None: every one) over the last `days` (None: all time)."""
    since = period_start(days)
    rows = await store.shadow_verdicts_in_channel(workspace, channel, since)
    tally = await store.shadow_tally(workspace, channel, since)
    if not rows:
        return ShadowFigures(tally)
    reviews = trusted_reviews(await store.reviews_in_channel(workspace, channel, undropped_only=True))
    return ShadowFigures(tally, await asyncio.to_thread(shadow_criteria, rows, reviews))


def shadow_criteria(rows: Sequence[ShadowVerdictRow], reviews: Sequence[ReviewRow]) -> list[ShadowCriterion]:
    """Per shadow model and criterion (by normalized name, in order of first grade), its figures."""
    latest: dict[Key, dict[str, ReviewRow]] = {}
    for review in reviews:  # oldest first: a reviewer's later verdict replaces their earlier one
        key = (review.grading_run_id, review.iteration, normalize_name(review.criterion))
        latest.setdefault(key, {})[review.reviewer] = review
    groups: dict[tuple[str, str], list[ShadowVerdictRow]] = {}
    for row in rows:
        groups.setdefault((row.model, normalize_name(row.criterion)), []).append(row)
    return [_criterion(found, latest) for found in groups.values()]


def _criterion(rows: Sequence[ShadowVerdictRow], latest: dict[Key, dict[str, ReviewRow]]) -> ShadowCriterion:
    name = rows[-1].criterion
    judged = [row for row in rows if row.live_verdict is not None and _judged(row.verdict, row.live_verdict)]
    by_run: dict[str, list[int]] = {}
    shadow_pairs: list[Pair] = []
    live_pairs: list[Pair] = []
    clusters: list[str] = []
    for row in judged:
        counts = by_run.setdefault(row.grading_run_id, [0, 0])
        counts[0] += row.verdict != row.live_verdict
        counts[1] += 1
        reviewed = latest.get((row.grading_run_id, row.iteration, normalize_name(row.criterion)), {})
        for review in reviewed.values():
            if not is_judged(review.reviewer_verdict):
                continue
            person = verdict_label(review.reviewer_verdict)
            shadow_pairs.append((person, verdict_label(row.verdict)))
            live_pairs.append((person, verdict_label(str(row.live_verdict))))
            clusters.append(row.grading_run_id)
    flips = sum(found for found, _ in by_run.values())
    compared = len(judged)
    return ShadowCriterion(
        model=rows[-1].model,
        criterion=name,
        shadow=_agreement(name, shadow_pairs, clusters),
        live=_agreement(name, live_pairs, clusters),
        compared=compared,
        flips=flips,
        flip_interval=share_interval([(f, t) for f, t in by_run.values()])
        if compared >= MIN_REVIEWS_FOR_KAPPA
        else None,
    )


def _judged(*verdicts: str) -> bool:
    return all(is_judged(verdict) for verdict in verdicts)


Pair = tuple[bool | int, bool | int]
"""A person's verdict and a grader's on one criterion of one iteration, as agreement labels."""


def _agreement(name: str, pairs: list[Pair], clusters: list[str]) -> CriterionAgreement | None:
    if not pairs:
        return None
    (found,) = agreement_report({name: pairs}, clusters={name: clusters})
    return found


# --- Words -------------------------------------------------------------------------------------


def _side_words(agreement: CriterionAgreement | None) -> str:
    """E.g. ``88% (71–96%), κ 0.72 (0.41–0.93)``, or ``—`` under the minimum."""
    if agreement is None or not agreement.enough:
        return "—"
    interval = interval_words(agreement.agreement_interval, percent=True)
    shown = f"{percent_words(agreement.percent_agreement)} ({interval})"
    kappa = shown_kappa(agreement)
    if kappa is not None:
        shown += f", κ {kappa_words(kappa)}"
        if agreement.kappa_interval is not None:
            shown += f" ({interval_words(agreement.kappa_interval)})"
    return shown


def agreement_words(criterion: ShadowCriterion) -> str:
    """The shadow grader's agreement with people beside the live grader's, with its count."""
    shadow, live = criterion.shadow, criterion.live
    if shadow is None or live is None:
        return "with people: no trusted review of its iterations yet"
    reviews = f"{plural(shadow.n, 'trusted review')} from {plural(shadow.clusters, 'run')}"
    if not shadow.enough:
        return f"with people: {reviews}: too few to read (under {MIN_REVIEWS_FOR_KAPPA})"
    return f"with people: shadow {_side_words(shadow)} · live {_side_words(live)} on {reviews}"


def flip_words(criterion: ShadowCriterion) -> str:
    """How often the shadow grader's verdict differs from the live grader's, with its count."""
    iterations = plural(criterion.compared, "iteration")
    if criterion.flip_share is None:
        return f"flips against live: {iterations} compared: too few to read (under {MIN_REVIEWS_FOR_KAPPA})"
    interval = interval_words(criterion.flip_interval, percent=True)
    return (
        f"flips against live: {criterion.flips} of {iterations}: "
        f"{percent_words(criterion.flip_share)} (95% CI {interval})"
    )


def tally_words(tally: ShadowTally) -> str:
    """How many live iterations were graded in the shadow and what it cost."""
    cost = dollars(tally.usd)
    if tally.unpriced:
        cost += f" + {plural(tally.unpriced, 'unpriced grade')}"
    words = f"{plural(tally.grades, 'live iteration')} graded in the shadow ({tally.tokens:,} tokens, {cost})"
    if tally.errors:
        words += f"; {tally.errors} failed and are left out"
    return words


SHADOW_WORDS = (
    "The shadow grader grades a share of live iterations with the same rubric, draft and calibration "
    "examples; it is never posted and never acts. Agreement: with trusted reviews, on the verdicts both "
    "graders gave, 95% intervals by run. Flips: iterations where its verdict differs from the live "
    "grader's. Judge a model swap on these before making it."
)
"""How to read the shadow figures, under them."""


def shadow_lines(figures: ShadowFigures) -> list[str]:
    """The figures for a terminal; nothing when no iteration was graded in the shadow."""
    if not figures.tally.grades:
        return []
    lines = [f"Shadow grader: {tally_words(figures.tally)}."]
    lines += [
        f"  {c.criterion} ({c.model}): {agreement_words(c)} · {flip_words(c)}" for c in figures.criteria
    ]
    return [*lines, SHADOW_WORDS]


def shadow_blocks(figures: ShadowFigures) -> list[BlockJson]:
    """The figures in Slack under a heading; none when no iteration was graded in the shadow."""
    if not figures.tally.grades:
        return []
    lines = [f"*Shadow grader* — {tally_words(figures.tally)}"]
    lines += [
        f"• *{slack_name(c.criterion)}* ({slack_name(c.model)}) — {agreement_words(c)} · {flip_words(c)}"
        for c in figures.criteria
    ]
    return block_dicts([section_block("\n".join(lines)), context_block(SHADOW_WORDS)])
