"""Saving a review, refreshing its message's tally, and showing a blind reviewer how the grader judged.

Both happen under the store's lock of the iteration, so whichever refresh runs last has read every
review saved before it: concurrent reviewers never leave a stale tally behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewVerdict, ReviewVia
from bot.db.store import Store
from bot.rendering.results import evaluation_message
from bot.review.controls import ReviewTally, review_controls
from bot.review.modes import awaiting_second
from bot.review.verdicts import VERDICT_WORDS
from bot.slack.client import attempt
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, truncate

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
    via: ReviewVia,
) -> None:
    """Store ``reviewer``'s verdicts on the iteration, replacing their earlier review of it;
    ``editor``: whether they may change the channel's grading (their disagreements then calibrate
    the grader on their own); ``via``: how they gave it."""
    await store.save_review(
        record.thread, record.grading_run_id, record.iteration, reviewer, verdicts, editor=editor, via=via
    )


async def refresh_tally(store: Store, client: AsyncWebClient, record: EvaluationRecord) -> None:
    """Re-render the iteration's message with the tally of every review stored for it, its buttons as
    the channel's review modes have them, and whether a second review is wanted."""
    workspace = record.thread.workspace
    modes = await store.review_modes(workspace, record.channel)
    async with store.locked_reviews(workspace, record.grading_run_id, record.iteration) as rows:
        wanted = awaiting_second(modes, rows, record.grading_run_id, record.iteration) is not None
        tally = ReviewTally.from_rows(rows, second_wanted=wanted)
        controls = review_controls(record.evaluation, tally, blind=modes.blind)
        version = record.provenance["rubric_version"] if record.provenance else None
        message = evaluation_message(record.evaluation, review=controls, rubric_version=version)
        await attempt(
            client.chat_update(channel=record.channel, ts=record.message_ts, **message),
            f"show the review tally in {record.channel}",
        )


def grader_revealed(verdicts: Sequence[ReviewVerdict]) -> str:
    """What a blind reviewer is shown once their review is saved: the grader's verdict beside theirs
    on each criterion (mrkdwn, names escaped)."""
    lines = ["Review saved. How the grader judged, beside your verdicts:"]
    for verdict in verdicts:
        grader, yours = _said(verdict.grader_verdict), _said(verdict.reviewer_verdict)
        same = "same" if verdict.grader_verdict == verdict.reviewer_verdict else f"you: {yours}"
        lines.append(
            f"• *{escape(truncate(verdict.criterion, REVEALED_NAME_MAX))}* — grader {grader} ({same})"
        )
    return truncate("\n".join(lines), SECTION_TEXT_MAX)


REVEALED_NAME_MAX = 80
"""Longest criterion name in the message showing a blind reviewer the grader's verdicts."""


def _said(verdict: str) -> str:
    return VERDICT_WORDS.get(verdict, verdict) if not verdict.isdecimal() else f"{verdict}/5"
