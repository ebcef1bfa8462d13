"""What a failure notice in Slack may say: plain words and a short reference, never an exception's text.

An exception's text can carry secrets — a model provider's error may hold an API key's tail or an
organisation id, a database error its host, user or SQL parameters — and a Slack notice is read by
everyone in the channel. So the full error goes only to the log, on a line naming a short reference
(``ref 7f3a2c``); the notice says what failed in plain words and repeats the reference, for an
operator to find the line.
"""

from __future__ import annotations

import logging
import re
import secrets

from slack_sdk.errors import SlackApiError

from bot.slack.client import describe_error

REFERENCE_BYTES = 3
"""Random bytes in a reference: six hex digits, unique enough to find one line in a day's log."""

SLACK_ERROR_CODE = re.compile(r"[a-z_]+")
"""The shape of Slack's error codes (``not_in_channel``): a fixed vocabulary, safe to show."""


def log_failure(logger: logging.Logger, what: str, exc: BaseException, *, traceback: bool = True) -> str:
    """Log that `what` failed with `exc` (its full text, and its traceback) under a new reference,
    and return the reference for the notice."""
    reference = secrets.token_hex(REFERENCE_BYTES)
    logger.error("%s (ref %s): %s", what, reference, describe_error(exc), exc_info=exc if traceback else None)
    return reference


def reference_words(reference: str) -> str:
    """The sentence a notice ends with, naming the log line's reference."""
    return f"If it keeps happening, give the bot's operator this reference: ref {reference}."


def slack_failure_words(exc: BaseException) -> str:
    """A failed Slack call in plain words: Slack's error code if it answered one, else that it
    could not be reached (a connection error's text names hosts and addresses)."""
    if isinstance(exc, SlackApiError):
        code = str(exc.response.get("error"))
        if SLACK_ERROR_CODE.fullmatch(code):
            return f"Slack answered {code}"
    return "Slack could not be reached"
