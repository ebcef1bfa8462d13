"""OAuth mode's installations: Bolt's OAuth flow settings and SQLAlchemy stores on the bot's database,
and the authorization that finds a workspace's bot token (refreshing a rotating one) for Bolt's
requests and for queued jobs alike."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urljoin

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.listener.async_builtins import AsyncTokenRevocationListeners
from slack_bolt.oauth.async_callback_options import AsyncCallbackOptions
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import Settings
from bot.db.database import WRITE_LOCK_OPTION
from bot.db.schema import INSTALLATIONS_TABLE, INSTALLED_BOTS_TABLE
from bot.slack.http import INSTALL_PATH, OAUTH_REDIRECT_PATH
from bot.vocabulary.workspace import Workspace
from bot.workspaces.authorization import CachedAuthorize, RefusedTokenWatch
from bot.workspaces.encryption import (
    EncryptedInstallationStore,
    TokenCipher,
    cipher_of,
    prepare_stored_tokens,
)
from bot.workspaces.install_flow import (
    AllowedInstalls,
    AllowlistOAuthFlow,
    SignedStateStore,
    failed,
    succeeded,
)
from bot.workspaces.manifest import bot_scopes

logger = logging.getLogger(__name__)

AUTHORIZE_PATH = "../oauth/v2/authorize"
"""Slack's authorize page relative to its Web API URL (https://slack.com/api/ → https://slack.com/oauth/v2/authorize):
a stand-in for the Web API serves it as well."""

STATE_EXPIRATION_SECONDS = 600
"""How long an installer has between opening the install page and coming back with Slack's code."""


TOKEN_ROTATION_MINUTES = 120
"""A rotating bot token is refreshed when it expires within this many minutes (Slack's tokens live
12 hours; Bolt's default margin)."""


@dataclass(frozen=True)
class Installations:
    """The installations of a distributed app: the OAuth flow's settings, the authorization on them
    and Bolt's listeners that delete an installation when it is uninstalled or its tokens revoked."""

    oauth_flow: AllowlistOAuthFlow
    authorize: CachedAuthorize
    revocation: AsyncTokenRevocationListeners

    async def bot_token(self, workspace: Workspace, client: AsyncWebClient) -> AuthorizeResult | None:
        """The workspace's installation, its token refreshed if it rotates; None if there is none (any
        more) or Slack no longer takes its token.

        A workspace of an Enterprise Grid org may be served by the org-wide installation or by one of
        its own: the org-wide one is looked up first, as Slack sends its events for every workspace.
        """
        for org_wide in (True, False) if workspace.enterprise else (False,):
            context = AsyncBoltContext(client=client, is_enterprise_install=org_wide)
            result = await self.authorize(
                context=context,
                enterprise_id=workspace.enterprise or None,
                team_id=workspace.team,
                user_id=None,
            )
            if result is not None:
                return result
        return None

    def forget_token(self, context: AsyncBoltContext) -> None:
        """The request's installation was removed or its bot token revoked: this process does not use
        (nor ask Slack about) the token it was authorized with again."""
        if context.bot_token:
            self.authorize.refuse(context.bot_token)


@asynccontextmanager
async def open_installations(settings: Settings, client: AsyncWebClient) -> AsyncIterator[Installations]:
    """The installations kept in `RUBRIC_BOT_DB` (tables made by the bot's migrations), open while the
    context is; `client` is the bot's tokenless client, which the flow and token refreshes call."""
    assert settings.slack_client_id is not None and settings.slack_client_secret is not None
    client_id, client_secret = settings.slack_client_id, settings.slack_client_secret.get_secret_value()
    engine = settings.database.create_engine()
    # On SQLite a store's transaction takes the write lock as it begins: consuming a state (or
    # refreshing a token) reads, then writes, and a read transaction another connection wrote past
    # meanwhile could not write at all (SQLITE_BUSY, which Bolt would report as an invalid state).
    writer = engine.execution_options(**{WRITE_LOCK_OPTION: True})
    try:
        cipher = cipher_of(settings.encryption_keys)
        await prepare_stored_tokens(writer, cipher)
        store = _installation_store(client_id, writer, cipher)
        authorize = CachedAuthorize(
            logger=logger,
            installation_store=store,
            client_id=client_id,
            client_secret=client_secret,
            token_rotation_expiration_minutes=TOKEN_ROTATION_MINUTES,
            client=client,  # so that a refresh goes to SLACK_API_URL like every other call
        )
        # First, so that it sees every answer (slack_sdk asks the handlers in turn until one retries).
        client.retry_handlers.insert(0, RefusedTokenWatch(authorize))
        oauth_settings = AsyncOAuthSettings(
            client_id=client_id,
            client_secret=client_secret,
            scopes=list(settings.scopes or bot_scopes()),
            user_scopes=[],
            redirect_uri=settings.oauth_redirect_url,
            install_path=INSTALL_PATH,
            redirect_uri_path=OAUTH_REDIRECT_PATH,
            authorization_url=urljoin(settings.slack_api_url, AUTHORIZE_PATH),
            installation_store=store,
            token_rotation_expiration_minutes=TOKEN_ROTATION_MINUTES,
            state_store=SignedStateStore(client_secret, writer, STATE_EXPIRATION_SECONDS),
            state_expiration_seconds=STATE_EXPIRATION_SECONDS,
            callback_options=AsyncCallbackOptions(success=succeeded, failure=failed),
            logger=logger,
        )
        allowed = AllowedInstalls(settings.allowed_teams, settings.allowed_enterprises)
        flow = AllowlistOAuthFlow(allowed=allowed, client=client, settings=oauth_settings)
        yield Installations(flow, authorize, AsyncTokenRevocationListeners(store))
    finally:
        await engine.dispose()


def _installation_store(
    client_id: str, engine: AsyncEngine, cipher: TokenCipher | None
) -> AsyncInstallationStore:
    """slack_sdk's SQLAlchemy installation store on the bot's tables, its tokens encrypted when
    `RUBRIC_BOT_ENCRYPTION_KEY` is set."""
    store = AsyncSQLAlchemyInstallationStore(
        client_id,
        engine,
        bots_table_name=INSTALLED_BOTS_TABLE,
        installations_table_name=INSTALLATIONS_TABLE,
        logger=logger,
    )
    return store if cipher is None else EncryptedInstallationStore(store, cipher)
