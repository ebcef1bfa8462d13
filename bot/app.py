"""The Slack app: Bolt wiring and the process lifecycles of `rubric-bot serve` and `rubric-bot worker`.

In a `serve` process Bolt's async app acks on the event loop and runs go to the `ThreadRunner`'s
job queue: the process runs them itself (with SQLite) or, with PostgreSQL, puts them in the shared
queue, which its own worker and every other `serve` or `worker` process take jobs from. SIGTERM
drains the runner before the process exits.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import cast

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger import get_bolt_logger
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from bot.agent.models import init_audit_model, init_shadow_model
from bot.agent.worker import configured_agents
from bot.agreement.channel_replay import open_replays
from bot.audit.auditor import Auditor
from bot.config import DEFAULT_CONCURRENCY, Settings
from bot.db.database import Checkpointer, open_checkpointer
from bot.db.store import Store
from bot.governance.editors import EditorsNow, RubricEditors
from bot.lifecycle.retention import schedule_claims_pruning, schedule_retention
from bot.limits.quota import LimitsOf
from bot.listeners import register
from bot.listeners.context import Services
from bot.material.reader import MaterialReader
from bot.ops import startup
from bot.ops.health import Readiness
from bot.ops.server import Probes, add_probe_routes, serve_ops, serve_starting
from bot.proposals.proposing import open_proposals
from bot.queue.durable import open_queue
from bot.review.calibration import calibration_source
from bot.shadow.grader import ShadowGrader
from bot.slack.client import build_client, log_listener_failure
from bot.slack.http import EVENTS_PATH, slack_web_app
from bot.slack.socket_mode import check_tokens, retry_until_stopped, serve_socket_mode
from bot.threads.runner import ThreadRunner
from bot.threads.runner_base import RunnerPolicy, RunnerPorts
from bot.trust.thresholds import trust_source
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.installations import Installations, open_installations
from bot.workspaces.settings import Deployment, WorkspaceOverrides

logger = logging.getLogger(__name__)

Authorize = Callable[..., Awaitable[AuthorizeResult]]
"""What `AsyncApp(authorize=...)` is annotated to take."""

GC_YOUNG_THRESHOLD = 20_000
"""New container objects between two of the garbage collector's young passes, from Python's 700: a
conversation allocates tens of thousands (langchain's messages and runnables, SQLAlchemy's rows),
so at 700 the collector ran about 2.4 times a conversation and took 2-3 ms of its CPU; at 20,000
it takes ~0.4 ms, and the peak memory is the same (181 and 183 MB: issue 45,
``benchmarks/agent_floor.py`` with a ``gc`` callback)."""

HTTP_SHUTDOWN_SECONDS = 5.0
"""How long a stopping HTTP server waits for requests already being answered (acks are fast)."""


class _ClientCarriesTheToken(logging.Filter):
    """Drops Bolt's start-up warning that SLACK_BOT_TOKEN goes unused because a client was given:
    the bot always gives one, carrying that very token, so the warning only alarms operators."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


get_bolt_logger(AsyncApp).addFilter(_ClientCarriesTheToken())


def create_app(settings: Settings, services: Services, clients: WorkspaceClients) -> AsyncApp:
    """The Bolt app with every listener registered; what a listener raises is logged, see bot.slack.client.

    With installations (OAuth mode) Bolt serves the installation pages and authorizes each request
    with its workspace's token; a workspace that uninstalls the bot or revokes its token has its
    installation deleted by the uninstall listeners (`bot.listeners.events`).
    """
    secret = settings.slack_signing_secret
    installations = clients.installations
    app = AsyncApp(
        client=clients.client,
        signing_secret=secret.get_secret_value() if secret else "",
        name="rubric-bot",
        oauth_flow=installations.oauth_flow if installations else None,
        # Bolt takes an `AsyncAuthorize` as it is (its annotation names only plain functions).
        authorize=cast(Authorize, installations.authorize) if installations else None,
    )
    register(app, services)
    app.error(log_listener_failure)
    return app


@dataclass(frozen=True)
class Process:
    """What a `serve` or `worker` process works with: the bot's tables, Slack clients, the runner and
    the conversations' checkpointer."""

    store: Store
    clients: WorkspaceClients
    runner: ThreadRunner
    checkpointer: Checkpointer
    workspaces: WorkspaceOverrides
    editors: RubricEditors


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
    # /healthz answers from the start, and /readyz says "starting" until Slack's requests are served.
    async with serve_ops(settings.metrics_port, probes), AsyncExitStack() as starting:
        if not socket_mode:  # Slack's port: its requests meanwhile get 503 (come back), not 404
            await starting.enter_async_context(serve_starting(port, probes, not_yet=(EVENTS_PATH,)))
        if await startup.prepare_database(settings.database, wait=wait_for_db, stop=stop) is None:
            return  # stopped while waiting for the database
        async with (
            open_runner(settings, concurrency) as process,
            open_replays(settings, process.store) as replays,
            open_proposals(process.store, replays) as proposals,
        ):
            store, clients, runner = process.store, process.clients, process.runner
            workspaces, editors = process.workspaces, process.editors
            services = Services(
                settings,
                store,
                runner,
                replays,
                editors,
                process.checkpointer,
                workspaces,
                clients.installations,
                proposals,
            )
            app = create_app(settings, services, clients)
            _tune_garbage_collector()
            probes.job_counts = runner.job_counts
            if socket_mode:
                assert settings.slack_app_token is not None  # socket_mode implies it
                probes.readiness.ping_database = store.ping
                token = settings.slack_app_token.get_secret_value()
                await serve_socket_mode(app, clients.client, token, stop, probes.readiness.connection_changed)
            # A distributed app has no token of its own to check: each installation's is checked by
            # Bolt's authorization as its requests come in.
            elif settings.oauth or await retry_until_stopped(
                lambda: check_tokens(clients.client), stop, "check the bot token"
            ):
                await starting.aclose()  # the Slack app takes the port over, the probes with it
                probes.readiness.ping_database = store.ping
                await _serve_http(app, settings, port, stop, partial(add_probe_routes, probes=probes))
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
        async with open_runner(settings, concurrency) as process:
            _tune_garbage_collector()
            runner = process.runner
            probes.readiness.ping_database, probes.job_counts = process.store.ping, runner.job_counts
            logger.info("rubric-bot worker running up to %d job(s) at once", concurrency)
            await stop.wait()
            logger.info("stopping: letting %d running job(s) finish", runner.busy_threads)
            await runner.drain(settings.shutdown_grace)
    logger.info("stopped")


