"""`rubric-bot` (also `python -m bot`): the Slack bot that grades its work against a rubric.

Subcommands serve the bot, print its manifest, try a rubric in the terminal, report how far
the grader agrees with the team's reviews, and upgrade or copy its database.

Every error is one line on stderr, never a traceback; configuration and usage problems exit with 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import NoReturn, TextIO

import aiohttp
import psycopg
from dotenv import load_dotenv
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from bot.agent import TurnOutcome, agent_config, build_agent, init_models, run_turn
from bot.agreement.report import Report, load_report, period_start, render_chart, report_table
from bot.config import (
    DEFAULT_CONCURRENCY,
    ENV_FILE,
    SLACK_CONNECTION,
    ConfigError,
    Settings,
    load_settings,
    problem,
)
from bot.db import admin as dbadmin
from bot.db.database import Database, DatabaseError
from bot.db.store import RunRecord, Store
from bot.listeners.command_text import CommandError, report_days
from bot.threads import render
from grading import DEFAULT_MAX_GRADER_CALLS, CriterionResult, RubricError, RubricEvaluation, parse_rubric

EXIT_CONFIG = 2
"""Exit code for unusable configuration or arguments (argparse uses 2 for usage errors too)."""

EXIT_FAILURE = 1
"""Exit code when a run itself failed (a model error in `grade`)."""

GRADE_EXIT_CODES: Mapping[str, int] = {
    "satisfied": 0,
    "max_iterations_reached": 3,
    "grader_error": 4,
    "failed": 5,
}
"""`grade`'s exit code per final grading status, so a script or CI job can gate on the outcome."""

EXIT_BROKEN_PIPE = 141
"""Exit code when the reader of our output went away (`| head -1`): 128 + SIGPIPE, as the shell
reports for tools that SIGPIPE ended."""

STDIN_ARGUMENT = "-"
"""The `grade` request argument that means "read the request from standard input"."""

DEFAULT_PORT = 3000
"""HTTP port of `serve` when `--port` is not given (Bolt's customary default)."""

QUIET_LOGGERS = ("httpx", "httpx2")
"""HTTP client loggers of the model providers: one INFO line per model call is noise."""


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


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2), pointing at `--help`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"{self.prog}: {message} (see {self.prog} --help)\n")


def fail(message: str) -> None:
    """Print one error line for the user on stderr."""
    print(f"rubric-bot: {one_line(message)}", file=sys.stderr)


def one_line(text: str) -> str:
    """`text` with its whitespace (newlines included) collapsed, for a one-line message."""
    return " ".join(text.split())


# -- serve -------------------------------------------------------------------------------------


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true", help="serve HTTP even when SLACK_APP_TOKEN is set")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    _add_concurrency(parser)


def _add_concurrency(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"runs this process works on at once with PostgreSQL (default {DEFAULT_CONCURRENCY})",
    )


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _run_serve(args: argparse.Namespace) -> int:
    # HTTP mode verifies every request with the signing secret; without --http either way will do.
    connection = "SLACK_SIGNING_SECRET" if args.http else SLACK_CONNECTION
    settings = load_settings(["SLACK_BOT_TOKEN", "RUBRIC_BOT_MODEL", connection])
    database = settings.database
    if not database.is_postgres and not database.sqlite_path.parent.is_dir():
        parent = database.sqlite_path.parent
        raise ConfigError([problem("RUBRIC_BOT_DB", f"is in a directory that does not exist ({parent})")])
    from bot.app import serve  # Bolt and aiohttp are only needed to serve

    _start_logging(settings)
    try:
        asyncio.run(serve(settings, http=args.http, port=args.port, concurrency=args.concurrency))
    except OSError as exc:  # e.g. the HTTP port is taken: the operator's to fix, not a bug to trace
        logging.getLogger(__name__).debug("serve failed", exc_info=True)
        fail(f"cannot serve: {exc}")
        return EXIT_FAILURE
    return 0


def _start_logging(settings: Settings) -> None:
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


# -- worker ------------------------------------------------------------------------------------


