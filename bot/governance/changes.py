"""Changes of a channel's default rubric: each is a new version in the database (none is ever
deleted) and is announced in the channel — who changed it and the new criteria, or that it was
cleared — so the team sees it. `/rubric history` lists the versions; `/rubric revert N` makes
version N the default again, as a change like any other."""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.rubrics import RubricVersion
from bot.db.store import Store
from bot.rendering.rubrics import rubric_confirmation
from bot.slack.blocks import block_dicts, context_block, header_block, section_block
from bot.slack.client import attempt
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, slack_date, truncate
from bot.vocabulary.workspace import Workspace
from grading import RubricError, parse_rubric

HISTORY_LENGTH = 10
"""Versions `/rubric history` lists, newest first."""

HISTORY_CRITERIA = 3
"""Criteria named per version in the history; the rest are counted."""

CRITERION_WORDS_MAX = 60
"""Longest a criterion's text is shown in the history before it is shortened."""


@dataclass(frozen=True)
class Change:
    """A change made: the version it recorded, and whether the channel was told."""

    version: RubricVersion
    announced: bool


async def change_rubric(
    store: Store,
    client: AsyncWebClient,
    *,
    workspace: Workspace,
    channel: str,
    user: str,
    text: str | None,
    reverted_to: int | None = None,
    replay_summary: str | None = None,
) -> Change | None:
    """Make `text` the channel's default rubric (None clears it), record the version (with the one
    line of its replay, see `bot.proposals`) and announce it in the channel; None (changing nothing)
    when clearing a channel that has no default rubric.

    `text` must parse (the caller checked it). `reverted_to` names the version a revert restored.
    """
    if text is None:
        version = await store.clear_channel_rubric(workspace, channel, user)
        if version is None:
            return None
    else:
        version = await store.set_channel_rubric(
            workspace, channel, text, user, replay_summary=replay_summary
        )
    return await announce_change(client, channel, version, reverted_to=reverted_to)


async def announce_change(
    client: AsyncWebClient, channel: str, version: RubricVersion, *, reverted_to: int | None = None
) -> Change:
    """Announce the saved `version` in `channel` (as `change_rubric` does once it has saved it; a
    form saves first, acks, then announces, so its ack waits for the database and not for Slack)."""
    posted = await attempt(
        client.chat_postMessage(
            channel=channel, **announcement(version, reverted_to=reverted_to), **NO_UNFURLS
        ),
        f"announce the rubric change in {channel}",
    )
    return Change(version, announced=posted is not None)


NOT_ANNOUNCED = (
    " I couldn't announce it in this channel, though: if I'm not in it, invite me with `/invite @rubric-bot`."
)
"""Added to the caller's confirmation when the channel's announcement could not be posted."""


def change_words(change: Change) -> str:
    """The confirmation only the person who made the change sees."""
    version = change.version
    done = (
        f"Channel default rubric set (version {version.version})."
        if version.rubric_text is not None
        else f"Cleared this channel's default rubric (version {version.version}); threads that "
        "already have one keep it."
    )
    return done + (" Announced in this channel." if change.announced else NOT_ANNOUNCED)


def announcement(version: RubricVersion, *, reverted_to: int | None = None) -> SlackMessage:
    """The channel's message about a change: who made it, and the new criteria or "cleared"."""
    again = f" (back to version {reverted_to})" if reverted_to is not None else ""
    if version.rubric_text is None:
        line = f"<@{version.set_by}> cleared this channel's default rubric{again}."
        return {
            "text": line,
            "blocks": block_dicts(
                [
                    section_block(
                        f"📝 {line} New conversations here are not graded unless they set a rubric."
                    ),
                    context_block(_version_words(version)),
                ]
            ),
        }
    line = f"<@{version.set_by}> changed this channel's default rubric{again}."
    confirmation = rubric_confirmation(parse_rubric(version.rubric_text))
    return {
        "text": f"{line} {confirmation['text']}",
        "blocks": [
            *block_dicts([section_block(f"📝 {line} New conversations here are graded against it.")]),
            *confirmation["blocks"],
            *block_dicts([context_block(_version_words(version))]),
        ],
    }


def _version_words(version: RubricVersion) -> str:
    replayed = f" Before it applied: {version.replay_summary}." if version.replay_summary else ""
    return (
        f"Version {version.version}.{replayed} `/rubric history` lists the versions; `/rubric revert N` "
        "restores one."
    )


def history_message(versions: list[RubricVersion], drops: str | None = None) -> SlackMessage:
    """`/rubric history`: the channel's latest versions, newest (the one in force) first; and
    `drops`, the lines on calibration examples editors took out, if any."""
    dropped = [section_block(truncate(drops, SECTION_TEXT_MAX))] if drops else []
    if not versions:
        text = "This channel's default rubric has never been set. `/rubric set <rubric>` sets it."
        return {"text": text, "blocks": block_dicts([section_block(text), *dropped])}
    lines = [_history_line(version, current=index == 0) for index, version in enumerate(versions)]
    return {
        "text": f"The last {len(versions)} versions of this channel's default rubric.",
        "blocks": block_dicts(
            [
                header_block("Versions of this channel's default rubric"),
                section_block(truncate("\n".join(lines), SECTION_TEXT_MAX)),
                *dropped,
                context_block("`/rubric revert N` makes version N the default again."),
            ]
        ),
    }


def _history_line(version: RubricVersion, *, current: bool) -> str:
    now = " (in force)" if current else ""
    replayed = f"\n      _{version.replay_summary}_" if version.replay_summary else ""
    return (
        f"*{version.version}*{now} · <@{version.set_by}> · {slack_date(version.created_at)} · "
        f"{first_criteria(version.rubric_text)}{replayed}"
    )


def first_criteria(text: str | None) -> str:
    """The first few criteria of a rubric text, for a one-line listing; "cleared" for none."""
    if text is None:
        return "_cleared_"
    try:
        names = parse_rubric(text).names
    except RubricError:  # stored before a change to the rubric format
        names = [text.strip().splitlines()[0]]
    shown = ", ".join(f"“{escape(truncate(name, CRITERION_WORDS_MAX))}”" for name in names[:HISTORY_CRITERIA])
    more = len(names) - HISTORY_CRITERIA
    return f"{shown} and {more} more" if more > 0 else shown
