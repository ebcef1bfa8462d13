"""What the log keeps: job kinds and ids without their text, no Slack tokens, libraries at INFO."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from bot.ops.logs import LEVEL_TESTING_LOGGERS, SecretsHidden, hide_secrets, start_logging

CANARY = "CANARY-9f1e"
"""Text a person wrote, carried in a job's arguments."""


def job_context(job_id: int) -> dict[str, object]:
    """A job's log context as procrastinate puts it on a record (``extra={"job": …}``)."""
    kwargs = {"text": f"about {CANARY} (really)", "previous": f"{CANARY}) ended with status: x"}
    call = "bot.queue.jobs.run[{}]({})".format(job_id, ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))
    return {"id": job_id, "task_name": "bot.queue.jobs.run", "task_kwargs": kwargs, "call_string": call}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Starting job {}", "Starting job bot.queue.jobs.run[7](…)"),
        (
            "Job {} ended with status: Success, lasted 0.012 s",
            "Job bot.queue.jobs.run[7](…) ended with status: Success, lasted 0.012 s",
        ),
        (
            "Waiting for job to finish: worker: {} (started 1.500 s ago)",
            "Waiting for job to finish: worker: ",
        ),
    ],
)
def test_a_jobs_arguments_leave_its_log_line_and_its_kind_and_id_stay(template, expected):
    job = job_context(7)
    record = logging.LogRecord("procrastinate.worker", logging.INFO, __file__, 1, template, None, None)
    record.msg = template.format(job["call_string"])
    record.job = job

    assert SecretsHidden().filter(record)
    assert record.getMessage().startswith(expected)
    assert CANARY not in record.getMessage() and CANARY not in repr(record.__dict__)
    assert record.job["id"] == 7 and record.job["task_name"] == "bot.queue.jobs.run"


def test_slack_tokens_are_masked_and_ordinary_text_is_left_alone():
    text = "oauth.v2.access: {'access_token': 'xoxb-1234-5678-AbCd', 'refresh_token': 'xoxe-1-My0'} xapp-1-A1"
    assert (
        hide_secrets(text) == "oauth.v2.access: {'access_token': 'xoxb-…', 'refresh_token': 'xoxe-…'} xapp-…"
    )
    assert hide_secrets("Deferred 1 job; jobs[3] (see above)") == "Deferred 1 job; jobs[3] (see above)"


def test_a_traceback_is_written_without_the_token_its_exception_quotes():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(SecretsHidden())
    logger = logging.getLogger("tests.secrets_in_tracebacks")
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("refresh failed for xoxe-1-AbCdEf-secret")
        except RuntimeError:
            logger.exception("could not refresh")
            logger.error("where it was", stack_info=True, extra={"note": "xoxb-1-in-a-frame"})
    finally:
        logger.removeHandler(handler)

    written = stream.getvalue()
    assert "Traceback (most recent call last)" in written and "Stack (most recent call last)" in written
    assert "RuntimeError: refresh failed for xoxe-…" in written
    assert "AbCdEf-secret" not in written and "in-a-frame" not in written  # nor the frames' source lines


@pytest.fixture
def root_logging() -> Iterator[io.StringIO]:
    """The root logger's handlers and levels restored after the test; the test's log text."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    names = ("bot", "grading", "slack_sdk", "aiosqlite", "procrastinate", *LEVEL_TESTING_LOGGERS)
    levels = {name: logging.getLogger(name).level for name in names}
    root.handlers = []
    stream = io.StringIO()
    yield stream
    root.handlers, root.level = saved
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_at_debug_other_libraries_stay_at_info_unless_named(root_logging, monkeypatch):
    monkeypatch.setattr("sys.stderr", root_logging)
    start_logging("DEBUG", ["procrastinate"])

    logging.getLogger("bot.threads").debug("the bot's own detail")
    logging.getLogger("slack_sdk.web").debug("body: %s", CANARY)
    logging.getLogger("aiosqlite").debug("parameters: %s", CANARY)
    logging.getLogger("slack_sdk.web").info("a library's INFO line")
    logging.getLogger("procrastinate.worker").debug("named: token xoxb-1-2-secret")

    log = root_logging.getvalue()
    assert "the bot's own detail" in log and "a library's INFO line" in log
    assert CANARY not in log
    assert "named: token xoxb-…" in log and "secret" not in log


@pytest.mark.parametrize("client_logger", LEVEL_TESTING_LOGGERS)
def test_slacks_clients_format_no_debug_line_nobody_asked_for(root_logging, client_logger):
    # slack_sdk's clients build each call's DEBUG line (its whole request and response) whenever
    # their logger's own level is unset, then drop it: they must see that they log at INFO.
    start_logging("DEBUG")

    assert logging.getLogger(client_logger).level == logging.INFO


@pytest.mark.parametrize("client_logger", LEVEL_TESTING_LOGGERS)
def test_slacks_clients_still_write_their_debug_lines_when_slack_sdk_is_named(
    root_logging, monkeypatch, client_logger
):
    monkeypatch.setattr("sys.stderr", root_logging)
    start_logging("DEBUG", ["slack_sdk"])

    logging.getLogger(client_logger).debug("Sending a request - url: POST chat.postMessage")

    assert "Sending a request" in root_logging.getvalue()
