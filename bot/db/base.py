"""The engine every part of the store shares: its writing and reading connections, and SQLite's turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from sqlalchemy import Select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.db.database import WRITE_LOCK_OPTION, Database
from bot.db.scope import workspace_columns
from bot.vocabulary.workspace import Workspace


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

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that writes: committed when the block ends, rolled back if it raises."""
        async with self._turns, self._writer.begin() as connection:
            yield connection

    async def _rows(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> list[Any]:
        async with self._turns, self._reader.connect() as connection:
            result = await connection.execute(query, parameters)
            return list(result.mappings())

    async def _scalar(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> Any:
        async with self._turns, self._reader.connect() as connection:
            return await connection.scalar(query, parameters)

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
