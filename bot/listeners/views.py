"""Modal submissions: the channel-rubric editor opened by `/rubric` or `/rubric edit`."""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot import render
from bot.listeners.context import services_of
from bot.runner import SLACK_ERRORS
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    """Listen to submissions of the rubric editor."""
    app.view(render.MODAL_CALLBACK_ID)(on_rubric_submitted)


async def on_rubric_submitted(
    ack: AsyncAck,
    body: dict[str, Any],
    view: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    """Save the edited rubric as the channel default; a parse error is shown on the input itself."""
    values = view["state"]["values"][render.MODAL_BLOCK_ID][render.MODAL_INPUT_ACTION_ID]
    text = (values.get("value") or "").strip()
    try:
        rubric = parse_rubric(text)
    except RubricError as exc:
        await ack(response_action="errors", errors={render.MODAL_BLOCK_ID: str(exc)})
        return
    channel = json.loads(view["private_metadata"])["channel"]
    user = body["user"]["id"]
    team = (body.get("team") or {}).get("id") or context.team_id or ""
    await services_of(context).store.set_channel_rubric(team, channel, text, user)
    await ack()
    try:
        await client.chat_postEphemeral(channel=channel, user=user, **render.rubric_confirmation(rubric))
    except SLACK_ERRORS as exc:
        logger.warning("could not confirm the channel rubric in %s: %s", channel, exc)
