"""How a `serve` or `worker` process starts, as its operator sees it.

One line says what is starting (version, mode, database without its password, concurrency); its
PostgreSQL connections carry the process's name; the schema is brought up to date first (as
`rubric-bot db upgrade` does), and a database that cannot be used (unreachable, refusing the
password, missing, lacking privileges) is one line naming it and exit 2 — or, with
``--wait-for-db``, one line per attempt until it answers.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import version

from bot.config import ConfigError, Settings
from bot.db.admin import UpgradeReport, upgrade
from bot.db.database import DATABASE_ERRORS, Database, cannot_use, describe_database_error, lacks_privilege
from bot.slack.socket_mode import retry_until_stopped

logger = logging.getLogger(__name__)


def for_process(settings: Settings, command: str) -> Settings:
    """`settings` with the database connections named ``rubric-bot COMMAND (HOST)``."""
    return settings.model_copy(update={"database": settings.database.for_command(command)})


def log_start(settings: Settings, mode: str, concurrency: int) -> None:
    """The start-up line: version, mode, database (no password) and how many runs at once."""
    runs = f"up to {concurrency} runs at once" if settings.database.is_postgres else "every thread at once"
    logger.info(
        "rubric-bot %s starting: %s, database %s, %s", version("rubric-bot"), mode, settings.database, runs
    )


async def prepare_database(
    database: Database, *, wait: bool, stop: asyncio.Event | None = None
) -> UpgradeReport | None:
    """Bring the database's schema up to date, as `rubric-bot db upgrade` does; what was applied, or
    None when `stop` was set while waiting for the database.

    Without `wait` a database that cannot be used is a `ConfigError` (one line, exit 2); with it,
    each failed attempt is one WARNING line and the next comes a little later, until it answers.
    """
    reports: list[UpgradeReport] = []

    async def attempt() -> None:
        reports.append(await upgrade(database))

    if wait:
        what = f"use the database {database}"
        stopping = stop or asyncio.Event()
        if not await retry_until_stopped(attempt, stopping, what, describe_database_error, logger):
            return None
    else:
        try:
            await attempt()
        except DATABASE_ERRORS as exc:
            hint = "" if lacks_privilege(exc) else " (or start with --wait-for-db to wait for it)"
            raise ConfigError([cannot_use(database, exc) + hint]) from None
    if reports[-1].changed:
        logger.info("database %s: %s", database, reports[-1])
    return reports[-1]
