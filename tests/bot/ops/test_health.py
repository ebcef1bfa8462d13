"""`/healthz` and `/readyz` as an orchestrator probes them, in process over real HTTP: ready on a
database that answers, one line naming nothing (and the detail logged once) on one that does not,
starting until the process serves, and in Socket Mode only while connected."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.db.store import Store
from bot.ops import health
from bot.ops.health import DATABASE_UNREACHABLE, STARTING, Readiness
from bot.ops.server import Probes, add_ops_routes
from tests.standins import HOST, free_port

USER = "probe_user_4c1"
PASSWORD = "probe-password-9e2"
"""The credentials of the unreachable PostgreSQL database: neither may show in an answer."""
UNREACHABLE = f"{DATABASE_UNREACHABLE}\n"
"""The line `/readyz` gives after ``not ready: `` when the database did not answer."""
PATIENT_ANSWER_SECONDS = 60.0
"""The readiness bound in tests where the database answers: a bound on an event, not a clock window."""


@pytest.fixture
async def probes() -> AsyncIterator[tuple[Probes, TestClient]]:
    """The routes as a process serves them, with nothing wired yet (a process starting), and a client."""
    app = web.Application()
    probes = Probes(Readiness())
    add_ops_routes(app, probes)
    async with TestClient(TestServer(app)) as client:
        yield probes, client


async def probe(client: TestClient, path: str = "/readyz") -> tuple[int, str]:
    response = await client.get(path)
    return response.status, await response.text()


async def test_readyz_says_starting_until_the_database_is_wired_then_ready(probes, database_url, monkeypatch):
    # The database's first answer is awaited, not raced against the 1 s bound on a busy machine.
    monkeypatch.setattr(health, "DATABASE_ANSWER_SECONDS", PATIENT_ANSWER_SECONDS)
    wired, client = probes
    assert await probe(client) == (503, f"not ready: {STARTING}\n")
    store = await Store.open(database_url)
    try:
        wired.readiness.ping_database = store.ping
        assert await probe(client) == (200, "ready\n")
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def unreachable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store whose database cannot be reached: a SQLite file in a folder that is not there, or a
    PostgreSQL server's port nothing listens on (credentials `USER` and `PASSWORD`)."""
    if request.param == "sqlite":
        url = str(tmp_path / "gone" / "bot.sqlite")
    else:
        url = f"postgresql://{USER}:{PASSWORD}@{HOST}:{free_port()}/rubric_bot"
    store = await Store.open(url, upgraded=True)  # as a process finds it after its start
    yield store
    await store.close()


async def test_readyz_names_an_unreachable_database_and_nothing_else_and_logs_why_once(
    probes, unreachable_store, caplog
):
    wired, client = probes
    wired.readiness.ping_database = unreachable_store.ping
    caplog.set_level(logging.WARNING, logger=health.__name__)

    answers = [await probe(client), await probe(client)]
    alive = await probe(client, "/healthz")

    assert answers == [(503, f"not ready: {UNREACHABLE}")] * 2
    assert alive == (200, "ok\n")
    logged = [r.getMessage() for r in caplog.records if r.name == health.__name__]
    assert len(logged) == 1 and logged[0].startswith("not ready: the database is unreachable: ")
    assert PASSWORD not in caplog.text


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that takes connections and never says a word, as a hung database server does."""
    with socket.socket() as listening:
        listening.bind((HOST, 0))
        listening.listen(8)
        yield listening.getsockname()[1]


async def test_readyz_calls_a_database_that_does_not_answer_in_time_unreachable(
    probes, silent_server, monkeypatch, caplog
):
    # The bound is what is tested, not its length: shortened, so the hung server costs no second.
    monkeypatch.setattr(health, "DATABASE_ANSWER_SECONDS", 0.05)
    store = await Store.open(f"postgresql://{USER}:{PASSWORD}@{HOST}:{silent_server}/rb", upgraded=True)
    wired, client = probes
    wired.readiness.ping_database = store.ping
    try:
        answer = await probe(client)
    finally:
        await store.close()

    assert answer == (503, f"not ready: {UNREACHABLE}")
    assert "not ready: the database is unreachable: it did not answer within 0.05 s" in caplog.text


async def test_in_socket_mode_readyz_follows_the_connection_to_slack(probes):
    wired, client = probes
    readiness = wired.readiness
    readiness.socket_mode = True  # as `serve` starts in Socket Mode

    async def answers() -> None:
        """A database that answers."""

    readiness.ping_database = answers
    not_connected = await probe(client)
    readiness.connection_changed(True)
    connected = await probe(client)
    readiness.connection_changed(False)

    assert not_connected == (503, "not ready: not connected to Slack (Socket Mode)\n")
    assert connected == (200, "ready\n")
    assert await probe(client) == not_connected


async def test_probes_that_come_together_share_one_database_query():
    # Anyone who can reach the port may probe it: twenty within the reuse window (an hour here, so
    # that how fast this machine sends them does not matter) cost the database one query for
    # /readyz and one count for /metrics.
    pings = counts = 0
    answering = asyncio.Event()

    async def ping() -> None:
        nonlocal pings
        pings += 1
        await answering.wait()

    async def count_jobs() -> dict[str, int]:
        nonlocal counts
        counts += 1
        await answering.wait()
        return {"todo": 2}

    app = web.Application()
    add_ops_routes(app, Probes(Readiness(ping, reuse_seconds=3600), count_jobs, reuse_seconds=3600))
    async with TestClient(TestServer(app)) as client:
        probing = [asyncio.ensure_future(probe(client, path)) for path in ("/readyz", "/metrics") * 10]
        while pings == 0 or counts == 0:  # both queries under way
            await asyncio.sleep(0)
        answering.set()
        answers = await asyncio.gather(*probing)

    assert (pings, counts) == (1, 1)
    assert answers[0::2] == [(200, "ready\n")] * 10
    queue_line = 'rubric_bot_queue_jobs{state="todo"} 2.0'
    assert all(status == 200 and queue_line in text for status, text in answers[1::2])
