"""`rubric-bot` (also `python -m bot`): the Slack bot that grades its work against a rubric.

Subcommands serve the bot, print its manifest, try a rubric in the terminal, report how far
the grader agrees with the team's reviews, show usage (requests, tokens and what they cost), and
upgrade or copy its database.

Every error is one line on stderr, never a traceback; configuration and usage problems exit with 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from importlib.metadata import version
from typing import NoReturn

from dotenv import load_dotenv

from bot.cli.db import DB
from bot.cli.exits import EXIT_BROKEN_PIPE, EXIT_CONFIG
from bot.cli.export import EXPORT
from bot.cli.grade import GRADE
from bot.cli.manifest import MANIFEST
from bot.cli.replay import REPLAY
from bot.cli.report import REPORT
from bot.cli.serve import SERVE, WORKER
from bot.cli.subcommand import CliSubcommand
from bot.cli.usage import USAGE
from bot.config import ENV_FILE, ConfigError
from bot.material.pdf import keep_main_out_of_children

CLI_SUBCOMMANDS: tuple[CliSubcommand, ...] = (
    SERVE,
    WORKER,
    MANIFEST,
    GRADE,
    REPORT,
    USAGE,
    EXPORT,
    DB,
    REPLAY,
)
"""Every `rubric-bot` subcommand, in `--help`'s order; a new one is one more module and one more entry."""

HELP_WIDTH = 100
"""Column at which --help descriptions are wrapped (they are given as one long paragraph)."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2), pointing at `--help`."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"{self.prog}: {message} (see {self.prog} --help)\n")


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
    keep_main_out_of_children()
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
