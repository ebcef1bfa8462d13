"""The Slack app: Bolt wiring and the process lifecycles of `rubric-bot serve` and `rubric-bot worker`.

In a `serve` process Bolt's async app acks on the event loop and runs go to the `ThreadRunner`'s
job queue: the process runs them itself (with SQLite) or, with PostgreSQL, puts them in the shared
queue, which its own worker and every other `serve` or `worker` process take jobs from. SIGTERM
drains the runner before the process exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.logger import get_bolt_logger
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import open_agent
from bot.channel_replay import open_replays
from bot.config import DEFAULT_CONCURRENCY, Settings
from bot.dbadmin import upgrade
from bot.jobs import open_queue
from bot.listeners import register
from bot.listeners.context import Services
from bot.review import calibration_source
from bot.runner import ThreadRunner
from bot.slack import build_client, log_listener_failure
from bot.socket_mode import serve_socket_mode
from bot.store import Store

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
"""The one HTTP path for events, slash commands and interactivity (as in manifest.yml)."""

HTTP_SHUTDOWN_SECONDS = 5.0
"""How long a stopping HTTP server waits for requests already being answered (acks are fast)."""

FORM_FIELDS_NEEDED = frozenset({"payload", "command", "ssl_check"})
"""A form Slack posts carries one of these: interactivity's JSON ``payload``, a slash command's
fields, or the ``ssl_check`` Slack sends when a command's URL is configured."""


class _ClientCarriesTheToken(logging.Filter):
    """Drops Bolt's start-up warning that SLACK_BOT_TOKEN goes unused because a client was given:
    the bot always gives one, carrying that very token, so the warning only alarms operators."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


get_bolt_logger(AsyncApp).addFilter(_ClientCarriesTheToken())


def create_app(settings: Settings, services: Services, client: AsyncWebClient) -> AsyncApp:
    """The Bolt app with every listener registered; what a listener raises is logged, see bot.slack."""
    secret = settings.slack_signing_secret
    app = AsyncApp(
        client=client,
        signing_secret=secret.get_secret_value() if secret else "",
        name="rubric-bot",
    )
    register(app, services)
    app.error(log_listener_failure)
    return app


async def serve(settings: Settings, *, http: bool, port: int, concurrency: int = DEFAULT_CONCURRENCY) -> None:
    """Run the bot until SIGTERM/SIGINT, then let running requests finish (or mark them interrupted).

    On PostgreSQL this process is also a worker (`concurrency` runs at once) among any others.
    """
    stop = _stop_event()
    async with (
        open_runner(settings, concurrency) as (store, client, runner),
        open_replays(settings, store, client) as replays,
    ):
        app = create_app(settings, Services(settings, store, runner, replays), client)
        if settings.socket_mode and not http:
            assert settings.slack_app_token is not None  # socket_mode implies it
            await serve_socket_mode(app, client, settings.slack_app_token.get_secret_value(), stop)
        else:
            await _serve_http(app, settings, port, stop)
        logger.info("stopping: letting %d busy thread(s) finish", runner.busy_threads)
        await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


async def work(settings: Settings, *, concurrency: int) -> None:
    """Run jobs from the PostgreSQL queue (no Slack ingress) until SIGTERM/SIGINT."""
    stop = _stop_event()
    async with open_runner(settings, concurrency) as (_, _, runner):
        logger.info("rubric-bot worker running up to %d job(s) at once", concurrency)
        await stop.wait()
        logger.info("stopping: letting %d running job(s) finish", runner.busy_threads)
        await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


@asynccontextmanager
async def open_runner(
    settings: Settings, concurrency: int
) -> AsyncIterator[tuple[Store, AsyncWebClient, ThreadRunner]]:
    """The store, Slack client and thread runner of a process, its queue running jobs."""
    # Runs started before this moment belong to earlier processes; unfinished, they were cut short.
    started = datetime.now(UTC)
    async with AsyncExitStack() as stack:
        await upgrade(settings.database)  # as `rubric-bot db upgrade`: never run on an older schema
        store = await Store.open(settings.database)
        # Dedupe keys only matter while Slack may still retry; don't let them pile up forever.
        await store.prune_claims()
        stack.push_async_callback(store.close)
        agent = await stack.enter_async_context(open_agent(settings, calibration=calibration_source(store)))
        session = await stack.enter_async_context(aiohttp.ClientSession())
        client = build_client(settings, session)
        queue = await stack.enter_async_context(
            open_queue(settings.database, concurrency=concurrency, stalled_after=settings.stalled_after)
        )
        runner = ThreadRunner(
            agent=agent,
            store=store,
            client=client,
            queue=queue,
            model_timeout=settings.model_timeout,
            run_timeout=settings.run_timeout,
        )
        await queue.start()
        # A durable queue resumes the runs a dead process left; the embedded one lost them.
        if not queue.durable and (abandoned := await runner.report_abandoned_runs(started)):
            logger.info("telling %d thread(s) that a restart interrupted their request", abandoned)
        yield store, client, runner


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve_http(app: AsyncApp, settings: Settings, port: int, stop: asyncio.Event) -> None:
    secret = settings.slack_signing_secret
    assert secret is not None  # `serve` requires it in HTTP mode
    # No access log: refused requests get one line of their own below, and the rest are Slack's.
    web_runner = web.AppRunner(
        slack_web_app(app, secret.get_secret_value()),
        shutdown_timeout=HTTP_SHUTDOWN_SECONDS,
        access_log=None,
    )
    await web_runner.setup()
    await web.TCPSite(web_runner, port=port).start()
    logger.info("rubric-bot listening for Slack on http://0.0.0.0:%d%s", port, EVENTS_PATH)
    try:
        await stop.wait()
    finally:
        # Closing the port first means Slack's retries of anything new reach the next process.
        await web_runner.cleanup()


def slack_web_app(app: AsyncApp, signing_secret: str) -> web.Application:
    """The aiohttp application Slack posts to: each request is verified, then parsed, then Bolt's.

    Bolt's own adapter parses a body before checking its signature, so anyone who can reach the
    port could make it fail on garbage (a 500 and a traceback per request). Here a request without
    Slack's valid signature is a 401 before its body is looked at, and a signed body that is not
    what Slack sends is a 400; either is one log line, without the body. A body over aiohttp's
    ``client_max_size`` is still refused with 413 while it is read. Bolt verifies the signature
    again: that check stays on in case this application is ever bypassed.
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
    return web_app


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
        bolt_request = AsyncBoltRequest(body=text, query=request.query_string, headers=request.headers)
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
