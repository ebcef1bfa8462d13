"""`rubric-bot serve` and `rubric-bot worker`: run the bot, and extra workers for the PostgreSQL job queue."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Coroutine
from typing import Any

import uvloop

from bot.cli.exits import EXIT_FAILURE, EXIT_OK
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_wait_for_db,
    fail,
    positive_int,
    start_logging,
)
from bot.config import (
    DEFAULT_CONCURRENCY,
    SLACK_CONNECTION,
    SLACK_IDENTITY,
    ConfigError,
    Settings,
    load_settings,
    problem,
)

DEFAULT_PORT = 3000
"""HTTP port of `serve` when `--port` is not given (Bolt's customary default)."""


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--http", action="store_true", help="serve HTTP even when SLACK_APP_TOKEN is set")
    mode.add_argument(
        "--socket-mode",
        action="store_true",
        help="connect in Socket Mode, and stop (exit 2) rather than serve HTTP when SLACK_APP_TOKEN is unset",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the settings (and that the models load) as serving would, say so in one line and exit: "
        "0 when they are usable, 2 naming every problem",
    )
    _configure_worker(parser)


def _configure_worker(parser: argparse.ArgumentParser) -> None:
    _add_concurrency(parser)
    add_wait_for_db(parser)


def _add_concurrency(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"runs this process works on at once with PostgreSQL (default {DEFAULT_CONCURRENCY})",
    )


def _run_serve(args: argparse.Namespace) -> int:
    settings = load_settings([SLACK_IDENTITY, "RUBRIC_BOT_MODEL", _connection(args)])
    http = args.http or not settings.socket_mode
    if problems := settings.oauth_problems(socket_mode=not http):
        raise ConfigError(problems)
    database = settings.database
    if not database.is_postgres and not database.sqlite_path.parent.is_dir():
        parent = database.sqlite_path.parent
        raise ConfigError([problem("RUBRIC_BOT_DB", f"is in a directory that does not exist ({parent})")])
    if http and args.port == settings.metrics_port:
        raise ConfigError([problem("RUBRIC_BOT_METRICS_PORT", f"is serve's --port too ({args.port})")])
    if args.check:
        return _check(settings, "HTTP mode" if http else "Socket Mode")
    from bot.app import serve  # Bolt and aiohttp are only needed to serve

    start_logging(settings)
    try:
        _run_service(
            serve(
                settings,
                http=args.http,
                port=args.port,
                concurrency=args.concurrency,
                wait_for_db=args.wait_for_db,
            )
        )
    except OSError as exc:  # e.g. the HTTP port is taken: the operator's to fix, not a bug to trace
        logging.getLogger(__name__).debug("serve failed", exc_info=True)
        fail(f"cannot serve: {exc}")
        return EXIT_FAILURE
    return EXIT_OK


def _connection(args: argparse.Namespace) -> str:
    """The setting `serve` needs to hear from Slack: HTTP mode verifies every request with the signing
    secret, Socket Mode connects with the app-level token; without a flag either will do."""
    if args.http:
        return "SLACK_SIGNING_SECRET"
    return "SLACK_APP_TOKEN" if args.socket_mode else SLACK_CONNECTION


def _check(settings: Settings, mode: str) -> int:
    """`serve --check`: the models load too (a missing key or package is a `ConfigError`), then one line."""
    from bot.agent.models import init_audit_model, init_models, init_shadow_model, init_summary_model

    worker, _ = init_models(settings)
    init_summary_model(settings, worker)
    init_audit_model(settings)
    init_shadow_model(settings)
    print(f"rubric-bot: the settings are ready to serve in {mode} (database {settings.database})")
    return EXIT_OK


def _run_worker(args: argparse.Namespace) -> int:
    settings = load_settings([SLACK_IDENTITY, "RUBRIC_BOT_MODEL", "RUBRIC_BOT_DB"])
    if problems := settings.oauth_problems(socket_mode=False):
        raise ConfigError(problems)
    if not settings.database.is_postgres:
        raise ConfigError(
            [
                "RUBRIC_BOT_DB is a SQLite file, and a worker takes its runs from the PostgreSQL job "
                "queue: set it to postgresql://USER:PASSWORD@HOST:5432/DBNAME (with SQLite, serve "
                "runs every request itself)."
            ]
        )
    from bot.app import work

    start_logging(settings)
    _run_service(work(settings, concurrency=args.concurrency, wait_for_db=args.wait_for_db))
    return EXIT_OK


SERVE = CliSubcommand(
    "serve",
    "run the Slack bot (Socket Mode if SLACK_APP_TOKEN is set, else HTTP)",
    _configure_serve,
    _run_serve,
    description=(
        "Run the Slack bot until SIGTERM or Ctrl-C. With SLACK_APP_TOKEN set it connects to Slack "
        "in Socket Mode (no public URL needed); otherwise, or with --http, it answers Slack's HTTP "
        "requests on /slack/events and needs SLACK_SIGNING_SECRET. It reads SLACK_BOT_TOKEN (or, "
        "for a bot workspaces install with OAuth, SLACK_CLIENT_ID and SLACK_CLIENT_SECRET; HTTP "
        "mode, install page on /slack/install), RUBRIC_BOT_MODEL and the model provider's API key "
        "(e.g. OPENAI_API_KEY), "
        "RUBRIC_BOT_DB and the optional settings listed in the README "
        f"(RUBRIC_BOT_GRADER_MODEL, RUBRIC_BOT_MAX_ITERATIONS, ...), {SETTINGS_SOURCE}."
    ),
)
"""`rubric-bot serve`."""

WORKER = CliSubcommand(
    "worker",
    "run queued requests without serving Slack (PostgreSQL only; add these for more capacity)",
    _configure_worker,
    _run_worker,
    description=(
        "Run requests from the PostgreSQL job queue until SIGTERM or Ctrl-C, without talking to "
        "Slack's events: serve processes take Slack's requests and queue them, and every serve and "
        "worker process runs them, one at a time per thread and in order. Run as many as the load "
        "needs, on any machine that reaches the database. It reads SLACK_BOT_TOKEN (or "
        "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET), "
        "RUBRIC_BOT_MODEL and the model provider's API key, RUBRIC_BOT_DB (a postgresql:// URL) "
        f"and serve's optional settings, {SETTINGS_SOURCE}."
    ),
)
"""`rubric-bot worker`."""


def _run_service(main: Coroutine[Any, Any, None]) -> None:
    """Run `serve`'s or `worker`'s main coroutine on uvloop's event loop, which schedules a busy
    bot's many small callbacks for less CPU than asyncio's own (measured: benchmarks/bot_load.py)."""
    uvloop.run(main)
