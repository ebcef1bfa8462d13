"""Socket Mode's connection pacing: each failed attempt is one WARNING line, backing off, with the
traceback only at DEBUG; a stop ends the waiting at once. (End to end: tests/e2e/test_socket_mode_e2e.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.config import ConfigError
from bot.slack import socket_mode


class Unreachable(OSError):
    pass


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(socket_mode, "FIRST_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(socket_mode, "MAX_RETRY_SECONDS", 0.04)


def failing_times(n: int) -> tuple[list[int], object]:
    calls: list[int] = []

    async def attempt() -> None:
        calls.append(len(calls))
        if len(calls) <= n:
            raise Unreachable("Connection refused")

    return calls, attempt


async def test_failed_attempts_are_one_warning_each_backing_off_with_the_traceback_only_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger=socket_mode.__name__)
    calls, attempt = failing_times(4)

    assert await socket_mode.retry_until_stopped(attempt, asyncio.Event(), "connect to Slack") is True

    assert len(calls) == 5
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "could not connect to Slack (attempt 1): Unreachable: Connection refused; retrying in 0.01s",
        "could not connect to Slack (attempt 2): Unreachable: Connection refused; retrying in 0.02s",
        "could not connect to Slack (attempt 3): Unreachable: Connection refused; retrying in 0.04s",
        "could not connect to Slack (attempt 4): Unreachable: Connection refused; retrying in 0.04s",
    ]
    assert all(r.exc_info is None for r in warnings)
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 4 and all(r.levelno == logging.DEBUG for r in tracebacks)


async def test_a_stop_ends_the_retrying_while_it_waits():
    stop = asyncio.Event()
    calls, attempt = failing_times(1_000)
    asyncio.get_running_loop().call_later(0.05, stop.set)

    assert await socket_mode.retry_until_stopped(attempt, stop, "connect to Slack") is False
    assert calls  # it tried, and gave up when told to


async def test_a_stop_cancels_an_attempt_that_hangs():
    stop = asyncio.Event()
    hanging = asyncio.Event()

    async def attempt() -> None:
        hanging.set()
        await asyncio.Event().wait()  # e.g. a TCP connect to a host that never answers

    asyncio.get_running_loop().call_later(0.05, stop.set)
    assert await socket_mode.retry_until_stopped(attempt, stop, "connect to Slack") is False
    assert hanging.is_set()


async def test_a_refused_token_is_not_retried():
    calls: list[int] = []

    async def attempt() -> None:
        calls.append(1)
        raise ConfigError(["SLACK_APP_TOKEN was refused by Slack (invalid_auth): ..."])

    with pytest.raises(ConfigError):
        await socket_mode.retry_until_stopped(attempt, asyncio.Event(), "check the Slack tokens")
    assert calls == [1]
