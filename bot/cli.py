"""`rubric-bot` (also `python -m bot`): the Slack bot that grades its work against a rubric.

Subcommands serve the bot, print its manifest, try a rubric in the terminal, and report how far
the grader agrees with the team's reviews.

Configuration problems end the program with one message and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

from dotenv import load_dotenv
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bot import render
from bot.agent import TurnOutcome, agent_config, build_agent, init_models, run_turn
from bot.commands import CommandError, report_days
from bot.config import ENV_FILE, ConfigError, load_settings, provided_names
from bot.report import Report, load_report, render_chart, report_table
from bot.store import Store
from grading import RubricError, parse_rubric

EXIT_CONFIG = 2
"""Exit code for unusable configuration or arguments (argparse uses 2 for usage errors too)."""

EXIT_FAILURE = 1
"""Exit code when a run itself failed (a model error in `grade`)."""

DEFAULT_PORT = 3000
"""HTTP port of `serve` when `--port` is not given (Bolt's customary default)."""

QUIET_LOGGERS = ("httpx", "httpx2")
"""HTTP client loggers of the model providers: one INFO line per model call is noise."""


@dataclass(frozen=True)
class Subcommand:
    """One `rubric-bot` subcommand: how to declare its arguments and how to run it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# -- serve -------------------------------------------------------------------------------------


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true", help="serve HTTP even when SLACK_APP_TOKEN is set")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")


def _run_serve(args: argparse.Namespace) -> int:
    required = ["SLACK_BOT_TOKEN", "RUBRIC_BOT_MODEL"]
    if args.http or "SLACK_APP_TOKEN" not in provided_names():
        required.append("SLACK_SIGNING_SECRET")  # HTTP mode verifies every request with it
    settings = load_settings(required)
    from bot.app import serve  # Bolt and aiohttp are only needed to serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    asyncio.run(serve(settings, http=args.http, port=args.port))
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
    parser.add_argument("task", help="the request to answer and grade")


def _run_grade(args: argparse.Namespace) -> int:
    settings = load_settings(["RUBRIC_BOT_MODEL"])
    try:
        rubric_text = args.rubric.read_text(encoding="utf-8")
        parse_rubric(rubric_text)
    except OSError as exc:
        print(f"rubric-bot: cannot read {args.rubric}: {exc.strerror}", file=sys.stderr)
        return EXIT_CONFIG
    except RubricError as exc:
        print(f"rubric-bot: {args.rubric} is not a valid rubric: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    worker, grader = init_models(settings)
    try:
        asyncio.run(
            grade(
                rubric_text,
                args.task,
                worker=worker,
                grader=grader,
                max_iterations=settings.max_iterations,
            )
        )
    except Exception as exc:  # a model failure is reported, not dumped
        print(f"rubric-bot: the run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return 0


async def grade(
    rubric_text: str,
    task: str,
    *,
    worker: BaseChatModel,
    grader: BaseChatModel,
    max_iterations: int,
    out: TextIO | None = None,
) -> TurnOutcome:
    """Run the revise-and-grade loop once in the terminal, printing each iteration's criteria."""
    stream = out or sys.stdout
    agent = build_agent(worker, grader, max_iterations=max_iterations, checkpointer=InMemorySaver())

    async def show(evaluation: dict[str, Any]) -> None:
        print(format_evaluation(evaluation), file=stream, flush=True)

    outcome = await run_turn(
        agent,
        {"messages": [HumanMessage(task)], "rubric": rubric_text},
        agent_config("cli"),
        show,
    )
    print(format_outcome(outcome), file=stream)
    return outcome


def format_evaluation(evaluation: dict[str, Any]) -> str:
    """One grader iteration as a plain-text table: result, criterion, gap."""
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
    title = f"Iteration {position}: {_status_words(evaluation['result'])}"
    if evaluation.get("score") is not None:
        title += f" (score {evaluation['score']:g}/5, {evaluation.get('verdict')})"
    rows = [("result", "criterion", "gap")]
    for criterion in evaluation.get("criteria") or []:
        mark = "pass" if criterion["passed"] else "FAIL"
        if criterion.get("score") is not None:
            mark += f" {criterion['score']}/5"
        rows.append((mark, criterion["name"], " ".join(criterion.get("gap", "").split())))
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    lines = [title]
    for number, (mark, name, gap) in enumerate(rows):
        lines.append(f"  {mark:<{widths[0]}}  {name:<{widths[1]}}  {gap}".rstrip())
        if number == 0:
            lines.append(f"  {'-' * widths[0]}  {'-' * widths[1]}  ---")
    if evaluation.get("explanation"):
        lines.append(f"  explanation: {evaluation['explanation']}")
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--channel", help="a Slack channel id, e.g. C0123ABCD (default: every channel)")
    parser.add_argument("--days", type=_days, help="only reviews of the last N days (default: all time)")
    parser.add_argument("--chart", type=Path, metavar="FILE", help="also write the chart to FILE (PNG)")
    parser.add_argument(
        "--db", type=Path, metavar="PATH", help="the bot's SQLite file (default: RUBRIC_BOT_DB)"
    )


def _days(text: str) -> int | None:
    try:
        return report_days(text)
    except CommandError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("`", "")) from None


def _run_report(args: argparse.Namespace) -> int:
    # Only the database is needed: no Slack tokens or models, so nothing else is required.
    db = args.db or load_settings().db_path
    if not db.is_file():
        print(f"rubric-bot: no database at {db} (set RUBRIC_BOT_DB or pass --db)", file=sys.stderr)
        return EXIT_CONFIG
    report = asyncio.run(_load_report(db, channel=args.channel, days=args.days))
    print(f"Channel {args.channel}" if args.channel else "All channels")
    print(report_table(report))
    if args.chart:
        try:
            render_chart(report, args.chart)
        except OSError as exc:
            print(f"rubric-bot: cannot write {args.chart}: {exc.strerror}", file=sys.stderr)
            return EXIT_FAILURE
        print(f"\nChart written to {args.chart}")
    return 0


async def _load_report(db: Path, *, channel: str | None, days: int | None) -> Report:
    store = await Store.open(str(db))
    try:
        return await load_report(store, team=None, channel=channel, days=days)
    finally:
        await store.close()


# -- entry point -------------------------------------------------------------------------------

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "serve",
        "run the Slack bot (Socket Mode if SLACK_APP_TOKEN is set, else HTTP)",
        _configure_serve,
        _run_serve,
    ),
    Subcommand("manifest", "print the Slack app manifest", lambda parser: None, _run_manifest),
    Subcommand(
        "grade", "answer a task and grade it against a rubric, in the terminal", _configure_grade, _run_grade
    ),
    Subcommand(
        "report",
        "how far the grader agrees with the team's reviews, per criterion (reads the database only)",
        _configure_report,
        _run_report,
    ),
)
"""Every `rubric-bot` subcommand; a new one is one more entry."""


def build_parser() -> argparse.ArgumentParser:
    """The `rubric-bot` argument parser."""
    parser = argparse.ArgumentParser(prog="rubric-bot", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subcommand in SUBCOMMANDS:
        sub = commands.add_parser(subcommand.name, help=subcommand.help)
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
