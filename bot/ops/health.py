"""Liveness and readiness, as an orchestrator probes them.

`/healthz` answers 200 whenever the process can answer at all. `/readyz` answers 200 when the process
can do its work: the database answers a query within `DATABASE_ANSWER_SECONDS` and, in Socket Mode,
the connection to Slack is up; otherwise 503 with one line saying which is not. Anyone who can reach
the port may ask, so a database failure is answered `DATABASE_UNREACHABLE` and its detail (host
names, the database user) goes to the log only. Probes that come at once, or within
`PROBE_REUSE_SECONDS` of each other, share one query: a flood of them costs the database nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from async_lru import alru_cache

from bot.db.database import DATABASE_ERRORS, describe_database_error

logger = logging.getLogger(__name__)

DATABASE_ANSWER_SECONDS = 1.0
"""How long `/readyz` waits for the database's answer to a trivial query before calling it down."""

DATABASE_UNREACHABLE = "database unreachable"
"""The reason `/readyz` gives when the database did not answer; why it did not is logged."""

PROBE_REUSE_SECONDS = 1.0
"""How long a probe's answer from the database (readiness, the queue's counts) is reused: an
orchestrator probing every few seconds still sees a fresh one, and anyone sending many probes
reaches the database at most once a second."""

STARTING = "starting (preparing the database, then Slack)"
"""The reason `/readyz` gives until the process serves: it answers from its first moments on."""


@dataclass
class Readiness:
    """What `/readyz` checks: the database, and the Socket Mode connection when there is one."""

    ping_database: Callable[[], Awaitable[None]] | None = None
    """Runs a trivial query on the process's own connection pool; None while the process starts
    (its schema being prepared, its queue opened), when it is not ready yet."""
    socket_mode: bool = False
    """Whether the process talks to Slack over Socket Mode (and so must be connected to be ready)."""
    socket_connected: bool = False
    logged_database_failure: str | None = None
    """The database failure last logged, so that a probe every few seconds logs an outage once."""
    reuse_seconds: float = PROBE_REUSE_SECONDS
    """How long the database's answer is reused (0: only by the probes that come at once)."""
    _database_checked: Callable[[], Awaitable[str | None]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._database_checked = alru_cache(maxsize=1, ttl=self.reuse_seconds)(self._database_problem)

    def connection_changed(self, connected: bool) -> None:
        """Called by Socket Mode as its connection comes up or goes down."""
        self.socket_connected = connected

    async def problem(self) -> str | None:
        """Why the process is not ready, in one line; None when it is."""
        if self.ping_database is None:
            return STARTING
        if self.socket_mode and not self.socket_connected:
            return "not connected to Slack (Socket Mode)"
        return await self._database_checked()

    async def _database_problem(self) -> str | None:
        """`DATABASE_UNREACHABLE` when the database does not answer a trivial query, else None."""
        assert self.ping_database is not None  # asked only once the process serves
        try:
            async with asyncio.timeout(DATABASE_ANSWER_SECONDS):
                await self.ping_database()
        except TimeoutError:
            return self._database_failed(f"it did not answer within {DATABASE_ANSWER_SECONDS:g} s")
        except DATABASE_ERRORS as exc:
            return self._database_failed(describe_database_error(exc))
        self.logged_database_failure = None
        return None

    def _database_failed(self, detail: str) -> str:
        """`DATABASE_UNREACHABLE`, with `detail` logged when it is new."""
        if detail != self.logged_database_failure:
            logger.warning("not ready: the database is unreachable: %s", detail)
            self.logged_database_failure = detail
        return DATABASE_UNREACHABLE


async def healthz(request: web.Request) -> web.Response:
    """200 while the process runs."""
    return web.Response(text="ok\n")


def readyz(readiness: Readiness) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The `/readyz` handler: 200 ``ready``, or 503 with the reason."""

    async def answer(request: web.Request) -> web.Response:
        problem = await readiness.problem()
        if problem is None:
            return web.Response(text="ready\n")
        logger.debug("not ready: %s", problem)
        return web.Response(status=503, text=f"not ready: {problem}\n")

    return answer
