"""The `/rubric` slash command: the channel's default rubric for new conversations.

Slash commands carry no thread, so they manage the channel default; a thread's own rubric is set
with a `rubric:` message in the thread. Every answer is ephemeral (only the caller sees it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot import render
from bot.commands import CommandError, RubricCommand, parse_command
from bot.conversation import slack_unescape
from bot.listeners.context import services_of
from bot.runner import SLACK_ERRORS
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)

COMMAND = "/rubric"
"""The slash command's name, as declared in manifest.yml."""


def register(app: AsyncApp) -> None:
    """Listen to `/rubric`."""
    app.command(COMMAND)(on_rubric)


async def on_rubric(
    ack: AsyncAck, command: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Route `/rubric …` to its subcommand; a malformed one gets the help text."""
    try:
        parsed = parse_command(command.get("text") or "")
    except CommandError as exc:
        await _answer(ack, f"{exc}\n\n{render.help_text()}")
        return
    await SUBCOMMANDS[parsed.name](parsed, ack, command, context, client)


Subcommand = Callable[
    [RubricCommand, AsyncAck, dict[str, Any], AsyncBoltContext, AsyncWebClient], Awaitable[None]
]
"""A `/rubric` subcommand's handler; each must call `ack` (that is its answer)."""


async def _edit(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    store = services_of(context).store
    current = await store.get_channel_rubric(_team(command, context), command["channel_id"])
    await ack()
    try:
        await client.views_open(
            trigger_id=command["trigger_id"],
            view=render.rubric_modal(current, channel_id=command["channel_id"]),
        )
    except SLACK_ERRORS as exc:
        logger.warning("could not open the rubric editor: %s", exc)


async def _set(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    text = slack_unescape(parsed.argument)
    try:
        rubric = parse_rubric(text)
    except RubricError as exc:
        await _answer(ack, **render.rubric_error(str(exc)))
        return
    await services_of(context).store.set_channel_rubric(
        _team(command, context), command["channel_id"], text, command["user_id"]
    )
    confirmation = render.rubric_confirmation(rubric)
    await _answer(
        ack,
        f"Channel default rubric set. {confirmation['text']}",
        blocks=[
            _lead("New conversations in this channel will be graded against this rubric."),
            *confirmation["blocks"],
        ],
    )


async def _show(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    store = services_of(context).store
    current = await store.get_channel_rubric(_team(command, context), command["channel_id"])
    if current is None:
        await _answer(ack, f"This channel has no default rubric. {render.no_rubric_hint()}")
        return
    await _answer(ack, f"This channel's default rubric for new conversations:\n```{current}```")


async def _clear(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    store = services_of(context).store
    cleared = await store.clear_channel_rubric(_team(command, context), command["channel_id"])
    await _answer(
        ack,
        "Cleared this channel's default rubric; threads that already have one keep it."
        if cleared
        else "This channel had no default rubric.",
    )


async def _help(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    await _answer(ack, render.help_text())


SUBCOMMANDS: dict[str, Subcommand] = {
    "edit": _edit,
    "set": _set,
    "show": _show,
    "clear": _clear,
    "help": _help,
}
"""Handler of each subcommand `bot.commands.parse_command` accepts."""


async def _answer(ack: AsyncAck, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
    """Answer the command with a message only the caller sees."""
    await ack(text=text, blocks=blocks, response_type="ephemeral")


def _lead(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _team(command: dict[str, Any], context: AsyncBoltContext) -> str:
    return command.get("team_id") or context.team_id or ""
