"""`rubric-bot manifest`: print the Slack app manifest shipped with the package, or its variant for
a bot offered to many workspaces (`--distributed --url https://HOST`)."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from bot.cli.exits import EXIT_OK
from bot.cli.subcommand import CliSubcommand
from bot.config import ConfigError
from bot.workspaces.manifest import (
    distributed_manifest,
    is_packaged_manifest,
    manifest_text,
    packaged_manifest_path,
)


def _configure_manifest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="the manifest of an app that workspaces install with OAuth (HTTP mode, needs --url)",
    )
    parser.add_argument(
        "--url",
        type=_public_url,
        metavar="https://HOST",
        help="where the bot is reached: the request and OAuth redirect URLs are made from it",
    )


def _public_url(text: str) -> str:
    """An argparse type: an https URL with a host and nothing after the path."""
    parts = urlsplit(text)
    if parts.scheme != "https" or not parts.netloc or parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(f"{text!r} is not an https://HOST URL (Slack calls only https URLs)")
    return text.rstrip("/")


def _run_manifest(args: argparse.Namespace) -> int:
    if args.distributed != (args.url is not None):
        raise ConfigError(
            ["--distributed and --url go together: rubric-bot manifest --distributed --url https://HOST"]
        )
    if _stdout_is_the_packaged_manifest():
        raise ConfigError(
            [
                f"stdout is {packaged_manifest_path()}, the packaged manifest this command reads, so "
                "nothing was written (a shell redirect has emptied it already: restore it with git "
                "checkout bot/manifest.yml, or reinstall). Write the manifest to a file of its own, "
                "e.g. rubric-bot manifest --distributed --url https://HOST > slack-manifest.yml"
            ]
        )
    sys.stdout.write(distributed_manifest(args.url) if args.distributed else manifest_text())
    return EXIT_OK


def _stdout_is_the_packaged_manifest() -> bool:
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: captured, not a file
        return False
    return is_packaged_manifest(descriptor)


MANIFEST = CliSubcommand(
    "manifest",
    "print the Slack app manifest",
    _configure_manifest,
    _run_manifest,
    description=(
        "Print the Slack app manifest (the repository's manifest.yml is a copy of it) to paste into "
        "api.slack.com/apps → Create New App → From a manifest. With --distributed --url "
        "https://HOST, the manifest of a bot that workspaces install with OAuth from that host: "
        "HTTP request URLs and the OAuth redirect URL filled in, Socket Mode off, org-wide "
        "installs allowed. It refuses to write into the packaged manifest it reads "
        "(bot/manifest.yml); write to a file of your own, e.g. > slack-manifest.yml. Reads no settings."
    ),
)
"""`rubric-bot manifest`."""
