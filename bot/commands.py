"""Parsing the text of the `/rubric` slash command into a subcommand and its argument (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SUBCOMMANDS: tuple[str, ...] = ("edit", "set", "show", "clear", "report", "calibration", "help")
"""Subcommands `/rubric` understands; a bare `/rubric` means `edit` (open the modal)."""

WITH_ARGUMENT: frozenset[str] = frozenset({"set"})
"""Subcommands that need text after them."""

OPTIONAL_ARGUMENT: frozenset[str] = frozenset({"report", "calibration"})
"""Subcommands that may take a word after them (`report 30`, `calibration off`); the rest take none."""

MAX_REPORT_DAYS = 3650
"""Longest period a report may cover, in days (ten years: longer than any bot's history, and
small enough that the period's start is always a valid date)."""

SWITCH_WORDS: dict[str, bool] = {"on": True, "off": False}
"""What `/rubric calibration` accepts after it."""

_HEAD = re.compile(r"(\S+)\s*(.*)", re.DOTALL)
"""The first word, then everything after it with its line breaks (a rubric may start on line 2)."""


class CommandError(ValueError):
    """The command text does not form a valid `/rubric` subcommand; the message says why."""


@dataclass(frozen=True)
class RubricCommand:
    """A parsed `/rubric` invocation. `argument` keeps its line breaks (rubrics are multi-line)."""

    name: str
    argument: str = ""


def parse_command(text: str) -> RubricCommand:
    """Split `/rubric` text into a subcommand and the rest; raise `CommandError` if it is unusable."""
    match = _HEAD.fullmatch(text.strip())
    if match is None:
        return RubricCommand("edit")
    head, argument = match.group(1), match.group(2).strip()
    name = head.lower()
    if name not in SUBCOMMANDS:
        raise CommandError(f"`{head}` is not a /rubric subcommand.")
    if name in WITH_ARGUMENT and not argument:
        raise CommandError(f"`/rubric {name}` needs a rubric after it.")
    if name not in WITH_ARGUMENT | OPTIONAL_ARGUMENT and argument:
        raise CommandError(f"`/rubric {name}` takes nothing after it.")
    return RubricCommand(name, argument)


def report_days(argument: str) -> int | None:
    """The period of `/rubric report [days]` (and `rubric-bot report --days`); None means all time."""
    text = argument.strip()
    if not text:
        return None
    if not text.isdecimal() or not 1 <= int(text) <= MAX_REPORT_DAYS:
        raise CommandError(
            f"`{text}` is not a number of days; give a whole number from 1 to {MAX_REPORT_DAYS}."
        )
    return int(text)


def calibration_switch(argument: str) -> bool | None:
    """`on` → True, `off` → False, nothing → None (show the current setting)."""
    text = argument.strip()
    if not text:
        return None
    try:
        return SWITCH_WORDS[text.lower()]
    except KeyError:
        raise CommandError(f"`/rubric calibration` takes `on` or `off`, not `{text}`.") from None
