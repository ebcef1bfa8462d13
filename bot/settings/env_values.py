"""Settings' values as env files hand them over: `docker run --env-file` (unlike python-dotenv, which
reads the bot's own `.env`) keeps an inline comment, surrounding spaces and quotes as part of the value,
so ``RUBRIC_BOT_MODEL=openai:gpt-4o-mini   # the worker`` arrives whole. Such a value is named in one
line at start, before it could fail every request later.
"""

from __future__ import annotations

import re

INLINE_COMMENT = re.compile(r"\s#")
"""Whitespace then ``#``: how an env file's line comment starts. `docker run --env-file` (and some
other loaders) keep it as part of the value, so ``openai:gpt-4o-mini   # the worker`` arrives whole."""

SECRET_SETTINGS = frozenset(
    {
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_CLIENT_SECRET",
        "RUBRIC_BOT_DB",  # a PostgreSQL URL may hold a password
    }
)
"""Settings whose values a problem report never shows (model providers' keys are never shown either)."""

PROVIDER_KEY_SUFFIX = "_API_KEY"
"""How model providers' keys are named (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, …): langchain reads
them from the environment, where `.env`'s are loaded too, so they are checked like the settings."""


LIST_SETTINGS = frozenset(
    {
        "RUBRIC_BOT_SCOPES",
        "RUBRIC_BOT_ALLOWED_MODELS",
        "RUBRIC_BOT_DEBUG_LOGGERS",
        "RUBRIC_BOT_RUBRIC_EDITORS",
    }
)
"""Comma-separated settings, whose entries are trimmed (`comma_list`): spaces around them are harmless."""


def pasted_value_problem(name: str, value: str) -> str | None:
    """The one line saying that setting (or provider key) `name`'s `value` carries more than the
    value (an inline comment, surrounding spaces or quotes, as `docker run --env-file` passes them
    on), or None if it does not. A secret (`SECRET_SETTINGS`, a provider key) is named, never shown.
    """
    secret = name in SECRET_SETTINGS or name.endswith(PROVIDER_KEY_SUFFIX)
    shown = " (value not shown: it is a secret)" if secret else f": {value!r}"
    if INLINE_COMMENT.search(value):
        return (
            f"{name} looks like it carries a comment{shown}. An env file given to docker run --env-file "
            "keeps everything after = as the value: put the comment on a line of its own."
        )
    if value != value.strip() and name not in LIST_SETTINGS:
        return f"{name} has spaces or tabs around its value{shown}: remove them."
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return (
            f"{name} is wrapped in quotes{shown}. docker run --env-file keeps quotes as part of the value: "
            "write it without them."
        )
    return None
