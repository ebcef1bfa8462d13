"""A thread's earlier messages, for a bot called into a discussion it has not seen.

`earlier_messages` asks Slack (``conversations.replies``, at most `MAX_REPLY_CALLS` calls) for the
thread's first message (its parent) and its newest messages before the request, and names each
author (``users.info``, remembered by `AuthorNames`, up to `MAX_NAME_LOOKUPS` calls a read);
`bound_thread` keeps the parent and the most recent messages that fit the character budget, as lines
with time and author, and says that earlier ones were left out.

Slack lists a thread oldest first, a page at a time, so the newest messages of a thread longer than
a page are found by time: the window (oldest, request) is narrowed by bisecting `oldest` between the
parent's ts and the request's until what is in it fits in one page.
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
from bot.slack.conversation import slack_unescape
from bot.slack.text import readable

REPLIES_PAGE = 200
"""Messages asked of ``conversations.replies`` per page (Slack's recommended most is 200)."""

MAX_REPLY_CALLS = 25
"""``conversations.replies`` calls one read makes at most: one for the thread's start, the rest to
find the window of its newest messages that fits a page (bisecting a thread of any length)."""

MICROS = 1_000_000
"""Slack's ts are seconds with six decimals: a ts is bisected as a whole number of microseconds."""

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
class ThreadRead:
    """What one read of a thread's earlier messages found, oldest first."""

    parent: ThreadMessage | None
    """The thread's first message (None: it is the bot's own, or nothing worth reading)."""
    replies: list[ThreadMessage]
    """The newest messages after the parent, oldest first."""
    skipped: bool = False
    """Whether messages between the parent and `replies` were not read (a thread longer than a page)."""


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


def bound_thread(thread: ThreadRead, limit: int) -> EarlierThread:
    """The thread's parent and its most recent messages whose lines fit in `limit` characters, oldest
    first.

    The parent takes at most half of `limit` (its start, marked as cut); the newest message is kept
    even when it alone is longer than the room left (its end, marked as cut), so a thread is never
    reduced to nothing but a count.
    """
    head: list[str] = []
    room = limit
    if thread.parent is not None:
        line = message_line(thread.parent)
        head.append(line if len(line) <= limit // 2 else line[: limit // 2] + " [… cut]")
        room -= len(head[0]) + 1
    kept = _newest_lines(thread.replies, max(room, 0))
    left_out = len(thread.replies) - len(kept)
    lines = [*head, *kept]
    if thread.skipped:
        lines.insert(
            0, "(earlier messages left out: only the thread's first message and its newest are read)"
        )
    elif left_out:
        lines.insert(0, f"({plural(left_out, 'earlier message')} left out)")
    return EarlierThread("\n".join(lines), read=len(head) + len(kept), left_out=left_out)


def _newest_lines(messages: Sequence[ThreadMessage], room: int) -> list[str]:
    """The lines of the most recent `messages` that fit in `room` characters, oldest first; at least
    the end of the newest."""
    kept: list[str] = []
    for message in reversed(messages):
        line = message_line(message)
        if len(line) > room:
            if not kept:
                kept.append("[… cut] " + line[len(line) - room :])
            break
        kept.append(line)
        room -= len(line) + 1
    return kept[::-1]


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
    max_calls: int = MAX_REPLY_CALLS,
    max_lookups: int = MAX_NAME_LOOKUPS,
) -> ThreadRead:
    """The thread's parent and its newest messages before `before_ts`, the bot's own left out: the
    whole thread when it fits in one page of `page_size`, else the parent and the newest messages
    that do (at most `max_calls` calls; at most `max_lookups` authors' names asked of Slack, the
    others shown by id): bounded before `bound_thread` trims it, however long the thread.

    Raises what the client raises (`bot.slack.client.SLACK_ERRORS`) when Slack refuses.
    """
    replies = _Replies(client, channel, thread_ts, before_ts, page_size)
    first, more = await replies.page()
    parent = next((raw for raw in first if raw.get("ts") == thread_ts), None)
    newest = [raw for raw in first if raw is not parent]
    if more:
        newest = await replies.newest(max_calls - 1)
    lookups = _Lookups(names, max_lookups)

    async def read(raws: Sequence[dict[str, Any]]) -> list[ThreadMessage]:
        wanted = [raw for raw in raws if _wanted(raw, before_ts, bot_user_id)]
        return [
            ThreadMessage(await _author(client, lookups, team, raw), raw["ts"], _message_text(raw))
            for raw in wanted
        ]

    found_parent = await read([parent] if parent is not None else [])
    return ThreadRead(found_parent[0] if found_parent else None, await read(newest), skipped=more)


@dataclass
class _Replies:
    """``conversations.replies`` of one thread before the request, one page at a time."""

    client: AsyncWebClient
    channel: str
    thread_ts: str
    before_ts: str
    page_size: int

    async def page(self, oldest: int | None = None) -> tuple[list[dict[str, Any]], bool]:
        """The first page of the thread's messages after `oldest` (microseconds; None: from its
        start) and before the request, and whether more follow. Slack answers with the parent first
        whatever the window; it is dropped from a window that starts after it."""
        answer = await self.client.conversations_replies(
            channel=self.channel,
            ts=self.thread_ts,
            latest=self.before_ts,
            oldest=None if oldest is None else _ts_of(oldest),
            limit=self.page_size,
        )
        messages: list[dict[str, Any]] = answer.get("messages") or []
        if oldest is not None:
            messages = [raw for raw in messages if raw.get("ts") != self.thread_ts]
        more = bool(answer.get("has_more") or (answer.get("response_metadata") or {}).get("next_cursor"))
        return messages, more

    async def newest(self, calls: int) -> list[dict[str, Any]]:
        """The newest messages of a thread longer than a page, in at most `calls` calls: the window
        (oldest, request) is bisected until it fits in a page holding at least half a page (or no
        narrower bound is left); the widest window that fit, else the narrowest that did not."""
        too_wide, fits = _micros(self.thread_ts), _micros(self.before_ts)
        best: list[dict[str, Any]] = []
        over: list[dict[str, Any]] = []
        for _ in range(calls):
            if fits - too_wide <= 1:
                break
            middle = (too_wide + fits) // 2
            messages, more = await self.page(oldest=middle)
            if more:
                too_wide, over = middle, messages
                continue
            fits, best = middle, messages
            if 2 * len(best) >= self.page_size:
                break
        return best or over


def _micros(ts: str) -> int:
    return int(Decimal(ts) * MICROS)


def _ts_of(micros: int) -> str:
    return f"{micros // MICROS}.{micros % MICROS:06d}"


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
    """The message's text, with the names of files it shared (their contents are not read), made
    writable (see `bot.slack.text`)."""
    files = [
        f"[shared a file: {file.get('name') or file.get('title') or 'unnamed'}]"
        for file in raw.get("files") or []
    ]
    return readable(" ".join([slack_unescape(raw.get("text") or ""), *files]).strip())
