"""`rubric-bot db`: bring a database to the newest schema, and copy a team's data to another one.

``upgrade`` runs the bot's migrations, langgraph's checkpointer setup and, on PostgreSQL, the job
queue's schema (``serve`` and ``worker`` run it at start too). ``copy`` moves everything a team has
(threads with their checkpoints, so a copied conversation continues with its history and rubric,
channel rubrics and settings, runs, evaluations, reviews) into an empty database, typically from
the SQLite default to PostgreSQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.database import Database, open_checkpointer
from bot.db.schema import metadata
from bot.db.store import Store
from bot.threads.jobs import apply_schema as apply_queue_schema

CHECKPOINT_SETUP_LOCK_KEY = 0x7275_6272_6964
"""PostgreSQL advisory lock held while the checkpointer creates or migrates its tables: its setup
is not safe to run twice at once, and several processes may start together."""

COPY_BATCH_ROWS = 500
"""Rows read and written at a time when copying a table, bounding memory on large histories."""


class CopyError(Exception):
    """`db copy` cannot start: the same database twice, or a target that already holds data."""


@dataclass
class CopyReport:
    """What `db copy` moved: rows per table of the bot's, then threads and checkpoints."""

    rows: dict[str, int] = field(default_factory=dict)
    threads: int = 0
    checkpoints: int = 0


async def upgrade(database: Database) -> None:
    """Bring the bot's tables, the checkpointer's and (on PostgreSQL) the job queue's to their newest
    versions (a no-op when they are)."""
    store = await Store.open(database)  # opening for writing migrates
    await store.close()
    async with open_checkpointer(database) as checkpointer, _setup_lock(database):
        await checkpointer.setup()
    if database.is_postgres:
        await apply_queue_schema(database.conninfo)


@asynccontextmanager
async def _setup_lock(database: Database) -> AsyncIterator[None]:
    if not database.is_postgres:
        yield  # SQLite serves one process
        return
    async with await psycopg.AsyncConnection.connect(database.conninfo, autocommit=True) as connection:
        await connection.execute("SELECT pg_advisory_lock(%s)", (CHECKPOINT_SETUP_LOCK_KEY,))
        yield  # closing the connection releases the lock


async def copy(source: Database, target: Database) -> CopyReport:
    """Copy every row of the bot's tables and every checkpoint from ``source`` into empty ``target``.

    Both are upgraded to the newest schema first. The bot's tables are copied in one transaction;
    if the checkpoints then fail to copy, the target holds part of the data: empty it and copy again.
    """
    if str(source) == str(target):
        raise CopyError("--from and --to name the same database")
    await upgrade(source)
    await upgrade(target)
    report = CopyReport()
    async with open_checkpointer(source) as read_from, open_checkpointer(target) as write_to:
        await _refuse_nonempty(target, write_to)
        report.rows = await _copy_tables(source, target)
        report.threads, report.checkpoints = await _copy_checkpoints(read_from, write_to)
    return report


async def _refuse_nonempty(target: Database, checkpointer: BaseCheckpointSaver) -> None:
    engine = target.create_engine(read_only=True)
    try:
        async with engine.connect() as connection:
            for table in metadata.sorted_tables:
                if count := await connection.scalar(select(func.count()).select_from(table)):
                    raise CopyError(
                        f"{target} is not empty ({table.name} has {count} rows); copy needs an empty one"
                    )
    finally:
        await engine.dispose()
    if [checkpoint async for checkpoint in checkpointer.alist(None, limit=1)]:
        raise CopyError(f"{target} already holds conversations (checkpoints); copy needs an empty one")


async def _copy_tables(source: Database, target: Database) -> dict[str, int]:
    reader, writer = source.create_engine(read_only=True), target.create_engine()
    counts: dict[str, int] = {}
    try:
        async with reader.connect() as read, writer.begin() as write:
            for table in metadata.sorted_tables:  # parents before the rows that refer to them
                counts[table.name] = 0
                result = await read.stream(select(table))
                async for batch in result.mappings().partitions(COPY_BATCH_ROWS):
                    await write.execute(insert(table), [dict(row) for row in batch])
                    counts[table.name] += len(batch)
            await _continue_run_ids(write)
    finally:
        await reader.dispose()
        await writer.dispose()
    return counts


async def _continue_run_ids(connection: AsyncConnection) -> None:
    """Make PostgreSQL number new runs after the copied ones (SQLite always takes the next rowid)."""
    if connection.dialect.name != "postgresql":
        return
    await connection.execute(
        text(
            "SELECT setval(pg_get_serial_sequence('runs', 'run_id'), COALESCE(MAX(run_id), 1), "
            "MAX(run_id) IS NOT NULL) FROM runs"
        )
    )


async def _copy_checkpoints(source: BaseCheckpointSaver, target: BaseCheckpointSaver) -> tuple[int, int]:
    """Put every checkpoint of every thread, pending writes included, into ``target``; the counts."""
    threads: set[str] = set()
    checkpoints = 0
    async for saved in source.alist(None):
        await _put_checkpoint(target, saved)
        threads.add(saved.config["configurable"]["thread_id"])
        checkpoints += 1
    return len(threads), checkpoints


async def _put_checkpoint(target: BaseCheckpointSaver, saved: CheckpointTuple) -> None:
    configurable = saved.config["configurable"]
    # The parent's config carries the parent id, which the saver stores alongside.
    parent = saved.parent_config or {
        "configurable": {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable["checkpoint_ns"],
        }
    }
    # Every channel counts as new, so the target stores every value, not only the last step's.
    config = await target.aput(parent, saved.checkpoint, saved.metadata, saved.checkpoint["channel_versions"])
    writes_by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in saved.pending_writes or ():
        writes_by_task[task_id].append((channel, value))
    for task_id, writes in writes_by_task.items():
        await target.aput_writes(config, writes, task_id)
