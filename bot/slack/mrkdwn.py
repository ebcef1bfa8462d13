"""Slack mrkdwn text, the format of the bot's own messages: escaping, truncation and splitting.

``&``, ``<`` and ``>`` in user- or model-written text are escaped, so it can never turn into
``<!channel>`` pings or forged links. Splitting and truncating cut on paragraph, line and word
boundaries, never inside an entity such as ``&amp;`` or a ``<url|link>``, and close and reopen a
code fence that a cut falls inside, so every piece renders on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

FENCE = "```"
"""The only code-block fence Slack's mrkdwn understands."""

ELLIPSIS = "…"
"""Marks text that was shortened to fit a Slack limit."""

SECTION_TEXT_MAX = 3000
"""Slack's limit on a section block's text (Block Kit reference, section block)."""

MIN_SPLIT_LIMIT = 16
"""Smallest piece size split_mrkdwn accepts: room for a reopened and a closed fence plus text."""

_FENCE_ROOM = len(FENCE) + 1
"""Characters a fence line takes with its newline; reserved when a cut may close or reopen one."""

# An HTML entity cut off at the end of a piece, e.g. "&am".
_PARTIAL_ENTITY = re.compile(r"&#?\w*$")

# Ranks of candidate cut points, best first when splitting: a paragraph break outside code,
# then any line break outside code, a line break inside code (costs a fence close/reopen),
# then a space outside a <link>. With none of them, the cut falls mid-word.
_PARAGRAPH, _LINE, _CODE_LINE, _SPACE = 4, 3, 2, 1


def slack_date(moment: datetime) -> str:
    """`moment` in Slack's date formatting, so each reader sees it in their own time zone (UTC in
    clients that cannot format it)."""
    fallback = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def escape(text: str) -> str:
    """Escape the three characters Slack reads as control characters in mrkdwn."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code_body(text: str) -> str:
    """Text to put verbatim between two fences: escaped, and with a zero-width space breaking up
    any fence inside it, which would otherwise end the block early and let the rest be read as
    formatting."""
    return escape(text.strip()).replace(FENCE, "`\u200b``")


def truncate(text: str, limit: int) -> str:
    """Shorten mrkdwn to at most ``limit`` characters, ending with an ellipsis when cut.

    Cuts at the last line break or space that fits (mid-word only when the last break would
    lose over half the room), and closes a code block left open.
    """
    if len(text) <= limit:
        return text
    budget = limit - len(ELLIPSIS) - _FENCE_ROOM
    if budget < 1:
        return ELLIPSIS[:limit]
    end, _, in_code = _cut(text, budget, in_code=False, ranked=False)
    if end < budget // 2:  # a break that far back would waste the room: cut the word instead
        end = _hard_cut(text[:budget])
        in_code = _in_code_at(text, end, in_code=False)
    return text[:end].rstrip() + ELLIPSIS + ("\n" + FENCE if in_code else "")


def split_mrkdwn(text: str, limit: int = SECTION_TEXT_MAX) -> list[str]:
    """Split mrkdwn into pieces of at most ``limit`` characters, losing no visible text.

    Prefers paragraph breaks, then line breaks, avoids cutting inside a code block when a break
    outside it fits, and closes/reopens a code block that has to be cut. Only the whitespace at
    a cut is dropped. Empty or whitespace-only text gives no pieces.
    """
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT}, got {limit}")
    pieces: list[str] = []
    rest = text.strip("\n")
    in_code = False
    while rest.strip():
        prefix = FENCE + "\n" if in_code else ""
        if len(prefix) + len(rest) <= limit:
            pieces.append(prefix + rest)
            break
        end, resume, ends_in_code = _cut(rest, limit - len(prefix) - _FENCE_ROOM, in_code)
        head = rest[:end].rstrip("\n")
        pieces.append(prefix + head + ("\n" + FENCE if ends_in_code else ""))
        rest = rest[resume:]
        if not ends_in_code:
            rest = rest.lstrip("\n")
        in_code = ends_in_code
    return pieces


def _cut(text: str, budget: int, in_code: bool, ranked: bool = True) -> tuple[int, int, bool]:
    """Where to cut ``text`` so the head fits ``budget``: (head end, rest start, head ends in code).

    With ``ranked`` the best kind of break wins (see the rank constants) and the latest of that
    kind; without, the latest line break or space wins, to keep as much as possible.
    """
    window = text[: budget + 1]  # a break right after the budget still leaves a fitting head
    usable = [
        (rank if ranked else _SPACE, end, resume)
        for rank, end, resume in _breaks(window, in_code)
        if 0 < end <= budget and window[:end].strip()
    ]
    if usable:
        _, end, resume = max(usable)
    else:
        end = resume = _hard_cut(window[:budget])
    return end, resume, _in_code_at(text, end, in_code)


def _breaks(window: str, in_code: bool) -> Iterator[tuple[int, int, int]]:
    """Candidate cuts in ``window`` as (rank, head end, rest start)."""
    for match in re.finditer("\n", window):
        end = match.start()
        if _in_code_at(window, end, in_code):
            yield _CODE_LINE, end, end + 1
            continue
        following = window[end + 1 :]
        # A blank line, or a line that opens a code block, starts a new paragraph.
        new_paragraph = following.startswith(("\n", FENCE)) or window[:end].endswith(FENCE)
        yield (_PARAGRAPH if new_paragraph else _LINE), end, end + 1
    for match in re.finditer(" ", window):
        end = match.start()
        if window.rfind("<", 0, end) <= window.rfind(">", 0, end):  # not inside <url|text>
            yield _SPACE, end, end + 1


def _hard_cut(head: str) -> int:
    """End of a cut with no break to use, moved back before a partial entity or link."""
    end = len(head)
    entity = _PARTIAL_ENTITY.search(head)
    if entity and entity.start() > 0:
        end = entity.start()
    link_start = head.rfind("<", 0, end)
    if link_start > 0 and head.rfind(">", 0, end) < link_start:
        end = link_start
    return end


def _in_code_at(text: str, position: int, in_code: bool) -> bool:
    """Whether ``position`` lies inside a code block, given the state at the start of text."""
    return in_code != bool(text.count(FENCE, 0, position) % 2)
