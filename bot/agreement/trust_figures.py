"""What a channel's trust level promises and what its window shows, per pass/fail criterion.

With `/rubric trust` on, each criterion (pooled as in :mod:`bot.agreement.pooling`) has a confidence
threshold λ recalibrated from the channel's trusted reviews (`bot.trust.thresholds`); the grader's
verdicts under λ are left to people. For the report's window this gives, per criterion: the target,
λ, the coverage (verdicts acted on ÷ all it gave, 95 % cluster-bootstrap interval by run), the
agreement observed on the acted-on verdicts trusted people reviewed (exact 95 % interval), and
whether the target holds on the window — or, before any threshold, how many more trusted reviews
the criterion needs (:func:`grading.selective.min_kept`).

:func:`reviewed_cases` (one per reviewed verdict: its confidence, and whether the latest trusted
review agreed) is also what the thresholds are calibrated on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scipy.stats import binomtest
from slack_sdk.models.blocks import Block

from bot.agreement.pooling import PooledCriterion, pooled_criteria
from bot.agreement.presentation import interval_words, percent_words, slack_name
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.db.trust import TrustThreshold
from bot.review.calibration import Trust
from bot.review.verdicts import is_judged, verdict_label
from bot.slack.blocks import context_block, plural, section_block
from bot.vocabulary.provenance import UNKNOWN
from bot.vocabulary.workspace import Workspace
from grading.agreement import MIN_REVIEWS_FOR_KAPPA, Interval, share_interval
from grading.rubric import normalize_name
from grading.selective import DEFAULT_RISK, min_kept

INTERVAL_LEVEL = 0.95
"""Confidence of the intervals shown (the report's everywhere)."""

MIN_ACTED_REVIEWS = MIN_REVIEWS_FOR_KAPPA
"""Fewer reviewed acted-on verdicts than this and the window's agreement is not shown (nor whether
the target holds): the report's minimum for any agreement figure."""


@dataclass(frozen=True)
class ReviewedCase:
    """One reviewed verdict of the grader: its confidence and whether the trusted review agreed."""

    grading_run_id: str
    confidence: float
    agreed: bool
    withheld: bool = False
    """A verdict a threshold withheld: calibration evidence, but never one acted on."""


def reviewed_cases(item: PooledCriterion) -> list[ReviewedCase]:
    """One case per verdict of `item` a trusted person reviewed (the latest review of it counts),
    with the grader's confidence in it (1 for a verdict stored before confidences were).

    A verdict a threshold withheld counts too, with what the grader said: left out, the verdicts
    under a threshold would never be reviewed as such and a threshold could only ever rise."""
    latest: dict[tuple[str, int], ReviewRow] = {}
    for row in item.reviews:  # oldest first
        latest[(row.grading_run_id, row.iteration)] = row
    cases = [
        ReviewedCase(
            run, item.confidences.get((run, iteration)) or 1.0, row.reviewer_verdict == row.grader_verdict
        )
        for (run, iteration), row in latest.items()
    ]
    return cases + _withheld_cases(item)


def _withheld_cases(item: PooledCriterion) -> list[ReviewedCase]:
    """The reviewed verdicts of `item` a threshold withheld: agreed when the person's verdict is the
    one the grader gave (a person who could not tell either says nothing of it)."""
    latest: dict[tuple[str, int], ReviewRow] = {}
    for row in item.withheld_reviews:  # oldest first
        if is_judged(row.reviewer_verdict):
            latest[(row.grading_run_id, row.iteration)] = row
    cases = []
    for (run, iteration), row in latest.items():
        said = item.withheld[(run, iteration)]
        agreed = verdict_label(row.reviewer_verdict) == said.passed
        cases.append(ReviewedCase(run, said.confidence, agreed, withheld=True))
    return cases


def trusted_reviews(rows: Sequence[ReviewRow]) -> list[ReviewRow]:
    """The reviews of `rows` (none dropped from calibration) whose case — one verdict on one criterion
    of one iteration — is trusted as calibration trusts it (`bot.review.calibration.Trust`), who is
    an editor read from what each review recorded as it was saved."""
    trust = Trust.recorded(rows)
    cases: dict[tuple[str, int, str, str], list[ReviewRow]] = {}
    for row in rows:
        key = (row.grading_run_id, row.iteration, normalize_name(row.criterion), row.reviewer_verdict)
        cases.setdefault(key, []).append(row)
    return [
        row
        for same in cases.values()
        if trust.trusts(list(dict.fromkeys(r.reviewer for r in same)))
        for row in same
    ]


def trust_criteria(items: Sequence[PooledCriterion]) -> list[PooledCriterion]:
    """The pooled criteria a threshold is kept for: pass/fail ones of a known grader model."""
    return [item for item in items if item.key.kind == "list" and item.key.grader_model != UNKNOWN]


@dataclass(frozen=True)
class CriterionTrust:
    """One criterion's line: its threshold and what the window shows under it."""

    name: str
    threshold: TrustThreshold | None
    """As last recalibrated; None when no trusted review of it was saved since trust was set."""
    acted: int
    graded: int
    coverage_interval: Interval | None
    reviewed: int
    """Acted-on verdicts of the window a trusted person reviewed."""
    agreed: int
    agreement_interval: Interval | None
    needed: int
    """Trusted reviews still needed before any threshold can be promised (0: enough)."""

    @property
    def coverage(self) -> float | None:
        return self.acted / self.graded if self.graded else None

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.reviewed if self.reviewed >= MIN_ACTED_REVIEWS else None


@dataclass(frozen=True)
class TrustFigures:
    """A channel's trust level (``target`` at ``risk``) and its criteria's figures in the window."""

    target: float
    risk: float
    criteria: list[CriterionTrust]


def trust_figures(
    target: float,
    risk: float,
    thresholds: Sequence[TrustThreshold],
    reviews: Sequence[ReviewRow],
    records: Sequence[EvaluationRecord],
) -> TrustFigures:
    """The figures of the window's `records` and trusted `reviews` under the channel's `thresholds`."""
    by_key = {(t.grader_model, t.criterion_text): t for t in thresholds if t.target == target}
    fewest = min_kept(target, risk)
    criteria = []
    for item in trust_criteria(pooled_criteria(reviews, records)):
        threshold = by_key.get((item.key.grader_model, item.key.text))
        level = threshold.threshold if threshold and threshold.threshold is not None else 0.0
        acted = [
            (c.grading_run_id, c.agreed)
            for c in reviewed_cases(item)
            if c.confidence >= level and not c.withheld
        ]
        agreed = sum(ok for _, ok in acted)
        kept = _kept_by_run(item, level)
        criteria.append(
            CriterionTrust(
                name=item.name,
                threshold=threshold,
                acted=sum(k for k, _ in kept),
                graded=sum(t for _, t in kept),
                coverage_interval=share_interval(kept)
                if sum(t for _, t in kept) >= MIN_ACTED_REVIEWS
                else None,
                reviewed=len(acted),
                agreed=agreed,
                agreement_interval=_exact_interval(agreed, len(acted)),
                needed=max(0, fewest - (threshold.reviews if threshold else 0)),
            )
        )
    return TrustFigures(target, risk, criteria)


async def load_trust(
    store: Store,
    workspace: Workspace | None,
    channel: str | None,
    since: datetime | None,
    records: Sequence[EvaluationRecord],
) -> TrustFigures | None:
    """The channel's trust figures over the window from ``since`` (`records`: its evaluations); None
    when trust is off there or the report spans channels."""
    if channel is None:
        return None
    levels = await store.trust_levels(workspace, channel, 1)
    if not levels or levels[0].target is None:
        return None
    target = levels[0].target
    thresholds = await store.trust_thresholds(workspace, channel)
    reviews = trusted_reviews(await store.reviews_in_channel(workspace, channel, since, undropped_only=True))
    risk = thresholds[0].risk if thresholds else DEFAULT_RISK
    return await asyncio.to_thread(trust_figures, target, risk, thresholds, reviews, records)


def _kept_by_run(item: PooledCriterion, level: float) -> list[tuple[int, int]]:
    """Per run, the verdicts acted on at `level` (judged, confidence ≥ it) and all it gave."""
    runs: dict[str, list[int]] = {}
    for (run, _), confidence in item.confidences.items():
        counts = runs.setdefault(run, [0, 0])
        counts[0] += confidence is not None and confidence >= level
        counts[1] += 1
    return [(acted, total) for acted, total in runs.values()]


def _exact_interval(agreed: int, reviewed: int) -> Interval | None:
    """The exact (Clopper–Pearson) 95 % interval on an agreement rate; None under the minimum."""
    if reviewed < MIN_ACTED_REVIEWS:
        return None
    found = binomtest(agreed, reviewed).proportion_ci(INTERVAL_LEVEL, method="exact")
    return (float(found.low), float(found.high))


def holds_words(figures: TrustFigures, criterion: CriterionTrust) -> str:
    """Whether the target holds on the window: ``holds``, ``not met`` or why it cannot be told."""
    if criterion.agreement is None:
        return f"too few reviewed to tell (under {MIN_ACTED_REVIEWS})"
    return "holds" if criterion.agreement >= figures.target else "not met"


def threshold_words(figures: TrustFigures, criterion: CriterionTrust) -> str:
    """E.g. ``λ 0.67`` or why there is none yet (the criterion then runs as without trust)."""
    found = criterion.threshold
    if found is not None and found.threshold is not None:
        return f"λ {found.threshold:.2f}"
    if criterion.needed:
        more = plural(criterion.needed, "more trusted review")
        return f"no threshold yet: {more} needed, all verdicts acted on"
    reviews = found.reviews if found else 0
    return (
        f"no threshold promises {percent_words(figures.target)} from {plural(reviews, 'trusted review')}: "
        "all verdicts acted on"
    )


def _agreement_words(criterion: CriterionTrust) -> str:
    if criterion.agreement is None:
        return f"agreement on acted-on: {criterion.agreed} of {criterion.reviewed} reviewed"
    interval = interval_words(criterion.agreement_interval, percent=True)
    return f"agreement on acted-on {percent_words(criterion.agreement)} ({interval}) of {criterion.reviewed}"


def _coverage_words(criterion: CriterionTrust) -> str:
    if criterion.coverage_interval is None:
        return f"acted on {criterion.acted} of {criterion.graded}"
    interval = interval_words(criterion.coverage_interval, percent=True)
    return f"coverage {percent_words(criterion.coverage)} ({interval}) of {criterion.graded}"


def criterion_words(figures: TrustFigures, criterion: CriterionTrust) -> str:
    """The criterion's figures in one line (without its name)."""
    facts = [threshold_words(figures, criterion), _coverage_words(criterion), _agreement_words(criterion)]
    if criterion.threshold is not None and criterion.threshold.threshold is not None:
        facts.append(f"{percent_words(figures.target)} {holds_words(figures, criterion)} on this window")
    return " · ".join(facts)


TRUST_WORDS = (
    "λ: the grader's verdicts with a confidence under it are left to people (can't tell), recalibrated "
    "from the channel's trusted reviews whenever one is saved, so that the verdicts acted on agree with "
    "people at least at the target with probability {promise}. Coverage: verdicts acted on ÷ all. "
    "Agreement on acted-on: trusted reviews of the verdicts acted on, with its exact 95% interval."
)
"""How to read the trust figures, under them."""


def trust_blocks(figures: TrustFigures | None) -> list[Block]:
    """The figures in Slack under a heading; none when trust is off."""
    if figures is None:
        return []
    lines = [f"• *{slack_name(c.name)}* — {criterion_words(figures, c)}" for c in figures.criteria] or [
        "No pass/fail criterion graded in this window."
    ]
    head = f"*Trust level {percent_words(figures.target)}* (risk {figures.risk:g})"
    return [
        section_block("\n".join([head, *lines])),
        context_block(TRUST_WORDS.format(promise=f"{1 - figures.risk:.0%}")),
    ]


def trust_table(figures: TrustFigures | None) -> list[str]:
    """The figures for a terminal, under a heading; none when trust is off."""
    if figures is None:
        return []
    head = f"Trust level {percent_words(figures.target)} (risk {figures.risk:g}):"
    return ["", head] + [f"  {c.name}: {criterion_words(figures, c)}" for c in figures.criteria]
