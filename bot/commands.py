"""Parsing the text of the `/rubric` slash command into a subcommand and its argument (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SUBCOMMANDS: tuple[str, ...] = ("edit", "set", "show", "clear", "help")
"""Subcommands `/rubric` understands; a bare `/rubric` means `edit` (open the modal)."""

WITH_ARGUMENT: frozenset[str] = frozenset({"set"})
"""Subcommands that need text after them; the others take none."""

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
    if name not in WITH_ARGUMENT and argument:
        raise CommandError(f"`/rubric {name}` takes nothing after it.")
    return RubricCommand(name, argument)
