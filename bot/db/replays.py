"""Channel replays: one at a time per channel, and not again before the cooldown.

A replay holds a lock of its channel while it runs: a PostgreSQL advisory lock on a connection of
its own, released by the database if the process dies (SQLite serves one process: a lock of the
store).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.db.base import StoreBase
from bot.db.database import Database
from bot.db.schema import channel_replays
from bot.db.scope import in_channel, lock_scope, utc_now
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class ReplayRefused:
    """Why a channel's replay cannot start now: one is ``running``, else the cooldown lasts until
    ``next_start``; ``started_by`` started the latest one (None if it is not known)."""

    running: bool
    started_by: str | None
    next_start: datetime | None = None


class ReplayLease:
    """A started replay's hold on its channel; `release` once it ends (the channel is free again)."""

    def __init__(
        self, release: Callable[[], Awaitable[None]], undo_start: Callable[[], Awaitable[None]]
    ) -> None:
        self._release = release
        self._undo_start = undo_start

    async def release(self, *, graded: bool = True) -> None:
        """Let the channel's next replay start once its cooldown is over; at once if this one
        `graded` nothing (the cooldown bounds the grader's spend, and it spent none): the channel's
        latest start is then the one before it again."""
        try:
            if not graded:
                await self._undo_start()
        finally:
            await self._release()


class _ReplayStart(NamedTuple):
    """A channel's latest replay start, as `channel_replays` records it."""

    started_by: str
    started_at: datetime


class ReplayStore(StoreBase):
    """Each channel's replay lock and latest start."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        super().__init__(engine, database)
        self._replays: dict[tuple[Workspace, str], asyncio.Lock] = {}
        self._replay_locks: AsyncEngine | None = None
        """PostgreSQL: where a replay's lock connection comes from, opened when first needed: no
        pool, so replays running for minutes never hold the connections other queries wait for."""

    async def _close_replay_locks(self) -> None:
        """Close the replay locks' connections, if any were opened."""
        if self._replay_locks is not None:
            await self._replay_locks.dispose()

    async def start_replay(
        self, workspace: Workspace, channel: str, user: str, cooldown: timedelta
    ) -> ReplayLease | ReplayRefused:
        """Take the channel's replay lock and record the start; `ReplayRefused` if one runs or the
        latest started less than `cooldown` ago. The lease must be released when the replay ends."""
        if self._postgres:
            return await self._start_replay_postgres(workspace, channel, user, cooldown)
        lock = self._replays.setdefault((workspace, channel), asyncio.Lock())
        if lock.locked():
            return ReplayRefused(running=True, started_by=await self._replay_starter(workspace, channel))
        await lock.acquire()
        try:
            async with self._write() as connection:
                replaced = await self._record_replay_start(connection, workspace, channel, user, cooldown)
        except BaseException:
            lock.release()
            raise
        if isinstance(replaced, ReplayRefused):
            lock.release()
            return replaced

        async def undo_start() -> None:
            async with self._write() as connection:
                await self._restore_replay_start(connection, workspace, channel, replaced)

        return ReplayLease(_released(lock), undo_start)

    async def _start_replay_postgres(
        self, workspace: Workspace, channel: str, user: str, cooldown: timedelta
    ) -> ReplayLease | ReplayRefused:
        key = {"key": f"replay:{lock_scope(workspace)}:{channel}"}
        if self._replay_locks is None:  # a connection of its own, not the pool's, for the whole replay
            self._replay_locks = self._database.create_engine(pool_size=None)
        connection = await self._replay_locks.connect()
        try:
            locked = await connection.scalar(
                text("SELECT pg_try_advisory_lock(hashtextextended(:key, 0))"), key
            )
            if not locked:
                await connection.close()
                return ReplayRefused(running=True, started_by=await self._replay_starter(workspace, channel))
            replaced = await self._record_replay_start(connection, workspace, channel, user, cooldown)
            await connection.commit()
        except BaseException:
            await connection.close()  # a session's advisory locks end with it
            raise
        release = _unlocked(connection, key)
        if isinstance(replaced, ReplayRefused):
            await release()
            return replaced

        async def undo_start() -> None:  # on the connection holding the lock, so before its release
            await self._restore_replay_start(connection, workspace, channel, replaced)
            await connection.commit()

        return ReplayLease(release, undo_start)

    async def _record_replay_start(
        self, connection: AsyncConnection, workspace: Workspace, channel: str, user: str, cooldown: timedelta
    ) -> ReplayRefused | _ReplayStart | None:
        """Record a replay starting now, holding the channel's lock: refused if the cooldown lasts,
        else the start it replaced (None if the channel had none)."""
        table = channel_replays
        latest = (
            await connection.execute(
                select(table.c.started_by, table.c.started_at).where(*in_channel(table, workspace, channel))
            )
        ).first()
        now = utc_now()
        if latest is not None and latest.started_at + cooldown > now:
            return ReplayRefused(
                running=False, started_by=latest.started_by, next_start=latest.started_at + cooldown
            )
        await self._put_channel_row(
            table, workspace, channel, {"started_by": user, "started_at": now}, connection
        )
        return _ReplayStart(*latest) if latest else None

    async def _restore_replay_start(
        self, connection: AsyncConnection, workspace: Workspace, channel: str, previous: _ReplayStart | None
    ) -> None:
        """Make `previous` the channel's latest replay start again (holding the channel's lock)."""
        table = channel_replays
        if previous is None:
            await connection.execute(delete(table).where(*in_channel(table, workspace, channel)))
        else:
            await self._put_channel_row(table, workspace, channel, previous._asdict(), connection)

    async def _replay_starter(self, workspace: Workspace, channel: str) -> str | None:
        table = channel_replays
        return await self._scalar(select(table.c.started_by).where(*in_channel(table, workspace, channel)))


def _released(lock: asyncio.Lock) -> Callable[[], Awaitable[None]]:
    async def release() -> None:
        lock.release()

    return release


def _unlocked(connection: AsyncConnection, key: dict[str, str]) -> Callable[[], Awaitable[None]]:
    """Releases a session's advisory lock and gives its connection back to the pool."""

    async def release() -> None:
        try:
            await connection.execute(text("SELECT pg_advisory_unlock(hashtextextended(:key, 0))"), key)
            await connection.commit()
        finally:
            await connection.close()

    return release
