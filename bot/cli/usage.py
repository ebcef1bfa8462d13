"""`rubric-bot usage`: requests, model tokens and their cost per workspace, channel, person and day,
from the runs the bot records (read-only)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, date, datetime, timedelta

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
from bot.cli.teams import add_team_options, require_team_for_enterprise, team_workspace
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
    parser.add_argument("--channel", type=channel_argument, help=CHANNEL_HELP)
    add_team_options(parser, "only this workspace, by team id, e.g. T0123ABCD (default: every one)")
    parser.add_argument("--json", action="store_true", help="print JSON (every day's rows and the total)")
    add_database_option(parser)


def _run_usage(args: argparse.Namespace) -> int:
    settings = load_settings()
    database = args.db or settings.database
    require_team_for_enterprise(args)
    args.channel = channel_id(args.channel, settings)
    since = day_start(datetime.now(UTC)) - timedelta(days=args.days - 1)
    try:
        rows, counters = asyncio.run(_usage(database, since, args, args.channel))
    except UnreadableDatabase as exc:
        fail(str(exc))
        return EXIT_CONFIG
    if args.channel:  # a channel's budget, and the wider ones it spends from
        counters = [c for c in counters if c.level != "channel" or c.subject == args.channel]
    if args.json:
        print(usage_json(rows, counters, since=since.date(), channel=args.channel))
    else:
        where = f"channel {args.channel}" if args.channel else "every channel"
        where += f" of workspace {args.team}" if args.team else ""
        print(usage_text(rows, counters, since=since.date(), where=where))
    return EXIT_OK


def usage_text(rows: list[UsageRow], counters: list[SpendCounter], *, since: date, where: str) -> str:
    """`rubric-bot usage`'s text: the period, its requests, tokens and cost, and today's budgets."""
    head = f"Bot usage in {where} since {since:%Y-%m-%d} (UTC)"
    return f"{head}\n\n{usage_table(rows)}\n\n{counters_table(counters)}"


async def _usage(
    database: Database, since: datetime, args: argparse.Namespace, channel: str | None
) -> tuple[list[UsageRow], list[SpendCounter]]:
    async with read_only_store(database) as store:
        workspace = await team_workspace(store, args.team, args.enterprise) if args.team else None
        today = day_start(datetime.now(UTC)).date()
        return await store.usage(workspace, channel, since), await store.counters_of(today)


USAGE = CliSubcommand(
    "usage",
    "requests, tokens and their cost (US$) per channel, person and day (reads the database only)",
    _configure_usage,
    _run_usage,
    description=(
        "Print how many requests the bot answered, the model tokens (worker plus grader) they "
        "used and what those cost in US dollars at list prices (unpriced models named, never counted "
        "as free), per channel, per person and per UTC day, from the runs it records; and what every "
        "budget level (person, channel, workspace, the whole bot) spent today, in requests, tokens "
        "and dollars, which the daily limits (RUBRIC_BOT_DAILY_REQUESTS_PER_USER, "
        "RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL, RUBRIC_BOT_WORKSPACE_DAILY_TOKENS, "
        "RUBRIC_BOT_DAILY_TOKENS, RUBRIC_BOT_CHANNEL_DAILY_USD, RUBRIC_BOT_WORKSPACE_DAILY_USD, "
        "RUBRIC_BOT_DAILY_USD) are checked against. It only "
        f"reads the database (--db, else RUBRIC_BOT_DB {SETTINGS_SOURCE}; default rubric-bot.sqlite) "
        "and needs no Slack or model keys."
    ),
    epilog=exit_status_help(
        [(EXIT_OK, "usage printed"), (EXIT_CONFIG, "no such database, or one it cannot read; bad arguments")]
    ),
)
"""`rubric-bot usage`."""
