"""The threads the bot takes part in (`threads`), and when each was last active."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.base import StoreBase
from bot.db.schema import threads
from bot.db.scope import CHANNEL_KEYS, bound, thread_columns, utc_now
from bot.vocabulary.thread import ThreadKey


class ThreadStore(StoreBase):
    """The threads the bot takes part in."""

    async def add_thread(self, thread: ThreadKey) -> None:
        """Remember that the bot takes part in this thread, and that it is active now."""
        async with self._write() as connection:
            await upsert_thread(connection, thread)

    async def has_thread(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in this thread."""
        return bool(await self._scalar(_HAS_THREAD, thread_columns(thread)))


async def upsert_thread(connection: AsyncConnection, thread: ThreadKey) -> None:
    """Remember that the bot takes part in this thread, and that it is active now (in `connection`'s
    transaction)."""
    upsert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    now = utc_now()
    statement = upsert(threads).values(**thread_columns(thread), created_at=now, last_activity=now)
    statement = statement.on_conflict_do_update(
        index_elements=["enterprise", "team", "channel", "thread_ts"], set_={"last_activity": now}
    )
    await connection.execute(statement)


_HAS_THREAD = select(exists().where(*bound(threads, *CHANNEL_KEYS, "thread_ts")))
