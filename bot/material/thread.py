"""A thread's earlier messages, for a bot called into a discussion it has not seen.

`earlier_messages` asks Slack (``conversations.replies``, up to `MAX_REPLY_PAGES` pages) and names
each author (``users.info``, remembered by `AuthorNames`, up to `MAX_NAME_LOOKUPS` calls a read);
`bound_thread` keeps the most recent messages that fit the character budget, as lines with time and
author, and says how many earlier ones were left out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import plural
from bot.slack.client import attempt
from bot.threads.conversation import slack_unescape

REPLIES_PAGE = 200
"""Messages asked of ``conversations.replies`` per page (Slack's recommended most is 200)."""

MAX_REPLY_PAGES = 25
"""Pages of ``conversations.replies`` one read asks for at most (5,000 messages at 200 a page): a
longer thread is read from its start that far, and the rest is not read."""

MAX_NAME_LOOKUPS = 50
"""``users.info`` calls one read makes at most; authors past them are shown by their id."""

NAMES_REMEMBERED = 5_000
"""People whose display names a process remembers (the least recently asked are forgotten first)."""

MESSAGE_SUBTYPES: frozenset[str | None] = frozenset({None, "file_share", "thread_broadcast", "bot_message"})
"""Thread messages worth reading: people's and other apps' (not joins, topic changes, …)."""


@dataclass(frozen=True)
class ThreadMessage:
    """One earlier message of a thread, as the worker reads it."""

    author: str
    """The author's display name (an app's name for an app's message)."""
    ts: str
    text: str


@dataclass(frozen=True)
class EarlierThread:
    """A thread's earlier messages bounded to a budget: the most recent ones, oldest first."""

    text: str
    """One line per message kept (time, author, text), after a line counting those left out."""
    read: int
    """Messages kept."""
    left_out: int
    """Earlier messages that did not fit."""


def message_line(message: ThreadMessage) -> str:
    """``[2026-12-03 09:12 UTC #1764753120.000100] Ana: text``; a line of the text that starts with
    ``[`` is indented by a space, so that only the bot's stamps start lines (a deletion removes a
    message's text up to the next stamp)."""
    text = message.text.replace("\n[", "\n [")
    return f"{message_stamp(message.ts)} {message.author}: {text}"


def message_stamp(ts: str) -> str:
    """When the message `ts` was sent and its ts, as its line starts:
    ``[2026-12-03 09:12 UTC #1764753120.000100]``. The ts tells the message's line apart from any
    other, so a deletion finds it whatever the message said last (it may have been edited since)."""
    return f"[{minute_stamp(ts)} #{ts}]"


def minute_stamp(ts: str) -> str:
    """When the message `ts` was sent, to the minute: ``2026-12-03 09:12 UTC``."""
    moment = datetime.fromtimestamp(float(ts), UTC)
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def bound_thread(messages: Sequence[ThreadMessage], limit: int) -> EarlierThread:
    """The most recent `messages` whose lines fit in `limit` characters, oldest first.

    The newest message is kept even when it alone is longer than `limit` (its end, marked as cut),
    so a thread is never reduced to nothing but a count.
    """
    kept: list[str] = []
    room = limit
    for message in reversed(messages):
        line = message_line(message)
        if len(line) > room:
            if not kept:
                kept.append("[… cut] " + line[len(line) - room :])
            break
        kept.append(line)
        room -= len(line) + 1
    left_out = len(messages) - len(kept)
    lines = kept[::-1]
    if left_out:
        lines.insert(0, f"({plural(left_out, 'earlier message')} left out)")
    return EarlierThread("\n".join(lines), read=len(kept), left_out=left_out)


class AuthorNames:
    """People's display names by workspace and user id, asked of ``users.info`` once each."""

    def __init__(self, remembered: int = NAMES_REMEMBERED) -> None:
        self._names: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._remembered = remembered

    def knows(self, team: str, user: str) -> bool:
        """Whether `user`'s name is remembered (asking for it makes no call)."""
        return (team, user) in self._names

    async def name(self, client: AsyncWebClient, team: str, user: str) -> str:
        """`user`'s display name; their id when Slack cannot say (then asked again next time)."""
        key = (team, user)
        if key in self._names:
            self._names.move_to_end(key)
            return self._names[key]
        response = await attempt(client.users_info(user=user), f"look up user {user}")
        if response is None:
            return user
        name = display_name(response["user"])
        self._names[key] = name
        if len(self._names) > self._remembered:
            self._names.popitem(last=False)
        return name


def display_name(user: dict[str, Any]) -> str:
    """What Slack shows for a person: their display name, else their full name, else their handle."""
    profile = user.get("profile") or {}
    return profile.get("display_name") or profile.get("real_name") or user.get("real_name") or user["id"]


async def earlier_messages(
    client: AsyncWebClient,
    names: AuthorNames,
    *,
    team: str,
    channel: str,
    thread_ts: str,
    before_ts: str,
    bot_user_id: str,
    page_size: int = REPLIES_PAGE,
    max_pages: int = MAX_REPLY_PAGES,
    max_lookups: int = MAX_NAME_LOOKUPS,
) -> list[ThreadMessage]:
    """The thread's messages before `before_ts`, oldest first, the bot's own left out (`page_size` a
    page, at most `max_pages` pages; at most `max_lookups` authors' names asked of Slack, the others
    shown by id): bounded before `bound_thread` trims it, however long the thread.

    Raises what the client raises (`bot.slack.client.SLACK_ERRORS`) when Slack refuses.
    """
    found: list[ThreadMessage] = []
    lookups = _Lookups(names, max_lookups)
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.conversations_replies(
            channel=channel, ts=thread_ts, limit=page_size, cursor=cursor
        )
        for raw in page.get("messages") or []:
            if _wanted(raw, before_ts, bot_user_id):
                author = await _author(client, lookups, team, raw)
                found.append(ThreadMessage(author, raw["ts"], _message_text(raw)))
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    return found


@dataclass
class _Lookups:
    """The names one read may ask Slack for: those remembered, and `left` more."""

    names: AuthorNames
    left: int

    async def name(self, client: AsyncWebClient, team: str, user: str) -> str:
        if self.names.knows(team, user):
            return await self.names.name(client, team, user)
        if self.left <= 0:
            return user
        self.left -= 1
        return await self.names.name(client, team, user)


def _wanted(raw: dict[str, Any], before_ts: str, bot_user_id: str) -> bool:
    return (
        Decimal(raw["ts"]) < Decimal(before_ts)
        and raw.get("subtype") in MESSAGE_SUBTYPES
        and raw.get("user") != bot_user_id
        and bool(raw.get("text") or raw.get("files"))
    )


async def _author(client: AsyncWebClient, names: _Lookups, team: str, raw: dict[str, Any]) -> str:
    if raw.get("user") and not raw.get("bot_id"):
        return await names.name(client, team, raw["user"])
    return (raw.get("bot_profile") or {}).get("name") or raw.get("username") or "an app"


def _message_text(raw: dict[str, Any]) -> str:
    """The message's text, with the names of files it shared (their contents are not read)."""
    files = [
        f"[shared a file: {file.get('name') or file.get('title') or 'unnamed'}]"
        for file in raw.get("files") or []
    ]
    return " ".join([slack_unescape(raw.get("text") or ""), *files]).strip()
