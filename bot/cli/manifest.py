"""`rubric-bot manifest`: print the Slack app manifest shipped with the package."""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files

from bot.cli.exits import EXIT_OK
from bot.cli.subcommand import CliSubcommand, no_arguments


def manifest_text() -> str:
    """The Slack app manifest shipped with the package (same file as the repo's manifest.yml)."""
    return files("bot").joinpath("manifest.yml").read_text(encoding="utf-8")


def _run_manifest(args: argparse.Namespace) -> int:
    sys.stdout.write(manifest_text())
    return EXIT_OK


MANIFEST = CliSubcommand(
    "manifest",
    "print the Slack app manifest",
    no_arguments,
    _run_manifest,
    description=(
        "Print the Slack app manifest (the repository's manifest.yml) to paste into "
        "api.slack.com/apps → Create New App → From a manifest. Reads no settings."
    ),
)
"""`rubric-bot manifest`."""
