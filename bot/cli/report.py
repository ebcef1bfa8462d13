"""`rubric-bot report`: the agreement report in the terminal, from the database alone (read-only)."""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from bot.agreement.report import Report, load_report, period_start, report_table
from bot.agreement.report_chart import render_chart
from bot.audit.report import AuditFigures, audit_lines, load_audit
from bot.cli.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_database_option,
    database_exists,
    days_argument,
    fail,
)
from bot.config import Settings, load_settings
from bot.db.database import Database
from bot.db.material import MaterialTally
from bot.db.runs import RunRecord
from bot.db.store import Store
from bot.db.usage import CostTally
from bot.limits.usage import spend_words
from bot.slack.blocks import plural

T = TypeVar("T")
"""What a query of `_recorded` reads."""


def _configure_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--channel",
        help="#name (looked up with SLACK_BOT_TOKEN) or id, e.g. C0123ABCD (default: every channel)",
    )
    parser.add_argument(
        "--days", type=days_argument, help="only reviews and runs of the last N days (default: all time)"
    )
    parser.add_argument("--chart", type=Path, metavar="FILE", help="also write the chart to FILE (PNG)")
    add_database_option(parser)


class NothingToReport(Exception):
    """The report cannot be made as asked (no such database or channel); `str()` says why, in one line."""


def _run_report(args: argparse.Namespace) -> int:
    # Only the database is needed (and Slack only to look up a channel's #name): nothing is required.
    settings = load_settings()
    database = args.db or settings.database
    try:
        report, title, runs = asyncio.run(_report(database, settings, channel=args.channel, days=args.days))
    except NothingToReport as exc:
        fail(str(exc))
        return EXIT_CONFIG
    print(title)
    print(report_table(report))
    print()
    print(undelivered_table(runs.undelivered))
    print(material_line(runs.material))
    print(cost_line(runs.cost))
    if runs.audit is not None and (lines := audit_lines(runs.audit)):
        print()
        print("\n".join(lines))
    if args.chart:
        try:
            render_chart(report, args.chart)
        except OSError as exc:
            fail(f"cannot write {args.chart}: {exc.strerror}")
            return EXIT_FAILURE
        print(f"\nChart written to {args.chart}")
    return EXIT_OK


@dataclass(frozen=True)
class RunFacts:
    """What the runs of the report's channel and period say besides the agreement (None: not recorded
    in the database, a file from before the bot recorded it)."""

    undelivered: list[RunRecord] | None
    """The runs whose answer never reached Slack."""
    material: MaterialTally | None
    """How much of what the requests shared was read."""
    cost: CostTally | None
    """What the runs cost."""
    audit: AuditFigures | None
    """The audit disagreement (see `bot.audit.report`)."""


async def _report(
    database: Database, settings: Settings, *, channel: str | None, days: int | None
) -> tuple[Report, str, RunFacts]:
    """The report of `channel` (#name or id; None: every channel), its title line, and what the
    runs of the same channel and period say besides."""
    if not database_exists(database):
        raise NothingToReport(f"no database at {database} (set RUBRIC_BOT_DB or pass --db)")
    channel_id, title = (None, "All channels") if channel is None else await _channel(channel, settings)
    # Read-only: a report must never change (or create the tables in) whatever database it is given.
    try:
        store = await Store.open(database, read_only=True)
        try:
            if channel_id is not None:
                await _check_channel_known(store, channel_id, title, database)
            report = await load_report(store, workspace=None, channel=channel_id, days=days)
            return report, title, await _run_facts(store, channel_id, days)
        finally:
            await store.close()
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise NothingToReport(f"{database} is not a rubric-bot database ({reason})") from None


async def _run_facts(store: Store, channel: str | None, days: int | None) -> RunFacts:
    since = period_start(days)
    return RunFacts(
        undelivered=await _recorded(store.undelivered_runs(None, channel, since)),
        material=await _recorded(store.material_tally(None, channel, since)),
        cost=await _recorded(store.cost_tally(None, channel, since)),
        audit=await _recorded(load_audit(store, workspace=None, channel=channel, days=days)),
    )


async def _recorded(query: Awaitable[T]) -> T | None:
    """What `query` reads, or None when the database is from before the bot recorded it."""
    try:
        return await query
    except (OperationalError, ProgrammingError):  # an older file, opened read-only: not upgraded
        return None


