"""`/rubric review`: a channel's review modes (blind, double review), shown to anyone and changed by
an editor. A change is a change of how the channel is graded: only editors may make it (the listener
checks), it is announced in the channel and `/rubric history` keeps every one."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.review_modes import ReviewModes, ReviewModesChange
from bot.db.store import Store
from bot.governance.changes import NOT_ANNOUNCED
from bot.review.modes import modes_words
from bot.slack.blocks import block_dicts, context_block, section_block
from bot.slack.client import attempt
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.mrkdwn import slack_date
from bot.vocabulary.workspace import Workspace

MODES_IN_HISTORY = 10
"""Review mode changes `/rubric history` lists, newest first."""

WHAT_MODES_DO = (
    "*Blind*: the review form opens with nothing pre-set and the grader's verdicts hidden until it is "
    "saved, and *Agree* becomes *Review…*. *Double review*: for that share of reviewed iterations (the "
    "same ones each time: picked by the iteration's id), the next person who opens it after its first "
    "reviewer is asked for a blind second review; `/rubric report` then shows how far people agree with "
    "each other beside the grader's agreement."
)
"""What the review modes do, said with them."""


async def change_review_modes(
    store: Store,
    client: AsyncWebClient,
    *,
    workspace: Workspace,
    channel: str,
    user: str,
    modes: ReviewModes,
) -> str:
    """Set the channel's review modes to ``modes`` as ``user``'s change, announce it in the channel,
    and say what happened (only ``user`` sees that)."""
    if await store.review_modes(workspace, channel) == modes:
        return f"This channel's reviews are {modes_words(modes)} already; nothing was changed."
    await store.set_review_modes(workspace, channel, modes, user)
    posted = await attempt(
        client.chat_postMessage(channel=channel, **announcement(modes, user), **NO_UNFURLS),
        f"announce the review modes in {channel}",
    )
    done = f"Reviews in this channel: {modes_words(modes)}."
    return done + (" Announced in this channel." if posted is not None else NOT_ANNOUNCED)


def announcement(modes: ReviewModes, user: str) -> SlackMessage:
    """The channel's message about a change of its review modes: who set what."""
    line = f"<@{user}> changed how this channel reviews the grader: {modes_words(modes)}."
    return {
        "text": line,
        "blocks": block_dicts(
            [
                section_block(f"🔍 {line}"),
                context_block("`/rubric history` keeps it; `/rubric review` shows it."),
            ]
        ),
    }


def modes_message(change: ReviewModesChange | None) -> SlackMessage:
    """`/rubric review`: the channel's review modes, who set them, and what they do."""
    if change is None:
        head = f"Reviews in this channel: {modes_words(ReviewModes())} (never changed)."
    else:
        head = (
            f"Reviews in this channel: {modes_words(change.modes)}, set by <@{change.set_by}> on "
            f"{slack_date(change.created_at)}."
        )
    usage = "An editor changes them with `/rubric review blind on|off` or `/rubric review double 0.2|off`."
    return {
        "text": head,
        "blocks": block_dicts([section_block(head), context_block(f"{WHAT_MODES_DO} {usage}")]),
    }


def modes_history(changes: Sequence[ReviewModesChange]) -> str | None:
    """The history's lines on review mode changes, newest first; None without any."""
    if not changes:
        return None
    lines = [f"{modes_words(c.modes)} · <@{c.set_by}> · {slack_date(c.created_at)}" for c in changes]
    return "*Review modes*\n" + "\n".join(lines)
