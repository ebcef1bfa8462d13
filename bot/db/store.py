"""The bot's own tables (dedupe, threads, channel rubrics and settings, runs, evaluations, reviews,
the posted-message ledger), on SQLite or PostgreSQL.

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
  (see :meth:`Store.locked_reviews`), so they take turns across processes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, cast
from weakref import WeakValueDictionary

from sqlalchemy import (
    Select,
    Update,
    and_,
    bindparam,
    delete,
    exists,
    false,
    func,
    insert,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.db import audits as audits_db
from bot.db import calibration, migrations
from bot.db.database import SPEND_POOL_SIZE, WRITE_LOCK_OPTION, Database, DatabaseError, schema_lock
from bot.db.schema import (
    FINAL_STEP,
    STREAM_STEP,
    audits,
    calibration_drops,
    channel_replays,
    channel_rubric_versions,
    channel_rubrics,
    channel_settings,
    claims,
    evaluations,
    message_changes,
    posted,
    reviews,
    runs,
    threads,
    workspace_settings,
)
from bot.db.spend import (
    LevelSpend,
    RunQuota,
    SpendCounter,
    Spender,
    SpendLevel,
    admit,
    charge,
    counters_of,
    spent,
)
from bot.material.files import Unread
from bot.provenance.record import EvaluationProvenance, read_provenance, rubric_version
from bot.threads.conversation import MessageChange, ThreadKey
from bot.workspaces.workspace import NO_ENTERPRISE, Organization, Tenant, Workspace
from grading import RubricEvaluation, Status

if TYPE_CHECKING:
    from bot.limits.prices import RunCost

RunStatus = Status | Literal["interrupted", "answered", "timed_out", "error"]
"""How a run ended (`runs.status`): its grading's final status, or one of the bot's own below."""

INTERRUPTED: Final = "interrupted"
"""Run status of a run stopped before it finished (shutdown, or found after a crash)."""

ANSWERED: Final = "answered"
"""Run status of a run answered without a rubric (nothing was graded)."""

TIMED_OUT: Final = "timed_out"
"""Run status of a run ended because a model call or the whole run took longer than allowed."""

FAILED: Final = "error"
"""Run status of a run ended by any other failure of the models or the agent."""

Verdict = Literal["pass", "fail", "cannot_tell", "1", "2", "3", "4", "5"]
"""A verdict on one criterion, the grader's or a reviewer's: pass/fail for a criterion of a list
rubric, the score (as text) for a dimension of a scored rubric; the grader's may be cannot_tell
(it abstained), a reviewer's never is."""

Step = int | Literal["final", "stream"]
"""What a posted message belongs to: a grader iteration's number, the run's final messages, or
its streamed plan."""


@dataclass(frozen=True)
class UsageRow:
    """Runs one requester started in one channel on one UTC day, and the tokens they used."""

    day: date
    channel: str
    requester: str
    """The Slack user who asked; "" for runs from before requesters were kept."""
    requests: int
    tokens: int
    usd: float = 0.0
    """What their priced model calls cost, in US dollars."""
    unpriced: int = 0
    """Of the runs, how many used a model the price table does not know (their cost is partial)."""
    workspace: str = ""
    """The Slack workspace (team id) of the channel."""


@dataclass(frozen=True)
class RubricVersion:
    """One change of a channel's default rubric."""

    version: int
    rubric_text: str | None
    """The rubric set; None where the change cleared it."""
    set_by: str
    created_at: datetime


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


@dataclass(frozen=True)
class RunRecord:
    """One request the bot started answering."""

    run_id: int
    thread_id: str
    team: str
    channel: str
    thread_ts: str
    request_ts: str
    status: RunStatus | None
    undelivered: bool
    """Whether the run's closing message never reached the thread."""
    started_at: datetime
    finished_at: datetime | None
    enterprise: str = NO_ENTERPRISE

    @property
    def thread(self) -> ThreadKey:
        """The thread the run answered in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)


@dataclass
class RunLease:
    """An attempt's hold on a run (see `Store.take_run`), for `Store.start_attempt`: ``key`` is
    taken from whoever held the run while ``taking`` (until an attempt started with it), then
    checked to be still the run's."""

    key: str
    taking: bool = True


def new_lease() -> str:
    """A lease no other attempt has."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class RunMaterial:
    """What a run's request shared, as the run read it: recorded when the run starts."""

    thread_messages: int
    """Earlier thread messages the worker got."""
    files_read: Sequence[str]
    files_unread: Sequence[Unread]
    """Files (and threads Slack refused to list) that were not read, with why."""


@dataclass(frozen=True)
class AttemptStart:
    """What an attempt at a run learns as it starts (see `Store.start_attempt`), from one transaction."""

    interrupted: list[RunRecord]
    """The thread's interrupted runs nobody had reported, now marked reported: the attempt tells them."""
    unread: tuple[Unread, ...]
    """What the request shared that was not read."""
    channel_rubric: str | None
    """The channel's default rubric (None if it has none, or it was not asked for)."""
    settings: WorkspaceSettingsRow | None = None
    """What the workspace's admins set (None if they never did, or it was not asked for)."""
    holds_run: bool = True
    """False if the lease the attempt held was taken over by another attempt (nothing recorded)."""


@dataclass(frozen=True)
class MaterialTally:
    """How much of what people shared with their requests the runs read."""

    runs: int
    """Runs whose request shared anything (earlier thread messages or files)."""
    thread_messages: int
    """Earlier thread messages the worker got, over those runs."""
    files_read: int
    files_unread: int
    """Files (and threads Slack refused to list) that were not read."""


@dataclass(frozen=True)
class CostTally:
    """What the finished runs cost (see `bot.limits.prices`)."""

    runs: int
    """Finished runs with a recorded cost."""
    satisfied: int
    """Of them, those that ended with the rubric satisfied."""
    usd: float
    """US dollars of their priced model calls."""
    grader_usd: float
    """The grader's part of `usd`."""
    unpriced: int
    """Runs that used a model the price table does not know (their cost is partial)."""


EVALUATION_DEFAULTS: dict[str, Any] = {"unmatched": [], "grader_calls": 0}
"""Values of the evaluation keys that grading added after the bot began storing evaluations:
an evaluation stored before them reads as if the grader flagged nothing and made no count."""


@dataclass(frozen=True)
class EvaluationRecord:
    """An evaluation message the bot posted, with what it graded against."""

    grading_run_id: str
    iteration: int
    team: str
    channel: str
    thread_ts: str
    message_ts: str
    evaluation: RubricEvaluation
    rubric_text: str
    created_at: datetime
    enterprise: str = NO_ENTERPRISE
    provenance: EvaluationProvenance | None = None
    """What produced the evaluation (see `bot.provenance.record`); every field UNKNOWN when stored
    before provenance was kept."""

    @property
    def thread(self) -> ThreadKey:
        """The thread the evaluation message is in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)


@dataclass(frozen=True)
class ReviewVerdict:
    """A reviewer's verdict on one criterion, beside the grader's."""

    criterion: str
    grader_verdict: Verdict
    reviewer_verdict: Verdict
    comment: str = ""


@dataclass(frozen=True)
class ReviewRow:
    """One stored review of one criterion of one iteration by one reviewer."""

    team: str
    channel: str
    thread_ts: str
    grading_run_id: str
    iteration: int
    criterion: str
    grader_verdict: Verdict
    reviewer_verdict: Verdict
    comment: str
    reviewer: str
    created_at: datetime
    enterprise: str = NO_ENTERPRISE
    review_id: int = 0
    """The review's number (0 before it is stored); a calibration example's id."""
    editor: bool = False
    """Whether the reviewer could change the channel's grading when they reviewed."""

    @property
    def thread(self) -> ThreadKey:
        """The thread the reviewed evaluation message is in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)

    @property
    def disagrees(self) -> bool:
        """Whether the reviewer's verdict differs from the grader's."""
        return self.reviewer_verdict != self.grader_verdict


ChangeKind = Literal["forget", "revise"]
"""What a kept message change asks: a deleted message forgotten, or an edited one's stored copy revised."""


@dataclass(frozen=True)
class PendingChange:
    """A deletion or edit kept until it is applied (see `Store.record_change`)."""

    change_id: int
    kind: ChangeKind
    change: MessageChange


@dataclass(frozen=True)
class PostedEvaluation:
    """The evaluation a thread message shows, recorded with the message's ledger entry (for reviews)."""

    thread: ThreadKey
    evaluation: RubricEvaluation
    rubric_text: str
    """The rubric the evaluation graded against."""
    provenance: EvaluationProvenance | None = None
    """What produced the evaluation, stored with it."""


@dataclass(frozen=True)
class PostedPart:
    """A part of a run's step that Slack took, as the ledger records it."""

    step: Step
    part: int
    message_ts: str


@dataclass(frozen=True)
class PostedMessage:
    """A thread message a run posted: which step and part of it, and its Slack ts."""

    run_id: int
    step: Step
    part: int
    message_ts: str
    posted_at: datetime


