"""The text typed after `/rubric`: which subcommand, and its argument (pure).

Which subcommands exist, and what each takes after it, is the `/rubric` table's to say
(:data:`bot.listeners.rubric_command.RUBRIC_SUBCOMMANDS`); this module reads text against it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

MAX_REPORT_DAYS = 3650
"""Longest period a report may cover, in days (ten years: longer than any bot's history, and
small enough that the period's start is always a valid date)."""

SWITCH_WORDS: dict[str, bool] = {"on": True, "off": False}
"""What `/rubric calibration` accepts after it."""

_HEAD = re.compile(r"(\S+)\s*(.*)", re.DOTALL)
"""The first word, then everything after it with its line breaks (a rubric may start on line 2)."""

DEFAULT_SUBCOMMAND = "edit"
"""What a bare `/rubric` means: open the editor of the channel's default rubric."""


class Argument(Enum):
    """What a subcommand takes after its name."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRED = "required"


class Grammar(Protocol):
    """What parsing needs to know of a subcommand (an entry of the `/rubric` table has it)."""

    @property
    def usage(self) -> str:
        """How it is typed, e.g. ``/rubric set <rubric>``."""
        ...

    @property
    def argument(self) -> Argument:
        """What it takes after its name."""
        ...


class CommandError(ValueError):
    """The command text does not form a valid `/rubric` subcommand; the message says why."""


@dataclass(frozen=True)
class ParsedCommand:
    """A parsed `/rubric` invocation. `argument` keeps its line breaks (rubrics are multi-line)."""

    name: str
    argument: str = ""


def parse_command(text: str, subcommands: Mapping[str, Grammar]) -> ParsedCommand:
    """Split `/rubric` text into a subcommand and the rest; raise `CommandError` if it is unusable.

    ``subcommands`` holds every subcommand there is, by name.
    """
    match = _HEAD.fullmatch(text.strip())
    if match is None:
        return ParsedCommand(DEFAULT_SUBCOMMAND)
    head, argument = match.group(1), match.group(2).strip()
    name = head.lower()
    grammar = subcommands.get(name)
    if grammar is None:
        raise CommandError(f"`{head}` is not a /rubric subcommand.")
    if grammar.argument is Argument.REQUIRED and not argument:
        raise CommandError(f"`/rubric {name}` needs more after it: `{grammar.usage}`.")
    if grammar.argument is Argument.NONE and argument:
        raise CommandError(f"`/rubric {name}` takes nothing after it.")
    return ParsedCommand(name, argument)


def report_days(argument: str) -> int | None:
    """The period of `/rubric report|replay [days]` (and `rubric-bot report --days`); None: all time."""
    text = argument.strip()
    if not text:
        return None
    if not text.isdecimal() or not 1 <= int(text) <= MAX_REPORT_DAYS:
        raise CommandError(
            f"`{text}` is not a number of days; give a whole number from 1 to {MAX_REPORT_DAYS}."
        )
    return int(text)


DROP_WORD = "drop"
"""`/rubric calibration drop N`: take example N out of calibration."""


def calibration_switch(argument: str) -> bool | None:
    """`on` → True, `off` → False, nothing → None (show the current setting)."""
    text = argument.strip()
    if not text:
        return None
    try:
        return SWITCH_WORDS[text.lower()]
    except KeyError:
        raise CommandError(f"`/rubric calibration` takes `on`, `off` or `drop N`, not `{text}`.") from None


def calibration_drop(argument: str) -> int | None:
    """The example N of `/rubric calibration drop N`; None when the argument is not a drop."""
    head, _, rest = argument.strip().partition(" ")
    if head.lower() != DROP_WORD:
        return None
    text = rest.strip()
    if not text.isdecimal() or int(text) < 1:
        raise CommandError(
            f"`/rubric calibration drop` needs an example's number, not `{text}`; "
            "`/rubric calibration` lists them."
        )
    return int(text)


TRUST_OFF = "off"
"""What `/rubric trust` takes to turn trust off."""

TRUST_LEVELS = (0.5, 0.99)
"""The trust levels `/rubric trust` accepts, inclusive: under half, a grader agreeing with people
is worse than a coin; above 99 %, no team reviews enough for the promise to reach it."""


def trust_level(argument: str) -> float | None:
    """The level of `/rubric trust 0.9` (``90%`` too), None for `off`; CommandError otherwise."""
    text = argument.strip().lower()
    if text == TRUST_OFF:
        return None
    low, high = TRUST_LEVELS
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # NaN fails too
        raise CommandError(
            f"`/rubric trust` takes a level from {low:g} to {high:g} (the agreement with the team the "
            f"grader's acted-on verdicts must reach, e.g. `0.9` or `90%`) or `off`, not `{argument.strip()}`."
        )
    return round(value, 4)


@dataclass(frozen=True)
class ReviewModeChange:
    """What `/rubric review blind on|off` or `/rubric review double <share>|off` changes (None: kept)."""

    blind: bool | None = None
    double_share: float | None = None


REVIEW_USAGE = "`/rubric review blind on|off` or `/rubric review double <share from 0 to 1>|off`"
"""How the review modes are changed, said with a change that cannot be read."""


def review_mode_change(argument: str) -> ReviewModeChange | None:
    """The change of `/rubric review blind on` or `/rubric review double 0.2` (``20%``, ``off`` = 0);
    None for a bare `/rubric review` (show the modes); CommandError otherwise."""
    words = argument.lower().split()
    if not words:
        return None
    if len(words) != 2 or words[0] not in ("blind", "double"):
        raise CommandError(f"{REVIEW_USAGE} changes how this channel reviews, not `{argument.strip()}`.")
    mode, value = words
    if mode == "blind":
        if value not in SWITCH_WORDS:
            raise CommandError(f"`/rubric review blind` takes `on` or `off`, not `{value}`.")
        return ReviewModeChange(blind=SWITCH_WORDS[value])
    return ReviewModeChange(double_share=_share(value))


def _share(text: str) -> float:
    """A share of `/rubric review double`: ``0.2``, ``20%`` or ``off`` (0)."""
    if text == "off":
        return 0.0
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:  # NaN fails too
        raise CommandError(
            "`/rubric review double` takes the share of reviewed iterations a second person is asked "
            f"to review, from 0 to 1 (e.g. `0.2` or `20%`), or `off`, not `{text}`."
        )
    return round(value, 4)


def version_number(argument: str) -> int:
    """The version of `/rubric revert N`."""
    text = argument.strip()
    if not text.isdecimal() or int(text) < 1:
        raise CommandError(f"`{text}` is not a version number; `/rubric history` lists them.")
    return int(text)
