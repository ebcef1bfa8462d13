"""Where `/healthz`, `/readyz` and `/metrics` are served: all three on a port of their own
(`RUBRIC_BOT_METRICS_PORT`) in every mode; in HTTP mode the two probes also beside `/slack/events`,
which load balancers probe, but never `/metrics` (it would tell anyone who can reach Slack's public
port how busy the bot is and what it spends)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from bot.ops.health import PROBE_REUSE_SECONDS, Readiness, healthz, readyz
from bot.ops.metrics import JobCounts, metrics

logger = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
"""Answers 200 while the process runs (a liveness probe)."""

READY_PATH = "/readyz"
"""Answers 200 when the process can work, else 503 with the reason (a readiness probe)."""

METRICS_PATH = "/metrics"
"""Prometheus's text format."""


@dataclass
class Probes:
    """What the three routes answer from, filled in as the process gets going: they answer from its
    first moments (`/readyz` then says it is starting, and `/metrics` shows no queue yet)."""

    readiness: Readiness
    job_counts: JobCounts | None = None
    """The queue's counts, once it is open."""
    reuse_seconds: float = PROBE_REUSE_SECONDS
    """How long `/metrics` reuses the queue's counts (see `bot.ops.health.PROBE_REUSE_SECONDS`)."""

    async def count_jobs(self) -> Mapping[str, int] | None:
        """The queue's job counts, None before it is open."""
        return await self.job_counts() if self.job_counts is not None else None


def add_probe_routes(app: web.Application, probes: Probes) -> None:
    """Add `/healthz` and `/readyz` to `app` (before it starts): what a public port may answer."""
    app.router.add_get(HEALTH_PATH, healthz)
    app.router.add_get(READY_PATH, readyz(probes.readiness))


def add_ops_routes(app: web.Application, probes: Probes) -> None:
    """Add the three routes to `app` (before it starts): what the metrics port answers."""
    add_probe_routes(app, probes)
    app.router.add_get(METRICS_PATH, metrics(probes.count_jobs, probes.reuse_seconds))


STARTING_RETRY_SECONDS = 5
"""What a request sent to a path not served yet is told to wait before it tries again."""


@asynccontextmanager
async def serve_ops(port: int, probes: Probes) -> AsyncIterator[None]:
    """Serve the three routes on `port` (`RUBRIC_BOT_METRICS_PORT`, all interfaces) for as long as
    the context is open."""
    app = web.Application()
    add_ops_routes(app, probes)
    async with _serving(app, port):
        paths = (HEALTH_PATH, READY_PATH, METRICS_PATH)
        logger.info("health and metrics on http://0.0.0.0:%d (%s, %s, %s)", port, *paths)
        yield


@asynccontextmanager
async def serve_starting(port: int, probes: Probes, not_yet: Sequence[str]) -> AsyncIterator[None]:
    """Serve the two probes on Slack's port `port` while the process starts; POSTs to the `not_yet`
    paths (Slack's) are answered 503 with ``Retry-After``, not 404: the sender is told to come back,
    not that nothing is there."""
    app = web.Application()
    add_probe_routes(app, probes)
    for path in not_yet:
        app.router.add_post(path, _starting)
    async with _serving(app, port):
        yield


@asynccontextmanager
async def _serving(app: web.Application, port: int) -> AsyncIterator[None]:
    """`app` served on `port` (all interfaces) while the context is open, the port let go after."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, port=port).start()
        yield
    finally:
        await runner.cleanup()


async def _starting(request: web.Request) -> web.Response:
    return web.Response(
        status=503,
        text="starting: try again in a moment\n",
        headers={"Retry-After": str(STARTING_RETRY_SECONDS)},
    )
