"""The engine every part of the store shares: its writing and reading connections, SQLite's turns,
and SQLite's thread.

On SQLite the statements of a read (`StoreBase._rows`, `StoreBase._scalar`) and of the hottest
writes (`StoreBase.in_thread`) run whole in one thread with a synchronous connection of its own:
through the async engine each statement is three trips between the event loop and aiosqlite's
thread, about two thirds of a millisecond of the loop's CPU, where SQLite itself takes microseconds;
a transaction in the thread costs the loop one trip (issue 45).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.db.database import WRITE_LOCK_OPTION, Database
from bot.db.scope import workspace_columns
from bot.vocabulary.workspace import Workspace

Done = TypeVar("Done")
"""What a transaction run by `StoreBase.in_thread` returns."""


class StoreBase:
    """One database's engine as every part of the store uses it (see `bot.db.store`): writes in a
    transaction, reads on their own, and on SQLite one turn at a time."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        self._engine = engine
        self._database = database if database is not None else Database(engine.url)
        """The database `engine` was created for, whose settings (the connections' name) the
        store's other engines take too."""
        self._writer = engine.execution_options(**{WRITE_LOCK_OPTION: True})
        self._postgres = engine.dialect.name == "postgresql"
        # A single-statement read needs no transaction around it: on PostgreSQL, autocommit spares
        # the BEGIN and the ROLLBACK (two round trips of three). SQLite reads keep their explicit
        # transaction, see `bot.db.database`.
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT") if self._postgres else engine
        self._upsert = postgresql.insert if self._postgres else sqlite.insert
        # SQLite serves one process through one connection, its statements in arrival order (as
        # the lock queues them): messages a thread receives back to back reach the runner in
        # that order. PostgreSQL serves many processes and needs no such queue.
        self._turns: AbstractAsyncContextManager[Any] = nullcontext() if self._postgres else asyncio.Lock()
        self._sqlite_thread: ThreadPoolExecutor | None = None
        """SQLite: the thread whole transactions run in (see the module's docstring), on
        `_sqlite_writer` and `_sqlite_reader` (opened when the first comes)."""
        self._sqlite_writer: Engine | None = None
        self._sqlite_reader: Engine | None = None

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that writes: committed when the block ends, rolled back if it raises."""
        async with self._turns, self._writer.begin() as connection:
            yield connection

    async def in_thread(self, work: Callable[[Connection], Done], *, writes: bool = True) -> Done:
        """`work`'s statements (sent synchronously on the connection it is given) in one transaction
        that `writes` or only reads: on SQLite, whole in the store's SQLite thread (see the module's
        docstring); on PostgreSQL, on the async engine (each statement a round trip either way).
        Committed when `work` returns, rolled back if it raises."""
        if self._postgres:
            engine = self._writer if writes else self._reader
            async with engine.connect() as connection:
                if not writes:  # the reader is in autocommit: a single read needs no transaction
                    return await connection.run_sync(work)
                async with connection.begin():
                    return await connection.run_sync(work)
        async with self._turns:
            if self._sqlite_thread is None:
                self._sqlite_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._sqlite_thread, self._in_sqlite, work, writes)

    def _in_sqlite(self, work: Callable[[Connection], Done], writes: bool) -> Done:
        """`work` in a transaction of the SQLite thread's connection (called in that thread)."""
        if self._sqlite_writer is None or self._sqlite_reader is None:
            engine = self._database.create_thread_engine(read_only=self._database_read_only)
            self._sqlite_writer = engine.execution_options(**{WRITE_LOCK_OPTION: True})
            self._sqlite_reader = engine
        engine = self._sqlite_writer if writes else self._sqlite_reader
        with engine.connect() as connection, connection.begin():
            return work(connection)

    @property
    def _database_read_only(self) -> bool:
        """Whether the store opened its SQLite file read-only (``mode=ro``, see `Database.create_engine`)."""
        return self._engine.url.query.get("mode") == "ro"

    async def _close_sqlite_thread(self) -> None:
        """Close the SQLite thread's connection (in that thread: sqlite3 wants it) and the thread."""
        thread, engine = self._sqlite_thread, self._sqlite_reader
        self._sqlite_thread = self._sqlite_writer = self._sqlite_reader = None
        if thread is None:
            return
        if engine is not None:
            await asyncio.get_running_loop().run_in_executor(thread, engine.dispose)
        thread.shutdown()

    async def _rows(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> list[Any]:
        return await self.in_thread(
            lambda connection: list(connection.execute(query, parameters).mappings()), writes=False
        )

    async def _scalar(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> Any:
        return await self.in_thread(lambda connection: connection.scalar(query, parameters), writes=False)

    async def _put_channel_row(
        self,
        table: Any,
        workspace: Workspace,
        channel: str,
        values: dict[str, Any],
        connection: AsyncConnection | None = None,
    ) -> None:
        """Insert or replace the channel's row in one atomic upsert (within `connection`, if given)."""
        key = {**workspace_columns(workspace), "channel": channel}
        statement = self._upsert(table).values(**key, **values)
        statement = statement.on_conflict_do_update(
            index_elements=list(key), set_={name: statement.excluded[name] for name in values}
        )
        if connection is not None:
            await connection.execute(statement)
            return
        async with self._write() as own:
            await own.execute(statement)