def _run_worker(args: argparse.Namespace) -> int:
    settings = load_settings(["SLACK_BOT_TOKEN", "RUBRIC_BOT_MODEL", "RUBRIC_BOT_DB"])
    if not settings.database.is_postgres:
        raise ConfigError(
            [
                "RUBRIC_BOT_DB is a SQLite file, and a worker takes its runs from the PostgreSQL job "
                "queue: set it to postgresql://USER:PASSWORD@HOST:5432/DBNAME (with SQLite, serve "
                "runs every request itself)."
            ]
        )
    from bot.app import work

    _start_logging(settings)
    asyncio.run(work(settings, concurrency=args.concurrency))
    return 0


# -- manifest ----------------------------------------------------------------------------------


def manifest_text() -> str:
    """The Slack app manifest shipped with the package (same file as the repo's manifest.yml)."""
    return files("bot").joinpath("manifest.yml").read_text(encoding="utf-8")


def _run_manifest(args: argparse.Namespace) -> int:
    sys.stdout.write(manifest_text())
    return 0


# -- grade -------------------------------------------------------------------------------------


def _configure_grade(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rubric", type=Path, required=True, help="file holding the rubric")
    request = parser.add_mutually_exclusive_group(required=True)
    request.add_argument(
        "request", nargs="?", help=f"the request to answer and grade; {STDIN_ARGUMENT} reads it from stdin"
    )
    request.add_argument("--file", type=Path, metavar="PATH", help="read the request from PATH")


def _run_grade(args: argparse.Namespace) -> int:
    try:
        rubric_text = args.rubric.read_text(encoding="utf-8")
        parse_rubric(rubric_text)
        request = _request_text(args)
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror}")
        return EXIT_CONFIG
    except RubricError as exc:
        fail(f"{args.rubric} is not a valid rubric: {exc}")
        return EXIT_CONFIG
    if not request.strip():
        fail("the request is empty: give it as an argument, with --file PATH, or on stdin with -")
        return EXIT_CONFIG
    settings = load_settings(["RUBRIC_BOT_MODEL"])
    worker, grader = init_models(settings)
    try:
        outcome = asyncio.run(
            grade(
                rubric_text,
                request,
                worker=worker,
                grader=grader,
                max_iterations=settings.max_iterations,
                max_grader_calls=settings.max_grader_calls,
            )
        )
    except BrokenPipeError:
        raise  # main() ends quietly
    except Exception as exc:  # a model failure is reported, not dumped
        fail(f"the run failed: {type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    return GRADE_EXIT_CODES.get(outcome.status or "", EXIT_FAILURE)


def _request_text(args: argparse.Namespace) -> str:
    """The request from the argument, standard input (`-`) or `--file` (OSError if unreadable)."""
    if args.file is not None:
        return args.file.read_text(encoding="utf-8")
    if args.request == STDIN_ARGUMENT:
        return sys.stdin.read()
    return str(args.request)


async def grade(
    rubric_text: str,
    request: str,
    *,
    worker: BaseChatModel,
    grader: BaseChatModel,
    max_iterations: int,
    max_grader_calls: int = DEFAULT_MAX_GRADER_CALLS,
    out: TextIO | None = None,
) -> TurnOutcome:
    """Run the revise-and-grade loop once in the terminal, printing each iteration's criteria."""
    stream = out or sys.stdout
    agent = build_agent(
        worker,
        grader,
        max_iterations=max_iterations,
        max_grader_calls=max_grader_calls,
        checkpointer=InMemorySaver(),
    )

    async def show(evaluation: RubricEvaluation) -> None:
        print(format_evaluation(evaluation), file=stream, flush=True)

    outcome = await run_turn(
        agent,
        {"messages": [HumanMessage(request)], "rubric": rubric_text},
        agent_config("cli"),
        show,
    )
    print(format_outcome(outcome), file=stream)
    return outcome


def format_evaluation(evaluation: RubricEvaluation) -> str:
    """One grader iteration as a plain-text table: result, criterion, gap.

    Items the grader returned that match no criterion follow the table's criteria, under
    "the grader also flagged"; a failing one is also named in the title line.
    """
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
    title = f"Iteration {position}: {_status_words(evaluation['result'])}"
    if evaluation["score"] is not None:
        title += f" (score {evaluation['score']:g}/5, {evaluation['verdict']})"
    if flagged := render.flagged_words(evaluation):
        title += f"; {flagged}"
    rows = [("result", "criterion", "gap")] + [_table_row(c) for c in evaluation["criteria"]]
    flagged_rows = [_table_row(item) for item in evaluation["unmatched"]]
    widths = [max(len(row[column]) for row in rows + flagged_rows) for column in range(2)]
    table = [
        f"  {mark:<{widths[0]}}  {name:<{widths[1]}}  {gap}".rstrip()
        for mark, name, gap in rows + flagged_rows
    ]
    lines = [title, table[0], f"  {'-' * widths[0]}  {'-' * widths[1]}  ---", *table[1 : len(rows)]]
    if flagged_rows:
        lines.append("  the grader also flagged (not in the rubric, so not part of the verdict):")
        lines += table[len(rows) :]
    if evaluation["explanation"]:
        lines.append(f"  explanation: {evaluation['explanation']}")
    if evaluation["grader_calls"] or evaluation["usage"]:
        lines.append(f"  {render.grader_effort_words(evaluation).lower()}")
    return "\n".join(lines) + "\n"


def _table_row(criterion: CriterionResult) -> tuple[str, str, str]:
    mark = "pass" if criterion["passed"] else "FAIL"
    if criterion["score"] is not None:
        mark += f" {criterion['score']}/5"
    return mark, criterion["name"], " ".join(criterion["gap"].split())


def _status_words(status: str) -> str:
    """A status in the same words the thread shows, for the terminal."""
    return render.STATUS_WORDS[status][1].lower() if status in render.STATUS_WORDS else status


def format_outcome(outcome: TurnOutcome) -> str:
    """The final status line(s) and the answer."""
    status = _status_words(outcome.status) if outcome.status else "no rubric"
    if outcome.iterations is not None and outcome.max_iterations is not None:
        status += f" ({outcome.iterations}/{outcome.max_iterations})"
    lines = [f"Final status: {status}"]
    if outcome.best_iteration is not None:
        lines.append(f"Showing the best answer (iteration {outcome.best_iteration + 1}).")
    if outcome.usage:
        lines.append(f"Tokens: {render.usage_words(outcome.usage)}")
    return "\n".join([*lines, "", outcome.answer])


# -- report ------------------------------------------------------------------------------------


def _configure_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--channel",
        help="#name (looked up with SLACK_BOT_TOKEN) or id, e.g. C0123ABCD (default: every channel)",
    )
    parser.add_argument(
        "--days", type=_days, help="only reviews and runs of the last N days (default: all time)"
    )
    parser.add_argument("--chart", type=Path, metavar="FILE", help="also write the chart to FILE (PNG)")
    parser.add_argument(
        "--db", type=_database, metavar="PATH_OR_URL", help="the bot's database (default: RUBRIC_BOT_DB)"
    )


