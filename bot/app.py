"""The Slack app: Bolt wiring and the process lifecycles of `rubric-bot serve` and `rubric-bot worker`.

In a `serve` process Bolt's async app acks on the event loop and runs go to the `ThreadRunner`'s
job queue: the process runs them itself (with SQLite) or, with PostgreSQL, puts them in the shared
queue, which its own worker and every other `serve` or `worker` process take jobs from. SIGTERM
drains the runner before the process exits.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from functools import partial

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger import get_bolt_logger
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import configured_agents
from bot.agreement.channel_replay import open_replays
from bot.config import DEFAULT_CONCURRENCY, Settings
from bot.db.database import Checkpointer, open_checkpointer
from bot.db.store import Store
from bot.governance.editors import RubricEditors
from bot.lifecycle.retention import schedule_retention
from bot.listeners import register
from bot.listeners.context import Services
from bot.material.reader import MaterialReader
from bot.ops import startup
from bot.ops.health import Readiness
from bot.ops.server import Probes, add_ops_routes, serve_ops
from bot.review.calibration import calibration_source
from bot.slack.client import build_client, log_listener_failure
from bot.slack.http import EVENTS_PATH, slack_web_app
from bot.slack.socket_mode import check_tokens, retry_until_stopped, serve_socket_mode
from bot.threads.jobs import open_queue
from bot.threads.runner import ThreadRunner
from bot.workspaces.settings import Deployment, WorkspaceOverrides

logger = logging.getLogger(__name__)

HTTP_SHUTDOWN_SECONDS = 5.0
"""How long a stopping HTTP server waits for requests already being answered (acks are fast)."""


class _ClientCarriesTheToken(logging.Filter):
    """Drops Bolt's start-up warning that SLACK_BOT_TOKEN goes unused because a client was given:
    the bot always gives one, carrying that very token, so the warning only alarms operators."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


get_bolt_logger(AsyncApp).addFilter(_ClientCarriesTheToken())


def create_app(settings: Settings, services: Services, client: AsyncWebClient) -> AsyncApp:
    """The Bolt app with every listener registered; what a listener raises is logged, see bot.slack.client."""
    secret = settings.slack_signing_secret
    app = AsyncApp(
        client=client,
        signing_secret=secret.get_secret_value() if secret else "",
        name="rubric-bot",
    )
    register(app, services)
    app.error(log_listener_failure)
    return app


async def serve(
    settings: Settings,
    *,
    http: bool,
    port: int,
    concurrency: int = DEFAULT_CONCURRENCY,
    wait_for_db: bool = False,
) -> None:
    """Run the bot until SIGTERM/SIGINT, then let running requests finish (or mark them interrupted).

    On PostgreSQL this process is also a worker (`concurrency` runs at once) among any others.
    """
    stop = _stop_event()
    socket_mode = settings.socket_mode and not http
    settings = startup.for_process(settings, "serve")
    startup.log_start(settings, "Socket Mode" if socket_mode else f"HTTP mode on port {port}", concurrency)
    probes = Probes(Readiness(socket_mode=socket_mode))
    async with AsyncExitStack() as starting:
        # /healthz answers from the start, and /readyz says "starting" until Slack's requests are served.
        await starting.enter_async_context(serve_ops(settings.metrics_port if socket_mode else port, probes))
        if await startup.prepare_database(settings.database, wait=wait_for_db, stop=stop) is None:
            return  # stopped while waiting for the database
        async with (
            open_runner(settings, concurrency) as (store, client, runner, checkpointer),
            open_replays(settings, store, client) as replays,
        ):
            workspaces = WorkspaceOverrides(Deployment.from_settings(settings), store)
            editors = RubricEditors(settings.rubric_editors, workspace_editors=workspaces.rubric_editors)
            services = Services(settings, store, runner, replays, editors, checkpointer, workspaces)
            app = create_app(settings, services, client)
            probes.job_counts = runner.job_counts
            if socket_mode:
                assert settings.slack_app_token is not None  # socket_mode implies it
                probes.readiness.ping_database = store.ping
                token = settings.slack_app_token.get_secret_value()
                await serve_socket_mode(app, client, token, stop, probes.readiness.connection_changed)
            elif await retry_until_stopped(lambda: check_tokens(client), stop, "check the bot token"):
                await starting.aclose()  # the Slack app takes the port over, these routes with it
                probes.readiness.ping_database = store.ping
                await _serve_http(app, settings, port, stop, partial(add_ops_routes, probes=probes))
            logger.info("stopping: letting %d busy thread(s) finish", runner.busy_threads)
            await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


