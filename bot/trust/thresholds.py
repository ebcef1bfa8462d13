"""Each criterion's confidence threshold, recalibrated from the channel's trusted reviews, and the
source the grader reads them from at each iteration.

A review saved in a channel with a trust level recalibrates every pass/fail criterion of the channel
(pooled over the rubric versions in which its text is unchanged, per grader model): the grader's
confidence in each verdict a trusted person reviewed and whether they agreed go to
:func:`grading.selective.calibrate` at the channel's target and `RUBRIC_BOT_TRUST_RISK`. The
thresholds are stored (`bot.db.trust`), so a run reads them in one query. A criterion for which no
threshold can be promised runs as without trust.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from langgraph.runtime import Runtime

from bot.agent.worker import ThreadContext
from bot.agreement.pooling import criterion_text, pooled_criteria
from bot.agreement.trust_figures import reviewed_cases, trust_criteria, trusted_reviews
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.db.trust import TrustThreshold
from bot.vocabulary.workspace import Workspace
from grading import Rubric
from grading.selective import calibrate

logger = logging.getLogger(__name__)


def channel_thresholds(
    reviews: Sequence[ReviewRow], records: Sequence[EvaluationRecord], target: float, risk: float
) -> list[TrustThreshold]:
    """Each pass/fail criterion's threshold from the channel's trusted `reviews` of its `records`."""
    found = []
    for item in trust_criteria(pooled_criteria(reviews, records)):
        cases = reviewed_cases(item)
        threshold = calibrate([c.confidence for c in cases], [c.agreed for c in cases], target, risk)
        found.append(
            TrustThreshold(
                item.key.grader_model, item.key.text, item.name, target, risk, threshold, len(cases)
            )
        )
    return found


async def recalibrate(store: Store, workspace: Workspace, channel: str, risk: float) -> list[TrustThreshold]:
    """Work out the channel's thresholds again and store them; nothing when its trust level is off."""
    levels = await store.trust_levels(workspace, channel, 1)
    if not levels or levels[0].target is None:
        return []
    target = levels[0].target
    reviews = trusted_reviews(await store.reviews_in_channel(workspace, channel, undropped_only=True))
    records = [record async for record in store.evaluation_records(workspace, channel, None)]
    thresholds = await asyncio.to_thread(channel_thresholds, reviews, records, target, risk)
    await store.save_trust_thresholds(workspace, channel, thresholds)
    return thresholds


async def recalibrate_after_review(store: Store, workspace: Workspace, channel: str, risk: float) -> None:
    """`recalibrate` after a saved review: a failure is logged and the thresholds in force stay (the
    review itself is saved; the next one recalibrates again)."""
    try:
        await recalibrate(store, workspace, channel, risk)
    except Exception:
        logger.exception("could not recalibrate the trust thresholds of channel %s", channel)


def trust_source(
    store: Store,
) -> Callable[[Rubric, str, Runtime[ThreadContext | None]], Awaitable[dict[str, float]]]:
    """The grader's trust source: per criterion of the rubric, the run's channel's threshold for this
    grader model at the channel's level (none when trust is off, or without a `ThreadContext`), as
    the run's first grading reads them (once a run: its iterations are held to the same ones)."""

    async def thresholds(
        rubric: Rubric, model: str, runtime: Runtime[ThreadContext | None]
    ) -> dict[str, float]:
        where = runtime.context
        if where is None:
            return {}
        stored = await where.once(("trust", model), partial(in_force, where.workspace, where.channel, model))
        by_name = {name: stored.get(criterion_text(rubric, name)) for name in rubric.names}
        return {name: threshold for name, threshold in by_name.items() if threshold is not None}

    async def in_force(workspace: Workspace, channel: str, model: str) -> dict[str, float]:
        """The channel's threshold for `model` by criterion text, at its level (none when off)."""
        levels = await store.trust_levels(workspace, channel, 1)
        if not levels or levels[0].target is None:
            return {}
        return {
            t.criterion_text: t.threshold
            for t in await store.trust_thresholds(workspace, channel)
            if t.grader_model == model and t.target == levels[0].target and t.threshold is not None
        }

    return thresholds