EXPORT_BATCH = 500
"""Evaluations read per query when they are walked in order (`Store.evaluation_records`)."""

ERASE_BATCH = 200
"""Threads deleted per transaction: bounds the statement size (SQLite caps bound parameters) and how
long the write lock is held, on databases with many threads to delete."""

_THREAD_KEY_COLUMNS = [threads.c[name] for name in ThreadKey.__dataclass_fields__]
"""The columns read into a ThreadKey (every table of a thread's rows has them by these names)."""

_RUN_COLUMNS = [runs.c[name] for name in RunRecord.__dataclass_fields__]
"""The runs columns read into a RunRecord."""

_EVALUATION_COLUMNS = [evaluations.c[name] for name in EvaluationRecord.__dataclass_fields__]
"""The evaluations columns read into an EvaluationRecord."""

_REVIEW_COLUMNS = [reviews.c[name] for name in ReviewRow.__dataclass_fields__]
"""The reviews columns read into a ReviewRow."""

_VERSION_COLUMNS = [channel_rubric_versions.c[name] for name in RubricVersion.__dataclass_fields__]
"""The channel_rubric_versions columns read into a RubricVersion."""


Spending = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
"""Opens the connection a claim updates the spend counters on (see `Store._spending`)."""


class Claim:
    """The open transaction of a message just claimed (see `Store.claiming`): what it records
    commits with the claim."""

    def __init__(self, connection: AsyncConnection, spending: Spending) -> None:
        self._connection = connection
        self._spending = spending
        self._upsert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
        self.admitted: list[tuple[Spender, int]] = []
        """The runs admitted in this transaction: who spends, and the tokens reserved (for giving
        them back where the counters are not in the transaction and it fails)."""

    async def add_thread(self, thread: ThreadKey) -> None:
        """Remember that the bot takes part in this thread, and that it is active now."""
        now = _now()
        statement = self._upsert(threads).values(**_thread_columns(thread), created_at=now, last_activity=now)
        statement = statement.on_conflict_do_update(
            index_elements=["enterprise", "team", "channel", "thread_ts"], set_={"last_activity": now}
        )
        await self._connection.execute(statement)

    async def start_run(
        self,
        thread: ThreadKey,
        request_ts: str,
        *,
        requester: str | None = None,
        quota: RunQuota | None = None,
    ) -> int:
        """Record that the request ``request_ts`` in the thread, from `requester`, started running;
        its run id.

        With a `quota`, the run is only started within it (see `bot.db.spend.admit`): its
        requester, channel, workspace and the deployment are charged a request and
        ``quota.estimate`` tokens, or `QuotaExceeded` is raised (recording nothing) if one of them
        had already reached a cap.
        """
        charged = 0
        if quota is not None:
            spender = Spender(quota.day, thread.workspace, thread.channel, requester)
            async with self._spending() as connection:
                await admit(connection, spender, quota)
            charged = quota.estimate
            self.admitted.append((spender, charged))
        row = {
            "thread_id": thread.thread_id,
            **_thread_columns(thread),
            "request_ts": request_ts,
            "requester": requester,
            "started_at": _now(),
            "charged_tokens": charged,
        }
        result = await self._connection.execute(insert(runs).values(row).returning(runs.c.run_id))
        return int(result.scalar_one())

    async def workspace_settings(self, workspace: Workspace) -> WorkspaceSettingsRow | None:
        """What the workspace's admins set, read in the claim's transaction."""
        return await _workspace_settings(self._connection, workspace)

    async def driver_connection(self) -> Any:
        """The database driver's own connection in this transaction (psycopg's on PostgreSQL), for a
        job queue to insert the claimed message's job in the same transaction."""
        raw = await self._connection.get_raw_connection()
        return raw.driver_connection


@dataclass(frozen=True)
class WorkspaceSettingsRow:
    """What a workspace's admins set over the deployment's defaults (None: the deployment's), and
    who last changed it when."""

    worker_model: str | None
    grader_model: str | None
    daily_requests_per_user: int | None
    daily_tokens_per_channel: int | None
    rubric_editors: tuple[str, ...] | None
    updated_by: str
    updated_at: datetime
    daily_tokens_per_workspace: int | None = None


