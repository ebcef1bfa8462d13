"""How a process starts, in process: the schema brought up to date once, and a database it cannot use
said in one line without its password (exit 2), or waited for with ``--wait-for-db`` until stopped."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.config import ConfigError, Settings
from bot.db.database import Database
from bot.ops import startup
from tests.standins import HOST, free_port

PASSWORD = "startup-password-51f"
"""The password of the unreachable PostgreSQL database: it must show nowhere."""


@pytest.fixture
def unusable() -> Database:
    """A database a process cannot use: a PostgreSQL port nothing listens on (no server needed)."""
    return Database.parse(f"postgresql://rb:{PASSWORD}@{HOST}:{free_port()}/rubric_bot")


async def test_a_database_it_cannot_use_is_one_line_naming_it_without_its_password(unusable):
    with pytest.raises(ConfigError) as refused:
        await startup.prepare_database(unusable, wait=False)

    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"rubric-bot: cannot use the database {unusable}: ")
    assert line.endswith("(or start with --wait-for-db to wait for it)")
    assert PASSWORD not in line


class StopOnWarning(logging.Handler):
    """Sets `stop` at the first WARNING, as an operator stops a process that waits for its database."""

    def __init__(self, stop: asyncio.Event) -> None:
        super().__init__(logging.WARNING)
        self.stop = stop
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.stop.set()


async def test_waiting_for_the_database_logs_each_attempt_and_ends_when_stopped(unusable):
    stop = asyncio.Event()
    watcher = StopOnWarning(stop)
    startup.logger.addHandler(watcher)
    try:
        report = await startup.prepare_database(unusable, wait=True, stop=stop)
    finally:
        startup.logger.removeHandler(watcher)

    assert report is None
    (line,) = watcher.lines
    assert line.startswith(f"could not use the database {unusable} (attempt 1): ")
    assert PASSWORD not in line


async def test_the_schema_is_brought_up_to_date_once_and_said_once(database_url, caplog):
    caplog.set_level(logging.INFO, logger=startup.__name__)
    database = Database.parse(database_url)

    first = await startup.prepare_database(database, wait=False)
    second = await startup.prepare_database(database, wait=False)

    assert first is not None and first.changed
    assert second is not None and not second.changed
    said = [r.getMessage() for r in caplog.records if r.name == startup.__name__]
    assert said == [f"database {database}: {first}"]


def test_the_start_up_line_names_the_mode_and_the_database_without_its_password(caplog):
    caplog.set_level(logging.INFO, logger=startup.__name__)
    url = f"postgresql://rb:{PASSWORD}@db.internal:5432/rubric_bot"
    settings = startup.for_process(Settings(database=Database.parse(url)), "worker")

    startup.log_start(settings, "worker", concurrency=4)

    (line,) = [r.getMessage() for r in caplog.records if r.name == startup.__name__]
    assert line.startswith("rubric-bot ") and "starting: worker, database postgresql://rb:***@" in line
    assert line.endswith("up to 4 runs at once") and PASSWORD not in line
