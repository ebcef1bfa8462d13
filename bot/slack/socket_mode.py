"""Socket Mode: check the tokens, connect, stay connected, and stop whenever asked.

(HTTP mode checks its bot token at start with the same `check_tokens`, and the start-up waits for
the database with the same `retry_until_stopped`.)

slack_sdk's websockets client does the protocol (hello, envelopes, acks, Slack's own refresh
requests). This module decides *when* to connect: it asks Slack about both tokens first, so a
wrong one ends start-up with one line instead of endless retries; it paces failed attempts with a
growing delay and reports each as one WARNING line (the traceback only at DEBUG); and it gives up
the moment the stop event is set, connected or not, so SIGTERM always ends the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TypeVar

from slack_bolt.adapter.socket_mode.websockets import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.websockets import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import ConfigError, problem
from bot.slack.client import describe_error

logger = logging.getLogger(__name__)

T = TypeVar("T")

CLOSED_CONNECTION_NOISE = "Failed to receive or enqueue a message: ConnectionClosed"
"""How slack_sdk's reader logs (as an ERROR) the connection it was reading closing under it."""


class _ClosedConnectionNoise(logging.Filter):
    """Keeps slack_sdk's ERROR about a closed connection to DEBUG: `serve_socket_mode` reports the
    loss itself, once, and what it does about it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return CLOSED_CONNECTION_NOISE not in record.getMessage() or logger.isEnabledFor(logging.DEBUG)


client_logger = logging.getLogger(f"{__name__}.client")
"""The logger slack_sdk's Socket Mode client writes to."""
client_logger.addFilter(_ClosedConnectionNoise())

FIRST_RETRY_SECONDS = 1.0
"""Delay after the first failed attempt to reach Slack; each further failure doubles it."""

MAX_RETRY_SECONDS = 60.0
"""Longest delay between attempts: an outage of hours costs one WARNING line a minute."""

TOKEN_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "missing_scope",
    }
)
"""Slack API errors that mean the token itself is wrong: retrying cannot help, the operator must fix it."""


async def serve_socket_mode(
    app: AsyncApp,
    client: AsyncWebClient,
    app_token: str,
    stop: asyncio.Event,
    on_connection: Callable[[bool], None] = lambda connected: None,
) -> None:
    """Serve `app` over Socket Mode until `stop` is set; `ConfigError` if Slack refuses a token.

    `on_connection` hears each time the connection comes up (True) or goes down (False).
    """
    handler = AsyncSocketModeHandler(app, app_token, web_client=client, logger=client_logger)
    socket = handler.client
    # Reconnecting is this module's job (paced, and stoppable); the client would retry on its own.
    socket.default_auto_reconnect_enabled = socket.auto_reconnect_enabled = False

    async def connect() -> None:
        await socket.connect_to_new_endpoint(force=True)  # a fresh URL: each one is good for one connection

    try:
        checked = await retry_until_stopped(lambda: check_tokens(client, app_token), stop, "check the tokens")
        if not checked:
            return
        while await retry_until_stopped(connect, stop, "connect to Slack"):
            logger.info("rubric-bot connected to Slack in Socket Mode")
            on_connection(True)
            lost = await until_stopped(_connection_lost(socket), stop) is not None
            on_connection(False)
            if not lost:
                return
            logger.warning("the Socket Mode connection to Slack was lost; reconnecting")
    finally:
        await handler.close_async()


async def check_tokens(client: AsyncWebClient, app_token: str | None = None) -> None:
    """Ask Slack about the bot token (`auth.test`) and any app token (`apps.connections.open`);
    HTTP mode, which has no app token, checks the bot token alone.

    A refused token is a `ConfigError` naming it and how to get a good one; any other failure
    (Slack unreachable, a 5xx) is raised as is, for the caller to retry.
    """
    checks: list[tuple[str, Callable[[], Awaitable[object]]]] = [("SLACK_BOT_TOKEN", client.auth_test)]
    if app_token is not None:
        checks.append(("SLACK_APP_TOKEN", lambda: client.apps_connections_open(app_token=app_token)))
    for name, call in checks:
        try:
            await call()
        except SlackApiError as exc:
            error = describe_error(exc)
            if error in TOKEN_ERRORS:
                raise ConfigError([problem(name, f"was refused by Slack ({error})")]) from None
            raise


async def retry_until_stopped(
    attempt: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    what: str,
    describe: Callable[[BaseException], str] | None = None,
    log: logging.Logger = logger,
) -> bool:
    """Run `attempt` until it succeeds (True) or `stop` is set (False), backing off between tries.

    Each failure is one WARNING line on `log` with its reason (as `describe` puts it; by default
    the exception's type and message); `ConfigError` is not retried.
    """
    delay = FIRST_RETRY_SECONDS
    number = 1
    while not stop.is_set():
        try:
            return await until_stopped(attempt(), stop) is not None
        except ConfigError:
            raise
        except Exception as exc:
            log.warning(
                "could not %s (attempt %d): %s; retrying in %gs",
                what,
                number,
                (describe or _reason)(exc),
                delay,
            )
            log.debug("attempt %d to %s failed", number, what, exc_info=True)
        if await until_stopped(asyncio.sleep(delay), stop) is None:
            return False
        delay = min(delay * 2, MAX_RETRY_SECONDS)
        number += 1
    return False


async def until_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> tuple[T] | None:
    """`(result,)` of `awaitable`, or None when `stop` is set first (the awaitable is then cancelled)."""
    work = asyncio.ensure_future(awaitable)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not work.done():
            work.cancel()
            with suppress(asyncio.CancelledError):
                await work
    if work.cancelled():
        return None
    return (work.result(),)


async def _connection_lost(socket: SocketModeClient) -> None:
    """Return once the connection is gone for good (a refresh Slack asked for replaces it in place)."""
    while True:
        session = socket.current_session
        if session is not None:
            await session.wait_closed()
        if not await socket.is_connected():
            # The dead session's reader would log its closed connection over and over until replaced.
            if socket.message_receiver is not None:
                socket.message_receiver.cancel()
            return


def _reason(exc: BaseException) -> str:
    """An exception as one short line: its type and message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
