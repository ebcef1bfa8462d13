"""Which Slack messages are requests to the bot, and which conversation (thread) each belongs to.

Pure functions over Slack event payloads: no I/O, no Slack client.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from bot.vocabulary.thread import InThread, MessageChange
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace

MAX_INPUT_CHARS = 20_000
"""Longest request the bot accepts; longer ones get a reply saying so instead of a model run
(they would blow the worker's and the grader's context and cost before doing any good)."""

EDIT_CUT_NOTE = f"\n[… the rest of this edit was cut: the limit is {MAX_INPUT_CHARS:,} characters]"
"""Ends an edited message's new text cut to MAX_INPUT_CHARS: an edit replaces a request already
taken (its stored copy, or a queued run's question), so it is cut rather than refused."""

HANDLED_SUBTYPES: frozenset[str | None] = frozenset({None, "file_share", "thread_broadcast"})
"""Message subtypes written by a person. Everything else (bot_message, message_changed,
message_deleted, channel_join, …) is not a request."""

_RUBRIC_DIRECTIVE = re.compile(r"\s*rubric\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)
"""`rubric:` at the start of a message (after any mention): the rest replaces the thread's rubric."""


def stored_message_id(channel: str, ts: str) -> str:
    """The id of a person's Slack message in the conversation's checkpoint: the Slack message's own,
    so a retried attempt can tell whether an earlier one already added it, and a deleted or edited
    message can be found there."""
    return f"slack:{channel}:{ts}"


def slack_unescape(text: str) -> str:
    """Undo Slack's escaping of `<`, `>` and `&` (rubrics and tasks are read as typed).

    Slack escapes every `&` it sends, so one pass of HTML unescaping restores exactly what was
    typed (`&amp;lt;` becomes `&lt;`).
    """
    return html.unescape(text)


def mention_pattern(bot_user_id: str) -> re.Pattern[str]:
    """Matches the bot's mention as Slack encodes it: `<@UBOT>` or `<@UBOT|name>`."""
    return re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>")


def mentions_bot(text: str, bot_user_id: str) -> bool:
    """Whether the message text mentions the bot anywhere."""
    return mention_pattern(bot_user_id).search(text) is not None


def strip_mentions(text: str, bot_user_id: str) -> str:
    """The text without the bot's own mentions (the worker doesn't need to see its Slack id)."""
    return mention_pattern(bot_user_id).sub("", text).strip()


def rubric_directive(text: str) -> str | None:
    """The rubric in a `rubric: …` message (mention already stripped), else None."""
    match = _RUBRIC_DIRECTIVE.fullmatch(text)
    return match.group(1).strip() if match else None


def is_from_person(event: dict[str, Any], bot_user_id: str | None) -> bool:
    """False for bots (any `bot_id` or bot subtype), the bot itself, edits and deletions."""
    return (
        not event.get("bot_id")
        and event.get("subtype") in HANDLED_SUBTYPES
        and bool(event.get("user"))
        and event.get("user") != bot_user_id
    )


def is_direct_message(event: dict[str, Any]) -> bool:
    """A message in the bot's DM with a person."""
    return event.get("channel_type") == "im"


@dataclass(frozen=True)
class UserMessage(InThread):
    """A person's message the bot will act on, with the thread it belongs to."""

    team: str
    channel: str
    ts: str
    thread_ts: str
    """The thread root's ts: a top-level message starts a thread under itself."""
    user: str
    text: str
    """What the person wrote, without the bot's mention and with Slack's escaping undone."""
    event_id: str | None = None
    enterprise: str = NO_ENTERPRISE

    @property
    def thread_id(self) -> str:
        """The conversation's checkpoint key."""
        return self.thread.thread_id

    @property
    def dedupe_keys(self) -> tuple[str, ...]:
        """Keys that identify this message across retries and its app_mention/message twins."""
        keys = (self.thread.message_key(self.ts),)
        return (f"event:{self.event_id}", *keys) if self.event_id else keys


def user_message(
    event: dict[str, Any], *, workspace: Workspace, bot_user_id: str, event_id: str | None
) -> UserMessage:
    """Build the `UserMessage` of a person's message or mention event in `workspace`."""
    return UserMessage(
        team=workspace.team,
        enterprise=workspace.enterprise,
        channel=event["channel"],
        ts=event["ts"],
        thread_ts=event.get("thread_ts") or event["ts"],
        user=event["user"],
        text=slack_unescape(strip_mentions(event.get("text") or "", bot_user_id)),
        event_id=event_id,
    )


DELETED = "message_deleted"
"""The `message` event subtype of a deleted message."""

CHANGED = "message_changed"
"""The `message` event subtype of an edited message."""


def message_change(event: dict[str, Any], *, workspace: Workspace, bot_user_id: str) -> MessageChange | None:
    """The change a `message_deleted` or `message_changed` event reports; None for a bot's message
    or one Slack describes without its ts."""
    edited = event.get("subtype") == CHANGED
    previous = event.get("previous_message")
    message = event.get("message") if edited else previous
    if not isinstance(message, dict) or message.get("bot_id") or not message.get("ts"):
        return None

    def read(text: object) -> str:
        return slack_unescape(strip_mentions(text if isinstance(text, str) else "", bot_user_id))

    ts, text = str(message["ts"]), read(message.get("text"))
    return MessageChange(
        team=workspace.team,
        enterprise=workspace.enterprise,
        channel=event["channel"],
        thread_ts=str(message.get("thread_ts") or ts),
        ts=ts,
        text=_capped(text) if edited else text,
        previous_text=read(previous.get("text")) if edited and isinstance(previous, dict) else "",
        cut_from=len(text) if edited and len(text) > MAX_INPUT_CHARS else 0,
    )


def _capped(text: str) -> str:
    """An edit's new text, cut with EDIT_CUT_NOTE to MAX_INPUT_CHARS when it is longer."""
    if len(text) <= MAX_INPUT_CHARS:
        return text
    return text[: MAX_INPUT_CHARS - len(EDIT_CUT_NOTE)] + EDIT_CUT_NOTE
