"""Where the bot keeps its data: a SQLite file (the zero-setup default) or a PostgreSQL database.

`RUBRIC_BOT_DB` names one of them. :class:`Database` parses that setting and opens what lives
there: the SQLAlchemy engine of the bot's own tables and langgraph's checkpointer. The two
backends differ only here; everything above works the same on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiosqlite
import psycopg
import sqlalchemy.exc
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from procrastinate.exceptions import ConnectorException
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine, Table, event, select
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from bot.db.private_file import make_private

logger = logging.getLogger(__name__)

DEFAULT_DB = "rubric-bot.sqlite"
"""`RUBRIC_BOT_DB` when unset: a SQLite file in the working directory."""

SQLITE_PREFIX = "sqlite:"
"""Optional prefix of a SQLite path (``sqlite:PATH``), as `rubric-bot db copy --from` spells it."""

POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
"""URL schemes taken to mean PostgreSQL (``postgres://`` is the short form many hosts hand out)."""

SQLITE_DRIVER = "sqlite+aiosqlite"
"""SQLAlchemy's driver name for SQLite (asyncio through aiosqlite)."""

POSTGRES_DRIVER = "postgresql+psycopg"
"""SQLAlchemy's driver name for PostgreSQL (psycopg 3, which is asyncio-native)."""

BUSY_TIMEOUT_MS = 5_000
"""How long a SQLite statement waits for another connection's write lock (the checkpointer's
connection shares the file) before failing."""

SYNC_PRAGMA = "PRAGMA synchronous = NORMAL"
"""Durability of SQLite commits, the checkpointer's and the store's: with WAL, NORMAL survives a crash
of the process and only an OS crash can lose the last commits; it spares an fsync per write."""

SECURE_DELETE_PRAGMA = "PRAGMA secure_delete = ON"
"""SQLite overwrites deleted content with zeros instead of leaving it in free pages of the file:
what a person deleted, or a purge removed, cannot be read back from the file."""

WAL_TRIES = 3
"""Tries at switching a fresh SQLite file to WAL. Connections opened at once (processes starting
together) each want the file to themselves for the switch; SQLite fails all but one at once, without
waiting (waiting could deadlock), and the next try waits for the switch and finds it done."""

WRITE_LOCK_OPTION = "rubric_bot_write_lock"
"""Execution option marking a connection whose transactions write: on SQLite they start with
``BEGIN IMMEDIATE``, taking the database's write lock up front so that a read-then-write
transaction waits its turn instead of failing with "database is locked" halfway."""

CONNECT_TIMEOUT_SECONDS = 3
"""How long opening a PostgreSQL connection may take (libpq's ``connect_timeout``): a server that
cannot be reached (a dropped route, no refusal) fails the connection that much later, not after the
operating system's minutes of retries."""

STATEMENT_TIMEOUT_MS = 60_000
"""Longest a PostgreSQL statement of the bot's may run (``statement_timeout``), a lock it waits for
included; the migrations are not bound (see `bot.db.store.migrate`)."""

TCP_USER_TIMEOUT_MS = 10_000
"""How long what a PostgreSQL connection sent may stay unacknowledged before the connection is
dropped (``tcp_user_timeout``, with keepalives on an idle one): in a partition, a statement in
flight fails instead of waiting the kernel's quarter of an hour."""

POOL_TIMEOUT_SECONDS = 5.0
"""How long a statement waits for a free connection of the store's PostgreSQL pools (SQLAlchemy's
default is 30 s)."""

BOUNDED_WAITS = {
    "connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
    "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
}
"""libpq's connection parameters bounding every wait of a PostgreSQL connection on the network
(besides ``statement_timeout``, see `Database.bounded_parameters`)."""

Checkpointer = AsyncSqliteSaver | AsyncPostgresSaver
"""langgraph's checkpointer on either backend."""

CHECKPOINT_POOL_SIZE = 10
"""Most PostgreSQL connections the checkpointer's pool opens in one process."""

STORE_POOL_SIZE = 10
"""PostgreSQL connections the bot's tables keep open in one process by default
(`RUBRIC_BOT_DB_POOL_SIZE`), and the most they use: a busy process waits a moment for one rather
than opening (and authenticating) a new connection for each burst and closing it again, which cost
more CPU under load than the queries themselves."""

SPEND_POOL_SIZE = 4
"""PostgreSQL connections of one process's spend counters (`bot.db.store.Store._spending`), besides
the store's (never more than the store's): each holds one short statement at a time, and a claim
waiting for one must not take one of the store's, which the claim's own transaction already holds."""

UNFLUSHED_COMMITS = "SET synchronous_commit = off"
"""How the spend counters' PostgreSQL connections commit: without waiting for the write-ahead log to
reach the disk. A counter row is locked until its statement's commit ends, so a burst from one
person queued one disk flush per admission, one after the other (100 claims at once from one
person, store and queue alone: p99 146-222 ms, 134-163 without). Only a crash of the server itself
(not of the bot) can lose the last fraction of a second of counter updates, the same bargain as
SQLite's `SYNC_PRAGMA`: the runs those admissions started, and their tokens, stay recorded in the
flushed runs table."""

SCHEMA_LOCK_KEY = 0x7275_6272_6964
"""PostgreSQL advisory lock (session-level) held by the one process changing the schema: the bot's
migrations, the checkpointer's setup and the job queue's schema, in that order (see `schema_lock`)."""

SCHEMA_LOCK_RETRY_SECONDS = 0.25
"""How often a process waiting for another's schema change tries the lock again."""

DATABASE_ERRORS: tuple[type[Exception], ...] = (OSError, SQLAlchemyError, psycopg.Error)
"""What talking to the database raises when it is unreachable, refuses the login, does not exist or
denies a statement (SQLite's errors are SQLAlchemy's; psycopg's own reach us from the checkpointer
and the queue)."""


PRIVILEGES_NEEDED = "the bot's role must own the database, or have CREATE on the schema it uses"
"""What a database that denies the bot a statement needs, as the README's Troubleshooting says."""


def describe_database_error(exc: BaseException) -> str:
    """The driver's message for a failed database call, in one line (libpq's never holds the password):
    the server's own sentence without the statement it quotes."""
    reason = getattr(exc, "orig", None) or exc
    primary = reason.diag.message_primary if isinstance(reason, psycopg.Error) else None
    text = " ".join((primary or str(reason)).split())
    return text or type(reason).__name__


def cannot_use(database: Database, exc: BaseException) -> str:
    """The one line saying that `database` (named without its password) cannot be used, why, and
    (when the role lacks a privilege) what it needs."""
    line = f"cannot use the database {database}: {describe_database_error(exc)}"
    return f"{line} ({PRIVILEGES_NEEDED})" if lacks_privilege(exc) else line


def lacks_privilege(exc: BaseException) -> bool:
    """Whether the database refused a statement for want of a privilege (waiting will not help)."""
    return isinstance(getattr(exc, "orig", None) or exc, psycopg.errors.InsufficientPrivilege)


class DatabaseTimeout(TimeoutError):
    """The database did not answer within the time a caller may wait (Slack's acknowledgement,
    say): taken as the database being unavailable (see `UNAVAILABLE_ERRORS`)."""


UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    sqlite3.OperationalError,
    ConnectorException,
    DatabaseTimeout,
)
"""What a statement raises when the database could not answer it (down, restarting, the connection
cut, no connection free in time, SQLite's file locked) rather than because the statement is wrong:
the same work can succeed later. SQLAlchemy's and procrastinate's wrap the driver's own errors."""


