"""What every `rubric-bot` subcommand module uses: the subcommand record, argument types, one-line errors.

Each subcommand module exports its `CliSubcommand`s; :mod:`bot.cli.main` lists them in its registry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from bot.config import Settings
from bot.db.database import Database, DatabaseError, without_password
from bot.db.store import Store
from bot.listeners.command_text import CommandError, report_days
from bot.ops import logs

SETTINGS_SOURCE = "from the environment or a .env file in the working directory"
"""Where every subcommand's settings come from, as its --help says."""


@dataclass(frozen=True)
class CliSubcommand:
    """One `rubric-bot` subcommand: how to declare its arguments and how to run it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str
    """The paragraph `--help` shows: what it does and which settings it reads."""
    epilog: str | None = None
    """Shown after the options in `--help` (e.g. a table of exit codes), verbatim."""


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """`configure` of a subcommand that takes no arguments."""


def fail(message: str) -> None:
    """Print one error line for the user on stderr."""
    print(f"rubric-bot: {one_line(message)}", file=sys.stderr)


def one_line(text: str) -> str:
    """`text` with its whitespace (newlines included) collapsed, for a one-line message."""
    return " ".join(text.split())


def start_logging(settings: Settings) -> None:
    """Log to stderr at `RUBRIC_BOT_LOG_LEVEL`, with no tokens or conversations (`bot.ops.logs`)."""
    logs.start_logging(settings.log_level, settings.debug_loggers)


# -- argument types ----------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def days_argument(text: str) -> int | None:
    """An argparse type: a period in days as `/rubric report` takes it (None: all time)."""
    try:
        return report_days(text)
    except CommandError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("`", "")) from None


def database_argument(text: str) -> Database:
    """An argparse type: a SQLite path (``sqlite:PATH`` too) or a ``postgresql://`` URL."""
    try:
        return Database.parse(text)
    except DatabaseError as exc:
        raise argparse.ArgumentTypeError(f"{without_password(text)!r} is not a database: {exc}") from None


def database_exists(database: Database) -> bool:
    """False for a SQLite file that is not there (opening it would create an empty one)."""
    return database.is_postgres or database.sqlite_path.is_file()


class UnreadableDatabase(Exception):
    """A subcommand that only reads cannot read the database it was given; `str()` says why, in one line."""


@asynccontextmanager
async def read_only_store(database: Database) -> AsyncIterator[Store]:
    """The bot's store on `database`, read-only (a subcommand that reads must never create or change
    tables); UnreadableDatabase when there is none, or its tables are not this version's."""
    if not database_exists(database):
        raise UnreadableDatabase(f"no database at {database} (set RUBRIC_BOT_DB or pass --db)")
    try:
        store = await Store.open(database, read_only=True)
        try:
            yield store
        finally:
            await store.close()
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise UnreadableDatabase(
            f"cannot read {database} ({reason}); if the bot has not run on it since an upgrade, "
            "run rubric-bot db upgrade first"
        ) from None


def add_database_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "the bot's database"
) -> None:
    """`--db PATH_OR_URL`: the database to use instead of `RUBRIC_BOT_DB`."""
    parser.add_argument(
        "--db", type=database_argument, metavar="PATH_OR_URL", help=f"{what} (default: RUBRIC_BOT_DB)"
    )


def add_wait_for_db(parser: argparse.ArgumentParser) -> None:
    """The ``--wait-for-db`` option of the subcommands that bring the schema up to date first."""
    parser.add_argument(
        "--wait-for-db",
        action="store_true",
        help="if the database cannot be used, say so once per attempt and wait for it (default: exit 2)",
    )
