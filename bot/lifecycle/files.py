"""The SQLite file and its -wal/-shm keep nothing that was deleted (they are private to the bot's
account: see `bot.db.private_file`).

Deleted rows are zeroed in the database file (``secure_delete``, see `bot.db.database`), but the
write-ahead log still holds the pages as they were until it is emptied: after each deletion it is.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

EMPTY_LOG_PRAGMA = "PRAGMA wal_checkpoint(TRUNCATE)"
"""Copies the write-ahead log into the database file and truncates the log to nothing."""


async def empty_write_ahead_log(checkpointer: BaseCheckpointSaver) -> None:
    """With SQLite, empty the write-ahead log after a deletion, so what was deleted is in no file.
    Best effort: a read under way in another connection keeps the log until the next deletion or
    the bot's stop. (PostgreSQL has no such file here.)"""
    if isinstance(checkpointer, AsyncSqliteSaver):
        async with checkpointer.lock:
            await checkpointer.conn.execute(EMPTY_LOG_PRAGMA)