def unavailable_error(exc: BaseException) -> BaseException | None:
    """The database-unavailable error (see `UNAVAILABLE_ERRORS`) `exc` is or came from, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UNAVAILABLE_ERRORS):
            return current
        current = current.__cause__ or current.__context__
    return None


class DatabaseError(ValueError):
    """`RUBRIC_BOT_DB` (or a `--db`/`--from`/`--to` argument) names no usable database."""


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):\S*@")
"""The password of a URL written in text (``scheme://user:PASSWORD@host``), up to the host's ``@``."""


def without_password(text: str) -> str:
    """`text` with the password of any URL in it shown as ``***``, as SQLAlchemy shows a URL: for
    text that may not parse as a URL at all (an operator's mistyped setting)."""
    return _URL_PASSWORD.sub(r"\1:***@", text)


@dataclass(frozen=True)
class Database:
    """A SQLite file or a PostgreSQL database, as SQLAlchemy URL; build it with :meth:`parse`."""

    url: URL
    application_name: str | None = None
    """What PostgreSQL shows as the connections' ``application_name`` (in ``pg_stat_activity``), unless
    the URL names one itself; see `named`."""

    @classmethod
    def parse(cls, text: str) -> Database:
        """A SQLite path (``PATH`` or ``sqlite:PATH``) or a ``postgresql://`` URL, else `DatabaseError`."""
        text = text.strip()
        if not text:
            raise DatabaseError("it is empty")
        scheme, separator, _ = text.partition("://")
        if not separator:
            path = text.removeprefix(SQLITE_PREFIX)
            if not path:
                raise DatabaseError("sqlite: needs a file path after it, e.g. sqlite:rubric-bot.sqlite")
            return cls(URL.create(SQLITE_DRIVER, database=path))
        if scheme.lower() not in POSTGRES_SCHEMES:
            raise DatabaseError(
                f"{scheme}:// is not supported: give a SQLite file path or a postgresql:// URL"
            )
        try:
            url = make_url(text).set(drivername=POSTGRES_DRIVER)
        except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
            raise DatabaseError(f"it is not a valid PostgreSQL URL ({without_password(str(exc))})") from None
        if not url.database:
            raise DatabaseError("the PostgreSQL URL names no database (postgresql://USER@HOST/DBNAME)")
        return cls(url)

    @property
    def is_postgres(self) -> bool:
        """Whether this is a PostgreSQL database (else a SQLite file)."""
        return self.url.get_backend_name() == "postgresql"

    @property
    def sqlite_path(self) -> Path:
        """The SQLite file's path (ValueError on PostgreSQL)."""
        if self.is_postgres or self.url.database is None:
            raise ValueError(f"{self} is not a SQLite file")
        return Path(self.url.database)

    def named(self, application_name: str) -> Database:
        """The same database, its PostgreSQL connections named `application_name` (a URL's own
        ``application_name`` wins)."""
        return replace(self, application_name=application_name)

    def for_command(self, command: str) -> Database:
        """The same database, its PostgreSQL connections named ``rubric-bot COMMAND (HOST)`` (e.g.
        ``rubric-bot db upgrade (host-1)``), so an operator can tell in ``pg_stat_activity`` which
        process of which machine holds each connection."""
        return self.named(f"rubric-bot {command} ({socket.gethostname()})")

    @property
    def _connection_name(self) -> dict[str, str]:
        """The connection parameter naming this process's connections, if it is to be added."""
        if self.application_name is None or "application_name" in self.url.query:
            return {}
        return {"application_name": self.application_name}

    @property
    def bounded_parameters(self) -> dict[str, str]:
        """The PostgreSQL connection parameters bounding its waits (`BOUNDED_WAITS`, and
        `STATEMENT_TIMEOUT_MS` added to the URL's own ``options``), unless the URL sets them."""
        options = str(self.url.query.get("options", ""))
        if "statement_timeout" not in options:
            options = f"{options} -c statement_timeout={STATEMENT_TIMEOUT_MS}".strip()
        waits = {key: value for key, value in BOUNDED_WAITS.items() if key not in self.url.query}
        return {**waits, "options": options}

    @property
    def conninfo(self) -> str:
        """The PostgreSQL URL as libpq (and so psycopg) takes it, password included: never print it."""
        bounded = self.bounded_parameters
        url = self.url.difference_update_query(bounded).set(drivername="postgresql")
        added = {**bounded, **self._connection_name}
        # Encoded here: SQLAlchemy would write spaces as "+", which libpq keeps as "+".
        query = "&".join(f"{key}={quote(value, safe='')}" for key, value in added.items())
        text = url.render_as_string(hide_password=False)
        return f"{text}{'&' if '?' in text else '?'}{query}"

    def __str__(self) -> str:
        """How messages name the database: the file path, or the URL with any password masked."""
        if not self.is_postgres:
            return str(self.sqlite_path)
        return self.url.set(drivername="postgresql").render_as_string(hide_password=True)

    def create_engine(
        self,
        *,
        read_only: bool = False,
        pool_size: int | None = STORE_POOL_SIZE,
        autocommit: bool = False,
        flushed_commits: bool = True,
    ) -> AsyncEngine:
        """An async SQLAlchemy engine; ``read_only`` opens SQLite with ``mode=ro`` and makes every
        PostgreSQL transaction read-only, so nothing (not even a schema upgrade) can write. On
        PostgreSQL it keeps `pool_size` connections (None: no pool, each connection is opened for
        its user and closed when it is done), each in autocommit if asked, and without
        `flushed_commits` its commits do not wait for the server's disk (see `UNFLUSHED_COMMITS`)."""
        if self.is_postgres:
            options: dict[str, Any] = (
                {"poolclass": NullPool}
                if pool_size is None
                else {"pool_size": pool_size, "max_overflow": 0, "pool_timeout": POOL_TIMEOUT_SECONDS}
            )
            # Set on each connection as it opens: as execution options instead, SQLAlchemy sets
            # them again each time a connection is checked out, and a claim checks out two.
            if read_only:
                options["execution_options"] = {"postgresql_readonly": True}
            if autocommit:
                options["isolation_level"] = "AUTOCOMMIT"
            parameters = {**self._connection_name, **self.bounded_parameters}
            engine = create_async_engine(self.url, connect_args=parameters, **options)
            if not flushed_commits:
                event.listen(engine.sync_engine, "connect", _commit_without_flush)
            return engine
        if not read_only:
            make_private(self.sqlite_path)
        engine = create_async_engine(self._sqlite_url(read_only))
        event.listen(engine.sync_engine, "connect", _sqlite_connect_hook(read_only=read_only))
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
        return engine

    def create_thread_engine(self, *, read_only: bool = False) -> Engine:
        """SQLite only: a synchronous engine on the same file (the standard ``sqlite3`` driver) for a
        thread that runs a transaction whole in one call (see `bot.db.base.StoreBase.in_thread`):
        through the async engine each statement is three trips between the event loop and
        aiosqlite's thread, about two thirds of a millisecond, where SQLite itself takes
        microseconds. Its transactions are ``BEGIN IMMEDIATE`` where `WRITE_LOCK_OPTION` is set;
        ``read_only`` opens the file with ``mode=ro``, as `create_engine` does."""
        engine = create_sync_engine(self._sqlite_url(read_only).set(drivername="sqlite"))
        event.listen(engine, "connect", _sqlite_connect_hook(read_only=read_only))
        event.listen(engine, "begin", _sqlite_begin)
        return engine

    def _sqlite_url(self, read_only: bool) -> URL:
        """The SQLite file's URL, opening it with ``mode=ro`` if `read_only`."""
        if not read_only:
            return self.url
        return self.url.set(
            database=f"file:{quote(str(self.sqlite_path))}", query={"mode": "ro", "uri": "true"}
        )


async def fill_pool(engine: AsyncEngine, tables: Sequence[Table] = ()) -> None:
    """Open every connection a PostgreSQL engine's pool keeps, at once, each having looked at
    `tables`, and give them back to it.

    A process fills its pools as it starts: the first burst of requests after a start would
    otherwise open (and authenticate) them one by one while its acknowledgements wait. And each
    connection's server process reads a table's catalog entries the first time a statement names
    it: looked at now (no rows read), they are not read during that burst."""
    async with contextlib.AsyncExitStack() as connections:
        for _ in range(pool_size(engine)):
            connection = await connections.enter_async_context(engine.connect())
            for table in tables:
                await connection.execute(select(table).limit(0))


def pool_size(engine: AsyncEngine) -> int:
    """The connections a PostgreSQL engine's pool keeps (see `Database.create_engine`)."""
    return int(engine.sync_engine.pool.size())  # type: ignore[attr-defined]


def _commit_without_flush(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(UNFLUSHED_COMMITS)
    cursor.close()
    dbapi_connection.commit()  # a session setting set in a transaction rolled back would not stay


def _sqlite_connect_hook(*, read_only: bool) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own implicit BEGIN would hide ours; `_sqlite_begin` emits it instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not read_only:
            _use_wal(cursor)
            cursor.execute(SYNC_PRAGMA)
            cursor.execute(SECURE_DELETE_PRAGMA)
        cursor.close()

    return on_connect


def _use_wal(cursor: Any) -> None:
    """Switch the file to write-ahead logging (a no-op once it is)."""
    for tries_left in reversed(range(WAL_TRIES)):
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if tries_left == 0 or "locked" not in str(exc):
                raise


def _sqlite_begin(connection: Any) -> None:
    immediate = connection.get_execution_options().get(WRITE_LOCK_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@asynccontextmanager
async def schema_lock(database: Database) -> AsyncIterator[None]:
    """Hold the schema lock for the block: on PostgreSQL one process at a time changes the schema.

    It is tried (``pg_try_advisory_lock``) every `SCHEMA_LOCK_RETRY_SECONDS` rather than waited for
    in ``pg_advisory_lock``, on an autocommit connection of its own: a statement waiting for a
    lock keeps its snapshot, and the checkpointer's ``CREATE INDEX CONCURRENTLY`` (run by the
    holder) waits for every older snapshot in the database, so processes waiting inside the lock
    and the one holding it would wait for each other for ever. Between tries a waiting process
    holds neither a transaction nor a snapshot. Closing the connection releases the lock.
    SQLite serves one process, so it needs no lock.
    """
    if not database.is_postgres:
        yield
        return
    async with await psycopg.AsyncConnection.connect(database.conninfo, autocommit=True) as connection:
        waited = False
        while not await _try_schema_lock(connection):
            if not waited:
                logger.info("waiting for another process to finish upgrading the schema of %s", database)
                waited = True
            await asyncio.sleep(SCHEMA_LOCK_RETRY_SECONDS)
        yield


async def _try_schema_lock(connection: psycopg.AsyncConnection[Any]) -> bool:
    cursor = await connection.execute("SELECT pg_try_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
    row = await cursor.fetchone()
    return bool(row and row[0])


@asynccontextmanager
async def open_checkpointer(database: Database) -> AsyncIterator[Checkpointer]:
    """langgraph's checkpointer on the database, open for as long as the context is.

    SQLite gets an `AsyncSqliteSaver` on its own connection (the file private, see
    `bot.db.private_file`); PostgreSQL an `AsyncPostgresSaver` on a
    psycopg pool. Neither creates its tables here: `rubric-bot db upgrade` does (the SQLite saver
    also creates them on first use).
    """
    if database.is_postgres:
        # The saver's documented connection settings: it commits each statement itself, and
        # prepared statements would break behind a transaction-pooling proxy such as PgBouncer.
        settings = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        pool = AsyncConnectionPool(
            database.conninfo,
            connection_class=AsyncConnection[DictRow],
            kwargs=settings,
            min_size=1,
            max_size=CHECKPOINT_POOL_SIZE,
            open=False,
        )
        async with pool:
            yield AsyncPostgresSaver(pool)
        return
    make_private(database.sqlite_path)
    async with aiosqlite.connect(str(database.sqlite_path), timeout=BUSY_TIMEOUT_MS / 1000) as connection:
        await connection.execute(SYNC_PRAGMA)
        await connection.execute(SECURE_DELETE_PRAGMA)
        yield AsyncSqliteSaver(connection)
