"""What a request shared that the bot did not read, as the run records it and the thread is told."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unread:
    """Something shared with a request that the bot did not read, and why (a line in the thread)."""

    name: str
    reason: str
