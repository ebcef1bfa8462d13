"""The HTTP app Slack talks to: signed requests (verify first, then parse, then hand to Bolt) and,
for an app installed with OAuth, the installation pages Bolt's OAuth flow serves."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from cachetools import TTLCache
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
"""The one HTTP path for events, slash commands and interactivity (as in manifest.yml)."""

INSTALL_PATH = "/slack/install"
"""Where a workspace's admin starts installing the bot (the "Add to Slack" page); OAuth mode only."""

OAUTH_REDIRECT_PATH = "/slack/oauth_redirect"
"""Where Slack sends the installer back with the code (the app's OAuth Redirect URL); OAuth mode only."""

PAGE_VISITS_PER_WINDOW = 30
"""Install-page and redirect requests one address may make per `PAGE_WINDOW_SECONDS`: more than any
person installing needs, few enough that a script cannot make the redirect write at will."""

PAGE_WINDOW_SECONDS = 60
"""The window `PAGE_VISITS_PER_WINDOW` counts in."""

PAGE_ADDRESSES_TRACKED = 10_000
"""Addresses counted at once; beyond it the oldest counts are dropped (memory stays bounded)."""

PAGE_RETRY_AFTER = PAGE_WINDOW_SECONDS
"""What an address over the limit is told to wait (at most the rest of its window)."""

FORM_FIELDS_NEEDED = frozenset({"payload", "command", "ssl_check"})
"""A form Slack posts carries one of these: interactivity's JSON ``payload``, a slash command's
fields, or the ``ssl_check`` Slack sends when a command's URL is configured."""


