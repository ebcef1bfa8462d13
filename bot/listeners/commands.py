"""The `/rubric` slash command: the channel's default rubric, its agreement report, calibration.

Slash commands carry no thread, so they manage the channel default; a thread's own rubric is set
with a `rubric:` message in the thread. Every answer is ephemeral (only the caller sees it),
except the agreement report, which is posted to the channel for the team to read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import render
from bot.commands import (
    CommandError,
    RubricCommand,
    calibration_switch,
    parse_command,
    report_days,
)
from bot.conversation import slack_unescape
from bot.listeners.context import services_of
from bot.report import Report, chart_png, load_report, report_blocks
from bot.review import CALIBRATION_EXAMPLES
from bot.runner import SLACK_ERRORS
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)

COMMAND = "/rubric"
"""The slash command's name, as declared in manifest.yml."""

CHART_FILENAME = "grader-agreement.png"
"""File name of the report's chart when uploaded to the channel."""

CHART_COMMENT = (
    "κ per criterion against the 0.6 bar, and how often the grader matched the reviewers next to "
    "what always giving the most common verdict would score."
)
"""The message the chart is uploaded with: how to read it."""

UPLOAD_ERRORS: tuple[type[Exception], ...] = (*SLACK_ERRORS, SlackClientError)
"""What posting the report can raise: a Web API failure, or the file upload step failing."""


def register(app: AsyncApp) -> None:
    """Listen to `/rubric`."""
    app.command(COMMAND)(on_rubric)


async def on_rubric(
    ack: AsyncAck, command: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Route `/rubric …` to its subcommand; a malformed one gets the help text."""
    try:
        parsed = parse_command(command.get("text") or "")
        await SUBCOMMANDS[parsed.name](parsed, ack, command, context, client)
    except CommandError as exc:
        await _answer(ack, f"{exc}\n\n{render.help_text(include_reviews=True)}")


Subcommand = Callable[
    [RubricCommand, AsyncAck, dict[str, Any], AsyncBoltContext, AsyncWebClient], Awaitable[None]
]
"""A `/rubric` subcommand's handler; each must call `ack` (that is its answer). It may raise
`CommandError` for a bad argument, but only before it acks."""


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


async def _report(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    """Post the channel's agreement report and its chart; ack first, since κ and the chart take a while.

    With no reviews yet only the caller is told so, not the whole channel.
    """
    days = report_days(parsed.argument)
    await _answer(ack, "Working out how far the grader agrees with this channel's reviews…")
    channel = command["channel_id"]
    store = services_of(context).store
    report = await load_report(store, team=_team(command, context), channel=channel, days=days)
    if report.reviews == 0:
        await _respond(context, **report_blocks(report, channel=channel))
        return
    try:
        await _post_report(client, report, channel)
    except UPLOAD_ERRORS as exc:
        logger.warning("could not post the agreement report in %s: %s", channel, exc)
        await _respond(
            context,
            text=f"I couldn't post the report or its chart here ({_slack_error(exc)}). If I'm not in this "
            "channel, invite me with `/invite @rubric-bot` and try again.",
        )


async def _post_report(client: AsyncWebClient, report: Report, channel: str) -> None:
    await client.chat_postMessage(channel=channel, **report_blocks(report, channel=channel))
    chart = await asyncio.to_thread(chart_png, report)
    await client.files_upload_v2(
        channel=channel,
        file=chart,
        filename=CHART_FILENAME,
        title=f"Grader agreement, {report.period}",
        initial_comment=CHART_COMMENT,
    )


async def _respond(context: AsyncBoltContext, **message: Any) -> None:
    """A later answer to the command, only for the caller (via its response_url: no membership needed)."""
    if context.respond is None:
        return
    try:
        await context.respond(response_type="ephemeral", **message)
    except SLACK_ERRORS as exc:
        logger.warning("could not answer /rubric: %s", exc)


def _slack_error(exc: Exception) -> str:
    """Slack's error code for a failed call, else the exception's type."""
    return exc.response.get("error") if isinstance(exc, SlackApiError) else type(exc).__name__


async def _calibration(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    """Show, or switch on or off, whether the grader learns from the channel's disagreements."""
    switch = calibration_switch(parsed.argument)
    store = services_of(context).store
    team, channel = _team(command, context), command["channel_id"]
    if switch is not None:
        await store.set_calibration(team, channel, switch)
    enabled = switch if switch is not None else await store.calibration_enabled(team, channel)
    await _answer(ack, _calibration_words(enabled))


def _calibration_words(enabled: bool) -> str:
    if enabled:
        return (
            "Calibration is *on* in this channel: when the team disagrees with the grader, it is "
            f"shown up to {CALIBRATION_EXAMPLES} of the latest disagreements with the rubric as "
            "worked examples. `/rubric calibration off` stops that."
        )
    return (
        "Calibration is *off* in this channel: the grader does not see the team's reviews. "
        "`/rubric calibration on` turns it back on."
    )


async def _help(
    parsed: RubricCommand,
    ack: AsyncAck,
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    await _answer(ack, render.help_text(include_reviews=True))


SUBCOMMANDS: dict[str, Subcommand] = {
    "edit": _edit,
    "set": _set,
    "show": _show,
    "clear": _clear,
    "report": _report,
    "calibration": _calibration,
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
