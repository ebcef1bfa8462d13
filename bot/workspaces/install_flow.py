"""OAuth mode's install pages, safe for anyone to open: no database write until Slack sends an
installer back, and installs refused for workspaces the operator does not serve (how often one
address may ask is limited by `bot.slack.http`).

The OAuth state is a signed, expiring value (Fernet, keyed from the app's client secret), so
showing the install page writes nothing; only the redirect writes, one row per state, to make sure
each state is used once. ``RUBRIC_BOT_ALLOWED_TEAMS`` / ``RUBRIC_BOT_ALLOWED_ENTERPRISES``, when set,
name the only workspaces and Enterprise Grid orgs whose installs are kept: another's is undone
(its new token revoked) and its installer shown a page saying so.
"""

from __future__ import annotations

import base64
import html
import logging
import secrets
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from slack_bolt.error import BoltError
from slack_bolt.oauth.async_callback_options import AsyncFailureArgs, AsyncSuccessArgs
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.oauth.sqlalchemy_utils import normalize_datetime_for_db
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.db.schema import oauth_states
from bot.slack.client import SLACK_ERRORS, describe_error

logger = logging.getLogger(__name__)

STATE_KEY_INFO = b"rubric-bot OAuth state"
"""What the state's signing key is derived for (HKDF's ``info``): the client secret signs nothing else."""


class SignedStateStore(AsyncOAuthStateStore):
    """OAuth states that are signed and expire by themselves: issuing one writes nothing, and the
    redirect consumes it by recording it in the states table, whose unique index refuses a second use.
    Expired records are deleted as the next state is consumed."""

    def __init__(self, client_secret: str, engine: AsyncEngine, expiration_seconds: int) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=STATE_KEY_INFO)
        self._fernet = Fernet(base64.urlsafe_b64encode(key.derive(client_secret.encode())))
        self._engine = engine
        self._expiration = expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        return logger

    async def async_issue(self, *args: object, **kwargs: object) -> str:
        return self._fernet.encrypt(secrets.token_bytes(16)).decode()

    async def async_consume(self, state: str) -> bool:
        try:
            self._fernet.decrypt(state.encode(), ttl=self._expiration)
        except InvalidToken:  # not ours, altered or expired: nothing to write
            return False
        now = datetime.now(UTC)
        expire_at = normalize_datetime_for_db(now + timedelta(seconds=self._expiration))
        try:
            async with self._engine.begin() as connection:
                await connection.execute(
                    oauth_states.delete().where(oauth_states.c.expire_at <= normalize_datetime_for_db(now))
                )
                await connection.execute(insert(oauth_states).values(state=state, expire_at=expire_at))
        except IntegrityError:
            logger.info("refused an OAuth state used before")
            return False
        return True


@dataclass(frozen=True)
class AllowedInstalls:
    """The workspaces and Enterprise Grid orgs an install is kept for; both empty: any."""

    teams: Collection[str] = ()
    enterprises: Collection[str] = ()

    def allow(self, installation: Installation) -> bool:
        if not self.teams and not self.enterprises:
            return True
        return installation.team_id in self.teams or installation.enterprise_id in self.enterprises


class InstallNotAllowed(BoltError):
    """An install from a workspace (or org) the deployment does not serve."""

    def __init__(self, installation: Installation) -> None:
        super().__init__("not an allowed workspace")
        self.team = installation.team_id
        self.enterprise = installation.enterprise_id


class AllowlistOAuthFlow(AsyncOAuthFlow):
    """Bolt's OAuth flow, keeping only the installs `allowed` takes: another's token is revoked at
    once (Slack installed the app when it handed the token over) and nothing of it is stored."""

    def __init__(
        self, *, allowed: AllowedInstalls, client: AsyncWebClient, settings: AsyncOAuthSettings
    ) -> None:
        super().__init__(client=client, logger=logger, settings=settings)
        self.allowed = allowed

    async def store_installation(self, request: AsyncBoltRequest, installation: Installation) -> None:
        if self.allowed.allow(installation):
            await super().store_installation(request, installation)
            return
        logger.warning(
            "refused an install by team %s (Enterprise Grid org %s): not in RUBRIC_BOT_ALLOWED_TEAMS or "
            "RUBRIC_BOT_ALLOWED_ENTERPRISES",
            installation.team_id,
            installation.enterprise_id or "none",
        )
        try:
            await self.client.auth_revoke(token=installation.bot_token)
        except SLACK_ERRORS as exc:
            logger.warning("could not revoke the refused install's token: %s", describe_error(exc))
        raise InstallNotAllowed(installation)


async def succeeded(args: AsyncSuccessArgs) -> BoltResponse:
    """Bolt's own success page."""
    return await args.default.success(args)


async def failed(args: AsyncFailureArgs) -> BoltResponse:
    """Bolt's own failure page, except for a refused install: a page saying whose it was and why."""
    if not isinstance(args.error, InstallNotAllowed):
        return await args.default.failure(args)
    who = (
        f"workspace {args.error.team}" if args.error.team else f"Enterprise Grid org {args.error.enterprise}"
    )
    page = REFUSED_PAGE.format(who=html.escape(who))
    headers: dict[str, str | Sequence[str]] = {
        "Content-Type": "text/html; charset=utf-8",
        "Set-Cookie": args.settings.state_utils.build_set_cookie_for_deletion(),
    }
    return BoltResponse(status=403, body=page, headers=headers)


REFUSED_PAGE = """<html><head><meta charset="utf-8"><title>Not installed</title></head>
<body><h2>rubric-bot was not installed</h2>
<p>This deployment of rubric-bot serves only the workspaces its operator has allowed, and {who} is not
one of them. Nothing was installed and nothing of your workspace was kept.</p>
<p>If you expected to be able to install it, ask the people who run this deployment to allow your
workspace.</p></body></html>
"""
"""The page an installer from a workspace the deployment does not serve sees (HTTP 403)."""
