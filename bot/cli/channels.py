"""`--channel` as every terminal command takes it: a Slack channel id (``C0123ABCD``, needs nothing
more) or a ``#name``, looked up in Slack with `SLACK_BOT_TOKEN` (and `SLACK_API_URL`)."""

from __future__ import annotations

import argparse
import asyncio
import re
from dataclasses import dataclass

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.config import ConfigError, Settings

CHANNEL_ID = re.compile(r"[CDG][A-Z0-9]+")
"""What a Slack conversation id looks like; channel names are lower-case, so they never match."""

CHANNEL_NAME = re.compile(r"#?[a-z0-9][a-z0-9_\-]{0,79}")
"""A Slack channel's name as people write it, with or without its ``#``."""

CHANNEL_HELP = "only this channel: #name (looked up in Slack with SLACK_BOT_TOKEN) or id, e.g. C0123ABCD"
"""The `--channel` option's help, the same in every command."""

CHANNEL_PAGE = 1000
"""Channels asked for per `conversations.list` page (Slack's maximum)."""


@dataclass(frozen=True)
class Channel:
    """A channel as a command names it: its id, and how its output's title says it."""

    id: str
    title: str


def channel_argument(text: str) -> str:
    """An argparse type: a channel id or a #name, as written (`resolve_channel` finds a name's id)."""
    if not (CHANNEL_ID.fullmatch(text) or CHANNEL_NAME.fullmatch(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a channel id such as C0123ABCD nor a #name")
    return text


def channel_id(text: str | None, settings: Settings) -> str | None:
    """The id of the channel given as `text` (None: every channel); a #name is looked up in Slack."""
    return None if text is None else resolve_channel(text, settings).id


def resolve_channel(text: str, settings: Settings) -> Channel:
    """The channel given as `text`: an id as it is, a #name looked up in Slack (a `ConfigError`, one
    line, when it cannot be)."""
    if CHANNEL_ID.fullmatch(text):
        return Channel(text, f"Channel {text}")
    return asyncio.run(_look_up(text.removeprefix("#"), settings))


async def _look_up(name: str, settings: Settings) -> Channel:
    or_id = "or pass the channel's id (C0123ABCD: the channel's details, at the bottom of About)"
    if settings.slack_bot_token is None:
        raise ConfigError([f"looking up #{name} needs SLACK_BOT_TOKEN (environment or .env); {or_id}"])
    from bot.slack.client import build_client, describe_error  # Slack's client is only needed for a name

    try:
        pages = await build_client(settings).conversations_list(
            types="public_channel,private_channel", exclude_archived=False, limit=CHANNEL_PAGE
        )
        async for page in pages:
            for found in page["channels"]:
                if found["name"] == name:
                    return Channel(found["id"], f"Channel #{name} ({found['id']})")
    except SlackApiError as exc:
        error = describe_error(exc)
        raise ConfigError(
            [
                f"Slack would not list channels to find #{name} ({error}); the bot needs the channels:read "
                f"and groups:read scopes (in manifest.yml; reinstall the app after adding them), {or_id}"
            ]
        ) from None
    except aiohttp.ClientError as exc:
        raise ConfigError([f"cannot reach Slack to look up #{name} ({exc}); {or_id}"]) from None
    raise ConfigError([f"Slack has no channel named #{name} that the bot can see; {or_id}"])