@asynccontextmanager
async def open_runner(settings: Settings, concurrency: int) -> AsyncIterator[Process]:
    """The store, Slack clients, thread runner and checkpointer of a process, its queue running jobs
    (the retention sweep among them when `RUBRIC_BOT_RETENTION_DAYS` is set)."""
    # Runs started before this moment belong to earlier processes; unfinished, they were cut short.
    started = datetime.now(UTC)
    async with AsyncExitStack() as stack:
        # Upgraded by `prepare_database`, just before.
        store = await Store.open(settings.database, upgraded=True, pool_size=settings.db_pool_size)
        stack.push_async_callback(store.close)
        await store.fill_pools()
        checkpointer = await stack.enter_async_context(open_checkpointer(settings.database))
        session = await stack.enter_async_context(aiohttp.ClientSession())
        client = build_client(settings, session)
        installations: Installations | None = None
        if settings.oauth:
            installations = await stack.enter_async_context(open_installations(settings, client))
        clients = WorkspaceClients(client, installations)
        workspaces = WorkspaceOverrides(Deployment.from_settings(settings), store)
        editors = RubricEditors(settings.rubric_editors, workspace_editors=workspaces.rubric_editors)
        # Calibration asks who is an editor as the grader reads its examples, not as they were saved.
        calibration = calibration_source(store, EditorsNow(editors, clients.client_for))
        agents = configured_agents(settings, checkpointer, calibration=calibration, trust=trust_source(store))
        queue = await stack.enter_async_context(
            open_queue(settings.database, concurrency=concurrency, stalled_after=settings.stalled_after)
        )
        reader = MaterialReader(
            session,
            api_url=settings.slack_api_url,
            thread_chars=settings.thread_context_chars,
            max_file_bytes=settings.max_file_bytes,
        )
        ports = RunnerPorts(
            agent=agents.default,
            store=store,
            clients=clients,
            queue=queue,
            reader=reader,
            checkpointer=checkpointer,
            workspaces=WorkspaceOverrides(Deployment.from_settings(settings), store),
            agents=agents,
            auditor=_auditor(settings, store, workspaces.limits),
            shadow=_shadow_grader(settings, store, checkpointer, workspaces.limits),
        )
        runner = ThreadRunner(ports, RunnerPolicy.from_settings(settings))
        # Dedupe keys only matter while Slack may still retry; don't let them pile up forever.
        schedule_claims_pruning(queue, store)
        if settings.retention_days is not None:
            schedule_retention(queue, store, checkpointer, settings.retention_days, clients.client_for)
        await queue.start()
        # A durable queue resumes the runs a dead process left; the embedded one lost them, and
        # kept the deletions and edits it had not applied.
        if not queue.durable:
            if kept := await runner.resume_changes():
                logger.info("applying %d deletion(s) and edit(s) of messages an earlier process kept", kept)
            if abandoned := await runner.report_abandoned_runs(started):
                logger.info("telling %d thread(s) that a restart interrupted their request", abandoned)
        yield Process(store, clients, runner, checkpointer, workspaces, editors)


def _auditor(settings: Settings, store: Store, limits: LimitsOf) -> Auditor | None:
    """The audit grader of `RUBRIC_BOT_AUDIT_MODEL`, if set (see `bot.audit`), spending from the
    daily budgets `limits` gives a workspace."""
    model = init_audit_model(settings)
    if model is None or settings.audit_model is None:
        return None
    return Auditor(store, model, settings.audit_model, settings.audit_share, limits)


def _shadow_grader(
    settings: Settings, store: Store, checkpointer: Checkpointer, limits: LimitsOf
) -> ShadowGrader | None:
    """The shadow grader of `RUBRIC_BOT_SHADOW_GRADER_MODEL`, if set (see `bot.shadow`), spending
    within each workspace's daily limits."""
    model = init_shadow_model(settings)
    if model is None or settings.shadow_grader_model is None:
        return None
    return ShadowGrader(
        store, checkpointer, model, settings.shadow_grader_model, settings.shadow_share, limits
    )


def _tune_garbage_collector() -> None:
    """Tune the garbage collector for serving. What the process opened to start is frozen, kept out
    of the full passes: it lives as long as the process, and each full pass walks every tracked
    object with the event loop stopped (150-200 ms, several times a minute under load, measured on
    ``serve``; 10-40 ms with it frozen), which a burst of Slack requests waits out. And young passes
    wait for `GC_YOUNG_THRESHOLD` new objects (see there)."""
    gc.freeze()
    _, *older = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *older)


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
