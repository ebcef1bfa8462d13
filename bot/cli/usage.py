"""`rubric-bot usage`: requests, model tokens and their cost per workspace, channel, person and day,
from the runs the bot records (read-only)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta

from bot.cli.exits import EXIT_CONFIG, EXIT_OK, exit_status_help
from bot.cli.report import CHANNEL_ID
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    UnreadableDatabase,
    add_database_option,
    fail,
    positive_int,
    read_only_store,
)
from bot.config import load_settings
from bot.db.database import Database
from bot.db.spend import SpendCounter
from bot.db.usage import UsageRow
from bot.limits.quota import day_start
from bot.limits.usage import CHANNEL_USAGE_DAYS, counters_table, usage_json, usage_table


def _configure_usage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--days",
        type=positive_int,
        default=CHANNEL_USAGE_DAYS,
        help=f"the last N UTC days, today included (default {CHANNEL_USAGE_DAYS})",
    )
    parser.add_argument(
        "--channel", type=channel_id_argument, help="only this channel, by id, e.g. C0123ABCD"
    )
    parser.add_argument("--json", action="store_true", help="print JSON (every day's rows and the total)")
    add_database_option(parser)


def channel_id_argument(text: str) -> str:
    """An argparse type: a Slack channel id such as C0123ABCD."""
    if not CHANNEL_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a channel id such as C0123ABCD")
    return text


def _run_usage(args: argparse.Namespace) -> int:
    database = args.db or load_settings().database
    since = day_start(datetime.now(UTC)) - timedelta(days=args.days - 1)
    try:
        rows, counters = asyncio.run(_usage(database, since, args.channel))
    except UnreadableDatabase as exc:
        fail(str(exc))
        return EXIT_CONFIG
    if args.channel:  # a channel's budget, and the wider ones it spends from
        counters = [c for c in counters if c.level != "channel" or c.subject == args.channel]
    if args.json:
        print(usage_json(rows, counters, since=since.date(), channel=args.channel))
    else:
        where = f"channel {args.channel}" if args.channel else "every channel"
        print(f"Bot usage in {where} since {since:%Y-%m-%d} (UTC)\n")
        print(usage_table(rows))
        print(f"\n{counters_table(counters)}")
    return EXIT_OK


async def _usage(
    database: Database, since: datetime, channel: str | None
) -> tuple[list[UsageRow], list[SpendCounter]]:
    async with read_only_store(database) as store:
        today = day_start(datetime.now(UTC)).date()
        return await store.usage(None, channel, since), await store.counters_of(today)


USAGE = CliSubcommand(
    "usage",
    "requests and tokens per channel, per person and per day (reads the database only)",
    _configure_usage,
    _run_usage,
    description=(
        "Print how many requests the bot answered and the model tokens (worker plus grader) they "
        "used, per channel, per person and per UTC day, from the runs it records; and what every "
        "budget level (person, channel, workspace, the whole bot) spent today, which the daily "
        "limits (RUBRIC_BOT_DAILY_REQUESTS_PER_USER, RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL, "
        "RUBRIC_BOT_WORKSPACE_DAILY_TOKENS, RUBRIC_BOT_DAILY_TOKENS) are checked against. It only "
        f"reads the database (--db, else RUBRIC_BOT_DB {SETTINGS_SOURCE}; default rubric-bot.sqlite) "
        "and needs no Slack or model keys."
    ),
    epilog=exit_status_help(
        [(EXIT_OK, "usage printed"), (EXIT_CONFIG, "no such database, or one it cannot read; bad arguments")]
    ),
)
"""`rubric-bot usage`."""
