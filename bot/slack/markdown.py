"""Model-written Markdown for Slack's ``markdown`` blocks: mentions kept inert, split to Slack's limits.

A ``markdown`` block takes standard Markdown and Slack renders it, so the worker's answer goes in
as written. Two things are left to the bot. Slack's own mention syntax (``<!channel>``,
``<!here>``, ``<!everyone>``, ``<!group>``, ``<!subteam^…>``, ``<@U…>``) and bare ``@channel``/``@here``/
``@everyone`` written by a model must not notify anyone, so an invisible character is put inside
each. And an answer longer than a block or a message holds is split between its top-level
Markdown blocks (paragraphs, lists, headings, code blocks), found with markdown-it-py's CommonMark
parser; a code block that must be cut is closed and reopened, so every piece renders on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt

from bot.slack.mrkdwn import ELLIPSIS

__all__ = ["inert_mentions", "split_markdown", "truncate_markdown"]

ZERO_WIDTH_SPACE = "\u200b"
"""Put after the ``<`` of Slack mention syntax: the text looks the same but is no longer syntax."""

WORD_JOINER = "\u2060"
"""Put after the ``@`` of a bare ``@here``: invisible, and no longer the word Slack links."""

MIN_SPLIT_LIMIT = 16
"""Smallest piece size split_markdown accepts: room for a reopened and a closed fence plus text."""

_SLACK_MENTION = re.compile(r"<(?=!(?:channel|here|everyone|group|subteam\^)|@[UW][A-Z0-9])", re.IGNORECASE)
"""The ``<`` opening a broadcast (``<!group>`` is the old name of ``<!channel>``), user-group or
user mention in Slack's syntax."""

_BARE_BROADCAST = re.compile(r"(?<![^\W_]|@)@(?=(?:channel|here|everyone)(?![^\W_]))", re.IGNORECASE)
"""The ``@`` of a bare ``@channel``, ``@here`` or ``@everyone`` not inside a word such as an
address (``me@here.com``). ``_`` does not count as part of a word: Slack reads ``_@here_`` as
an italic ``@here`` and ``x_@everyone`` as a mention, so both are made inert."""

_PARSER = MarkdownIt("commonmark")
"""CommonMark parser; only its block structure (token line ranges) is used."""


def inert_mentions(markdown: str) -> str:
    """The Markdown with every Slack mention and bare broadcast word made inert, looking the same."""
    text = _SLACK_MENTION.sub("<" + ZERO_WIDTH_SPACE, markdown)
    return _BARE_BROADCAST.sub("@" + WORD_JOINER, text)


@dataclass(frozen=True)
class _Segment:
    """A top-level Markdown block with the blank lines after it; ``fence`` set for fenced code."""

    lines: list[str]
    fence: str | None = None


def split_markdown(markdown: str, limit: int) -> list[str]:
    """Split Markdown into pieces of at most ``limit`` characters, losing no visible text.

    Cuts fall between top-level blocks where they can; a block longer than ``limit`` is cut at
    line breaks, then spaces, then anywhere, and a fenced code block cut this way is closed and
    reopened with its own fence and language. Only the line breaks at a cut are dropped.
    Whitespace-only Markdown gives no pieces.
    """
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT}, got {limit}")
    pieces: list[str] = []
    current = ""
    for chunk in _chunks(_segments(markdown), limit):
        if current and len(current) + len(chunk) > limit:
            pieces.append(current)
            current = ""
        current += chunk
    pieces.append(current)
    return [piece.strip("\n") for piece in pieces if piece.strip()]


def truncate_markdown(markdown: str, limit: int) -> str:
    """The Markdown shortened to at most ``limit`` characters, ending with an ellipsis when cut."""
    if len(markdown) <= limit:
        return markdown
    head = split_markdown(markdown, max(limit - len(ELLIPSIS) - 1, MIN_SPLIT_LIMIT))[0]
    ends_in_fence = head.rsplit("\n", 1)[-1].startswith(("```", "~~~"))
    return head + ("\n" if ends_in_fence else "") + ELLIPSIS


def _segments(markdown: str) -> list[_Segment]:
    """The text as consecutive top-level blocks, each with the blank lines that follow it."""
    lines = markdown.splitlines(keepends=True)
    starts: dict[int, str | None] = {}
    for token in _PARSER.parse(markdown):
        if token.level == 0 and token.map is not None and not token.type.endswith("_close"):
            starts.setdefault(token.map[0], token.markup if token.type == "fence" else None)
    bounds = sorted({0, *starts})
    ends = [*bounds[1:], len(lines)]
    return [_Segment(lines[start:end], starts.get(start)) for start, end in zip(bounds, ends, strict=True)]


def _chunks(segments: Sequence[_Segment], limit: int) -> Iterator[str]:
    """Each segment whole when it fits in ``limit``, else cut into pieces that do."""
    for segment in segments:
        text = "".join(segment.lines)
        if len(text) <= limit:
            yield text
        elif segment.fence is not None:
            yield from _cut_fence(segment.lines, segment.fence, limit)
        else:
            yield from _cut_lines(segment.lines, limit)


def _cut_fence(lines: Sequence[str], fence: str, limit: int) -> Iterator[str]:
    """A fenced code block in pieces, each closed with ``fence`` and reopened with its opening line."""
    opening, *body = lines
    blank: list[str] = []  # the blank lines after the block, kept to separate it from the next
    while body and not body[-1].strip():
        blank.insert(0, body.pop())
    if body and body[-1].strip().startswith(fence):  # its closing fence: each piece gets its own
        body.pop()
    opening = opening if opening.endswith("\n") else opening + "\n"
    closing = fence + "\n"
    room = limit - len(opening) - len(closing) - 1  # 1: a line break may end a piece cut mid-line
    if room < 1:  # an opening line that long cannot be repeated: cut the block as plain lines
        yield from _cut_lines(lines, limit)
        return
    for piece in _cut_lines(body, room):
        yield opening + piece + ("" if piece.endswith("\n") else "\n") + closing
    yield "".join(blank)


def _cut_lines(lines: Sequence[str], limit: int) -> Iterator[str]:
    """Lines packed into pieces of at most ``limit``; a longer line is cut at spaces, else anywhere."""
    current = ""
    for line in lines:
        for part in _cut_line(line, limit):
            if current and len(current) + len(part) > limit:
                yield current
                current = ""
            current += part
    if current:
        yield current


def _cut_line(line: str, limit: int) -> Iterator[str]:
    """One line in parts of at most ``limit``, cut after the last space that fits when there is one."""
    while len(line) > limit:
        space = line.rfind(" ", 0, limit)
        end = space + 1 if space > limit // 2 else limit
        yield line[:end]
        line = line[end:]
    if line:
        yield line
