"""`rubric-bot report`: the agreement report in the terminal, from the database alone (read-only)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from bot.agreement.report import Report, load_report, period_start, report_table
from bot.agreement.report_chart import render_chart
from bot.audit.report import AuditFigures, audit_lines, load_audit
from bot.cli.channels import CHANNEL_HELP, Channel, channel_argument, resolve_channel
from bot.cli.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_database_option,
    database_exists,
    days_argument,
    fail,
)
from bot.cli.teams import add_team_options, require_team_for_enterprise, team_workspace
from bot.config import load_settings
from bot.db.database import Database
from bot.db.material import MaterialTally
from bot.db.runs import RunRecord
from bot.db.store import Store
from bot.db.usage import CostTally
from bot.limits.usage import spend_words
from bot.shadow.report import ShadowFigures, load_shadow, shadow_lines
from bot.slack.blocks import plural
from bot.vocabulary.workspace import Workspace

T = TypeVar("T")
"""What a query of `_recorded` reads."""


def _configure_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channel", type=channel_argument, help=f"{CHANNEL_HELP} (default: every channel)")
    add_team_options(parser, "only this workspace, by team id, e.g. T0123ABCD (default: every one)")
    parser.add_argument(
        "--days", type=days_argument, help="only reviews and runs of the last N days (default: all time)"
    )
    parser.add_argument("--chart", type=Path, metavar="FILE", help="also write the chart to FILE (PNG)")
    parser.add_argument("--json", action="store_true", help="print JSON (the report and the runs' facts)")
    add_database_option(parser)


class NothingToReport(Exception):
    """The report cannot be made as asked (no such database or channel); `str()` says why, in one line."""


def _run_report(args: argparse.Namespace) -> int:
    # Only the database is needed (and Slack only to look up a channel's #name): nothing is required.
    settings = load_settings()
    database = args.db or settings.database
    require_team_for_enterprise(args)
    try:
        if not database_exists(database):
            raise NothingToReport(f"no database at {database} (set RUBRIC_BOT_DB or pass --db)")
        channel = resolve_channel(args.channel, settings) if args.channel else None
        report, runs = asyncio.run(_report(database, args, channel, days=args.days))
    except NothingToReport as exc:
        fail(str(exc))
        return EXIT_CONFIG
    if args.json:
        print(
            report_json(report, runs, channel=channel.id if channel else None, team=args.team, days=args.days)
        )
    else:
        print(channel.title if channel else "All channels")
        print(report_text(report, runs))
    if args.chart:
        try:
            render_chart(report, args.chart)
        except OSError as exc:
            fail(f"cannot write {args.chart}: {exc.strerror}")
            return EXIT_FAILURE
        print(f"\nChart written to {args.chart}", file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


def report_text(report: Report, runs: RunFacts) -> str:
    """`rubric-bot report`'s text after its title: the agreement table, the undelivered answers, what
    the requests shared, the cost, the audit disagreement when any run was audited, and the shadow
    grader's figures when any iteration was graded in the shadow."""
    parts = [
        report_table(report),
        "",
        undelivered_table(runs.undelivered),
        material_line(runs.material),
        cost_line(runs.cost),
    ]
    if runs.audit is not None and (lines := audit_lines(runs.audit)):
        parts += ["", *lines]
    if runs.shadow is not None and (lines := shadow_lines(runs.shadow)):
        parts += ["", *lines]
    return "\n".join(parts)


def report_json(
    report: Report, runs: RunFacts, *, channel: str | None, team: str | None, days: int | None
) -> str:
    """`rubric-bot report --json`: what the text shows, for scripts (NaN and infinities as null)."""
    document = {"channel": channel, "team": team, "days": days, "report": report, "runs": runs}
    return TypeAdapter(dict[str, Any]).dump_json(document, indent=2).decode()


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
    shadow: ShadowFigures | None = None
    """The shadow grader's agreement with people and flips against the live grader (`bot.shadow`)."""


async def _report(
    database: Database, args: argparse.Namespace, channel: Channel | None, *, days: int | None
) -> tuple[Report, RunFacts]:
    """The report of `channel` (None: every channel) in the workspace of ``--team`` (every one
    without), and what the runs of the same channel and period say besides."""
    # Read-only: a report must never change (or create the tables in) whatever database it is given.
    try:
        store = await Store.open(database, read_only=True)
        try:
            workspace = await team_workspace(store, args.team, args.enterprise) if args.team else None
            if channel is not None:
                await _check_channel_known(store, workspace, channel, database)
            channel_id = channel.id if channel else None
            report = await load_report(store, workspace=workspace, channel=channel_id, days=days)
            return report, await _run_facts(store, workspace, channel_id, days)
        finally:
            await store.close()
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise NothingToReport(f"{database} is not a rubric-bot database ({reason})") from None


async def _run_facts(
    store: Store, workspace: Workspace | None, channel: str | None, days: int | None
) -> RunFacts:
    since = period_start(days)
    return RunFacts(
        undelivered=await _recorded(store.undelivered_runs(workspace, channel, since)),
        material=await _recorded(store.material_tally(workspace, channel, since)),
        cost=await _recorded(store.cost_tally(workspace, channel, since)),
        audit=await _recorded(load_audit(store, workspace=workspace, channel=channel, days=days)),
        shadow=await _recorded(load_shadow(store, workspace=workspace, channel=channel, days=days)),
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


async def _check_channel_known(
    store: Store, workspace: Workspace | None, channel: Channel, database: Database
) -> None:
    """Raise `NothingToReport` when the database has never seen `channel`, naming the ones it has."""
    reviewed = sorted({row.channel for row in await store.reviews_in_channel(workspace, None)})
    if channel.id in reviewed or await store.evaluations_in_channel(workspace, channel.id):
        return
    known = f"channels with reviews: {', '.join(reviewed)}" if reviewed else "it has no reviews at all"
    raise NothingToReport(f"{database} has nothing from {channel.title.removeprefix('Channel ')}; {known}")


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
        "SLACK_BOT_TOKEN (and SLACK_API_URL), one given as an id needs nothing more. It covers "
        "every workspace the database holds unless --team names one; --json prints the same as JSON. "
        "Cost is in US dollars at list prices."
    ),
)
"""`rubric-bot report`."""