def _days(text: str) -> int | None:
    try:
        return report_days(text)
    except CommandError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("`", "")) from None


class NothingToReport(Exception):
    """The report cannot be made as asked (no such database or channel); `str()` says why, in one line."""


def _run_report(args: argparse.Namespace) -> int:
    # Only the database is needed (and Slack only to look up a channel's #name): nothing is required.
    settings = load_settings()
    database = args.db or settings.database
    try:
        report, title, undelivered = asyncio.run(
            _report(database, settings, channel=args.channel, days=args.days)
        )
    except NothingToReport as exc:
        fail(str(exc))
        return EXIT_CONFIG
    print(title)
    print(report_table(report))
    print()
    print(undelivered_table(undelivered))
    if args.chart:
        try:
            render_chart(report, args.chart)
        except OSError as exc:
            fail(f"cannot write {args.chart}: {exc.strerror}")
            return EXIT_FAILURE
        print(f"\nChart written to {args.chart}")
    return 0


async def _report(
    database: Database, settings: Settings, *, channel: str | None, days: int | None
) -> tuple[Report, str, list[RunRecord] | None]:
    """The report of `channel` (#name or id; None: every channel), its title line, and the runs
    whose answer never reached Slack in the same channel and period (None: not recorded)."""
    if not _exists(database):
        raise NothingToReport(f"no database at {database} (set RUBRIC_BOT_DB or pass --db)")
    channel_id, title = (None, "All channels") if channel is None else await _channel(channel, settings)
    # Read-only: a report must never change (or create the tables in) whatever database it is given.
    try:
        store = await Store.open(database, read_only=True)
        try:
            if channel_id is not None:
                await _check_channel_known(store, channel_id, title, database)
            report = await load_report(store, team=None, channel=channel_id, days=days)
            return report, title, await _undelivered(store, channel_id, days)
        finally:
            await store.close()
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        raise NothingToReport(f"{database} is not a rubric-bot database ({reason})") from None


