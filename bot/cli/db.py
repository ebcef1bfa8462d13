"""`rubric-bot db`: upgrade a database's schema, or copy a team's data into an empty database."""

from __future__ import annotations

import argparse
import asyncio

from bot.cli.exits import EXIT_CONFIG, EXIT_OK
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_database_option,
    add_wait_for_db,
    database_argument,
    database_exists,
    fail,
)
from bot.config import load_settings
from bot.db import admin as dbadmin
from bot.db.database import DATABASE_ERRORS, describe_database_error


def _configure_db(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade", help="bring the database's tables to the newest schema (serve does this at start)"
    )
    add_database_option(upgrade, "the database")
    add_wait_for_db(upgrade)
    upgrade.set_defaults(db_run=_run_db_upgrade)
    copy = actions.add_parser(
        "copy", help="copy every conversation, rubric, run and review into an empty database"
    )
    copy.add_argument(
        "--from", dest="source", type=database_argument, required=True, metavar="PATH_OR_URL",
        help="the database to copy, e.g. sqlite:rubric-bot.sqlite",
    )  # fmt: skip
    copy.add_argument(
        "--to", dest="target", type=database_argument, required=True, metavar="URL",
        help="an empty database, e.g. postgresql://USER:PASSWORD@HOST/DBNAME",
    )  # fmt: skip
    copy.set_defaults(db_run=_run_db_copy)


def _run_db(args: argparse.Namespace) -> int:
    return int(args.db_run(args))


def _run_db_upgrade(args: argparse.Namespace) -> int:
    from bot.ops.startup import prepare_database  # Slack's and the queue's packages: only needed here

    database = args.db or load_settings().database
    # A database that cannot be used is a ConfigError (one line, exit 2), or waited for.
    report = asyncio.run(prepare_database(database, wait=args.wait_for_db))
    print(f"{database}: {report}")
    return EXIT_OK


def _run_db_copy(args: argparse.Namespace) -> int:
    if not database_exists(args.source):
        fail(f"no database at {args.source}")
        return EXIT_CONFIG
    try:
        report = asyncio.run(dbadmin.copy(args.source, args.target))
    except dbadmin.CopyError as exc:
        fail(f"cannot copy: {exc}")
        return EXIT_CONFIG
    except DATABASE_ERRORS as exc:
        # The driver's own message names the server and what failed, never the password.
        fail(f"cannot copy {args.source} to {args.target}: {describe_database_error(exc)}")
        return EXIT_CONFIG
    rows = ", ".join(f"{table} {count}" for table, count in report.rows.items())
    print(f"Copied {args.source} to {args.target}")
    print(f"  rows: {rows}")
    print(f"  conversations: {report.threads} threads, {report.checkpoints} checkpoints")
    return EXIT_OK


DB = CliSubcommand(
    "db",
    "upgrade the database's schema, or copy a team's data to another database",
    _configure_db,
    _run_db,
    description=(
        "`db upgrade` brings the database's tables (the bot's, the conversation checkpoints' and "
        "the PostgreSQL job queue's) to the installed version's schema; serve does it at start. "
        "`db copy --from SRC --to DST` copies every thread with its conversation, channel rubrics "
        "and settings, runs, evaluations and reviews into an empty database, e.g. from the SQLite "
        "file to PostgreSQL. A database is a SQLite path (sqlite:PATH also works) or a "
        "postgresql://USER:PASSWORD@HOST/DBNAME URL; "
        f"upgrade reads RUBRIC_BOT_DB {SETTINGS_SOURCE} unless --db is given."
    ),
)
"""`rubric-bot db`."""
