"""The bot's own tables (dedupe, threads, channel rubrics and settings, runs, evaluations, reviews,
the posted-message ledger), on SQLite or PostgreSQL: `Store`, composed of one part per aggregate
(each in its module of `bot.db`, owning its statements and the types of its rows) sharing one engine.

The tables are defined in :mod:`bot.db.schema` and migrated by :mod:`bot.db.migrations`; a Store opened
for writing brings them to the newest version first.

Every row holding Slack data belongs to one workspace (`Workspace`: team and Enterprise Grid org),
and every method reading or changing such rows takes the workspace (or a `ThreadKey`, which carries
it) and filters by it: workspaces sharing a database never see each other's rows, even where their
channel ids collide. Only the terminal's report may pass None to read across workspaces.

Every method is one transaction on a pooled connection, so several processes may share one database:

- a dedupe claim is one INSERT of unique keys, which only one process can win;
- channel rubrics and settings are upserts: the last writer wins and no write is half-applied;
- a rubric change numbers its version under a lock of the channel (a PostgreSQL advisory lock for
  the transaction; SQLite's write lock), so concurrent writers cannot both take the same number;
- a run's admission adds to the day's spend counters of every level in one upsert that returns
  them (`bot.db.spend`), so concurrent admissions cannot both squeeze under a limit; on PostgreSQL
  it commits on its own, holding the counter rows for that statement only, and is given back if
  the claim's transaction fails;
- a replay holds a lock of its channel while it runs: a PostgreSQL advisory lock on a connection of
  its own, released by the database if the process dies (SQLite serves one process: a lock of this
  Store);
- a review save locks the reviewed iteration (``SELECT … FOR UPDATE`` of its evaluation row on
  PostgreSQL, the write lock on SQLite), and so does a tally read for refreshing its message
  (see `bot.db.reviews.ReviewStore.locked_reviews`), so they take turns across processes.

Transactions that span aggregates (a request's admission, a run's start and end) are composed in
`bot.db.transactions`.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.db import migrations
from bot.db.claims import ClaimStore
from bot.db.database import (
    STORE_POOL_SIZE,
    WRITE_LOCK_OPTION,
    Database,
    DatabaseError,
    fill_pool,
    schema_lock,
)
from bot.db.erasure import ErasureStore
from bot.db.evaluations import EvaluationStore
from bot.db.feedback import FeedbackStore
from bot.db.ledger import LedgerStore
from bot.db.material import MaterialStore
from bot.db.message_changes import MessageChangeStore
from bot.db.proposals import ProposalStore
from bot.db.replays import ReplayStore
from bot.db.review_modes import ReviewModeStore
from bot.db.reviews import ReviewStore
from bot.db.rubrics import RubricStore
from bot.db.runs import RunStore
from bot.db.schema import daily_spend, metadata
from bot.db.shadow import ShadowStore
from bot.db.threads import ThreadStore
from bot.db.transactions import RunTransactions
from bot.db.trust import TrustStore
from bot.db.uploads import UploadStore
from bot.db.usage import UsageStore
from bot.db.workspace_settings import WorkspaceSettingsStore


class Store(
    ClaimStore,
    ThreadStore,
    RubricStore,
    ReplayStore,
    ProposalStore,
    RunStore,
    RunTransactions,
    UsageStore,
    MaterialStore,
    LedgerStore,
    EvaluationStore,
    ReviewStore,
    ReviewModeStore,
    FeedbackStore,
    MessageChangeStore,
    ErasureStore,
    UploadStore,
    WorkspaceSettingsStore,
    TrustStore,
    ShadowStore,
):
    """The bot's tables on one database, every aggregate's reads and writes; build it with :meth:`open`."""

    @classmethod
    async def open(
        cls,
        database: str | Database,
        *,
        read_only: bool = False,
        upgraded: bool = False,
        pool_size: int = STORE_POOL_SIZE,
    ) -> Store:
        """Open a SQLite path or ``postgresql://`` URL, migrating its tables to the newest schema
        unless the caller has just `upgraded` it (`bot.db.admin.upgrade`: a second check would cost
        another lock and Alembic round for nothing). On PostgreSQL the tables keep `pool_size`
        connections, and the spend counters as many of their own, at most `SPEND_POOL_SIZE`.

        ``read_only`` changes nothing, not even the schema: SQLite opens the file with
        ``mode=ro`` (`DatabaseError` if there is none), PostgreSQL makes every transaction read-only.
        """
        if isinstance(database, str):
            database = Database.parse(database)
        if read_only and not database.is_postgres and not database.sqlite_path.is_file():
            raise DatabaseError(f"no database at {database}")
        engine = database.create_engine(read_only=read_only, pool_size=pool_size)
        try:
            if not (read_only or upgraded):
                async with schema_lock(database):
                    await migrate(engine)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, database)

    @property
    def database(self) -> Database:
        """The database the tables live in."""
        return self._database

    async def close(self) -> None:
        """Close every connection; the Store cannot be used afterwards."""
        await self._close_claims()
        await self._close_sqlite_thread()
        await self._close_counters()
        await self._close_replay_locks()
        await self._engine.dispose()

    async def fill_pools(self) -> None:
        """PostgreSQL: open the connections the tables' and the spend counters' pools keep, each
        having looked at the tables it serves (see `bot.db.database.fill_pool`); SQLite opens its
        file when it is first used."""
        if self._postgres:
            await fill_pool(self._engine, list(metadata.tables.values()))
            await fill_pool(self._counters_engine(), [daily_spend])

    async def ping(self) -> None:
        """Run a trivial query (for readiness); raises what the database or its driver raises."""
        await self._scalar(select(1))


async def migrate(engine: AsyncEngine) -> list[str]:
    """Bring the bot's tables to the newest schema in one transaction; the revisions applied.

    The caller holds `bot.db.database.schema_lock`, so processes starting together migrate one by one.
    """
    async with engine.execution_options(**{WRITE_LOCK_OPTION: True}).begin() as connection:
        if connection.dialect.name == "postgresql":  # a migration of a large table takes its time
            await connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
        return await connection.run_sync(migrations.upgrade)