def material_line(tally: MaterialTally | None) -> str:
    """How much of what the requests shared (earlier thread messages, files) the runs read."""
    if tally is None:
        return "Shared with requests: not recorded in this database yet (the bot adds that when it starts)"
    if not tally.runs:
        return "Shared with requests: nothing (no thread was read into a request, no file was attached)"
    return (
        f"Shared with requests: {plural(tally.runs, 'run')} read "
        f"{plural(tally.thread_messages, 'earlier thread message')} and {plural(tally.files_read, 'file')}; "
        f"{plural(tally.files_unread, 'file')} could not be read"
    )


def cost_line(tally: CostTally | None) -> str:
    """What the runs cost: in all, per satisfied run, and the grader's share."""
    if tally is None or not tally.runs:
        return "Cost: no priced runs recorded yet"
    return f"Cost: {spend_words(tally)}"


def undelivered_table(runs: Sequence[RunRecord] | None) -> str:
    """The runs whose answer (or failure notice) never reached their thread, one line each."""
    if runs is None:
        return "Undelivered answers: not recorded in this database yet (the bot adds that when it starts)"
    if not runs:
        return "Undelivered answers: none"
    lines = [f"Undelivered answers: {len(runs)} (the run ended, but Slack never took its last reply)"]
    lines += [
        f"  {run.started_at:%Y-%m-%d %H:%M} UTC  channel {run.channel}  thread {run.thread_ts}  "
        f"request {run.request_ts}  {run.status or 'unfinished'}"
        for run in runs
    ]
    return "\n".join(lines)


CHANNEL_ID = re.compile(r"[CDG][A-Z0-9]+")
"""What a Slack conversation id looks like; channel names are lower-case, so they never match."""


async def _channel(text: str, settings: Settings) -> tuple[str, str]:
    """The id and the title line of the channel given as `text`: an id, or a #name looked up in Slack."""
    if CHANNEL_ID.fullmatch(text):
        return text, f"Channel {text}"
    name = text.removeprefix("#")
    or_id = "or pass the channel's id (C0123ABCD: the channel's details, at the bottom of About)"
    if settings.slack_bot_token is None:
        raise NothingToReport(f"looking up #{name} needs SLACK_BOT_TOKEN (environment or .env); {or_id}")
    from bot.slack.client import build_client, describe_error  # Slack's client is only needed for a name

    try:
        pages = await build_client(settings).conversations_list(
            types="public_channel,private_channel", exclude_archived=False, limit=CHANNEL_PAGE
        )
        async for page in pages:
            for found in page["channels"]:
                if found["name"] == name:
                    return found["id"], f"Channel #{name} ({found['id']})"
    except SlackApiError as exc:
        error = describe_error(exc)
        raise NothingToReport(
            f"Slack would not list channels to find #{name} ({error}); the bot needs the channels:read "
            f"and groups:read scopes (in manifest.yml; reinstall the app after adding them), {or_id}"
        ) from None
    except aiohttp.ClientError as exc:
        raise NothingToReport(f"cannot reach Slack to look up #{name} ({exc}); {or_id}") from None
    raise NothingToReport(f"Slack has no channel named #{name} that the bot can see; {or_id}")


CHANNEL_PAGE = 1000
"""Channels asked for per `conversations.list` page (Slack's maximum)."""


async def _check_channel_known(store: Store, channel: str, title: str, database: Database) -> None:
    """Raise `NothingToReport` when the database has never seen `channel`, naming the ones it has."""
    reviewed = sorted({row.channel for row in await store.reviews_in_channel(None, None)})
    if channel in reviewed or await store.evaluations_in_channel(None, channel):
        return
    known = f"channels with reviews: {', '.join(reviewed)}" if reviewed else "it has no reviews at all"
    raise NothingToReport(f"{database} has nothing from {title.removeprefix('Channel ')}; {known}")


REPORT = CliSubcommand(
    "report",
    "how far the grader agrees with the team's reviews, per criterion (reads the database only)",
    _configure_report,
    _run_report,
    description=(
        "Print how far the grader agrees with the team's reviews, per criterion (agreement, "
        "baseline and Cohen's kappa), and optionally write the chart. It only reads the database "
        f"(--db, else RUBRIC_BOT_DB {SETTINGS_SOURCE}; default rubric-bot.sqlite), never writes "
        "to it, and needs no model keys; a channel given as #name is looked up in Slack with "
        "SLACK_BOT_TOKEN (and SLACK_API_URL), one given as an id needs nothing more."
    ),
)
"""`rubric-bot report`."""
