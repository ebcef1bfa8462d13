"""Text cleaned where it enters the bot: what Slack sends, what threads and files hold.

PostgreSQL keeps neither a NUL character (``\\u0000``) in text or ``jsonb`` nor, like SQLite's
driver and every UTF-8 encoder, a lone surrogate (half of a UTF-16 pair, which JSON's ``\\ud800``
escapes can carry): one such message would fail every write of it, and on PostgreSQL the claims
written with it. They are cleaned before anything reads them, the text kept readable: a NUL
dropped (it shows nothing), a lone surrogate shown as U+FFFD, as undecodable bytes are.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

UNWRITABLE = re.compile("[\x00\ud800-\udfff]")
"""Characters no database or encoder of the bot's takes. Python joins a JSON surrogate pair into one
character, so any surrogate left in a `str` is a lone one."""

REPLACEMENT = "\ufffd"
"""What a lone surrogate becomes: the character that shows "something unreadable was here"."""


def readable(text: str) -> str:
    """`text` without NUL characters, its lone surrogates replaced by U+FFFD."""
    if UNWRITABLE.search(text) is None:
        return text
    return UNWRITABLE.sub(lambda found: "" if found.group() == "\x00" else REPLACEMENT, text)


def clean_payload(value: Any) -> Any:
    """`value` (a parsed JSON payload) with every string in it, keys included, made `readable`:
    dicts and lists are cleaned in place (Bolt hands listeners the same objects), the value itself
    returned."""
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, list):
        value[:] = [clean_payload(item) for item in value]
    elif isinstance(value, dict):
        cleaned = {readable(key): clean_payload(item) for key, item in value.items()}
        value.clear()
        value.update(cleaned)
    return value


async def clean_request(body: dict[str, Any], next: Callable[[], Awaitable[None]]) -> None:
    """Bolt global middleware: every request's payload (events, commands, clicks, forms) cleaned
    (see `clean_payload`) before any listener reads it."""
    clean_payload(body)
    await next()
