"""Modal submissions: the channel-rubric editor (`/rubric`) and the review form (Disagree…)."""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot import render
from bot.listeners.actions import UNKNOWN_EVALUATION, save_review, show_tally
from bot.listeners.context import services_of
from bot.review import (
    REVIEW_CALLBACK_ID,
    ReviewInputError,
    parse_review_submission,
    review_context,
    review_notice,
)
from bot.slack import SLACK_ERRORS
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    """Listen to submissions of the rubric editor and of the review form."""
    app.view(render.MODAL_CALLBACK_ID)(on_rubric_submitted)
    app.view(REVIEW_CALLBACK_ID)(on_review_submitted)


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


async def on_review_submitted(
    ack: AsyncAck,
    body: dict[str, Any],
    view: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
) -> None:
    """Save the reviewer's verdicts and update the iteration's tally.

    An unusable answer is shown on its input; a form that can no longer be saved is replaced by a
    notice saying why (closing it silently would look like a saved review).
    """
    store = services_of(context).store
    try:
        about = review_context(view)
    except ValueError as exc:
        await ack(response_action="update", view=review_notice(f"This review can't be saved: {exc}."))
        return
    record = await store.get_evaluation(about.grading_run_id, about.iteration)
    if record is None:
        await ack(response_action="update", view=review_notice(UNKNOWN_EVALUATION))
        return
    try:
        _, verdicts = parse_review_submission(view, record.evaluation)
    except ReviewInputError as exc:
        await ack(response_action="errors", errors={exc.block_id: str(exc)})
        return
    except ValueError as exc:
        await ack(response_action="update", view=review_notice(f"This review can't be saved: {exc}."))
        return
    await save_review(store, record, body["user"]["id"], verdicts)
    await ack()
    await show_tally(store, client, record)
