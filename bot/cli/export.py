"""`rubric-bot export`: the reviewed cases as a JSON Lines dataset, from the database (read-only)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO

from bot.agreement.report import period_start
from bot.cli.channels import CHANNEL_HELP, channel_argument, channel_id
from bot.cli.exits import EXIT_CONFIG, EXIT_OK, exit_status_help
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    UnreadableDatabase,
    add_database_option,
    fail,
    positive_int,
    read_only_store,
)
from bot.cli.teams import ENTERPRISE_HELP, team_workspace
from bot.config import load_settings
from bot.db.database import Database, open_checkpointer
from bot.db.store import Store
from bot.export.dataset import dataset_rows, jsonl
from bot.vocabulary.workspace import Organization, Tenant

PRIVATE_FILE_MODE = 0o600
"""The mode of a file `--output` writes: its owner's alone."""


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channel", type=channel_argument, help=CHANNEL_HELP)
    parser.add_argument("--team", metavar="T", help="only this workspace, by team id, e.g. T0123ABCD")
    parser.add_argument(
        "--enterprise", metavar="E",
        help=f"alone: every workspace of the Enterprise Grid org E0123ABCD; {ENTERPRISE_HELP}",
    )  # fmt: skip
    parser.add_argument(
        "--days", type=positive_int, help="only evaluations of the last N days (default: all)"
    )
    parser.add_argument(
        "--reviewed-only", action="store_true", help="only criteria a person reviewed (default: every one)"
    )
    parser.add_argument(
        "--output", type=Path, metavar="FILE",
        help="write to FILE, readable by its owner only (default: stdout)",
    )  # fmt: skip
    add_database_option(parser)


def _run_export(args: argparse.Namespace) -> int:
    settings = load_settings()
    database = args.db or settings.database
    args.channel = channel_id(args.channel, settings)
    try:
        if args.output is None:
            count = asyncio.run(_export(database, args, sys.stdout))
        else:
            with _private_file(args.output) as out:
                count = asyncio.run(_export(database, args, out))
    except UnreadableDatabase as exc:
        fail(str(exc))
        return EXIT_CONFIG
    print(f"exported {count} row(s)", file=sys.stderr)
    return EXIT_OK


async def _export(database: Database, args: argparse.Namespace, out: TextIO) -> int:
    count = 0
    async with read_only_store(database) as store, open_checkpointer(database) as checkpointer:
        rows = dataset_rows(
            store,
            checkpointer,
            workspace=await _tenant(store, args),
            channel=args.channel,
            since=period_start(args.days),
            reviewed_only=args.reviewed_only,
        )
        async for row in rows:
            out.write(jsonl(row))
            count += 1
    return count


def _private_file(path: Path) -> TextIO:
    """`path` opened for writing, created (or made) readable and writable by its owner only: the
    dataset holds people's requests and reviewers' comments."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    os.fchmod(descriptor, PRIVATE_FILE_MODE)  # a file that was there keeps its mode otherwise
    return os.fdopen(descriptor, "w", encoding="utf-8")


async def _tenant(store: Store, args: argparse.Namespace) -> Tenant | None:
    """Whose rows: a workspace (in whichever Enterprise Grid org, see `bot.cli.teams`), a whole
    org, or everyone's."""
    if args.team:
        return await team_workspace(store, args.team, args.enterprise)
    return Organization(args.enterprise) if args.enterprise else None


EXPORT = CliSubcommand(
    "export",
    "the reviewed cases as a JSON Lines dataset (reads the database only)",
    _configure_export,
    _run_export,
    description=(
        "Write one JSON object per line for each graded criterion of each iteration: the request, "
        "the answer graded, the grader's verdict and reason with where it came from (rubric version, "
        "grader model, instructions hash, calibration examples, worker model) and the team's reviews. "
        "Deleted or purged data is never exported. It only reads the database (--db, else "
        f"RUBRIC_BOT_DB {SETTINGS_SOURCE}) and needs no Slack or model keys."
    ),
    epilog=exit_status_help(
        [(EXIT_OK, "rows written"), (EXIT_CONFIG, "no such database, or one it cannot read; bad arguments")]
    ),
)
"""`rubric-bot export`."""
