"""`rubric-bot db`: bring a database to the newest schema, and copy a team's data to another one.

``upgrade`` runs the bot's migrations, langgraph's checkpointer setup and, on PostgreSQL, the job
queue's schema, all under one lock so that any number of processes may start at once (``serve``
and ``worker`` run it at start too), and says what it applied. ``copy`` moves everything a team has
(threads with their checkpoints, so a copied conversation continues with its history and rubric,
channel rubrics and settings, runs, evaluations, reviews) into an empty database, typically from
the SQLite default to PostgreSQL.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.database import Checkpointer, Database, open_checkpointer, schema_lock
from bot.db.queue_schema import apply_schema as apply_queue_schema
from bot.db.schema import metadata
from bot.db.store import migrate

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


@dataclass(frozen=True)
class UpgradeReport:
    """What `upgrade` applied; all empty when the database was up to date."""

    tables: list[str]
    """The bot's migrations (Alembic revisions) applied, oldest first."""
    checkpoint_migrations: int
    """The checkpointer's migrations applied (on SQLite, whose saver keeps no versions: 1 when it
    created its tables)."""
    queue_schema: bool
    """Whether the job queue's schema was created (PostgreSQL)."""

    @property
    def changed(self) -> bool:
        """Whether anything was applied."""
        return bool(self.tables or self.checkpoint_migrations or self.queue_schema)

    def __str__(self) -> str:
        """E.g. ``applied the bot's migrations 0001, 0002; 10 checkpoint migration(s); the job
        queue's schema``, or ``up to date``."""
        parts = []
        if self.tables:
            parts.append(f"the bot's migrations {', '.join(self.tables)}")
        if self.checkpoint_migrations:
            parts.append(f"{self.checkpoint_migrations} checkpoint migration(s)")
        if self.queue_schema:
            parts.append("the job queue's schema")
        return f"applied {'; '.join(parts)}" if parts else "up to date"


async def upgrade(database: Database) -> UpgradeReport:
    """Bring the bot's tables, the checkpointer's and (on PostgreSQL) the job queue's to their newest
    versions (a no-op when they are), one process at a time; what was applied."""
    async with schema_lock(database):
        engine = database.create_engine()
        try:
            tables = await migrate(engine)
        finally:
            await engine.dispose()
        async with open_checkpointer(database) as checkpointer:
            before = await _checkpoint_version(checkpointer)
            await checkpointer.setup()
            checkpoint_migrations = await _checkpoint_version(checkpointer) - before
        queue_schema = database.is_postgres and await apply_queue_schema(database.conninfo)
    return UpgradeReport(tables, checkpoint_migrations, queue_schema)


async def _checkpoint_version(checkpointer: Checkpointer) -> int:
    """How many of its migrations the checkpointer has applied (SQLite: 1 once its tables exist)."""
    if isinstance(checkpointer, AsyncPostgresSaver):
        pool = checkpointer.conn
        assert isinstance(pool, AsyncConnectionPool)  # as open_checkpointer opens it
        async with pool.connection() as connection:
            found = await (
                await connection.execute("SELECT to_regclass('checkpoint_migrations') AS t")
            ).fetchone()
            if not found or found["t"] is None:
                return 0
            applied = await (
                await connection.execute("SELECT count(*) AS n FROM checkpoint_migrations")
            ).fetchone()
        return int(applied["n"]) if applied else 0
    tables = await checkpointer.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'checkpoints'")
    created = await tables.fetchone()
    return int(created[0]) if created else 0


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
