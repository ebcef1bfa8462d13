"""Saving a review and refreshing its message's tally.

Both happen under the store's lock of the iteration, so whichever refresh runs last has read every
review saved before it: concurrent reviewers never leave a stale tally behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewVerdict
from bot.db.store import Store
from bot.rendering.results import evaluation_message
from bot.review.controls import ReviewTally, review_controls
from bot.slack.client import attempt

UNKNOWN_EVALUATION = (
    "I have no record of that grader iteration (it may be older than the bot's database), "
    "so it can't be reviewed."
)
"""Told to someone who reviews an iteration the store does not know."""


async def save_review(
    store: Store,
    record: EvaluationRecord,
    reviewer: str,
    verdicts: Sequence[ReviewVerdict],
    *,
    editor: bool,
) -> None:
    """Store ``reviewer``'s verdicts on the iteration, replacing their earlier review of it;
    ``editor``: whether they may change the channel's grading (their disagreements then calibrate
    the grader on their own)."""
    await store.save_review(
        record.thread, record.grading_run_id, record.iteration, reviewer, verdicts, editor=editor
    )


async def refresh_tally(store: Store, client: AsyncWebClient, record: EvaluationRecord) -> None:
    """Re-render the iteration's message with the tally of every review stored for it."""
    async with store.locked_reviews(record.thread.workspace, record.grading_run_id, record.iteration) as rows:
        controls = review_controls(record.evaluation, ReviewTally.from_rows(rows))
        version = record.provenance["rubric_version"] if record.provenance else None
        message = evaluation_message(record.evaluation, review=controls, rubric_version=version)
        await attempt(
            client.chat_update(channel=record.channel, ts=record.message_ts, **message),
            f"show the review tally in {record.channel}",
        )
