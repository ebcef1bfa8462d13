"""How listeners reach the bot's services: a global middleware puts them in the Bolt context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_bolt.async_app import AsyncBoltContext

from bot.agreement.channel_replay import ChannelReplays
from bot.config import Settings
from bot.db.store import Store
from bot.governance.editors import RubricEditors
from bot.proposals.proposing import Proposals
from bot.slack.conversation import UserMessage, user_message
from bot.threads.runner import ThreadRunner
from bot.vocabulary.workspace import NO_ENTERPRISE, Organization, Tenant, Workspace
from bot.workspaces.installations import Installations
from bot.workspaces.settings import WorkspaceOverrides

SERVICES_KEY = "rubric_bot_services"
"""Where `Services` lives in each request's Bolt context."""

WORKSPACE_KEY = "rubric_bot_workspace"
"""Where the request's `Workspace` lives in its Bolt context."""


@dataclass(frozen=True)
class Services:
    """What listeners work with: settings, the bot's tables, the thread runner, channel replays and
    who may change grading, the conversations' checkpointer (uninstalling deletes a workspace's
    conversations), each workspace's own settings (`/rubric admin`) and in OAuth mode the
    installations."""

    settings: Settings
    store: Store
    runner: ThreadRunner
    replays: ChannelReplays
    editors: RubricEditors
    checkpointer: BaseCheckpointSaver
    workspaces: WorkspaceOverrides
    installations: Installations | None = None
    proposals: Proposals | None = None
    """Grading changes held for their replay (None: every change applies at once)."""

    async def attach(
        self, context: AsyncBoltContext, body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> None:
        """Bolt global middleware: make these services, and the request's workspace, available to
        every listener."""
        context[SERVICES_KEY] = self
        context[WORKSPACE_KEY] = request_workspace(self.settings, context, body)
        await next()


def services_of(context: AsyncBoltContext) -> Services:
    """The bot's services for this request."""
    return context[SERVICES_KEY]


def workspace_of(context: AsyncBoltContext) -> Workspace:
    """The workspace the bot's rows for this request are filed under (see `request_workspace`)."""
    return context[WORKSPACE_KEY]


def tenant_of(context: AsyncBoltContext) -> Tenant:
    """Whose installation a request speaks for: an org-wide installation's org (every workspace of
    it), else the request's workspace."""
    if context.is_enterprise_install and context.enterprise_id:
        return Organization(context.enterprise_id)
    return workspace_of(context)


def event_message(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> UserMessage:
    """The person's message an Events API `event` (delivered in `body`) carries, in its workspace."""
    return user_message(
        event,
        workspace=workspace_of(context),
        bot_user_id=context.bot_user_id or "",
        event_id=body.get("event_id"),
    )


def request_workspace(settings: Settings, context: AsyncBoltContext, body: dict[str, Any]) -> Workspace:
    """The workspace a request comes from: the installation's team, and in OAuth mode its Enterprise
    Grid org.

    Bolt reads them from the request's authorization, so in a Slack Connect channel it is the bot's
    own workspace whoever wrote, and every path (events, commands, forms) files a thread under one
    workspace. An org-wide installation's authorization names only the org: the team is then the
    one the request came from. With one `SLACK_BOT_TOKEN` there is one installation, and rows stay
    filed as they always were, by team alone.
    """
    if not settings.oauth:
        return Workspace(context.team_id or context.enterprise_id or "")
    event, user = body.get("event"), body.get("user")
    team = (
        context.team_id
        or body.get("team_id")
        or (event.get("team") if isinstance(event, dict) else None)
        or (user.get("team_id") if isinstance(user, dict) else None)
    )
    return Workspace(str(team or ""), context.enterprise_id or NO_ENTERPRISE)
