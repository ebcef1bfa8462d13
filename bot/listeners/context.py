"""How listeners reach the bot's services: a global middleware puts them in the Bolt context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_bolt.async_app import AsyncBoltContext

from bot.agreement.channel_replay import ChannelReplays
from bot.config import Settings
from bot.db.store import Store
from bot.governance.editors import RubricEditors
from bot.threads.runner import ThreadRunner
from bot.workspaces.settings import WorkspaceOverrides

SERVICES_KEY = "rubric_bot_services"
"""Where `Services` lives in each request's Bolt context."""


@dataclass(frozen=True)
class Services:
    """What listeners work with: settings, the bot's tables, the thread runner, channel replays and
    who may change grading, the conversations' checkpointer (uninstalling deletes a workspace's
    conversations) and each workspace's own settings (`/rubric admin`)."""

    settings: Settings
    store: Store
    runner: ThreadRunner
    replays: ChannelReplays
    editors: RubricEditors
    checkpointer: BaseCheckpointSaver
    workspaces: WorkspaceOverrides

    async def attach(self, context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        """Bolt global middleware: make these services available to every listener."""
        context[SERVICES_KEY] = self
        await next()


def services_of(context: AsyncBoltContext) -> Services:
    """The bot's services for this request."""
    return context[SERVICES_KEY]


def workspace_of(context: AsyncBoltContext) -> str:
    """The workspace the bot's rows for this request are filed under: the installation's team.

    Bolt reads it from the request's authorization, so in a Slack Connect channel it is the bot's
    own workspace whoever wrote, and every path (events, commands, forms) files a thread under one
    team. An org-wide installation may only name its enterprise.
    """
    return context.team_id or context.enterprise_id or ""
