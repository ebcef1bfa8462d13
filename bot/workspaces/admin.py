"""`/rubric admin`: a workspace's admins and owners see and change its settings.

Who is one is Slack's to say (``users.info``'s `is_admin`/`is_owner`), asked on the command and again
on the form's submission; a Slack error during the check refuses (fails closed). The command answers
with the settings in force and opens the form; a submission is checked against the deployment
(allowed models, ceilings) and either saved whole, announced to the admin and in the log, or
refused with an error under each input at fault and nothing changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.governance.editors import is_workspace_admin
from bot.slack.client import SLACK_ERRORS, attempt, describe_error
from bot.slack.messages import SlackMessage
from bot.slack.notices import log_failure, reference_words, slack_failure_words
from bot.slack.payloads import Submission, problems
from bot.vocabulary.workspace import Workspace, tenant_words
from bot.workspaces.admin_view import (
    UserGroup,
    admin_choices,
    admin_refusal,
    changed_settings,
    form_channel,
    saved_message,
    saved_modal,
    settings_message,
    settings_modal,
    user_groups_of,
)
from bot.workspaces.settings import SettingsInputError, WorkspaceOverrides, checked_settings

logger = logging.getLogger(__name__)

REFUSAL_BLOCK_ID = "worker_model"
"""The form's input a refused or unreadable submission's reason is shown under (its first)."""

UNREADABLE = (
    "Slack sent this form in a shape I can't read, so nothing was changed. Close it and run "
    "/rubric admin again."
)
"""Shown on the form when its submission lacks a part the bot needs."""


async def open_settings(
    ack: AsyncAck,
    client: AsyncWebClient,
    overrides: WorkspaceOverrides,
    *,
    workspace: Workspace,
    user: str,
    channel: str,
    trigger_id: str,
) -> None:
    """Answer `/rubric admin`: to an admin, the settings in force, and the form changing them."""
    refusal = await _refusal(client, user)
    if refusal is not None:
        await ack(text=refusal, response_type="ephemeral")
        return
    effective = await overrides.effective(workspace)
    await _answer(ack, settings_message(effective, overrides.deployment))
    groups = await _user_groups(client)
    view = settings_modal(effective, overrides.deployment, channel=channel, user_groups=groups)
    await attempt(client.views_open(trigger_id=trigger_id, view=view), "open the workspace settings form")


HoldGraderModel = Callable[[str, str, str, str], Awaitable[str | None]]
"""Holds a change of the workspace's grader model for its replay (`bot.proposals`):
``await hold(channel, user, wanted, in_force)``; what to tell the admin when it held it (the change
then waits for Apply), None when it did not (no trusted reviews to replay: it applies at once)."""


async def save_settings(
    ack: AsyncAck,
    client: AsyncWebClient,
    overrides: WorkspaceOverrides,
    *,
    workspace: Workspace,
    body: dict[str, Any],
    hold_grader_model: HoldGraderModel | None = None,
) -> None:
    """Save a submitted form (`body`) if its submitter is an admin and every choice is permitted;
    otherwise show why under the inputs at fault, and change nothing. A new grader model goes to
    `hold_grader_model` first: if it holds it, the rest is saved and the grader model stays."""
    try:
        submission = Submission.model_validate(body)
    except ValidationError as exc:
        logger.warning("unreadable workspace settings submission: %s", problems(exc))
        await ack(response_action="errors", errors={REFUSAL_BLOCK_ID: UNREADABLE})
        return
    user, view = submission.user.id, submission.view
    refusal = await _refusal(client, user)
    if refusal is not None:
        await ack(response_action="errors", errors={REFUSAL_BLOCK_ID: refusal})
        return
    try:
        stored = checked_settings(overrides.deployment, admin_choices(view), user=user, now=datetime.now(UTC))
    except SettingsInputError as exc:
        await ack(response_action="errors", errors=exc.problems)
        return
    before = await overrides.effective(workspace)
    channel = form_channel(view)
    held = None
    wanted = overrides.in_force(stored).grader_model.value
    if hold_grader_model is not None and channel is not None and wanted != before.grader_model.value:
        held = await hold_grader_model(channel, user, wanted, before.grader_model.value)
        if held is not None:
            kept = before.grader_model.value if before.grader_model.source == "workspace" else None
            stored = replace(stored, grader_model=kept)
    after = await overrides.save(workspace, stored)
    changes = changed_settings(before, after)
    confirmation = saved_message(changes, after, overrides.deployment, held)
    await ack(response_action="update", view=saved_modal(confirmation))
    logger.info(
        "%s: %s saved its settings: %s",
        tenant_words(workspace),
        user,
        "; ".join(changes) or "nothing changed",
    )
    if channel is not None:
        await attempt(
            client.chat_postEphemeral(channel=channel, user=user, **confirmation),
            f"confirm the workspace settings in {channel}",
        )


async def _refusal(client: AsyncWebClient, user: str) -> str | None:
    """None if `user` is an admin or owner of the workspace; else what to tell them."""
    try:
        if await is_workspace_admin(client, user):
            return None
    except SLACK_ERRORS as exc:
        reference = log_failure(logger, f"checking whether {user} is a workspace admin", exc, traceback=False)
        return (
            f"I couldn't check whether you are an admin of this workspace ({slack_failure_words(exc)}), "
            f"so nothing was changed. Try again in a minute. {reference_words(reference)}"
        )
    return admin_refusal()


async def _user_groups(client: AsyncWebClient) -> list[UserGroup]:
    """The workspace's user groups for the editors' menu; none if Slack cannot list them (logged):
    the form still opens, keeping the groups already chosen."""
    try:
        return user_groups_of((await client.usergroups_list()).get("usergroups") or [])
    except SLACK_ERRORS as exc:
        logger.warning("could not list the user groups for the settings form: %s", describe_error(exc))
        return []


async def _answer(ack: AsyncAck, message: SlackMessage) -> None:
    await ack(text=message["text"], blocks=message.get("blocks"), response_type="ephemeral")
