"""Runs and their attempts: a request's run, the lease of the attempt that may post its messages,
interrupted runs and their reports, undelivered endings.

A run's start and end span other aggregates too: see `bot.db.transactions`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any

from sqlalchemy import Connection, Update, and_, bindparam, func, insert, select, update

from bot.db.base import StoreBase
from bot.db.schema import runs
from bot.db.scope import in_channel, in_scope, in_thread, thread_columns, utc_now
from bot.db.spend import RunQuota
from bot.vocabulary.statuses import ANSWERED, INTERRUPTED, RunStatus
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace


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


RUN_COLUMNS = [runs.c[name] for name in RunRecord.__dataclass_fields__]
"""The runs columns read into a RunRecord."""


class RunStore(StoreBase):
    """Runs, their leases and interruptions."""

    async def acknowledge_interrupted(self, run_id: int) -> None:
        """Mark an interrupted run as reported (and as interrupted, if it never finished)."""
        async with self._write() as connection:
            statement = _interrupted_and_reported(update(runs).where(runs.c.run_id == run_id))
            await connection.execute(statement, {"reported_at": utc_now()})

    async def claim_abandoned_runs(self, started_before: datetime) -> list[RunRecord]:
        """Take the unreported runs an earlier process left behind, marking them interrupted and reported.

        Those are runs that never finished and started before ``started_before`` (this process's
        start), and interrupted runs whose thread was not told. One UPDATE … RETURNING claims them,
        so processes starting together each get different runs and every run is reported once.
        """
        claiming = _claiming_interrupted(
            (runs.c.finished_at.is_(None) & (runs.c.started_at < started_before))
            | (runs.c.status == INTERRUPTED)
        )
        return await self.in_thread(partial(claim_interrupted, claiming=claiming))

    async def claim_interrupted_runs(self, thread: ThreadKey) -> list[RunRecord]:
        """Take the thread's interrupted runs nobody has reported yet, marking them reported."""
        return await self.in_thread(
            partial(claim_interrupted, claiming=CLAIM_INTERRUPTED_IN_THREAD, parameters=run_thread(thread))
        )

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
        await self.in_thread(partial(hold, run_id=run_id, lease=RunLease(lease)))
        return lease

    async def holds_run(self, run_id: int, lease: str) -> bool:
        """Whether `lease` (from `take_run`) is still the run's: no other attempt has taken it over."""
        return bool(await self._scalar(HOLDS_RUN, {"run_id": run_id, "lease": lease}))

    async def request_stop(self, thread: ThreadKey, person: str) -> list[int]:
        """Ask, as `person`, to stop every run of `thread` that has not ended (the one running and
        any queued behind it); the runs newly asked, oldest first (none: nothing was running, or
        someone asked already)."""
        return await self._request_stop(in_thread(runs, thread), person)

    async def request_stop_of(self, workspace: Workspace, channel: str, person: str) -> list[int]:
        """`request_stop` for the runs `person` asked for in `channel`, in whichever thread."""
        return await self._request_stop(
            [*in_channel(runs, workspace, channel), runs.c.requester == person], person
        )

    async def _request_stop(self, conditions: list[Any], person: str) -> list[int]:
        asking = (
            update(runs)
            .where(*conditions, runs.c.finished_at.is_(None), runs.c.stopped_by.is_(None))
            .values(stopped_by=person)
            .returning(runs.c.run_id)
        )
        async with self._write() as connection:
            return sorted(row.run_id for row in await connection.execute(asking))

    async def stops_requested(self, run_ids: Sequence[int]) -> dict[int, str]:
        """Who asked to stop each of `run_ids` that someone has asked to stop, in one query."""
        found = await self._rows(STOPS_REQUESTED, {"run_ids": list(run_ids)})
        return {row["run_id"]: row["stopped_by"] for row in found}

    async def mark_undelivered(self, run_id: int) -> None:
        """Record that the run's closing message could not be posted in its thread."""
        async with self._write() as connection:
            await connection.execute(update(runs).where(runs.c.run_id == run_id).values(undelivered=True))

    async def undelivered_runs(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> list[RunRecord]:
        """Runs whose closing message never reached Slack, oldest first; from ``since`` on if given.

        ``None`` for ``workspace`` or ``channel`` matches every one, as in the other channel queries.
        """
        query = (
            select(*RUN_COLUMNS)
            .where(
                runs.c.undelivered.is_(True), *in_scope(runs, workspace, channel, since, runs.c.started_at)
            )
            .order_by(runs.c.run_id)
        )
        return [RunRecord(**row) for row in await self._rows(query)]

    async def recent_graded_runs(self, workspace: Workspace, channel: str, limit: int) -> list[RunRecord]:
        """The channel's latest runs, newest first, leaving out those answered without a rubric."""
        query = (
            select(*RUN_COLUMNS)
            .where(
                *in_channel(runs, workspace, channel),
                runs.c.status.is_(None) | (runs.c.status != ANSWERED),
            )
            .order_by(runs.c.started_at.desc(), runs.c.run_id.desc())
            .limit(limit)
        )
        return [RunRecord(**row) for row in await self._rows(query)]

    async def request_run(self, workspace: Workspace, channel: str, request_ts: str) -> RunRecord | None:
        """The run answering the request posted as ``request_ts``, if the bot stored one."""
        query = select(*RUN_COLUMNS).where(
            *in_channel(runs, workspace, channel), runs.c.request_ts == request_ts
        )
        rows = await self._rows(query.order_by(runs.c.run_id.desc()).limit(1))
        return RunRecord(**rows[0]) if rows else None

    async def earliest_request_ts(self, thread: ThreadKey) -> str | None:
        """The ts of the first request the bot answered in the thread (the earlier messages of the
        thread are what it read when called in), if any."""
        query = select(runs.c.request_ts).where(*(runs.c[k] == v for k, v in thread_columns(thread).items()))
        stamps = [row.request_ts for row in await self._rows(query)]
        return min(stamps, key=Decimal) if stamps else None


@dataclass(frozen=True)
class RunStart:
    """A run to record as started: the request ``request_ts`` in `thread`, from `requester`, with
    `quota` (if any) for what it may spend (see `bot.db.spend.admit_all`)."""

    thread: ThreadKey
    request_ts: str
    requester: str | None = None
    quota: RunQuota | None = None


def insert_runs(connection: Connection, started: Sequence[RunStart]) -> list[int]:
    """Record that the runs `started` started (in `connection`'s transaction, in one statement,
    synchronous like every statement of a claim), each with its quota's estimated tokens and
    dollars reserved for it; their run ids, in order."""
    if not started:
        return []
    now = utc_now()
    rows = [
        {
            "thread_id": run.thread.thread_id,
            **thread_columns(run.thread),
            "request_ts": run.request_ts,
            "requester": run.requester,
            "started_at": now,
            "charged_tokens": run.quota.estimate if run.quota else 0,
            "charged_usd": run.quota.estimate_usd if run.quota else 0.0,
        }
        for run in started
    ]
    return [int(run_id) for run_id in connection.execute(RUN_INSERT, rows).scalars()]


def hold(connection: Connection, run_id: int, lease: RunLease) -> bool:
    """Take `lease` on the run, or check that it is still the run's; whether the attempt holds it."""
    if lease.taking:
        connection.execute(RUN_UPDATE, {"of_run": run_id, "lease": lease.key})
        return True
    return bool(connection.scalar(HOLDS_RUN, {"run_id": run_id, "lease": lease.key}))


def claim_interrupted(
    connection: Connection, claiming: Update, parameters: dict[str, Any] | None = None
) -> list[RunRecord]:
    """Run `claiming` (see `_claiming_interrupted`) with `parameters`; the runs it claimed, oldest first."""
    result = connection.execute(claiming, {"reported_at": utc_now(), **(parameters or {})})
    return sorted((RunRecord(**row) for row in result.mappings()), key=lambda run: run.run_id)


def _claiming_interrupted(condition: Any) -> Update:
    """The statement marking the unreported runs matching `condition` reported (and interrupted,
    if they never ended), returning them."""
    unreported = update(runs).where(runs.c.acknowledged.is_(False), condition)
    return _interrupted_and_reported(unreported).returning(*RUN_COLUMNS)


def _interrupted_and_reported(statement: Update) -> Update:
    """``statement`` setting runs reported, and interrupted now unless they had ended already."""
    return statement.values(
        acknowledged=True,
        status=func.coalesce(runs.c.status, INTERRUPTED),
        finished_at=func.coalesce(
            runs.c.finished_at, bindparam("reported_at", type_=runs.c.finished_at.type)
        ),
    )


def run_thread(thread: ThreadKey) -> dict[str, str]:
    """The parameters of `CLAIM_INTERRUPTED_IN_THREAD`."""
    return {"run_enterprise": thread.enterprise, "run_team": thread.team, "run_thread": thread.thread_id}


# The statements every request runs, built once: building a statement costs a store call about as
# much CPU as sending it.
RUN_INSERT = insert(runs).returning(runs.c.run_id, sort_by_parameter_order=True)
"""Insert runs' rows (the columns `insert_runs` gives), returning their ids in the rows' order."""

STOPS_REQUESTED = select(runs.c.run_id, runs.c.stopped_by).where(
    runs.c.run_id.in_(bindparam("run_ids", expanding=True)), runs.c.stopped_by.is_not(None)
)

STOPS_REQUESTED = select(runs.c.run_id, runs.c.stopped_by).where(
    runs.c.run_id.in_(bindparam("run_ids", expanding=True)), runs.c.stopped_by.is_not(None)
)

HOLDS_RUN = select(runs.c.lease == bindparam("lease")).where(runs.c.run_id == bindparam("run_id"))

RUN_UPDATE = update(runs).where(runs.c.run_id == bindparam("of_run"))
"""Set the run's columns given as parameters (with ``of_run``, the run's id)."""

CLAIM_INTERRUPTED_IN_THREAD = _claiming_interrupted(
    and_(
        runs.c.enterprise == bindparam("run_enterprise"),
        runs.c.team == bindparam("run_team"),
        runs.c.thread_id == bindparam("run_thread"),
        runs.c.status == INTERRUPTED,
    )
)
"""Claim the thread's unreported interrupted runs (`run_thread`)."""