class Store:
    """The bot's tables on one database; build it with :meth:`open`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_LOCK_OPTION: True})
        self._postgres = engine.dialect.name == "postgresql"
        # A single-statement read needs no transaction around it: on PostgreSQL, autocommit spares
        # the BEGIN and the ROLLBACK (two round trips of three). SQLite reads keep their explicit
        # transaction, see `bot.db.database`.
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT") if self._postgres else engine
        self._upsert = postgresql.insert if self._postgres else sqlite.insert
        self._ledger = self._upsert(posted).on_conflict_do_nothing().returning(posted.c.run_id)
        """Insert a ledger entry (`_ledger_row`) unless that part was recorded before; returns the
        run id if inserted."""
        upsert = self._upsert(evaluations)
        self._evaluation_upsert = upsert.on_conflict_do_update(
            index_elements=["grading_run_id", "iteration"],
            set_={name: upsert.excluded[name] for name in _EVALUATION_REPLACED},
        )
        """Remember an evaluation message (`_evaluation_row`), replacing one of the same iteration."""
        # SQLite serves one process through one connection, its statements in arrival order (as
        # the lock queues them): messages a thread receives back to back reach the runner in
        # that order. PostgreSQL serves many processes and needs no such queue.
        self._turns: AbstractAsyncContextManager[Any] = nullcontext() if self._postgres else asyncio.Lock()
        self._refreshes: WeakValueDictionary[tuple[str, int], asyncio.Lock] = WeakValueDictionary()
        self._replays: dict[tuple[Workspace, str], asyncio.Lock] = {}
        self._replay_locks: AsyncEngine | None = None
        """PostgreSQL: where a replay's lock connection comes from, opened when first needed: no
        pool, so replays running for minutes never hold the connections other queries wait for."""
        self._counters: AsyncEngine | None = None
        """PostgreSQL: the spend counters' own autocommit engine, opened when first needed (see
        `_spending`)."""

    @classmethod
    async def open(
        cls, database: str | Database, *, read_only: bool = False, upgraded: bool = False
    ) -> Store:
        """Open a SQLite path or ``postgresql://`` URL, migrating its tables to the newest schema
        unless the caller has just `upgraded` it (`bot.db.admin.upgrade`: a second check would cost
        another lock and Alembic round for nothing).

        ``read_only`` changes nothing, not even the schema: SQLite opens the file with
        ``mode=ro`` (`DatabaseError` if there is none), PostgreSQL makes every transaction read-only.
        """
        if isinstance(database, str):
            database = Database.parse(database)
        if read_only and not database.is_postgres and not database.sqlite_path.is_file():
            raise DatabaseError(f"no database at {database}")
        engine = database.create_engine(read_only=read_only)
        try:
            if not (read_only or upgraded):
                async with schema_lock(database):
                    await migrate(engine)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine)

    @property
    def database(self) -> Database:
        """The database the tables live in."""
        return Database(self._engine.url)

    async def close(self) -> None:
        """Close every connection; the Store cannot be used afterwards."""
        for extra in (self._counters, self._replay_locks):
            if extra is not None:
                await extra.dispose()
        await self._engine.dispose()

    async def ping(self) -> None:
        """Run a trivial query (for readiness); raises what the database or its driver raises."""
        await self._scalar(select(1))

    # -- dedupe --------------------------------------------------------------------------------

    async def claim(self, *keys: str) -> bool:
        """Record every key at once; False (recording nothing) if any was recorded before."""
        async with self.claiming(*keys) as claimed:
            return claimed is not None

    @asynccontextmanager
    async def claiming(self, *keys: str) -> AsyncIterator[Claim | None]:
        """A transaction that claims every key at once, for the block to record what the claim leads to.

        It yields None, recording nothing, if any key was claimed before. One transaction inserts
        them all, so two deliveries of the same Slack message racing here (even in two processes)
        cannot both win, and a refused claim leaves no key behind. What the block records through
        the `Claim` commits with the keys or not at all: a message is either claimed and queued, or
        neither, and Slack's next delivery of it finds it unclaimed.
        """
        unique = list(dict.fromkeys(keys))
        if not unique:
            raise ValueError("claim needs at least one key")
        now = _now()
        statement = (
            self._upsert(claims)
            .values([{"key": key, "claimed_at": now} for key in unique])
            .on_conflict_do_nothing()
            .returning(claims.c.key)
        )
        claim: Claim | None = None
        connection: AsyncConnection | None = None
        try:
            async with self._turns, self._writer.connect() as connection, connection.begin() as transaction:
                inserted = (await connection.execute(statement)).all()
                if len(inserted) < len(unique):
                    await transaction.rollback()
                    yield None
                    return
                claim = Claim(connection, partial(self._spending, connection))
                yield claim
        except BaseException:
            if claim is not None and connection is not None and self._postgres:
                # Its admissions were committed on their own: give them back.
                async with self._spending(connection) as counters:
                    for spender, reserved in claim.admitted:
                        await charge(counters, spender, -1, -reserved)
            raise

    async def prune_claims(self, older_than_days: int = 7) -> int:
        """Forget claims older than the given days (Slack stops retrying within hours); the count."""
        cutoff = _now() - timedelta(days=older_than_days)
        async with self._write() as connection:
            result = await connection.execute(delete(claims).where(claims.c.claimed_at < cutoff))
        return result.rowcount

    # -- threads ---------------------------------------------------------------------------------

    async def add_thread(self, thread: ThreadKey) -> None:
        """Remember that the bot takes part in this thread, and that it is active now."""
        async with self._write() as connection:
            await Claim(connection, partial(self._spending, connection)).add_thread(thread)

    async def has_thread(self, thread: ThreadKey) -> bool:
        """Whether the bot takes part in this thread."""
        return bool(await self._scalar(_HAS_THREAD, _thread_columns(thread)))

    # -- channel rubrics and settings ------------------------------------------------------------

    async def set_channel_rubric(
        self, workspace: Workspace, channel: str, text: str, user: str
    ) -> RubricVersion:
        """Set (or replace) the channel's default rubric for new conversations; the version recorded."""
        async with self._write() as connection:
            await self._put_channel_row(
                channel_rubrics,
                workspace,
                channel,
                {"rubric_text": text, "set_by": user, "updated_at": _now()},
                connection,
            )
            return await self._add_rubric_version(connection, workspace, channel, text, user)

    async def get_channel_rubric(self, workspace: Workspace, channel: str) -> str | None:
        """The channel's default rubric text, or None."""
        return await self._scalar(_CHANNEL_RUBRIC, _channel_columns(workspace, channel))

    async def clear_channel_rubric(
        self, workspace: Workspace, channel: str, user: str
    ) -> RubricVersion | None:
        """Remove the channel's default rubric; the version recorded, None (recording none) if it had none."""
        table = channel_rubrics
        async with self._write() as connection:
            result = await connection.execute(delete(table).where(*_in_channel(table, workspace, channel)))
            if result.rowcount == 0:
                return None
            return await self._add_rubric_version(connection, workspace, channel, None, user)

    async def rubric_versions(self, workspace: Workspace, channel: str, limit: int) -> list[RubricVersion]:
        """The channel's latest `limit` default-rubric versions, newest first."""
        table = channel_rubric_versions
        query = (
            select(*_VERSION_COLUMNS)
            .where(*_in_channel(table, workspace, channel))
            .order_by(table.c.version.desc())
            .limit(limit)
        )
        return [RubricVersion(**row) for row in await self._rows(query)]

    async def rubric_version(self, workspace: Workspace, channel: str, version: int) -> RubricVersion | None:
        """Version ``version`` of the channel's default rubric, or None if there is no such version."""
        table = channel_rubric_versions
        query = select(*_VERSION_COLUMNS).where(
            *_in_channel(table, workspace, channel), table.c.version == version
        )
        rows = await self._rows(query)
        return RubricVersion(**rows[0]) if rows else None

    async def _add_rubric_version(
        self, connection: AsyncConnection, workspace: Workspace, channel: str, text: str | None, user: str
    ) -> RubricVersion:
        """Record the channel's next rubric version inside the caller's transaction."""
        await _lock(connection, f"rubric-version:{_lock_scope(workspace)}:{channel}")
        table = channel_rubric_versions
        latest = await connection.scalar(
            select(func.max(table.c.version)).where(*_in_channel(table, workspace, channel))
        )
        version = RubricVersion(version=(latest or 0) + 1, rubric_text=text, set_by=user, created_at=_now())
        await connection.execute(
            insert(table).values(**_workspace_columns(workspace), channel=channel, **asdict(version))
        )
        return version

    async def set_calibration(self, workspace: Workspace, channel: str, on: bool) -> None:
        """Switch grader calibration from the team's reviews on or off for the channel."""
        await self._put_channel_row(
            channel_settings, workspace, channel, {"calibration": on, "updated_at": _now()}
        )

    async def calibration_enabled(self, workspace: Workspace, channel: str) -> bool:
        """Whether calibration is on for the channel (on unless switched off)."""
        table = channel_settings
        value = await self._scalar(select(table.c.calibration).where(*_in_channel(table, workspace, channel)))
        return value is None or bool(value)

    async def _put_channel_row(
        self,
        table: Any,
        workspace: Workspace,
        channel: str,
        values: dict[str, Any],
        connection: AsyncConnection | None = None,
    ) -> None:
        """Insert or replace the channel's row in one atomic upsert (within `connection`, if given)."""
        key = {**_workspace_columns(workspace), "channel": channel}
        statement = self._upsert(table).values(**key, **values)
        statement = statement.on_conflict_do_update(
            index_elements=list(key), set_={name: statement.excluded[name] for name in values}
        )
        if connection is not None:
            await connection.execute(statement)
            return
        async with self._write() as own:
            await own.execute(statement)

    # -- replays ---------------------------------------------------------------------------------

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
        key = {"key": f"replay:{_lock_scope(workspace)}:{channel}"}
        if self._replay_locks is None:  # a connection of its own, not the pool's, for the whole replay
            self._replay_locks = self.database.create_engine(pool_size=None)
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
                select(table.c.started_by, table.c.started_at).where(*_in_channel(table, workspace, channel))
            )
        ).first()
        now = _now()
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
            await connection.execute(delete(table).where(*_in_channel(table, workspace, channel)))
        else:
            await self._put_channel_row(table, workspace, channel, previous._asdict(), connection)

    async def _replay_starter(self, workspace: Workspace, channel: str) -> str | None:
        table = channel_replays
        return await self._scalar(select(table.c.started_by).where(*_in_channel(table, workspace, channel)))

    # -- runs ------------------------------------------------------------------------------------

    async def start_run(
        self,
        thread: ThreadKey,
        request_ts: str,
        *,
        requester: str | None = None,
        quota: RunQuota | None = None,
    ) -> int:
        """Record that the request ``request_ts`` in the thread started running; its run id (see
        `Claim.start_run` for `requester` and `quota`)."""
        async with self._write() as connection:
            claim = Claim(connection, partial(self._spending, connection))
            return await claim.start_run(thread, request_ts, requester=requester, quota=quota)

    async def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        tokens: int | None = None,
        posted: Sequence[PostedPart] = (),
        cost: RunCost | None = None,
    ) -> None:
        """Record that a run ended with ``status``, having used ``tokens`` (worker plus grader) at
        ``cost`` if known; and, in the same transaction, its closing messages in the thread not
        recorded yet (`posted`; see `record_posted`)."""
        values: dict[str, Any] = {"status": status, "finished_at": _now()}
        if tokens is not None:
            values["tokens"] = values["charged_tokens"] = tokens
        if cost is not None:
            values |= {
                "cost_usd": cost.usd,
                "grader_cost_usd": cost.role_usd("grader"),
                "cost_unpriced": bool(cost.unpriced),
                "token_usage": cost.model_dump(mode="json")["roles"],
            }
        async with self._write() as connection:
            for part in posted:
                await connection.execute(
                    self._ledger, _ledger_row(run_id, part.step, part.part, part.message_ts)
                )
            if tokens is not None:  # the reservation gives way to what the run used
                usd = cost.usd if cost is not None else None
                await self._recharge(connection, run_id, requests=0, tokens=tokens, usd=usd)
            await connection.execute(_RUN_UPDATE, {"of_run": run_id, **values})

    async def _recharge(
        self,
        connection: AsyncConnection,
        run_id: int,
        *,
        requests: int,
        tokens: int,
        usd: float | None = None,
        more: bool = False,
    ) -> None:
        """Change what the run added to its day's spend counters to `tokens` (`more`: by `tokens`
        more: an audit's) and, when given, `usd` (and `requests` more requests), in the transaction
        of `connection` where the counters are in it. Money is what the run's recorded cost says it
        added, so recording it again adds nothing."""
        row = (await connection.execute(_RUN_SPENDER, {"of_run": run_id})).first()
        if row is None:
            return
        spender = Spender(
            day=row.started_at.astimezone(UTC).date(),
            workspace=Workspace(row.team, row.enterprise),
            channel=row.channel,
            requester=row.requester,
        )
        async with self._spending(connection) as counters:
            money = 0.0 if usd is None else usd - (row.cost_usd or 0.0)
            added = tokens if more else tokens - row.charged_tokens
            await charge(counters, spender, requests, added, money)

    async def spent_today(self, spender: Spender) -> dict[SpendLevel, LevelSpend]:
        """What the spender's levels spent on its day, reservations of unfinished runs included."""
        async with self._turns, self._reader.connect() as connection:
            return await spent(connection, spender)

    async def counters_of(self, day: date) -> list[SpendCounter]:
        """Every spend counter of a UTC day, of every workspace (for the terminal's usage)."""
        async with self._turns, self._reader.connect() as connection:
            return await counters_of(connection, day)

    async def charge_replay(self, workspace: Workspace, channel: str, tokens: int) -> None:
        """Count a replay's grader `tokens` against today's budgets of its channel, its workspace and
        the deployment (no person's: a replay is not a request)."""
        spender = Spender(_now().date(), workspace, channel)
        async with self._write() as connection, self._spending(connection) as counters:
            await charge(counters, spender, 0, tokens)

    async def usage(
        self, workspace: Workspace | None, channel: str | None, since: datetime
    ) -> list[UsageRow]:
        """Runs started from ``since`` on, their tokens and cost, per UTC day, workspace, channel and
        requester (oldest day first); ``None`` for ``workspace`` or ``channel`` matches every one."""
        day = self._utc_day(runs.c.started_at)
        requester = func.coalesce(runs.c.requester, "")
        query = (
            select(
                day.label("day"),
                runs.c.team,
                runs.c.channel,
                requester.label("requester"),
                func.count().label("requests"),
                func.coalesce(func.sum(runs.c.tokens), 0).label("tokens"),
                func.coalesce(func.sum(runs.c.cost_usd), 0).label("usd"),
                func.count().filter(runs.c.cost_unpriced).label("unpriced"),
            )
            .where(*_scope(runs, workspace, channel, since, runs.c.started_at))
            .group_by(day, runs.c.team, runs.c.channel, requester)
            .order_by(day, runs.c.team, runs.c.channel, requester)
        )
        return [
            UsageRow(
                day=date.fromisoformat(row["day"]),
                channel=row["channel"],
                requester=row["requester"],
                requests=int(row["requests"]),
                tokens=int(row["tokens"]),
                usd=float(row["usd"]),
                unpriced=int(row["unpriced"]),
                workspace=row["team"],
            )
            for row in await self._rows(query)
        ]

    def _utc_day(self, moment: Any) -> Any:
        """The UTC calendar day of a timestamp column, as ``YYYY-MM-DD`` text, in SQL."""
        if self._postgres:
            return func.to_char(func.timezone("UTC", moment), "YYYY-MM-DD")
        return func.substr(moment, 1, 10)  # SQLite keeps ISO-8601 UTC text

    async def mark_interrupted(self, run_id: int) -> None:
        """Record that a run was stopped before finishing; it is reported until acknowledged."""
        await self.finish_run(run_id, INTERRUPTED)

    async def acknowledge_interrupted(self, run_id: int) -> None:
        """Mark an interrupted run as reported (and as interrupted, if it never finished)."""
        async with self._write() as connection:
            statement = _interrupted_and_reported(update(runs).where(runs.c.run_id == run_id))
            await connection.execute(statement, {"reported_at": _now()})

    async def claim_abandoned_runs(self, started_before: datetime) -> list[RunRecord]:
        """Take the unreported runs an earlier process left behind, marking them interrupted and reported.

        Those are runs that never finished and started before ``started_before`` (this process's
        start), and interrupted runs whose thread was not told. One UPDATE … RETURNING claims them,
        so processes starting together each get different runs and every run is reported once.
        """
        async with self._write() as connection:
            claiming = _claiming_interrupted(
                (runs.c.finished_at.is_(None) & (runs.c.started_at < started_before))
                | (runs.c.status == INTERRUPTED)
            )
            return await _claim_interrupted(connection, claiming)

    async def claim_interrupted_runs(self, thread: ThreadKey) -> list[RunRecord]:
        """Take the thread's interrupted runs nobody has reported yet, marking them reported."""
        async with self._write() as connection:
            return await _claim_interrupted(connection, _CLAIM_INTERRUPTED_IN_THREAD, _run_thread(thread))

    async def start_attempt(
        self,
        run_id: int,
        thread: ThreadKey,
        material: RunMaterial | None,
        *,
        channel_rubric: bool,
        lease: RunLease | None = None,
        settings: bool = False,
    ) -> AttemptStart:
        """Everything an attempt at a run records and reads as it starts, in one transaction: it
        takes or checks its `lease` on the run (see `take_run`), claims the thread's unreported
        interrupted runs (see `claim_interrupted_runs`), records the request's `material` (a first
        attempt read it) or reads back what an earlier attempt recorded as unread (None), reads the
        channel's default rubric if `channel_rubric` and the workspace's settings if `settings`.

        An attempt whose lease was taken over records nothing and learns only that
        (``holds_run`` False); once one started with it, the lease is checked, no longer taken.
        """
        async with self._write() as connection:
            if lease is not None and not await _hold(connection, run_id, lease):
                return AttemptStart([], (), None, holds_run=False)
            interrupted = await _claim_interrupted(
                connection, _CLAIM_INTERRUPTED_IN_THREAD, _run_thread(thread)
            )
            if material is None:
                unread = _unread(await connection.scalar(_unread_query(run_id)))
            else:
                await connection.execute(_RUN_UPDATE, _material_values(run_id, material))
                unread = tuple(material.files_unread)
            rubric = (
                await connection.scalar(_CHANNEL_RUBRIC, _channel_columns(thread.workspace, thread.channel))
                if channel_rubric
                else None
            )
            stored = await _workspace_settings(connection, thread.workspace) if settings else None
        if lease is not None:
            lease.taking = False  # taken for good: later attempts check it
        return AttemptStart(interrupted, unread, rubric, stored)

    async def release_interrupted(self, run_id: int) -> None:
        """Undo a claim whose report could not be posted, so that a later attempt reports the run."""
        async with self._write() as connection:
            await connection.execute(update(runs).where(runs.c.run_id == run_id).values(acknowledged=False))

    async def take_run(self, run_id: int) -> str:
        """Make the calling attempt the only one that may post the run's messages; its lease.

        A process taking over a run whose process seemed dead (a job re-queued by the queue) takes
        the lease from it: if that process was only cut off from the database, it finds out with
        `holds_run` before its next post and leaves the thread to the new holder.
        """
        lease = new_lease()
        async with self._write() as connection:
            await _hold(connection, run_id, RunLease(lease))
        return lease

    async def holds_run(self, run_id: int, lease: str) -> bool:
        """Whether `lease` (from `take_run`) is still the run's: no other attempt has taken it over."""
        return bool(await self._scalar(_HOLDS_RUN, {"run_id": run_id, "lease": lease}))

    async def mark_undelivered(self, run_id: int) -> None:
        """Record that the run's closing message could not be posted in its thread."""
        async with self._write() as connection:
            await connection.execute(update(runs).where(runs.c.run_id == run_id).values(undelivered=True))

    async def record_material(
        self, run_id: int, thread_messages: int, files_read: Sequence[str], files_unread: Sequence[Unread]
    ) -> None:
        """Record what the run's request shared that was read (and what was not, with why)."""
        material = RunMaterial(thread_messages, files_read, files_unread)
        async with self._write() as connection:
            await connection.execute(_RUN_UPDATE, _material_values(run_id, material))

    async def unread_material(self, run_id: int) -> tuple[Unread, ...]:
        """What the run's request shared that was not read (none before the run read it)."""
        return _unread(await self._scalar(_unread_query(run_id)))

    async def material_tally(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> MaterialTally:
        """How much shared material the runs read (from ``since`` on; None filters match all)."""
        query = select(runs.c.thread_messages, runs.c.files_read, runs.c.files_unread).where(
            runs.c.thread_messages.is_not(None), *_scope(runs, workspace, channel, since, runs.c.started_at)
        )
        rows = await self._rows(query)
        with_material = [row for row in rows if row.thread_messages or row.files_read or row.files_unread]
        return MaterialTally(
            runs=len(with_material),
            thread_messages=sum(row.thread_messages for row in with_material),
            files_read=sum(len(row.files_read or []) for row in with_material),
            files_unread=sum(len(row.files_unread or []) for row in with_material),
        )

    async def cost_tally(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> CostTally:
        """What the runs started from ``since`` on cost (None filters match all)."""
        query = select(
            func.count().label("runs"),
            func.count().filter(runs.c.status == "satisfied").label("satisfied"),
            func.coalesce(func.sum(runs.c.cost_usd), 0).label("usd"),
            func.coalesce(func.sum(runs.c.grader_cost_usd), 0).label("grader_usd"),
            func.count().filter(runs.c.cost_unpriced).label("unpriced"),
        ).where(runs.c.cost_usd.is_not(None), *_scope(runs, workspace, channel, since, runs.c.started_at))
        (row,) = await self._rows(query)
        return CostTally(
            runs=int(row["runs"]),
            satisfied=int(row["satisfied"]),
            usd=float(row["usd"]),
            grader_usd=float(row["grader_usd"]),
            unpriced=int(row["unpriced"]),
        )

    async def undelivered_runs(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> list[RunRecord]:
        """Runs whose closing message never reached Slack, oldest first; from ``since`` on if given.

        ``None`` for ``workspace`` or ``channel`` matches every one, as in the other channel queries.
        """
        query = (
            select(*_RUN_COLUMNS)
            .where(runs.c.undelivered.is_(True), *_scope(runs, workspace, channel, since, runs.c.started_at))
            .order_by(runs.c.run_id)
        )
        return [RunRecord(**row) for row in await self._rows(query)]

    async def recent_graded_runs(self, workspace: Workspace, channel: str, limit: int) -> list[RunRecord]:
        """The channel's latest runs, newest first, leaving out those answered without a rubric."""
        query = (
            select(*_RUN_COLUMNS)
            .where(
                *_in_channel(runs, workspace, channel),
                runs.c.status.is_(None) | (runs.c.status != ANSWERED),
            )
            .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
            .limit(limit)
        )
        return [RunRecord(**row) for row in await self._rows(query)]

    # -- the posted-message ledger ---------------------------------------------------------------

    async def record_posted(
        self, run_id: int, step: Step, part: int, message_ts: str, evaluation: PostedEvaluation | None = None
    ) -> bool:
        """Record that part ``part`` of the run's ``step`` is in the thread as ``message_ts`` (with the
        evaluation it shows, if given: one transaction for an iteration's message).

        False (changing nothing) if that part was recorded before: it is already in the thread.
        """
        async with self._write() as connection:
            inserted = (
                await connection.execute(self._ledger, _ledger_row(run_id, step, part, message_ts))
            ).first()
            if inserted is not None and evaluation is not None:
                evaluation = await _versioned(connection, evaluation)
                await connection.execute(self._evaluation_upsert, _evaluation_row(message_ts, evaluation))
        return inserted is not None

    async def posted_messages(self, run_id: int) -> list[PostedMessage]:
        """What the run has posted so far, in the order it was posted."""
        query = select(posted).where(posted.c.run_id == run_id).order_by(posted.c.posted_at, posted.c.part)
        return [
            PostedMessage(
                run_id=row["run_id"],
                step=_step(row["iteration"]),
                part=row["part"],
                message_ts=row["message_ts"],
                posted_at=row["posted_at"],
            )
            for row in await self._rows(query)
        ]

    # -- evaluations -----------------------------------------------------------------------------

    async def save_evaluation(
        self, thread: ThreadKey, message_ts: str, evaluation: RubricEvaluation, rubric_text: str
    ) -> None:
        """Remember an evaluation message posted in the thread, keyed by its grading run id and iteration."""
        row = _evaluation_row(message_ts, PostedEvaluation(thread, evaluation, rubric_text))
        async with self._write() as connection:
            await connection.execute(self._evaluation_upsert, row)

    async def get_evaluation(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> EvaluationRecord | None:
        """An evaluation posted in the workspace, by grading run id and iteration, or None (also when
        the ids name another workspace's: a button's value is the clicker's to forge)."""
        query = select(*_EVALUATION_COLUMNS).where(
            *_in_workspace(evaluations, workspace), _iteration_of(evaluations, grading_run_id, iteration)
        )
        rows = await self._rows(query)
        return _evaluation_record(rows[0]) if rows else None

    async def evaluation_records(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> AsyncIterator[EvaluationRecord]:
        """The evaluations posted in a channel (None: any) from ``since`` on, with their provenance,
        oldest first; read EXPORT_BATCH at a time, so a long history never sits in memory whole and
        the caller may use the store between batches."""
        table = evaluations
        order = (table.c.created_at, table.c.grading_run_id, table.c.iteration)
        query = select(*_EVALUATION_COLUMNS).where(*_scope(table, workspace, channel, since))
        after: tuple[Any, ...] | None = None
        while True:
            batch = query
            if after is not None:
                typed = (
                    bindparam(None, value, type_=column.type)
                    for column, value in zip(order, after, strict=True)
                )
                batch = query.where(tuple_(*order) > tuple_(*typed))
            rows = await self._rows(batch.order_by(*order).limit(EXPORT_BATCH))
            for row in rows:
                yield _evaluation_record(row)
            if len(rows) < EXPORT_BATCH:
                return
            last = rows[-1]
            after = (last["created_at"], last["grading_run_id"], last["iteration"])

    async def evaluations_in_channel(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> list[RubricEvaluation]:
        """The evaluations posted in a channel, oldest first; only those from ``since`` on if given.

        ``None`` for ``workspace`` or ``channel`` matches every one (the terminal report may span them).
        """
        table = evaluations
        query = (
            select(table.c.evaluation)
            .where(*_scope(table, workspace, channel, since))
            .order_by(table.c.created_at, table.c.grading_run_id, table.c.iteration)
        )
        return [_stored_evaluation(row["evaluation"]) for row in await self._rows(query)]

    # -- reviews ---------------------------------------------------------------------------------

    async def save_review(
        self,
        thread: ThreadKey,
        grading_run_id: str,
        iteration: int,
        reviewer: str,
        verdicts: Sequence[ReviewVerdict],
        *,
        editor: bool = False,
    ) -> None:
        """Store a reviewer's verdicts on an iteration, replacing their earlier review of it;
        ``editor``: whether they may change the channel's grading (see `ReviewRow.editor`).

        It waits for a message refresh of the same iteration (see :meth:`locked_reviews`) to end.
        """
        now = _now()
        rows = [
            {
                **_thread_columns(thread),
                "grading_run_id": grading_run_id,
                "iteration": iteration,
                "criterion": verdict.criterion,
                "grader_verdict": verdict.grader_verdict,
                "reviewer_verdict": verdict.reviewer_verdict,
                "comment": verdict.comment,
                "reviewer": reviewer,
                "created_at": now,
                "editor": editor,
            }
            for verdict in verdicts
        ]
        async with self._write() as connection:
            await _lock_iteration(connection, grading_run_id, iteration)
            await connection.execute(
                delete(reviews).where(
                    *_in_workspace(reviews, thread.workspace),
                    _iteration_of(reviews, grading_run_id, iteration),
                    reviews.c.reviewer == reviewer,
                )
            )
            if rows:
                await connection.execute(insert(reviews), rows)

    @asynccontextmanager
    async def locked_reviews(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> AsyncIterator[list[ReviewRow]]:
        """Every review of the workspace's iteration, with the iteration locked until the block ends.

        Other refreshes of the same iteration wait meanwhile, so a refresh that updates the
        iteration's message inside the block is never overtaken by one that read fewer reviews.
        On PostgreSQL the lock is the evaluation row's (``FOR UPDATE``): refreshes and saves in
        every process wait for it. SQLite serves one process, whose refreshes take turns on a lock
        of this Store; holding the file's write lock instead would stall every other write
        (checkpoints included) for as long as the block talks to Slack.
        """
        if not self._postgres:
            async with self._refreshes.setdefault((grading_run_id, iteration), asyncio.Lock()):
                yield await self.reviews_for_iteration(workspace, grading_run_id, iteration)
            return
        async with self._write() as connection:
            await _lock_iteration(connection, grading_run_id, iteration)
            yield await self._reviews_of_iteration(connection, workspace, grading_run_id, iteration)

    async def reviews_for_iteration(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> list[ReviewRow]:
        """Every reviewer's verdicts on one iteration in the workspace, oldest review first."""
        async with self._turns, self._engine.connect() as connection:
            return await self._reviews_of_iteration(connection, workspace, grading_run_id, iteration)

    async def reviews_in_channel(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> list[ReviewRow]:
        """The channel's reviews, oldest first; only those made at or after ``since`` if given.

        ``None`` for ``workspace`` or ``channel`` matches every one (the terminal report may span them).
        """
        query = (
            select(*_REVIEW_COLUMNS)
            .where(*_scope(reviews, workspace, channel, since))
            .order_by(reviews.c.created_at, reviews.c.reviewer, reviews.c.criterion)
        )
        return [ReviewRow(**row) for row in await self._rows(query)]

    async def recent_disagreements(
        self,
        workspace: Workspace,
        channel: str,
        rubric_text: str | None = None,
        limit: int = 5,
        *,
        calibrating_only: bool = False,
        trusted_only: bool = False,
    ) -> list[ReviewRow]:
        """The channel's latest reviews that differ from the grader, newest first.

        With ``rubric_text`` only those of evaluations graded against that exact rubric. With
        ``trusted_only`` only those that may calibrate the grader: an editor's, or one a second
        reviewer agrees with, of a case no editor dropped (`bot.db.calibration`). ``calibrating_only``
        is ``trusted_only`` and none at all if calibration is switched off in the channel: the grader
        reads its examples in one query.
        """
        query = _disagreements_query(
            rubric_text is not None, calibrating_only, trusted_only or calibrating_only
        )
        parameters = {**_channel_columns(workspace, channel), "rubric_text": rubric_text, "limit": limit}
        return [ReviewRow(**row) for row in await self._rows(query, parameters)]

    # -- calibration drops (see bot.db.calibration) ----------------------------------------------

    async def drop_calibration(
        self, workspace: Workspace, channel: str, review_id: int, by: str
    ) -> ReviewRow | None:
        """Take the case of the channel's review ``review_id`` out of calibration, recorded as ``by``'s;
        the review, or None if the channel has no such review or its case was dropped already."""
        async with self._write() as connection:
            found = await connection.execute(
                select(*_REVIEW_COLUMNS).where(
                    *_in_channel(reviews, workspace, channel), reviews.c.review_id == review_id
                )
            )
            row = found.mappings().first()
            if row is None:
                return None
            dropped = await connection.execute(
                self._upsert(calibration_drops)
                .values(calibration.case_of(row) | {"dropped_by": by, "created_at": _now()})
                .on_conflict_do_nothing()
                .returning(calibration_drops.c.review_id)
            )
            return ReviewRow(**row) if dropped.first() is not None else None

    async def calibration_drops(
        self, workspace: Workspace, channel: str, limit: int
    ) -> list[calibration.CalibrationDrop]:
        """The channel's latest drops from calibration, newest first."""
        query = calibration.drops_query(_in_channel(calibration_drops, workspace, channel), limit)
        return [calibration.CalibrationDrop(**row) for row in await self._rows(query)]

    # -- audits (see bot.db.audits) ---------------------------------------------------------------

    async def start_audit(self, start: audits_db.AuditStart) -> bool:
        """Record that the run's audit starts; False if it was started before (a run is audited once)."""
        values = {**asdict(start), "created_at": _now()}
        async with self._write() as connection:
            started = await connection.execute(
                self._upsert(audits).values(values).on_conflict_do_nothing().returning(audits.c.run_id)
            )
            return started.first() is not None

    async def finish_audit(self, run_id: int, result: audits_db.AuditResult) -> None:
        """Record the audit's result, and count its tokens with its run's."""
        async with self._write() as connection:
            await connection.execute(
                audits_db.FINISH_AUDIT, {"of_run": run_id, **audits_db.result_values(result)}
            )
            if result.tokens:
                await self._recharge(connection, run_id, requests=0, tokens=result.tokens, more=True)
                await connection.execute(
                    audits_db.ADD_RUN_TOKENS, {"of_run": run_id, "audit_tokens": result.tokens}
                )

    async def audits_in_channel(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> list[audits_db.AuditRow]:
        """The finished audits of a channel (None: of every one), oldest first; from ``since`` on if given."""
        query = audits_db.finished_audits(_scope(audits, workspace, channel, since))
        return [audits_db.AuditRow(**row) for row in await self._rows(query)]

    @staticmethod
    async def _reviews_of_iteration(
        connection: AsyncConnection, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> list[ReviewRow]:
        query = (
            select(*_REVIEW_COLUMNS)
            .where(*_in_workspace(reviews, workspace), _iteration_of(reviews, grading_run_id, iteration))
            .order_by(reviews.c.created_at, reviews.c.reviewer, reviews.c.criterion)
        )
        result = await connection.execute(query)
        return [ReviewRow(**row) for row in result.mappings()]

    # -- data lifecycle: deletion, retention, purge ----------------------------------------------

    async def threads_in(
        self, workspace: Tenant | None, channel: str | None = None, thread_ts: str | None = None
    ) -> list[ThreadKey]:
        """The threads of a workspace (or org), a channel or one thread the bot has data of (None
        matches any)."""
        conditions = _scope(threads, workspace, channel, None)
        if thread_ts is not None:
            conditions.append(threads.c.thread_ts == thread_ts)
        query = select(*_THREAD_KEY_COLUMNS).where(*conditions)
        return [ThreadKey(**row) for row in await self._rows(query)]

    async def idle_threads(self, before: datetime) -> list[ThreadKey]:
        """Threads last active before ``before`` with no run still going (finished threads)."""
        running = exists().where(
            *(runs.c[name] == threads.c[name] for name in ThreadKey.__dataclass_fields__),
            runs.c.finished_at.is_(None),
        )
        query = select(*_THREAD_KEY_COLUMNS).where(threads.c.last_activity < before, ~running)
        return [ThreadKey(**row) for row in await self._rows(query)]

    async def erase_threads(self, refs: Sequence[ThreadKey], *, keep_verdicts: bool) -> Counter[str]:
        """Delete the threads' runs, evaluations, posted ledger, dedupe records and thread rows, and
        their reviews (or, ``keep_verdicts``, only the reviews' comments); rows deleted per kind."""
        erased: Counter[str] = Counter()
        for start in range(0, len(refs), ERASE_BATCH):
            batch = refs[start : start + ERASE_BATCH]
            async with self._write() as connection:
                erased += await _erase_batch(connection, batch, keep_verdicts=keep_verdicts)
        return erased

    async def erase_channel_settings(self, workspace: Tenant | None, channel: str | None) -> Counter[str]:
        """Delete a channel's (or, with None, every channel of the workspace's) rubric, its versions,
        settings and replay record; with no channel, the workspace's own settings too."""
        erased: Counter[str] = Counter()
        async with self._write() as connection:
            for kind, table in (
                ("channel rubrics", channel_rubrics),
                ("channel rubric versions", channel_rubric_versions),
                ("channel settings", channel_settings),
                ("channel replays", channel_replays),
                ("calibration drops", calibration_drops),
            ):
                result = await connection.execute(
                    delete(table).where(*_scope(table, workspace, channel, None))
                )
                erased[kind] += result.rowcount
            if channel is None:  # the whole workspace's: its admins' settings go too
                table = workspace_settings
                result = await connection.execute(delete(table).where(*_scope(table, workspace, None, None)))
                erased["workspace settings"] += result.rowcount
        return erased

    async def record_change(self, kind: ChangeKind, change: MessageChange) -> int:
        """Keep a deletion or edit until it is applied (see `message_changes`); its id."""
        row = {
            **_thread_columns(change.thread),
            "kind": kind,
            "change": asdict(change),
            "received_at": _now(),
        }
        async with self._write() as connection:
            result = await connection.execute(
                insert(message_changes).values(row).returning(message_changes.c.change_id)
            )
            return int(result.scalar_one())

    async def change_applied(self, change_id: int) -> None:
        """Forget a kept deletion or edit once it is applied."""
        async with self._write() as connection:
            await connection.execute(delete(message_changes).where(message_changes.c.change_id == change_id))

    async def pending_changes(self) -> list[PendingChange]:
        """The deletions and edits kept and not applied yet, in the order they came."""
        query = select(message_changes.c.change_id, message_changes.c.kind, message_changes.c.change)
        rows = await self._rows(query.order_by(message_changes.c.change_id))
        return [PendingChange(row.change_id, row.kind, MessageChange(**row.change)) for row in rows]

    async def delete_run(self, run_id: int) -> None:
        """Forget a run that never started (its request was deleted while queued)."""
        async with self._write() as connection:
            await self._recharge(connection, run_id, requests=-1, tokens=0)  # it never spent
            await connection.execute(delete(posted).where(posted.c.run_id == run_id))
            await connection.execute(delete(runs).where(runs.c.run_id == run_id))

    async def request_run(self, workspace: Workspace, channel: str, request_ts: str) -> RunRecord | None:
        """The run answering the request posted as ``request_ts``, if the bot stored one."""
        query = select(*_RUN_COLUMNS).where(
            *_in_channel(runs, workspace, channel), runs.c.request_ts == request_ts
        )
        rows = await self._rows(query.order_by(runs.c.run_id.desc()).limit(1))
        return RunRecord(**rows[0]) if rows else None

    async def earliest_request_ts(self, thread: ThreadKey) -> str | None:
        """The ts of the first request the bot answered in the thread (the earlier messages of the
        thread are what it read when called in), if any."""
        query = select(runs.c.request_ts).where(*(runs.c[k] == v for k, v in _thread_columns(thread).items()))
        stamps = [row.request_ts for row in await self._rows(query)]
        return min(stamps, key=Decimal) if stamps else None

    async def redact_run_evaluations(self, run_id: int, note: str) -> set[str]:
        """Replace the grader's words (explanation, gaps) in the run's stored evaluations with
        ``note``, keeping the verdicts; the grading runs they belong to."""
        posted_ts = select(posted.c.message_ts).where(posted.c.run_id == run_id)
        return await self._redact_evaluations(evaluations.c.message_ts.in_(posted_ts), note)

    async def redact_rubric(self, thread: ThreadKey, rubric_text: str, note: str) -> set[str]:
        """Replace ``rubric_text`` where the thread's stored evaluations quote it (their rubric, and
        the grader's words about it) with ``note``; the grading runs they belong to."""
        return await self._redact_evaluations(
            and_(*_in_thread(evaluations, thread), evaluations.c.rubric_text == rubric_text),
            note,
            rubric=True,
        )

    async def _redact_evaluations(self, condition: Any, note: str, *, rubric: bool = False) -> set[str]:
        query = select(evaluations.c.grading_run_id, evaluations.c.iteration, evaluations.c.evaluation)
        async with self._write() as connection:
            found = list((await connection.execute(query.where(condition))).mappings())
            for row in found:
                values: dict[str, Any] = {"evaluation": redacted_evaluation(row["evaluation"], note)}
                if rubric:
                    values["rubric_text"] = note
                where = _iteration_of(evaluations, row["grading_run_id"], row["iteration"])
                await connection.execute(update(evaluations).where(where).values(**values))
        return {row["grading_run_id"] for row in found}

    # -- workspace settings ------------------------------------------------------------------------

    async def workspace_settings(self, workspace: Workspace) -> WorkspaceSettingsRow | None:
        """What the workspace's admins set (`/rubric admin`); None if they never did."""
        async with self._turns, self._reader.connect() as connection:
            return await _workspace_settings(connection, workspace)

    async def save_workspace_settings(self, workspace: Workspace, settings: WorkspaceSettingsRow) -> None:
        """Replace what the workspace's admins set, in one atomic upsert."""
        values = asdict(settings)
        if settings.rubric_editors is not None:
            values["rubric_editors"] = list(settings.rubric_editors)
        statement = self._upsert(workspace_settings).values(**_workspace_columns(workspace), **values)
        statement = statement.on_conflict_do_update(
            index_elements=["enterprise", "team"], set_={name: statement.excluded[name] for name in values}
        )
        async with self._write() as connection:
            await connection.execute(statement)

    # -- plumbing --------------------------------------------------------------------------------

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that writes: committed when the block ends, rolled back if it raises."""
        async with self._turns, self._writer.begin() as connection:
            yield connection

    @asynccontextmanager
    async def _spending(self, transaction: AsyncConnection) -> AsyncIterator[AsyncConnection]:
        """A connection to update the spend counters on: SQLite's in `transaction` (one writer at a
        time anyway); on PostgreSQL one of their own pool in autocommit, so that a counter row is
        locked for its statement only, not until a claim's transaction (which waits on this
        process's event loop) commits: a burst from one person would queue behind it."""
        if not self._postgres:
            yield transaction
            return
        if self._counters is None:
            self._counters = self.database.create_engine(pool_size=SPEND_POOL_SIZE).execution_options(
                isolation_level="AUTOCOMMIT"
            )
        async with self._counters.connect() as connection:
            yield connection

    async def _rows(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> list[Any]:
        async with self._turns, self._reader.connect() as connection:
            result = await connection.execute(query, parameters)
            return list(result.mappings())

    async def _scalar(self, query: Select[Any], parameters: dict[str, Any] | None = None) -> Any:
        async with self._turns, self._reader.connect() as connection:
            return await connection.scalar(query, parameters)


async def migrate(engine: AsyncEngine) -> list[str]:
    """Bring the bot's tables to the newest schema in one transaction; the revisions applied.

    The caller holds `bot.db.database.schema_lock`, so processes starting together migrate one by one.
    """
    async with engine.execution_options(**{WRITE_LOCK_OPTION: True}).begin() as connection:
        return await connection.run_sync(migrations.upgrade)


async def _hold(connection: AsyncConnection, run_id: int, lease: RunLease) -> bool:
    """Take `lease` on the run, or check that it is still the run's; whether the attempt holds it."""
    if lease.taking:
        await connection.execute(_RUN_UPDATE, {"of_run": run_id, "lease": lease.key})
        return True
    return bool(await connection.scalar(_HOLDS_RUN, {"run_id": run_id, "lease": lease.key}))


async def _workspace_settings(
    connection: AsyncConnection, workspace: Workspace
) -> WorkspaceSettingsRow | None:
    """What the workspace's admins set (`/rubric admin`); None if they never did."""
    found = (await connection.execute(_WORKSPACE_SETTINGS, _workspace_columns(workspace))).mappings().first()
    if found is None:
        return None
    row = dict(found)
    editors = row.pop("rubric_editors")
    del row["enterprise"], row["team"]
    return WorkspaceSettingsRow(**row, rubric_editors=None if editors is None else tuple(editors))


def _step(iteration: str) -> Step:
    """A ledger row's step from its `posted.iteration`."""
    if iteration in (FINAL_STEP, STREAM_STEP):
        return FINAL_STEP if iteration == FINAL_STEP else STREAM_STEP
    return int(iteration)


def _ledger_row(run_id: int, step: Step, part: int, message_ts: str) -> dict[str, Any]:
    """A ledger entry: part `part` of the run's `step` is in the thread as `message_ts`, from now."""
    return {
        "run_id": run_id,
        "iteration": str(step),
        "part": part,
        "message_ts": message_ts,
        "posted_at": _now(),
    }


def _evaluation_row(message_ts: str, shown: PostedEvaluation) -> dict[str, Any]:
    """The evaluations row of an evaluation message."""
    evaluation = shown.evaluation
    return {
        "grading_run_id": evaluation["grading_run_id"],
        "iteration": evaluation["iteration"],
        "created_at": _now(),
        **_thread_columns(shown.thread),
        "message_ts": message_ts,
        "evaluation": evaluation,
        "rubric_text": shown.rubric_text,
        "provenance": shown.provenance,
    }


@cache
def _disagreements_query(of_rubric: bool, calibrating_only: bool, trusted_only: bool) -> Select[Any]:
    """A channel's latest reviews that differ from the grader (see `Store.recent_disagreements`),
    built once for each choice; parameters: the channel's columns, ``rubric_text``, ``limit``."""
    disagreeing = reviews.c.reviewer_verdict != reviews.c.grader_verdict
    query = select(*_REVIEW_COLUMNS).where(*_bound(reviews, *_CHANNEL_KEYS), disagreeing)
    if trusted_only:
        query = query.where(calibration.trusted(), calibration.not_dropped())
    if calibrating_only:
        settings = channel_settings
        query = query.where(
            ~exists().where(*_bound(settings, *_CHANNEL_KEYS), settings.c.calibration.is_(false()))
        )
    if of_rubric:
        query = query.where(
            exists().where(
                evaluations.c.enterprise == reviews.c.enterprise,
                evaluations.c.team == reviews.c.team,
                evaluations.c.grading_run_id == reviews.c.grading_run_id,
                evaluations.c.iteration == reviews.c.iteration,
                evaluations.c.rubric_text == bindparam("rubric_text"),
            )
        )
    return query.order_by(reviews.c.created_at.desc()).limit(bindparam("limit"))


def _bound(table: Any, *names: str) -> list[Any]:
    """Conditions that each named column of `table` equals the parameter of its name."""
    return [table.c[name] == bindparam(name) for name in names]


def _channel_columns(workspace: Workspace, channel: str) -> dict[str, str]:
    """The columns that say which channel a row belongs to."""
    return {**_workspace_columns(workspace), "channel": channel}


async def _lock_iteration(connection: AsyncConnection, grading_run_id: str, iteration: int) -> None:
    """Lock the iteration's evaluation row until the transaction ends (SQLite: already locked)."""
    query = select(evaluations.c.iteration).where(_iteration_of(evaluations, grading_run_id, iteration))
    await connection.execute(query.with_for_update())


async def _claim_interrupted(
    connection: AsyncConnection, claiming: Update, parameters: dict[str, Any] | None = None
) -> list[RunRecord]:
    """Run `claiming` (see `_claiming_interrupted`) with `parameters`; the runs it claimed, oldest first."""
    result = await connection.execute(claiming, {"reported_at": _now(), **(parameters or {})})
    return sorted((RunRecord(**row) for row in result.mappings()), key=lambda run: run.run_id)


def _claiming_interrupted(condition: Any) -> Update:
    """The statement marking the unreported runs matching `condition` reported (and interrupted,
    if they never ended), returning them."""
    unreported = update(runs).where(runs.c.acknowledged.is_(False), condition)
    return _interrupted_and_reported(unreported).returning(*_RUN_COLUMNS)


def _run_thread(thread: ThreadKey) -> dict[str, str]:
    """The parameters of `_CLAIM_INTERRUPTED_IN_THREAD`."""
    return {"run_enterprise": thread.enterprise, "run_team": thread.team, "run_thread": thread.thread_id}


def _material_values(run_id: int, material: RunMaterial) -> dict[str, Any]:
    """The parameters of `_RUN_UPDATE` recording what the run's request shared, read and not."""
    return {
        "of_run": run_id,
        "thread_messages": material.thread_messages,
        "files_read": list(material.files_read),
        "files_unread": [asdict(item) for item in material.files_unread],
    }


def _unread_query(run_id: int) -> Select[Any]:
    """What the run recorded as shared but not read (a JSON list; null before the run read it)."""
    return select(runs.c.files_unread).where(runs.c.run_id == run_id)


def _unread(stored: list[dict[str, str]] | None) -> tuple[Unread, ...]:
    return tuple(Unread(**item) for item in stored or [])


def _interrupted_and_reported(statement: Update) -> Update:
    """``statement`` setting runs reported, and interrupted now unless they had ended already."""
    return statement.values(
        acknowledged=True,
        status=func.coalesce(runs.c.status, INTERRUPTED),
        finished_at=func.coalesce(
            runs.c.finished_at, bindparam("reported_at", type_=runs.c.finished_at.type)
        ),
    )


def _iteration_of(table: Any, grading_run_id: str, iteration: int) -> Any:
    return and_(table.c.grading_run_id == grading_run_id, table.c.iteration == iteration)


def _scope(
    table: Any, workspace: Tenant | None, channel: str | None, since: datetime | None, time: Any = None
) -> list[Any]:
    """Conditions for rows of a workspace (or org) and channel made from ``since`` on; a None filter
    is left out.

    The time is the table's ``created_at`` unless another column is given (runs: ``started_at``).
    """
    conditions = []
    if workspace is not None:
        conditions += _in_workspace(table, workspace)
    if channel is not None:
        conditions.append(table.c.channel == channel)
    if since is not None:
        conditions.append((table.c.created_at if time is None else time) >= since)
    return conditions


def _in_workspace(table: Any, workspace: Tenant) -> list[Any]:
    """Conditions for a table's rows of one workspace (or of every workspace of an org)."""
    if isinstance(workspace, Organization):
        return [table.c.enterprise == workspace.enterprise]
    return [table.c.enterprise == workspace.enterprise, table.c.team == workspace.team]


def _in_channel(table: Any, workspace: Workspace, channel: str) -> list[Any]:
    """Conditions for a table's rows of one channel of one workspace."""
    return [*_in_workspace(table, workspace), table.c.channel == channel]


def _in_thread(table: Any, thread: ThreadKey) -> list[Any]:
    """Conditions for a table's rows of one thread."""
    return [*_in_channel(table, thread.workspace, thread.channel), table.c.thread_ts == thread.thread_ts]


def _lock_scope(workspace: Workspace) -> str:
    """How a lock's name says which workspace it is of."""
    return f"{workspace.enterprise}:{workspace.team}"


def _workspace_columns(workspace: Workspace) -> dict[str, str]:
    """The columns that say which workspace a row belongs to."""
    return {"enterprise": workspace.enterprise, "team": workspace.team}


def _thread_columns(thread: ThreadKey) -> dict[str, str]:
    """The columns that say which thread a row belongs to."""
    return {**_workspace_columns(thread.workspace), "channel": thread.channel, "thread_ts": thread.thread_ts}


async def _lock(connection: AsyncConnection, key: str) -> None:
    """Hold a lock named `key` until `connection`'s transaction ends: a PostgreSQL advisory lock; on
    SQLite the transaction already holds the database's write lock."""
    if connection.dialect.name == "postgresql":
        await connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
        )


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


def _now() -> datetime:
    return datetime.now(UTC)


async def _versioned(connection: AsyncConnection, shown: PostedEvaluation) -> PostedEvaluation:
    """`shown` with its provenance's rubric version: the latest channel version with its rubric's
    text (read in the transaction that saves it), else the text's hash."""
    if shown.provenance is None:
        return shown
    table = channel_rubric_versions
    number = await connection.scalar(
        select(func.max(table.c.version)).where(
            *_in_channel(table, shown.thread.workspace, shown.thread.channel),
            table.c.rubric_text == shown.rubric_text,
        )
    )
    found = rubric_version(number, shown.rubric_text)
    return replace(shown, provenance={**shown.provenance, "rubric_version": found})


def _evaluation_record(row: Any) -> EvaluationRecord:
    """An evaluations row as its record: the document typed, the provenance read (UNKNOWN where missing)."""
    return EvaluationRecord(
        **{
            **row,
            "evaluation": _stored_evaluation(row["evaluation"]),
            "provenance": read_provenance(row["provenance"]),
        }
    )


def _stored_evaluation(document: dict[str, Any]) -> RubricEvaluation:
    """A stored evaluation as the typed RubricEvaluation, keys added since it was stored filled in."""
    return cast(RubricEvaluation, {**EVALUATION_DEFAULTS, **document})


def redacted_evaluation(evaluation: RubricEvaluation | dict[str, Any], note: str) -> RubricEvaluation:
    """``evaluation`` with the grader's words (its explanation and each item's gap) replaced by
    ``note``: they may quote what was deleted. Verdicts and scores stay, for the agreement figures."""

    def blank(items: Any) -> list[Any]:
        return [{**item, "gap": note if item.get("gap") else ""} for item in items or []]

    document = dict(evaluation)
    document.update(
        explanation=note, criteria=blank(document.get("criteria")), unmatched=blank(document.get("unmatched"))
    )
    return cast(RubricEvaluation, document)


async def _erase_batch(
    connection: AsyncConnection, refs: Sequence[ThreadKey], *, keep_verdicts: bool
) -> Counter[str]:
    """Delete one batch of threads' rows (see `Store.erase_threads`) in the connection's transaction."""
    erased: Counter[str] = Counter()
    keys = [tuple(getattr(ref, name) for name in ThreadKey.__dataclass_fields__) for ref in refs]

    def of(table: Any) -> Any:
        return tuple_(*(table.c[name] for name in ThreadKey.__dataclass_fields__)).in_(keys)

    query = select(*_RUN_COLUMNS).where(of(runs))
    found = [RunRecord(**row) for row in (await connection.execute(query)).mappings()]
    run_ids = [run.run_id for run in found]
    messages = {ref.message_key(ref.thread_ts) for ref in refs}
    messages |= {run.thread.message_key(run.request_ts) for run in found}
    erased["posted messages"] += (
        await connection.execute(delete(posted).where(posted.c.run_id.in_(run_ids)))
    ).rowcount
    erased["runs"] += (await connection.execute(delete(runs).where(runs.c.run_id.in_(run_ids)))).rowcount
    erased["evaluations"] += (await connection.execute(delete(evaluations).where(of(evaluations)))).rowcount
    erased["audits"] += (await connection.execute(delete(audits).where(of(audits)))).rowcount
    if keep_verdicts:
        blanked = update(reviews).where(of(reviews), reviews.c.comment != "").values(comment="")
        erased["review comments"] += (await connection.execute(blanked)).rowcount
    else:
        erased["reviews"] += (await connection.execute(delete(reviews).where(of(reviews)))).rowcount
    erased["dedupe records"] += (
        await connection.execute(delete(claims).where(claims.c.key.in_(messages)))
    ).rowcount
    erased["message changes"] += (
        await connection.execute(delete(message_changes).where(of(message_changes)))
    ).rowcount
    erased["threads"] += (await connection.execute(delete(threads).where(of(threads)))).rowcount
    return erased


# The statements every request runs, built once: building a statement costs a store call about as
# much CPU as sending it.
_WORKSPACE_KEYS = ("enterprise", "team")
"""The columns, and parameters, that say which workspace a row belongs to."""
_CHANNEL_KEYS = (*_WORKSPACE_KEYS, "channel")
"""The columns, and parameters, that say which channel a row belongs to."""
_HAS_THREAD = select(exists().where(*_bound(threads, *_CHANNEL_KEYS, "thread_ts")))
_HOLDS_RUN = select(runs.c.lease == bindparam("lease")).where(runs.c.run_id == bindparam("run_id"))
_WORKSPACE_SETTINGS = select(workspace_settings).where(*_bound(workspace_settings, *_WORKSPACE_KEYS))
_CHANNEL_RUBRIC = select(channel_rubrics.c.rubric_text).where(*_bound(channel_rubrics, *_CHANNEL_KEYS))
# Updates name their parameters apart from the columns they set (SQLAlchemy reserves those names).
_RUN_SPENDER = select(
    runs.c.enterprise,
    runs.c.team,
    runs.c.channel,
    runs.c.requester,
    runs.c.started_at,
    runs.c.charged_tokens,
    runs.c.cost_usd,
).where(runs.c.run_id == bindparam("of_run"))
"""Whose spend counters a run charged, on which day, and how many tokens and dollars it charged them."""
_RUN_UPDATE = update(runs).where(runs.c.run_id == bindparam("of_run"))
"""Set the run's columns given as parameters (with ``of_run``, the run's id)."""
_CLAIM_INTERRUPTED_IN_THREAD = _claiming_interrupted(
    and_(
        runs.c.enterprise == bindparam("run_enterprise"),
        runs.c.team == bindparam("run_team"),
        runs.c.thread_id == bindparam("run_thread"),
        runs.c.status == INTERRUPTED,
    )
)
"""Claim the thread's unreported interrupted runs (`_run_thread`)."""
_EVALUATION_REPLACED = (
    "enterprise",
    "team",
    "channel",
    "thread_ts",
    "message_ts",
    "evaluation",
    "rubric_text",
    "provenance",
)
"""What a repeated evaluation message replaces of the one recorded before."""