async def _undelivered(store: Store, channel: str | None, days: int | None) -> list[RunRecord] | None:
    try:
        return await store.undelivered_runs(None, channel, period_start(days))
    except (OperationalError, ProgrammingError):  # a file from before delivery was recorded, read-only
        return None


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


# -- db ----------------------------------------------------------------------------------------


def _configure_db(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    upgrade = actions.add_parser(
        "upgrade", help="bring the database's tables to the newest schema (serve does this at start)"
    )
    upgrade.add_argument(
        "--db", type=_database, metavar="PATH_OR_URL", help="the database (default: RUBRIC_BOT_DB)"
    )
    upgrade.set_defaults(db_run=_run_db_upgrade)
    copy = actions.add_parser(
        "copy", help="copy every conversation, rubric, run and review into an empty database"
    )
    copy.add_argument(
        "--from", dest="source", type=_database, required=True, metavar="PATH_OR_URL",
        help="the database to copy, e.g. sqlite:rubric-bot.sqlite",
    )  # fmt: skip
    copy.add_argument(
        "--to", dest="target", type=_database, required=True, metavar="URL",
        help="an empty database, e.g. postgresql://USER:PASSWORD@HOST/DBNAME",
    )  # fmt: skip
    copy.set_defaults(db_run=_run_db_copy)


def _database(text: str) -> Database:
    try:
        return Database.parse(text)
    except DatabaseError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a database: {exc}") from None


def _exists(database: Database) -> bool:
    """False for a SQLite file that is not there (opening it would create an empty one)."""
    return database.is_postgres or database.sqlite_path.is_file()


def _run_db(args: argparse.Namespace) -> int:
    try:
        return args.db_run(args)
    except (OSError, SQLAlchemyError, psycopg.Error) as exc:
        # The driver's own message names the server and what failed, never the password.
        reason = getattr(exc, "orig", None) or exc
        fail(f"database error: {reason}")
        return EXIT_FAILURE


def _run_db_upgrade(args: argparse.Namespace) -> int:
    database = args.db or load_settings().database
    report = asyncio.run(dbadmin.upgrade(database))
    print(f"{database}: {report}")
    return 0


def _run_db_copy(args: argparse.Namespace) -> int:
    if not _exists(args.source):
        fail(f"no database at {args.source}")
        return EXIT_CONFIG
    try:
        report = asyncio.run(dbadmin.copy(args.source, args.target))
    except dbadmin.CopyError as exc:
        fail(f"cannot copy: {exc}")
        return EXIT_CONFIG
    rows = ", ".join(f"{table} {count}" for table, count in report.rows.items())
    print(f"Copied {args.source} to {args.target}")
    print(f"  rows: {rows}")
    print(f"  conversations: {report.threads} threads, {report.checkpoints} checkpoints")
    return 0


# -- replay ------------------------------------------------------------------------------------


def _configure_replay(parser: argparse.ArgumentParser) -> None:
    from bot.agreement import replay  # langgraph's SQLite saver and tqdm are only needed here
    from bot.cli import replay as replay_cli

    which = parser.add_argument_group("which reviewed iterations")
    which.add_argument("--channel", help="a Slack channel id, e.g. C0123ABCD (default: every channel)")
    which.add_argument("--days", type=_days, help="only those reviewed in the last N days")
    which.add_argument("--rubric-match", metavar="TEXT", help="only rubrics containing TEXT (ignoring case)")
    which.add_argument("--limit", type=_positive_int, metavar="N", help="only the latest N of them")
    candidate = parser.add_argument_group("the candidate grader")
    candidate.add_argument(
        "--grader-model",
        metavar="PROVIDER:MODEL",
        help="a langchain model string (default: RUBRIC_BOT_GRADER_MODEL, else RUBRIC_BOT_MODEL)",
    )
    candidate.add_argument(
        "--calibration",
        choices=replay.CALIBRATION_MODES,
        default="on",
        help="team examples shown: on = those shown at the time (default), off = none, "
        "loo = the team's other disagreements, never the case's own",
    )
    candidate.add_argument("--prompt", type=Path, metavar="FILE", help="candidate grader instructions")
    running = parser.add_argument_group("running and output")
    running.add_argument(
        "--concurrency",
        type=_positive_int,
        default=replay_cli.DEFAULT_CONCURRENCY,
        help=f"grader calls at once (default {replay_cli.DEFAULT_CONCURRENCY})",
    )
    running.add_argument("--dry-run", action="store_true", help="only count the cases and estimate tokens")
    running.add_argument("--json", action="store_true", help="print the result as JSON")
    running.add_argument("--chart", type=Path, metavar="FILE", help="also write a before/after chart (PNG)")
    running.add_argument(
        "--db", type=_database, metavar="PATH_OR_URL", help="the bot's database (default: RUBRIC_BOT_DB)"
    )


def _run_replay(args: argparse.Namespace) -> int:
    from bot.cli import replay as replay_cli

    return replay_cli.run(args)


# -- entry point -------------------------------------------------------------------------------

SETTINGS_SOURCE = "from the environment or a .env file in the working directory"
"""Where every subcommand's settings come from, as its --help says."""

CLI_SUBCOMMANDS: tuple[CliSubcommand, ...] = (
    CliSubcommand(
        "serve",
        "run the Slack bot (Socket Mode if SLACK_APP_TOKEN is set, else HTTP)",
        _configure_serve,
        _run_serve,
        description=(
            "Run the Slack bot until SIGTERM or Ctrl-C. With SLACK_APP_TOKEN set it connects to Slack "
            "in Socket Mode (no public URL needed); otherwise, or with --http, it answers Slack's HTTP "
            "requests on /slack/events and needs SLACK_SIGNING_SECRET. It reads SLACK_BOT_TOKEN, "
            "RUBRIC_BOT_MODEL and the model provider's API key (e.g. OPENAI_API_KEY), "
            "RUBRIC_BOT_DB and the optional settings listed in the README "
            f"(RUBRIC_BOT_GRADER_MODEL, RUBRIC_BOT_MAX_ITERATIONS, ...), {SETTINGS_SOURCE}."
        ),
    ),
    CliSubcommand(
        "worker",
        "run queued requests without serving Slack (PostgreSQL only; add these for more capacity)",
        _add_concurrency,
        _run_worker,
        description=(
            "Run requests from the PostgreSQL job queue until SIGTERM or Ctrl-C, without talking to "
            "Slack's events: serve processes take Slack's requests and queue them, and every serve and "
            "worker process runs them, one at a time per thread and in order. Run as many as the load "
            "needs, on any machine that reaches the database. It reads SLACK_BOT_TOKEN, "
            "RUBRIC_BOT_MODEL and the model provider's API key, RUBRIC_BOT_DB (a postgresql:// URL) "
            f"and serve's optional settings, {SETTINGS_SOURCE}."
        ),
    ),
    CliSubcommand(
        "manifest",
        "print the Slack app manifest",
        lambda parser: None,
        _run_manifest,
        description=(
            "Print the Slack app manifest (the repository's manifest.yml) to paste into "
            "api.slack.com/apps → Create New App → From a manifest. Reads no settings."
        ),
    ),
    CliSubcommand(
        "grade",
        "answer a request and grade it against a rubric, in the terminal",
        _configure_grade,
        _run_grade,
        description=(
            "Answer one request with the worker model and grade the answer against a rubric file, "
            "revising until the rubric is satisfied or RUBRIC_BOT_MAX_ITERATIONS (default 3) is "
            "reached; each iteration's criteria and the final answer are printed. The rubric is a list "
            "of pass/fail criteria, one per line (-, * or 1. bullets), or YAML with scored dimensions "
            "(see the README). The request is the argument, standard input with -, or --file PATH. "
            "It reads RUBRIC_BOT_MODEL with the provider's API key (e.g. OPENAI_API_KEY), "
            f"RUBRIC_BOT_GRADER_MODEL and RUBRIC_BOT_MAX_ITERATIONS, {SETTINGS_SOURCE}; "
            "no Slack settings."
        ),
        epilog="exit status:\n"
        + "".join(
            f"  {code}  {meaning}\n"
            for code, meaning in (
                (GRADE_EXIT_CODES["satisfied"], "the rubric is satisfied"),
                (EXIT_FAILURE, "the run failed (e.g. a model API error)"),
                (EXIT_CONFIG, "bad arguments, settings, rubric or request"),
                (GRADE_EXIT_CODES["max_iterations_reached"], "not satisfied within the iterations"),
                (GRADE_EXIT_CODES["grader_error"], "grader error: the answer could not be graded"),
                (GRADE_EXIT_CODES["failed"], "the grading failed (the rubric could not be used)"),
            )
        ),
    ),
    CliSubcommand(
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
    ),
    CliSubcommand(
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
    ),
    CliSubcommand(
        "replay",
        "grade the team's reviewed iterations again with a candidate grader and compare (Ctrl-C stops)",
        _configure_replay,
        _run_replay,
        description=(
            "Grade the team's reviewed iterations again, each rebuilt as its grader saw it (rubric, "
            "transcript from the checkpoint history, evidence tools), with a candidate grader model, "
            "calibration or prompt, and print how it agrees with the team next to the original grader: "
            "agreement and Cohen's kappa per criterion and overall, a bootstrap 95% interval on each "
            "difference, and the verdicts that flipped. Ctrl-C stops and prints what was graded. It reads "
            f"the database (--db, else RUBRIC_BOT_DB {SETTINGS_SOURCE}) and the grader model "
            "(--grader-model, else RUBRIC_BOT_GRADER_MODEL or RUBRIC_BOT_MODEL, with the provider's API "
            "key); no Slack settings."
        ),
        epilog="exit status:\n"
        + "".join(
            f"  {code}  {meaning}\n"
            for code, meaning in (
                (0, "the replay finished"),
                (EXIT_FAILURE, "the chart could not be written"),
                (EXIT_CONFIG, "bad arguments or settings"),
                (130, "stopped by Ctrl-C (the partial result is printed)"),
            )
        ),
    ),
)
"""Every `rubric-bot` subcommand; a new one is one more entry."""

HELP_WIDTH = 100
"""Column at which --help descriptions are wrapped (they are given as one long paragraph)."""


def build_parser() -> argparse.ArgumentParser:
    """The `rubric-bot` argument parser."""
    parser = OneLineErrorParser(prog="rubric-bot", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('rubric-bot')}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subcommand in CLI_SUBCOMMANDS:
        sub = commands.add_parser(
            subcommand.name,
            help=subcommand.help,
            description=textwrap.fill(subcommand.description, HELP_WIDTH),
            epilog=subcommand.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        subcommand.configure(sub)
        sub.set_defaults(run=subcommand.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `rubric-bot`; returns the exit code."""
    # Provider keys (e.g. OPENAI_API_KEY) may live in .env too; the real environment wins.
    load_dotenv(ENV_FILE, override=False)
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_CONFIG
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """Exit quietly once stdout's reader has gone, as Unix tools do (see Python's signal docs)."""
    # Python flushes stdout again at exit; pointing it at /dev/null keeps that from failing too.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE
