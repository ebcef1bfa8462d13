"""Suite-wide setup."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from bot.db.store import Store

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
"""Every test talks only to servers on loopback; a developer's proxy settings would reroute that
traffic (slack_sdk honours these but not NO_PROXY), so they are removed for the whole run,
bot subprocesses included."""


TEST_PG_VARIABLE = "RUBRIC_BOT_TEST_PG"
"""Names a PostgreSQL database (a postgresql:// URL) in which tests may create and drop schemas."""

ENABLE_PG_HINT = (
    f"PostgreSQL tests not run: set {TEST_PG_VARIABLE}=postgresql://USER:PASSWORD@127.0.0.1/DBNAME "
    "(a database tests may create and drop schemas in; .ci/run sets one up)"
)
"""The one line a local run without PostgreSQL shows; under CI=true those tests fail instead."""

POSTGRES_MARK = "postgres"
"""Marks a test that needs PostgreSQL (tests using the `postgres_server` fixture have it implicitly)."""

_SKIPPED_PG_TESTS = pytest.StashKey[int]()
"""How many PostgreSQL tests this run left out, for the summary line."""

SKIPPED_PG_OUTPUT = "rubric_bot_skipped_postgres_tests"
"""Key of that count in what a pytest-xdist worker hands back to the controller."""


def pytest_configure(config: pytest.Config) -> None:
    for name in PROXY_VARIABLES:
        os.environ.pop(name, None)
        os.environ.pop(name.lower(), None)
    config.addinivalue_line("markers", f"{POSTGRES_MARK}: needs PostgreSQL ({TEST_PG_VARIABLE})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a reachable PostgreSQL, leave its tests out locally with one line; CI runs (and fails) them."""
    needing = [item for item in items if _needs_postgres(item)]
    if not needing or os.environ.get("CI") == "true" or _postgres_problem() is None:
        return
    items[:] = [item for item in items if not _needs_postgres(item)]
    config.hook.pytest_deselected(items=needing)
    config.stash[_SKIPPED_PG_TESTS] = len(needing)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A parallel worker hands its count to the controller, which writes the summary."""
    if (output := getattr(session.config, "workeroutput", None)) is not None:
        output[SKIPPED_PG_OUTPUT] = session.config.stash.get(_SKIPPED_PG_TESTS, 0)


def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller hears a worker end. Every worker collects the whole suite, so each
    counts all the PostgreSQL tests left out: the summary says the count once."""
    counted = node.workeroutput.get(SKIPPED_PG_OUTPUT, 0)
    node.config.stash[_SKIPPED_PG_TESTS] = max(node.config.stash.get(_SKIPPED_PG_TESTS, 0), counted)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if skipped := config.stash.get(_SKIPPED_PG_TESTS, 0):
        terminalreporter.write_line(f"{skipped} {ENABLE_PG_HINT}")


def _needs_postgres(item: pytest.Item) -> bool:
    return item.get_closest_marker(POSTGRES_MARK) is not None or "postgres_server" in getattr(
        item, "fixturenames", ()
    )


@functools.cache
def _postgres_problem() -> str | None:
    """Why `RUBRIC_BOT_TEST_PG` cannot be used, or None when it accepts connections."""
    url = os.environ.get(TEST_PG_VARIABLE, "")
    if not url:
        return f"{TEST_PG_VARIABLE} is not set"
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        return f"{TEST_PG_VARIABLE} does not accept connections ({type(exc).__name__}: {exc})"
    return None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """`RUBRIC_BOT_TEST_PG`, checked to accept connections (a failure, never a skip, when it does not).

    Under pytest-xdist each worker gets a database of its own beside it (its name plus the worker's,
    dropped when the worker ends): advisory locks, ``LISTEN`` channels and ``CREATE INDEX
    CONCURRENTLY``'s wait for older snapshots are database-wide, so workers sharing one database
    would wait for, or hear, each other's tests.
    """
    if problem := _postgres_problem():
        pytest.fail(f"{problem}; .ci/run starts a PostgreSQL server and sets it", pytrace=False)
    url = os.environ[TEST_PG_VARIABLE]
    worker = os.environ.get(XDIST_WORKER_VARIABLE)
    if worker is None:
        yield url
        return
    with _database_of_worker(url, worker) as worker_url:
        yield worker_url


XDIST_WORKER_VARIABLE = "PYTEST_XDIST_WORKER"
"""Set by pytest-xdist in each worker process to the worker's name (``gw0``, ``gw1``…)."""


@contextmanager
def _database_of_worker(url: str, worker: str) -> Iterator[str]:
    """A fresh database named after `url`'s and `worker`, on the same server, dropped on exit."""
    server = make_url(url)
    name = f"{server.database}_{worker}"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(drop)  # left over from a run that was killed
        try:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.InsufficientPrivilege:
            pytest.fail(f"parallel workers need a role that may create databases ({TEST_PG_VARIABLE})")
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(drop)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A ``postgresql://`` URL whose tables live in an empty schema of their own, dropped afterwards."""
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = make_url(postgres_server)
    yield url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        _drop_schema(admin, schema)


DROP_LOCK_TIMEOUT = "5s"
"""How long dropping a test's schema waits for the locks of sessions still using it."""


def _drop_schema(admin: psycopg.Connection[Any], schema: str) -> None:
    """Drop a test's schema, ending the sessions that keep it from being dropped.

    A bot the test started can outlive this fixture (pytest tears fixtures down in reverse order of
    setup, and the bot's may have been set up first) and be in a transaction whose next statement,
    on its other connection, queues behind the drop: the drop waits for the transaction, the
    transaction for the drop, and PostgreSQL cannot see the cycle (one wait is in the bot). So the
    drop waits `DROP_LOCK_TIMEOUT` at most, then ends the sessions holding locks in the schema.
    """
    admin.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(DROP_LOCK_TIMEOUT)))
    drop = sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema))
    try:
        admin.execute(drop)
    except psycopg.errors.LockNotAvailable:
        admin.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
            "JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND l.granted AND l.pid <> pg_backend_pid()",
            (schema,),
        )
        admin.execute(drop)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each backend in turn: a fresh SQLite file's path, then a fresh PostgreSQL schema's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "rubric-bot.sqlite")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """The bot's store opened on each backend in turn (see `database_url`), closed after the test."""
    opened = await Store.open(database_url)
    yield opened
    await opened.close()
