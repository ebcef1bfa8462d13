"""The threads the bot takes part in (`threads`), and when each was last active."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, exists, select
from sqlalchemy.dialects import postgresql, sqlite

from bot.db.base import StoreBase
from bot.db.schema import threads
from bot.db.scope import CHANNEL_KEYS, bound, thread_columns, utc_now
from bot.vocabulary.thread import ThreadKey


class ThreadStore(StoreBase):
    """The threads the bot takes part in."""

    async def add_thread(self, thread: ThreadKey) -> None:
        """Remember that the bot takes part in this thread, and that it is active now."""
        async with self._write() as connection:
            await connection.run_sync(upsert_thread, thread)

    async def has_thread(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in this thread."""
        return bool(await self._scalar(_HAS_THREAD, thread_columns(thread)))


def upsert_thread(connection: Connection, thread: ThreadKey) -> None:
    """Remember that the bot takes part in this thread, and that it is active now (in `connection`'s
    transaction; synchronous, like every statement of a claim)."""
    now = utc_now()
    connection.execute(
        _thread_upsert(connection.dialect.name == "postgresql"),
        {**thread_columns(thread), "created_at": now, "last_activity": now},
    )


@cache
def _thread_upsert(postgres: bool) -> Any:
    """Insert a thread's row, or set its last activity if it has one; built once per dialect."""
    return _upserting((postgresql.insert if postgres else sqlite.insert)(threads))


def threads_upsert_from(rows: Select[Any]) -> Any:
    """PostgreSQL: `upsert_thread`'s statement for many threads at once, for a larger one to embed
    (as a CTE): `rows` selects each thread's columns (see `bot.db.scope.thread_columns`), then its
    ``created_at`` and ``last_activity``, one row per thread (a statement upserts a row once)."""
    columns = [*CHANNEL_KEYS, "thread_ts", "created_at", "last_activity"]
    return _upserting(postgresql.insert(threads).from_select(columns, rows))


def _upserting(insert: Any) -> Any:
    """`insert` setting the last activity of a thread that has a row already."""
    return insert.on_conflict_do_update(
        index_elements=["enterprise", "team", "channel", "thread_ts"],
        set_={"last_activity": insert.excluded.last_activity},
    )


_HAS_THREAD = select(exists().where(*bound(threads, *CHANNEL_KEYS, "thread_ts")))