async def work(settings: Settings, *, concurrency: int, wait_for_db: bool = False) -> None:
    """Run jobs from the PostgreSQL queue (no Slack ingress) until SIGTERM/SIGINT."""
    stop = _stop_event()
    settings = startup.for_process(settings, "worker")
    startup.log_start(settings, "worker", concurrency)
    probes = Probes(Readiness())
    async with serve_ops(settings.metrics_port, probes):
        if await startup.prepare_database(settings.database, wait=wait_for_db, stop=stop) is None:
            return  # stopped while waiting for the database
        async with open_runner(settings, concurrency) as (store, _, runner, _):
            probes.readiness.ping_database, probes.job_counts = store.ping, runner.job_counts
            logger.info("rubric-bot worker running up to %d job(s) at once", concurrency)
            await stop.wait()
            logger.info("stopping: letting %d running job(s) finish", runner.busy_threads)
            await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


@asynccontextmanager
async def open_runner(
    settings: Settings, concurrency: int
) -> AsyncIterator[tuple[Store, AsyncWebClient, ThreadRunner, Checkpointer]]:
    """The store, Slack client, thread runner and checkpointer of a process, its queue running jobs
    (the retention sweep among them when `RUBRIC_BOT_RETENTION_DAYS` is set)."""
    # Runs started before this moment belong to earlier processes; unfinished, they were cut short.
    started = datetime.now(UTC)
    async with AsyncExitStack() as stack:
        store = await Store.open(settings.database, upgraded=True)  # by `prepare_database`, just before
        # Dedupe keys only matter while Slack may still retry; don't let them pile up forever.
        await store.prune_claims()
        stack.push_async_callback(store.close)
        checkpointer = await stack.enter_async_context(open_checkpointer(settings.database))
        agents = configured_agents(settings, checkpointer, calibration=calibration_source(store))
        session = await stack.enter_async_context(aiohttp.ClientSession())
        client = build_client(settings, session)
        queue = await stack.enter_async_context(
            open_queue(settings.database, concurrency=concurrency, stalled_after=settings.stalled_after)
        )
        reader = MaterialReader(
            session,
            api_url=settings.slack_api_url,
            thread_chars=settings.thread_context_chars,
            max_file_bytes=settings.max_file_bytes,
        )
        runner = ThreadRunner(
            agent=agents.default,
            store=store,
            client=client,
            queue=queue,
            reader=reader,
            checkpointer=checkpointer,
            model_timeout=settings.model_timeout,
            run_timeout=settings.run_timeout,
            delivery_retry=settings.delivery_retry,
            workspaces=WorkspaceOverrides(Deployment.from_settings(settings), store),
            agents=agents,
        )
        if settings.retention_days is not None:
            schedule_retention(queue, store, checkpointer, settings.retention_days)
        await queue.start()
        # A durable queue resumes the runs a dead process left; the embedded one lost them, and
        # kept the deletions and edits it had not applied.
        if not queue.durable:
            if kept := await runner.resume_changes():
                logger.info("applying %d deletion(s) and edit(s) of messages an earlier process kept", kept)
            if abandoned := await runner.report_abandoned_runs(started):
                logger.info("telling %d thread(s) that a restart interrupted their request", abandoned)
        yield store, client, runner, checkpointer


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve_http(
    app: AsyncApp,
    settings: Settings,
    port: int,
    stop: asyncio.Event,
    add_routes: Callable[[web.Application], None],
) -> None:
    """Serve Slack's requests (and whatever `add_routes` adds) on `port` until `stop` is set."""
    secret = settings.slack_signing_secret
    assert secret is not None  # `serve` requires it in HTTP mode
    web_app = slack_web_app(app, secret.get_secret_value())
    add_routes(web_app)
    # No access log: refused requests get one line of their own below, and the rest are Slack's.
    web_runner = web.AppRunner(web_app, shutdown_timeout=HTTP_SHUTDOWN_SECONDS, access_log=None)
    await web_runner.setup()
    await web.TCPSite(web_runner, port=port).start()
    logger.info("rubric-bot listening for Slack on http://0.0.0.0:%d%s", port, EVENTS_PATH)
    try:
        await stop.wait()
    finally:
        # Closing the port first means Slack's retries of anything new reach the next process.
        await web_runner.cleanup()
