"""OAuth mode's authorization without a Slack round trip per request: Bolt's installation-store
authorize with its cache on, and what takes a token out of it.

Bolt's cache (``cache_enabled``) keeps the ``auth.test`` answer per bot token, so each request still
reads its workspace's installation (an uninstall by any process shows at once: no installation, no
token) but asks Slack about a token only the first time this process meets it. A token leaves the
cache when Slack stops taking it: at ``app_uninstalled`` or ``tokens_revoked``, or at the first
``invalid_auth`` / ``token_revoked`` / ``account_inactive`` answer to any call made with it. From
then on the process treats it as no authorization at all, without calling Slack with it again.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

logger = logging.getLogger(__name__)

REFUSED_TOKEN_ERRORS = frozenset({"invalid_auth", "token_revoked", "account_inactive"})
"""Slack's answers meaning the token itself is dead (revoked, uninstalled, or its user deactivated):
no later call with it can succeed."""

BEARER = "Bearer "
"""How slack_sdk sends a token (its ``Authorization`` header)."""


class CachedAuthorize(AsyncInstallationStoreAuthorize):
    """Bolt's installation-store authorize with its per-token cache on, which forgets a token once
    Slack refuses it (`refuse`) and keeps one entry per installation (a rotated token replaces the
    one before it)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(cache_enabled=True, **options)
        self._token_of: dict[tuple[str | None, str | None, str | None], str] = {}
        """The token cached for each installation's bot (enterprise, team, bot id), to drop it
        when a refresh brings the next one."""

    async def __call__(self, **request: Any) -> AuthorizeResult | None:
        result = await super().__call__(**request)
        if result is not None and (token := result.bot_token or result.user_token):
            installation = (result.enterprise_id, result.team_id, result.bot_id)
            previous = self._token_of.get(installation)
            if previous is not None and previous != token:
                self.authorize_result_cache.pop(previous, None)
            self._token_of[installation] = token
        return result

    def refuse(self, token: str) -> None:
        """Slack no longer takes `token`: requests and jobs it would authorize are not authorized,
        and Slack is not asked about it again. Bolt's cache answers a token it holds with what it
        holds, so the token is kept there as None (no authorization)."""
        if token in self.authorize_result_cache and self.authorize_result_cache[token] is None:
            return
        logger.info("a workspace's token was refused by Slack: this process no longer uses it")
        self.authorize_result_cache[token] = None  # type: ignore[assignment]  # Bolt returns it as is


class RefusedTokenWatch(AsyncRetryHandler):
    """A Web API client's retry handler that retries nothing: it tells `authorize` of each token
    that Slack answers with one of `REFUSED_TOKEN_ERRORS`. Bolt's per-request clients and the jobs'
    clients copy the bot client's handlers, so every call is watched."""

    def __init__(self, authorize: CachedAuthorize) -> None:
        super().__init__(max_retry_count=0)
        self._authorize = authorize

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        body = (response.body if response is not None else None) or {}
        refused = body.get("ok") is False and body.get("error") in REFUSED_TOKEN_ERRORS
        if refused and (token := _bearer_token(request)):
            self._authorize.refuse(token)
        return False


def _bearer_token(request: HttpRequest) -> str | None:
    for value in request.headers.get("Authorization", []):
        if value.startswith(BEARER):
            return value.removeprefix(BEARER)
    return None
