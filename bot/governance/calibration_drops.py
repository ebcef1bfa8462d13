"""Taking a calibration example out (`/rubric calibration drop N`), as a change of how the channel is
graded: only editors may, it is announced in the channel, and `/rubric history` keeps it.

The list of the examples in force (`/rubric calibration`) is rendered here too, so the numbers an
editor drops by are the ones they were shown: each example's review id.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.calibration import CalibrationDrop
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.governance.changes import CRITERION_WORDS_MAX, NOT_ANNOUNCED
from bot.review.calibration import CALIBRATION_EXAMPLES, TeamExample
from bot.review.verdicts import verdict_words
from bot.slack.blocks import block_dicts, context_block, section_block
from bot.slack.client import attempt
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, slack_date, truncate
from bot.vocabulary.workspace import Workspace

DROPS_IN_HISTORY = 10
"""Drops `/rubric history` lists, newest first."""


def no_such_example(number: int) -> str:
    """Told when example `number` is not (or no longer) in force in the channel."""
    return (
        f"This channel has no calibration example {number} (or it was dropped already); "
        "`/rubric calibration` lists the examples in force."
    )


async def drop_example(
    store: Store,
    client: AsyncWebClient,
    *,
    workspace: Workspace,
    channel: str,
    user: str,
    number: int,
) -> str:
    """Take example `number` (a review id) out of the channel's calibration as `user`'s change,
    announce it in the channel, and say what happened (only `user` sees that)."""
    dropped = await store.drop_calibration(workspace, channel, number, user)
    if dropped is None:
        return no_such_example(number)
    return await announce_drop(client, channel, dropped, user, None)


async def announce_drop(
    client: AsyncWebClient, channel: str, dropped: ReviewRow, user: str, replay_summary: str | None
) -> str:
    """Announce `user`'s drop (saved) in the channel; the confirmation only they see."""
    number = dropped.review_id
    posted = await attempt(
        client.chat_postMessage(
            channel=channel, **drop_announcement(dropped, user, replay_summary), **NO_UNFURLS
        ),
        f"announce the calibration drop in {channel}",
    )
    done = f"Example {number} will no longer be shown to the grader."
    return done + (" Announced in this channel." if posted is not None else NOT_ANNOUNCED)


def drop_announcement(review: ReviewRow, user: str, replay_summary: str | None = None) -> SlackMessage:
    """The channel's message about a dropped example: who dropped which case (and its replay)."""
    line = (
        f"<@{user}> took example {review.review_id} out of the grader's calibration: {_case_words(review)}."
    )
    replayed = f" Before it applied, it was {replay_summary}." if replay_summary else ""
    return {
        "text": line,
        "blocks": block_dicts(
            [
                section_block(f"📝 {line}"),
                context_block(
                    "`/rubric history` keeps it; `/rubric calibration` lists the examples in force."
                    + replayed
                ),
            ]
        ),
    }


def examples_message(enabled: bool, examples: Sequence[TeamExample]) -> SlackMessage:
    """`/rubric calibration`: whether calibration is on, and the examples the grader is shown."""
    if not enabled:
        text = (
            "Calibration is *off* in this channel: the grader does not see the team's reviews. "
            "`/rubric calibration on` turns it back on."
        )
        return {"text": text, "blocks": block_dicts([section_block(text)])}
    head = (
        "Calibration is *on* in this channel: the grader is shown up to "
        f"{CALIBRATION_EXAMPLES} of the latest trusted disagreements with the rubric as the team's "
        "examples — a rubric editor's review, or two reviewers agreeing. "
        "`/rubric calibration off` stops that."
    )
    if not examples:
        body = (
            "No example is in force: no editor's review, and no two reviewers agreeing, "
            "disagrees with the grader yet."
        )
    else:
        body = "\n".join(_example_line(example) for example in examples)
    return {
        "text": head,
        "blocks": block_dicts(
            [
                section_block(head),
                section_block(truncate(body, SECTION_TEXT_MAX)),
                context_block("An editor can take one out with `/rubric calibration drop N`."),
            ]
        ),
    }


def drops_history(drops: Sequence[CalibrationDrop]) -> str | None:
    """The history's lines on dropped calibration examples, newest first; None without any."""
    if not drops:
        return None
    lines = [
        f"example {drop.review_id} · “{escape(truncate(drop.criterion, CRITERION_WORDS_MAX))}” · "
        f"dropped by <@{drop.dropped_by}> · {slack_date(drop.created_at)}"
        + (f" · {drop.replay_summary}" if drop.replay_summary else "")
        for drop in drops
    ]
    return "*Calibration examples dropped*\n" + "\n".join(lines)


def _example_line(example: TeamExample) -> str:
    review = example.review
    who = " and ".join(f"<@{reviewer}>" for reviewer in example.reviewers)
    return f"*{review.review_id}* · {_case_words(review)} · {who} · {slack_date(review.created_at)}"


def _case_words(review: ReviewRow) -> str:
    criterion = escape(truncate(review.criterion, CRITERION_WORDS_MAX))
    return (
        f"“{criterion}” judged {verdict_words(review.reviewer_verdict)} "
        f"where the grader said {verdict_words(review.grader_verdict)}"
    )
