"""The Slack app: Bolt wiring, the Web API client, and the process lifecycle of `rubric-bot serve`.

One asyncio process serves every thread: Bolt's async app acks on the event loop, runs go to the
`ThreadRunner`, and SIGTERM drains the runner before the process exits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import open_agent
from bot.config import Settings
from bot.listeners import register
from bot.listeners.context import Services
from bot.runner import ThreadRunner
from bot.store import Store

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
"""The one HTTP path for events, slash commands and interactivity (as in manifest.yml)."""

SLACK_RETRIES = 3
"""Retries per Web API call for each kind of transient failure: 429s (after their Retry-After),
5xx answers and dropped connections."""

HTTP_SHUTDOWN_SECONDS = 5.0
"""How long a stopping HTTP server waits for requests already being answered (acks are fast)."""


def build_client(settings: Settings, session: aiohttp.ClientSession | None = None) -> AsyncWebClient:
    """The bot's Web API client: `SLACK_API_URL`, with retries for rate limits and transient errors."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return AsyncWebClient(
        token=token,
        base_url=settings.slack_api_url,
        session=session,
        retry_handlers=[
            AsyncRateLimitErrorRetryHandler(max_retry_count=SLACK_RETRIES),
            AsyncServerErrorRetryHandler(max_retry_count=SLACK_RETRIES),
            AsyncConnectionErrorRetryHandler(max_retry_count=SLACK_RETRIES),
        ],
    )


def create_app(settings: Settings, services: Services, client: AsyncWebClient) -> AsyncApp:
    """The Bolt app with every listener registered."""
    secret = settings.slack_signing_secret
    app = AsyncApp(
        client=client,
        signing_secret=secret.get_secret_value() if secret else "",
        name="rubric-bot",
    )
    register(app, services)
    return app


async def serve(settings: Settings, *, http: bool, port: int) -> None:
    """Run the bot until SIGTERM/SIGINT, then let running requests finish (or mark them interrupted)."""
    stop = _stop_event()
    # Runs started before this moment belong to earlier processes; unfinished, they were cut short.
    started = datetime.now(UTC)
    async with AsyncExitStack() as stack:
        store = await Store.open(str(settings.db_path))
        # Dedupe keys only matter while Slack may still retry; don't let them pile up forever.
        await store.prune_claims()
        stack.push_async_callback(store.close)
        agent = await stack.enter_async_context(open_agent(settings))
        session = await stack.enter_async_context(aiohttp.ClientSession())
        client = build_client(settings, session)
        runner = ThreadRunner(
            agent=agent,
            store=store,
            client=client,
            model_timeout=settings.model_timeout,
            run_timeout=settings.run_timeout,
        )
        abandoned = await runner.report_abandoned_runs(started)
        if abandoned:
            logger.info("telling %d thread(s) that a restart interrupted their request", abandoned)
        app = create_app(settings, Services(settings, store, runner), client)
        if settings.socket_mode and not http:
            await _serve_socket_mode(app, settings, stop)
        else:
            await _serve_http(app, port, stop)
        logger.info("stopping: letting %d busy thread(s) finish", runner.busy_threads)
        await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve_http(app: AsyncApp, port: int, stop: asyncio.Event) -> None:
    web_runner = web.AppRunner(app.web_app(path=EVENTS_PATH), shutdown_timeout=HTTP_SHUTDOWN_SECONDS)
    await web_runner.setup()
    await web.TCPSite(web_runner, port=port).start()
    logger.info("rubric-bot listening for Slack on http://0.0.0.0:%d%s", port, EVENTS_PATH)
    try:
        await stop.wait()
    finally:
        # Closing the port first means Slack's retries of anything new reach the next process.
        await web_runner.cleanup()


async def _serve_socket_mode(app: AsyncApp, settings: Settings, stop: asyncio.Event) -> None:
    assert settings.slack_app_token is not None  # socket_mode implies it
    handler = AsyncSocketModeHandler(app, settings.slack_app_token.get_secret_value())
    await handler.connect_async()
    logger.info("rubric-bot connected to Slack in Socket Mode")
    try:
        await stop.wait()
    finally:
        await handler.close_async()
