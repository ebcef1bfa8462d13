"""Trigger ids, as Slack hands them out with interactions and takes them back to open a modal.

Slack puts a ``trigger_id`` in every slash command and interaction payload. An app exchanges it for
one view (``views.open`` or ``views.push``) within three seconds; an id Slack never handed out, one
already exchanged, or one presented too late is refused (``invalid_trigger_id``,
``exchanged_trigger_id``, ``expired_trigger_id``). `TriggerIds` is that ledger for the Slack stand-in.

Its clock is whatever the ledger is given: the payload builders' ledger (`HANDED_OUT`) runs on the
monotonic clock, and a test that checks the expiry gives a ledger of its own a `ManualClock` and moves
it past the bound instead of sleeping.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable
from typing import Literal

Clock = Callable[[], float]
"""Seconds on some clock; only differences between two readings mean anything."""

TriggerRefusal = Literal["invalid_trigger_id", "exchanged_trigger_id", "expired_trigger_id"]
"""Slack's errors for a trigger id it will not exchange: never handed out, used already, too old."""

TRIGGER_EXPIRY_SECONDS = 3.0
"""Slack's: a trigger id opens a view only within three seconds of the interaction that carried it."""

PATIENT_TRIGGER_EXPIRY_SECONDS = 120.0
"""The expiry a stand-in serving a bot under test gives trigger ids instead of Slack's three seconds on
the wall clock, which a busy machine holding the bot up would miss; the expiry itself is tested on a
`ManualClock`."""


class ManualClock:
    """A clock that moves only when the test moves it (`advance`)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


class TriggerIds:
    """The trigger ids handed out, when (on `clock`), and which were exchanged; safe from any thread."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._handed_out: dict[str, float] = {}
        self._exchanged: set[str] = set()

    def hand_out(self) -> str:
        """A new trigger id in Slack's format (``132456.7890123.abcdef``), good from now on."""
        with self._lock:
            trigger_id = f"{next(self._numbers)}.{time.time_ns() // 1000}.{secrets.token_hex(6)}"
            self._handed_out[trigger_id] = self.clock()
        return trigger_id

    def exchange(self, trigger_id: str, expiry: float) -> TriggerRefusal | None:
        """Use `trigger_id` for a view if it was handed out at most `expiry` seconds ago and never
        used; None when it was, else why not."""
        with self._lock:
            handed_out_at = self._handed_out.get(trigger_id)
            if handed_out_at is None:
                return "invalid_trigger_id"
            if trigger_id in self._exchanged:
                return "exchanged_trigger_id"
            if self.clock() - handed_out_at > expiry:
                return "expired_trigger_id"
            self._exchanged.add(trigger_id)
            return None


HANDED_OUT = TriggerIds()
"""The ledger of the payload builders (tests.standins.slack_requests) and, unless given another, of
every Slack stand-in in the test process."""
