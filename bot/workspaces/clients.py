"""The Web API client each piece of work uses: the token of the workspace it belongs to.

Bolt's authorization gives each request its workspace's client; a queued job, run later and maybe in
another process, asks `WorkspaceClients` for its own. With one `SLACK_BOT_TOKEN` every workspace is
that token's; in OAuth mode each is looked up among the installations.
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.vocabulary.workspace import Workspace
from bot.workspaces.installations import Installations


@dataclass(frozen=True)
class WorkspaceClients:
    """Web API clients by workspace."""

    client: AsyncWebClient
    """The bot's own client: `SLACK_BOT_TOKEN`'s, or without a token in OAuth mode."""
    installations: Installations | None = None
    """The installations to find each workspace's token in (OAuth mode), else None."""

    async def client_for(self, workspace: Workspace) -> AsyncWebClient | None:
        """A client with the workspace's bot token; None if the bot is no longer installed there."""
        if self.installations is None:
            return self.client
        found = await self.installations.bot_token(workspace, self.client)
        if found is None or found.bot_token is None:
            return None
        return with_token(self.client, found.bot_token)


def with_token(client: AsyncWebClient, token: str) -> AsyncWebClient:
    """A client like `client` (its URL, session and retries) that calls Slack with `token`."""
    return AsyncWebClient(
        token=token,
        base_url=client.base_url,
        timeout=client.timeout,
        session=client.session,
        headers=client.headers,
        retry_handlers=list(client.retry_handlers),
        logger=client.logger,
    )
