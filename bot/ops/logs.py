"""What a process writes to its log: its own lines at `RUBRIC_BOT_LOG_LEVEL`, and nothing people wrote.

The bot's own loggers (``bot``, ``grading``) follow `RUBRIC_BOT_LOG_LEVEL`. Other libraries' loggers
stay at INFO or above even at DEBUG, because their DEBUG lines carry what the bot must not keep in a
log: slack_sdk's request and response bodies (``oauth.v2.access`` answers hold tokens, messages hold
conversations) and aiosqlite's statement parameters. An operator who needs one of them names it in
`RUBRIC_BOT_DEBUG_LOGGERS`.

Two things are taken out of every line, whichever logger wrote it: Slack tokens, and the arguments
of the PostgreSQL queue's jobs, which procrastinate writes into its lines at INFO (a request's text,
a deleted or edited message's text). A job is logged by its kind and id only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["OWN_LOGGERS", "QUIET_LOGGERS", "SecretsHidden", "hide_secrets", "start_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One line per record: time, level, logger, message."""

OWN_LOGGERS = ("bot", "grading")
"""The loggers whose level is `RUBRIC_BOT_LOG_LEVEL`; other libraries' stay at INFO or above."""

QUIET_LOGGERS = ("httpx", "httpx2", "alembic")
"""HTTP client loggers of the model providers (one INFO line per model call) and Alembic's (two INFO
lines per schema check, even when there is nothing to migrate): noise, kept at WARNING."""

LEVEL_TESTING_LOGGERS = ("slack_sdk.web.async_base_client", "slack_sdk.web.base_client")
"""slack_sdk's Web API clients' loggers. A client formats each call's whole request and response
for a DEBUG line whenever its logger's *own* level is unset (it tests ``logger.level``, not whether
DEBUG is on), then drops the line: ~0.2 ms of CPU a call (issue 45). Given the level they inherit,
they format nothing that no one logs, and still do where DEBUG is asked for."""

HIDDEN = "…"
"""What stands where a job's arguments or a token's secret part were."""

_JOB_CALL = re.compile(r"(\[\d+\])\(.*\)(?=$| ended with status: )", re.DOTALL)
"""A procrastinate job's call string, ``task.name[id](text='…', …)``: its arguments, after the
id, end the line or come before the outcome (``Job … ended with status: …``)."""

_SLACK_TOKEN = re.compile(r"\b(xox[a-z]|xapp)-[A-Za-z0-9-]+")
"""A Slack token (bot, user, refresh, app-level…): its prefix names its kind, the rest is secret."""

_JOB_RECORDS = ("job", "jobs")
"""The attributes procrastinate puts on its records (``extra=``): one job's or several jobs' dicts,
whose ``task_kwargs`` and ``call_string`` hold the job's arguments."""


def hide_secrets(text: str) -> str:
    """`text` with Slack tokens and queued jobs' arguments taken out."""
    return _SLACK_TOKEN.sub(rf"\1-{HIDDEN}", _JOB_CALL.sub(rf"\1({HIDDEN})", text))


class SecretsHidden(logging.Filter):
    """A handler's filter: every record it writes has `hide_secrets` applied, its extras, traceback
    and stack too (an exception's message or a frame's source line may quote a token)."""

    _tracebacks = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = hide_secrets(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:  # formatted here, as the handler's formatter would
            record.exc_text = self._tracebacks.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = hide_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = hide_secrets(record.stack_info)
        for name in _JOB_RECORDS:
            jobs = record.__dict__.get(name)
            if isinstance(jobs, Mapping):
                record.__dict__[name] = _job_without_arguments(jobs)
            elif isinstance(jobs, list):
                record.__dict__[name] = [
                    _job_without_arguments(job) for job in jobs if isinstance(job, Mapping)
                ]
        return True


def _job_without_arguments(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job's log context without its arguments."""
    kept = {key: value for key, value in job.items() if key not in ("task_kwargs", "call_string")}
    kept["call_string"] = hide_secrets(str(job.get("call_string", "")))
    return kept


def start_logging(level: str, debug_loggers: Iterable[str] = ()) -> None:
    """Log to stderr: the bot's loggers at `level`, others at INFO or above unless named in
    `debug_loggers`, noisy ones at WARNING; every line through `SecretsHidden`."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(SecretsHidden())
    numeric = logging.getLevelName(level)
    root = logging.getLogger()
    root.setLevel(max(numeric, logging.INFO))
    root.addHandler(handler)
    for name in (*OWN_LOGGERS, *debug_loggers):
        logging.getLogger(name).setLevel(numeric)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in LEVEL_TESTING_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logger.getEffectiveLevel())