def slack_web_app(
    app: AsyncApp, signing_secret: str, page_visits: PageVisits | None = None
) -> web.Application:
    """The aiohttp application Slack posts to: each request is verified, then parsed, then Bolt's.

    Bolt's own adapter parses a body before checking its signature, so anyone who can reach the
    port could make it fail on garbage (a 500 and a traceback per request). Here a request without
    Slack's valid signature is a 401 before its body is looked at, and a signed body that is not
    what Slack sends is a 400; either is one log line, without the body. A body over aiohttp's
    ``client_max_size`` is still refused with 413 while it is read. Bolt verifies the signature
    again: that check stays on in case this application is ever bypassed.

    The installation pages (OAuth mode) take `PAGE_VISITS_PER_WINDOW` requests per address and
    window (`page_visits`), and answer 429 beyond.
    """
    verifier = SignatureVerifier(signing_secret)

    async def answer(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if not _signed_by_slack(verifier, body, request):
            logger.info("refused a request from %s: no valid Slack signature", request.remote)
            return web.json_response({"error": "invalid signature"}, status=401)
        try:
            bolt_request = _bolt_request(body, request)
        except MalformedRequest as exc:
            logger.warning("refused a signed request from %s: %s", request.remote, exc)
            return web.json_response({"error": str(exc)}, status=400)
        return await to_aiohttp_response(await app.async_dispatch(bolt_request))

    web_app = web.Application()
    web_app.router.add_post(EVENTS_PATH, answer)
    if app.oauth_flow is not None:
        _add_oauth_pages(web_app, app.oauth_flow, page_visits or PageVisits())
    return web_app


def _add_oauth_pages(web_app: web.Application, flow: AsyncOAuthFlow, visits: PageVisits) -> None:
    """Serve Bolt's installation page and OAuth redirect (it issues and checks the state itself),
    each address limited by `visits`."""

    async def install(request: web.Request) -> web.StreamResponse:
        if not visits.admit(request.remote):
            return _too_many_visits()
        return await to_aiohttp_response(await flow.handle_installation(_page_request(request)))

    async def redirect(request: web.Request) -> web.StreamResponse:
        if not visits.admit(request.remote):
            return _too_many_visits()
        return await to_aiohttp_response(await flow.handle_callback(_page_request(request)))

    web_app.router.add_get(flow.install_path, install)
    web_app.router.add_get(flow.redirect_uri_path, redirect)


def _too_many_visits() -> web.Response:
    return web.Response(
        status=429,
        text="Too many requests from your address: try again in a minute.\n",
        headers={"Retry-After": str(PAGE_RETRY_AFTER)},
    )


class PageVisits:
    """How many install-page and redirect requests each address made in the current window: a
    fixed window per address, the counts kept in a bounded cache that forgets them when it ends."""

    def __init__(
        self,
        per_window: int = PAGE_VISITS_PER_WINDOW,
        window_seconds: float = PAGE_WINDOW_SECONDS,
        addresses: int = PAGE_ADDRESSES_TRACKED,
    ) -> None:
        self.per_window = per_window
        self._counts: TTLCache[str, list[int]] = TTLCache(maxsize=addresses, ttl=window_seconds)

    def admit(self, address: str | None) -> bool:
        """Count a request from `address`; False once it is over the limit for this window."""
        key = address or "unknown"
        count = self._counts.get(key)
        if count is None:  # its window starts now; counting in place keeps the window where it began
            count = self._counts[key] = [0]
        count[0] += 1
        if count[0] == self.per_window + 1:  # one line per address and window, however many follow
            logger.info("refusing install-page requests from %s until its minute is over: too many", key)
        return count[0] <= self.per_window


def _page_request(request: web.Request) -> AsyncBoltRequest:
    """A browser's GET as Bolt's request: its query and headers (the state cookie among them)."""
    return AsyncBoltRequest(body="", query=request.query_string, headers=dict(request.headers))


class MalformedRequest(ValueError):
    """A signed request whose body is not one Slack would send; the message says what is wrong."""


def _signed_by_slack(verifier: SignatureVerifier, body: bytes, request: web.Request) -> bool:
    """Whether the request carries Slack's signature of ``body``, made within the last 5 minutes."""
    try:
        return verifier.is_valid(
            body,
            request.headers.get("X-Slack-Request-Timestamp"),
            request.headers.get("X-Slack-Signature"),
        )
    except ValueError:  # a timestamp that is not a whole number, or a body that is not UTF-8
        return False


def _bolt_request(body: bytes, request: web.Request) -> AsyncBoltRequest:
    """The verified request as Bolt's; MalformedRequest if Bolt could not make sense of it."""
    text = body.decode()  # the signature check has read it as UTF-8 already
    payload = _slack_payload(text, request.headers.get("Content-Type", ""))
    try:
        headers: dict[str, str | Sequence[str]] = dict(request.headers.items())
        bolt_request = AsyncBoltRequest(body=text, query=request.query_string, headers=headers)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        # Bolt reads ids out of fields such as team, user and channel as it builds the request.
        raise MalformedRequest("its fields are not shaped the way Slack shapes them") from None
    if bolt_request.body != payload:
        # Bolt takes any form with "payload" somewhere in its text for interactivity, so a slash
        # command saying "payload" (or run in a #payload-team channel) would reach it empty.
        bolt_request.body = payload
        bolt_request.context = build_async_context(AsyncBoltContext(), payload)
    return bolt_request


def _slack_payload(text: str, content_type: str) -> dict[str, Any]:
    """What a signed body says, read as Bolt reads it; MalformedRequest if it is not Slack's.

    Bolt reads JSON when the content type says so or the body starts with ``{``, and a form
    otherwise, taking a form's ``payload`` field as JSON when there is one.
    """
    if content_type.split(";")[0] == "application/json" or text.startswith("{"):
        return _json_object(text, "the body")
    try:
        form = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=True, errors="strict"))
    except ValueError:
        raise MalformedRequest("the body is neither JSON nor a form") from None
    if not FORM_FIELDS_NEEDED & form.keys():
        raise MalformedRequest("the form has no payload, command or ssl_check field")
    if "payload" in form:
        return _json_object(form["payload"], "the payload field")
    return form


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise MalformedRequest(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise MalformedRequest(f"{what} is JSON but not an object")
    return value
