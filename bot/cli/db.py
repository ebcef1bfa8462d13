"""`rubric-bot db`: upgrade a database's schema, copy a team's data into an empty database, or delete
threads' data now (`prune` by age, `purge` by team, channel or thread)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from bot.cli import purge as purge_cli
from bot.cli.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_database_option,
    add_wait_for_db,
    database_argument,
    database_exists,
    fail,
)
from bot.cli.teams import ENTERPRISE_HELP, require_team_for_enterprise
from bot.config import load_settings
from bot.db import admin as dbadmin
from bot.db.database import DATABASE_ERRORS, Database, describe_database_error
from bot.lifecycle.erase import Erased, Scope


def _configure_db(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade", help="bring the database's tables to the newest schema (serve does this at start)"
    )
    add_database_option(upgrade, "the database")
    add_wait_for_db(upgrade)
    upgrade.set_defaults(db_run=_run_db_upgrade)
    rotate = actions.add_parser(
        "rotate-key", help="encrypt every stored OAuth token with the first key of RUBRIC_BOT_ENCRYPTION_KEY"
    )
    add_database_option(rotate, "the database")
    rotate.set_defaults(db_run=_run_db_rotate_key)
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
    prune = actions.add_parser(
        "prune", help="delete the threads idle for more than N days now (as the daily retention sweep does)"
    )
    prune.add_argument(
        "--days", type=purge_cli.non_negative_days, metavar="N",
        help="delete threads last active more than N days ago (default: RUBRIC_BOT_RETENTION_DAYS)",
    )  # fmt: skip
    add_database_option(prune, "the database")
    prune.set_defaults(db_run=_run_db_prune)
    purge = actions.add_parser("purge", help="delete a team's, a channel's or a thread's data now")
    scope = purge.add_mutually_exclusive_group(required=True)
    scope.add_argument("--team", metavar="T", help="a workspace's id (T0123ABCD): everything of it")
    scope.add_argument(
        "--channel", metavar="C", help="a channel's id (C0123ABCD): its threads, rubric and settings"
    )
    scope.add_argument(
        "--thread", type=purge_cli.thread_link, metavar="LINK",
        help="a Slack message link to the thread (or one of its replies), or CHANNEL:TS of its first message",
    )  # fmt: skip
    purge.add_argument("--enterprise", metavar="E", help=ENTERPRISE_HELP)
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_database_option(purge, "the database")
    purge.set_defaults(db_run=_run_db_purge)


def _run_db(args: argparse.Namespace) -> int:
    return int(args.db_run(args))


def _named(args: argparse.Namespace, database: Database) -> Database:
    """`database`, its PostgreSQL connections named after the command (``rubric-bot db upgrade (HOST)``)."""
    return database.for_command(f"db {args.db_action}")


def _run_db_upgrade(args: argparse.Namespace) -> int:
    from bot.ops.startup import prepare_database  # Slack's and the queue's packages: only needed here

    database = _named(args, args.db or load_settings().database)
    # A database that cannot be used is a ConfigError (one line, exit 2), or waited for.
    report = asyncio.run(prepare_database(database, wait=args.wait_for_db))
    print(f"{database}: {report}")
    return EXIT_OK


def _run_db_rotate_key(args: argparse.Namespace) -> int:
    from bot.workspaces.encryption import KEY_SETTING, cipher_of, rotate_stored_tokens  # Slack's packages

    settings = load_settings()
    cipher = cipher_of(settings.encryption_keys)
    if cipher is None:
        fail(f"set {KEY_SETTING} to the new key, then the key the tokens are encrypted with, comma-separated")
        return EXIT_CONFIG
    database = _named(args, args.db or settings.database)
    if not database_exists(database):
        fail(f"no database at {database}")
        return EXIT_CONFIG
    try:
        resealed = asyncio.run(rotate_stored_tokens(database, cipher))
    except DATABASE_ERRORS as exc:
        fail(f"cannot rotate the key of {database}: {describe_database_error(exc)}")
        return EXIT_CONFIG
    print(
        f"{database}: encrypted {resealed.tokens} token(s) of {resealed.rows} installation record(s) with "
        f"the first key of {KEY_SETTING}; the other keys can now be removed from it"
    )
    return EXIT_OK


def _run_db_copy(args: argparse.Namespace) -> int:
    if not database_exists(args.source):
        fail(f"no database at {args.source}")
        return EXIT_CONFIG
    try:
        report = asyncio.run(dbadmin.copy(_named(args, args.source), _named(args, args.target)))
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


def _run_db_prune(args: argparse.Namespace) -> int:
    settings = load_settings()
    days = args.days if args.days is not None else settings.retention_days
    if days is None:
        fail("give --days N, or set RUBRIC_BOT_RETENTION_DAYS: how many days of inactivity a thread is kept")
        return EXIT_CONFIG
    database = _named(args, args.db or settings.database)
    what = f"the finished threads idle for more than {days} day(s)"
    return _erase(database, what, partial(purge_cli.prune_database, database, days, settings))


def _run_db_purge(args: argparse.Namespace) -> int:
    settings = load_settings()
    database = _named(args, args.db or settings.database)
    channel, thread_ts = args.thread or (args.channel, None)
    require_team_for_enterprise(args)
    if not database_exists(database):
        fail(f"no database at {database}")
        return EXIT_CONFIG
    tenant = asyncio.run(purge_cli.team_of(database, args.team, args.enterprise)) if args.team else None
    scope = Scope(tenant=tenant, channel=channel, thread_ts=thread_ts)
    if not args.yes:
        if not sys.stdin.isatty():
            fail("purge asks for confirmation on a terminal; pass --yes to purge without asking")
            return EXIT_CONFIG
        found = asyncio.run(purge_cli.threads_of(database, scope))
        settings_too = "" if thread_ts else ", and its channel rubrics and settings"
        question = (
            f"Delete everything {database} keeps of {scope.describe()} ({found} thread(s) with their "
            f"conversations, runs, evaluations and reviews{settings_too})? This cannot be undone. "
            "Type yes to delete: "
        )
        if input(question).strip().lower() != "yes":
            print("Nothing deleted.")
            return EXIT_FAILURE
    return _erase(
        database,
        f"everything of {scope.describe()}",
        partial(purge_cli.purge_database, database, scope, settings),
    )


def _erase(database: Database, what: str, erase: Callable[[], Coroutine[Any, Any, Erased]]) -> int:
    """Run `erase` on `database` and print what it deleted, per kind."""
    if not database_exists(database):
        fail(f"no database at {database}")
        return EXIT_CONFIG
    try:
        erased = asyncio.run(erase())
    except DATABASE_ERRORS as exc:
        fail(f"cannot delete from {database}: {describe_database_error(exc)}")
        return EXIT_CONFIG
    print(f"Deleted from {database} {what}:")
    print("\n".join(purge_cli.erased_lines(erased)))
    return EXIT_OK


DB = CliSubcommand(
    "db",
    "upgrade the database's schema, copy a team's data to another database, or delete data now",
    _configure_db,
    _run_db,
    description=(
        "`db upgrade` brings the database's tables (the bot's, the conversation checkpoints' and "
        "the PostgreSQL job queue's) to the installed version's schema; serve does it at start. "
        "`db copy --from SRC --to DST` copies every thread with its conversation, channel rubrics "
        "and settings, runs, evaluations and reviews into an empty database, e.g. from the SQLite "
        "file to PostgreSQL. A database is a SQLite path (sqlite:PATH also works) or a "
        "postgresql://USER:PASSWORD@HOST/DBNAME URL. "
        "`db rotate-key` encrypts every stored OAuth token with the first key of "
        "RUBRIC_BOT_ENCRYPTION_KEY (the others only decrypt). "
        "`db prune [--days N]` deletes the finished threads idle for more than N days (default "
        "RUBRIC_BOT_RETENTION_DAYS), keeping review verdicts without their comments; `db purge "
        "--team T | --channel C | --thread LINK` deletes that team's, channel's or thread's data, "
        "reviews included, after asking (--yes: without asking). Both also delete from Slack the "
        "charts the bot uploaded about what they delete (a team's or channel's; prune: those older "
        "than N days), with SLACK_BOT_TOKEN or, for a bot installed with OAuth, the workspace's "
        "installation. Both print what they deleted. "
        f"upgrade, rotate-key, prune and purge read RUBRIC_BOT_DB {SETTINGS_SOURCE} unless --db is given."
    ),
)
"""`rubric-bot db`."""
