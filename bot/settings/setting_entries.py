"""The entries of the settings that are lists: how a comma-separated value is split, and what each
entry must look like (each setting's validator in `bot.config` checks its entries against one, or
reads its whole list with one of the readers below, which raise `ValueError` naming a wrong entry)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from cryptography.fernet import Fernet
from pydantic import SecretStr

EDITOR_ID = re.compile(r"[UWS][A-Z0-9]{2,}")
"""A Slack user id (``U…``, ``W…`` on Enterprise Grid) or user-group id (``S…``)."""

LOGGER_NAME = re.compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*")
"""A Python logger's dotted name, e.g. ``slack_sdk.web.async_base_client``."""

MODEL_ID = re.compile(r"[a-z][a-z0-9_]*:[^\s,]+")
"""A langchain model id as the model settings take it: ``provider:model``, e.g. ``openai:gpt-4o-mini``."""

MODEL_ID_MAX = 150
"""Longest model id `RUBRIC_BOT_ALLOWED_MODELS` takes: what a Slack menu option's value holds, and
the `/rubric admin` form offers each as one."""

TEAM_ID = re.compile(r"T[A-Z0-9]+")
"""A Slack workspace id (``T…``), as `RUBRIC_BOT_ALLOWED_TEAMS` lists them."""

ENTERPRISE_ID = re.compile(r"E[A-Z0-9]+")
"""An Enterprise Grid org id (``E…``), as `RUBRIC_BOT_ALLOWED_ENTERPRISES` lists them."""


def comma_list(value: str) -> tuple[str, ...]:
    """The entries of a comma-separated setting, as Slack and operators write lists: trimmed, with
    empty entries (a trailing comma, doubled commas) left out."""
    return tuple(entry for part in value.split(",") if (entry := part.strip()))


def unmatched_entries(entries: Sequence[str], pattern: re.Pattern[str]) -> str:
    """The numbers (from 1, comma-separated) of the `entries` that `pattern` does not match whole;
    '' when every one does."""
    return ", ".join(str(n) for n, entry in enumerate(entries, start=1) if not pattern.fullmatch(entry))


def logger_names(value: str) -> tuple[str, ...]:
    """The logger names of `RUBRIC_BOT_DEBUG_LOGGERS`."""
    names = comma_list(value)
    if wrong := unmatched_entries(names, LOGGER_NAME):
        raise ValueError(f"entry {wrong} is not a logger name")
    return names


def model_ids(value: str) -> tuple[str, ...]:
    """The model ids of `RUBRIC_BOT_ALLOWED_MODELS`, each once, in order."""
    ids = tuple(dict.fromkeys(comma_list(value)))
    if wrong := unmatched_entries(ids, MODEL_ID):
        raise ValueError(f'entry {wrong} is not a "provider:model" id')
    long = [str(n) for n, id_ in enumerate(ids, start=1) if len(id_) > MODEL_ID_MAX]
    if long:
        raise ValueError(f"entry {', '.join(long)} is longer than {MODEL_ID_MAX} characters")
    return ids


def fernet_keys(value: str) -> tuple[SecretStr, ...]:
    """The Fernet keys of `RUBRIC_BOT_ENCRYPTION_KEY`, kept secret."""
    for number, key in enumerate(keys := comma_list(value), start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(f"entry {number} is not a Fernet key") from None
    return tuple(SecretStr(key) for key in keys)


def scope_list(value: str) -> tuple[str, ...]:
    """The bot scopes of `RUBRIC_BOT_SCOPES`: at least one."""
    scopes = comma_list(value)
    if not scopes:
        raise ValueError("it names no scope")
    return scopes
