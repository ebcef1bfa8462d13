"""Modal submissions: the channel-rubric editor (`/rubric`), the review form (Disagree…) and the
workspace settings form (`/rubric admin`). A new rubric or grader model where there are trusted
reviews is held for its replay (`bot.proposals`)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.governance.changes import announce_change, change_words
from bot.listeners.context import services_of, workspace_of
from bot.rendering.rubrics import MODAL_BLOCK_ID, MODAL_CALLBACK_ID, MODAL_INPUT_ACTION_ID
from bot.review.form import (
    REVIEW_CALLBACK_ID,
    ReviewInputError,
    parse_review_submission,
    review_context,
    review_notice,
)
from bot.review.saving import UNKNOWN_EVALUATION, grader_revealed, refresh_tally, save_review
from bot.slack.client import attempt
from bot.slack.payloads import RubricEditorMetadata, Submission, problems
from bot.trust.thresholds import recalibrate_after_review
from bot.workspaces.admin import save_settings
from bot.workspaces.admin_view import ADMIN_CALLBACK_ID
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)

EDITOR_UNREADABLE = (
    "Slack sent this form in a shape I can't read, so the rubric was not saved. "
    "Close it and run /rubric edit again."
)
"""Shown on the rubric input when the editor's submission lacks a part the bot needs."""

EDITOR_WITHOUT_CHANNEL = (
    "This form doesn't say which channel it is for, so the rubric was not saved. "
    "Close it and run /rubric edit in the channel again."
)
"""Shown on the rubric input when the editor's metadata does not name its channel."""

RUBRIC_TEXT_MISSING = "Slack sent this form without the rubric text. Type or paste the rubric again."
"""Shown on the rubric input when the submission carries no text for it."""


def register(app: AsyncApp) -> None:
    """Listen to submissions of the rubric editor and of the review form."""
    app.view(MODAL_CALLBACK_ID)(on_rubric_submitted)
    app.view(REVIEW_CALLBACK_ID)(on_review_submitted)
    app.view(ADMIN_CALLBACK_ID)(on_settings_submitted)


async def on_rubric_submitted(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Save the edited rubric as the channel default; any problem is shown on the input itself."""
    try:
        submission = Submission.model_validate(body)
    except ValidationError as exc:
        logger.warning("unreadable rubric editor submission: %s", problems(exc))
        await _rubric_input_error(ack, EDITOR_UNREADABLE)
        return
    try:
        channel = RubricEditorMetadata.model_validate_json(submission.view.private_metadata).channel
    except ValidationError as exc:
        logger.warning("rubric editor submission without its channel: %s", problems(exc))
        await _rubric_input_error(ack, EDITOR_WITHOUT_CHANNEL)
        return
    typed = submission.view.input(MODAL_BLOCK_ID, MODAL_INPUT_ACTION_ID).value
    if typed is None:
        await _rubric_input_error(ack, RUBRIC_TEXT_MISSING)
        return
    text = typed.strip()
    try:
        parse_rubric(text)
    except RubricError as exc:
        await _rubric_input_error(ack, str(exc))
        return
    services, workspace, user = services_of(context), workspace_of(context), submission.user.id
    refusal = await services.editors.refusal(client, workspace, user)
    if refusal is not None:
        await _rubric_input_error(ack, refusal)
        return
    if services.proposals is not None:
        base = await services.store.latest_rubric_version(workspace, channel)
        held = await services.proposals.propose(
            workspace=workspace,
            channel=channel,
            user=user,
            kind="rubric",
            candidate=text,
            base=str(base),
            client=client,
            tell=partial(_tell_editor, client, channel, user),
        )
        if held is not None:
            await ack()
            await _tell_editor(client, channel, user, held)
            return
    version = await services.store.set_channel_rubric(workspace, channel, text, user)
    await ack()  # only now: if the database failed, Slack tells the editor the form was not saved
    change = await announce_change(client, channel, version)
    if not change.announced:
        await _tell_editor(client, channel, user, change_words(change))


async def _tell_editor(client: AsyncWebClient, channel: str, user: str, text: str) -> None:
    """Tell whoever submitted the rubric editor, privately, in the channel it is for."""
    await attempt(
        client.chat_postEphemeral(channel=channel, user=user, text=text),
        f"answer the rubric editor in {channel}",
    )


async def on_settings_submitted(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Save the workspace's settings from `/rubric admin`'s form; any problem is shown on its input.
    A new grader model is replayed first where the workspace has trusted reviews (`bot.proposals`)."""
    services, workspace = services_of(context), workspace_of(context)
    proposals = services.proposals

    async def hold(channel: str, user: str, wanted: str, in_force: str) -> str | None:
        if proposals is None:
            return None
        return await proposals.propose(
            workspace=workspace,
            channel=channel,
            user=user,
            kind="grader_model",
            candidate=wanted,
            base=in_force,
            client=client,
            tell=partial(_tell_editor, client, channel, user),
            across_workspace=True,
        )

    await save_settings(
        ack, client, services.workspaces, workspace=workspace, body=body, hold_grader_model=hold
    )


async def _rubric_input_error(ack: AsyncAck, message: str) -> None:
    """Keep the editor open with ``message`` under its rubric input."""
    await ack(response_action="errors", errors={MODAL_BLOCK_ID: message})


async def on_review_submitted(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Save the reviewer's verdicts and update the iteration's tally.

    An unusable answer is shown on its input; a form that can no longer be saved is replaced by a
    notice saying why (closing it silently would look like a saved review).
    """
    try:
        submission = Submission.model_validate(body)
    except ValidationError as exc:
        logger.warning("unreadable review form submission: %s", problems(exc))
        await _replace_review_form(ack, "Slack sent the form in a shape I can't read")
        return
    store = services_of(context).store
    try:
        about = review_context(submission.view)
    except ValueError as exc:
        await _replace_review_form(ack, str(exc))
        return
    record = await store.get_evaluation(workspace_of(context), about.grading_run_id, about.iteration)
    if record is None:
        await ack(response_action="update", view=review_notice(UNKNOWN_EVALUATION))
        return
    try:
        _, verdicts = parse_review_submission(submission.view, record.evaluation)
    except ReviewInputError as exc:
        await ack(response_action="errors", errors={exc.block_id: str(exc)})
        return
    except ValueError as exc:
        await _replace_review_form(ack, str(exc))
        return
    user = submission.user.id
    editor = await services_of(context).editors.is_editor(client, workspace_of(context), user)
    await save_review(store, record, user, verdicts, editor=editor, via="blind" if about.blind else "form")
    await ack()
    if about.blind:  # hidden until saved: now the reviewer sees how the grader judged
        await attempt(
            client.chat_postEphemeral(
                channel=record.channel, user=user, thread_ts=record.thread_ts, text=grader_revealed(verdicts)
            ),
            f"show a blind reviewer the grader's verdicts in {record.channel}",
        )
    # Before the tally shows the review: a run started after it sees its thresholds.
    await recalibrate_after_review(
        store, record.thread.workspace, record.channel, services_of(context).settings.trust_risk
    )
    await refresh_tally(store, client, record)


async def _replace_review_form(ack: AsyncAck, reason: str) -> None:
    """Replace a review form that cannot be saved with a notice saying why."""
    await ack(response_action="update", view=review_notice(f"This review can't be saved: {reason}."))
