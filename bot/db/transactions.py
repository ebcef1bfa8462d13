"""The transactions that span aggregates, composed here from the parts' statements and nowhere else:

- the claim that admits a request (`Claim`: its dedupe keys, its thread, the workspace's limits and
  settings, its run, and the job queued in the same transaction);
- a run's start (`RunTransactions.start_run`, `RunTransactions.start_attempt`: the lease, the thread's
  interrupted runs, the request's material, the channel rubric, the workspace's settings);
- an iteration's message (`RunTransactions.record_posted`: its ledger entry with its evaluation, whose
  provenance takes the channel rubric's version read in the same transaction);
- a run's end (`RunTransactions.finish_run`: its closing messages' ledger entries with its status,
  its tokens and cost replacing what its admission reserved on the spend counters);
- an audit's end (`RunTransactions.finish_audit`: its result, its tokens counted with its run's);
- a queued run forgotten (`RunTransactions.delete_run`: its ledger, its row, its spend given back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from functools import cache, partial
from typing import Any

from sqlalchemy import Connection, Text, bindparam, delete, func, literal, select, true
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db import audits as audits_db
from bot.db.evaluations import PostedEvaluation, evaluation_row, evaluation_upsert
from bot.db.ledger import PostedPart, Step, ledger_insert, ledger_row
from bot.db.material import RunMaterial, material_values, unread_of, unread_query
from bot.db.rubrics import CHANNEL_RUBRIC, version_numbered
from bot.db.runs import (
    CLAIM_INTERRUPTED_IN_THREAD,
    RUN_UPDATE,
    RunLease,
    RunRecord,
    claim_interrupted,
    hold,
    insert_run,
    run_thread,
)
from bot.db.schema import audits, claims, posted, runs
from bot.db.scope import channel_columns, in_scope, thread_columns, utc_now
from bot.db.spend import RunQuota, Spender, admit, charge
from bot.db.threads import thread_upsert_at, upsert_thread
from bot.db.usage import PricedRun, SyncSpending, UsageStore, cost_values
from bot.db.workspace_settings import (
    WORKSPACE_SETTINGS,
    WorkspaceSettingsRow,
    read_workspace_settings,
    settings_of,
)
from bot.vocabulary.provenance import rubric_version
from bot.vocabulary.statuses import INTERRUPTED, RunStatus
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.unread import Unread
from bot.vocabulary.workspace import Tenant, Workspace


class Claim:
    """The open transaction of a message just claimed (see `ClaimStore.claiming`): what it records
    commits with the claim. Its statements are synchronous, so that a claim's whole transaction can
    be one call to the database's thread on SQLite (see `bot.db.claims`)."""

    def __init__(self, connection: Connection, spending: SyncSpending) -> None:
        self._connection = connection
        self._spending = spending
        self._postgres = connection.dialect.name == "postgresql"
        self._settings: dict[Workspace, WorkspaceSettingsRow | None] = {}
        """The workspaces' settings read in this transaction (see `workspace_settings`)."""
        self.admitted: list[tuple[Spender, RunQuota]] = []
        """The runs admitted in this transaction: who spends, and what they reserved (for giving it
        back where the counters are not in the transaction and it fails)."""

    def take(self, keys: list[str], thread: ThreadKey | None) -> bool:
        """Insert the message's dedupe `keys` and remember its `thread` (that the bot takes part in
        it, and that it is active now); whether every key was new (if not, the caller rolls back).

        On PostgreSQL, with a thread, this is one statement, which also reads the thread's
        workspace's settings for `workspace_settings`: each statement of a claim is a round trip
        the acknowledgement waits for, and the event loop pays about 0.14 ms of CPU for each (100
        claims at once: 1.36 ms of CPU each, against 1.53 as three statements). On SQLite they are
        three statements, each a few microseconds in the claims thread (see `bot.db.claims`).
        """
        now = utc_now()
        if self._postgres and thread is not None:
            values = {"keys": keys, "claimed_at": now, **thread_columns(thread)}
            opened = self._connection.execute(_taking_on_postgres(), values).mappings().one()
            self._settings[thread.workspace] = settings_of(opened)
            return bool(opened["new_keys"] == len(keys))
        rows = [{"key": key, "claimed_at": now} for key in keys]
        if len(self._connection.execute(_keys_insert(self._postgres), rows).all()) < len(keys):
            return False
        if thread is not None:
            upsert_thread(self._connection, thread)
        return True

    def start_run(
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
        requester, channel, workspace and the deployment are charged a request, ``quota.estimate``
        tokens and ``quota.estimate_usd`` dollars, or `QuotaExceeded` is raised (recording nothing)
        if one of them had already reached a cap.
        """
        if quota is None:
            return insert_run(self._connection, thread, request_ts, requester)
        spender = Spender(quota.day, thread.workspace, thread.channel, requester)
        with self._spending() as connection:
            admit(connection, spender, quota)
        self.admitted.append((spender, quota))
        return insert_run(self._connection, thread, request_ts, requester, quota.estimate, quota.estimate_usd)

    def workspace_settings(self, workspace: Workspace) -> WorkspaceSettingsRow | None:
        """What the workspace's admins set, read in the claim's transaction (once)."""
        if workspace not in self._settings:
            self._settings[workspace] = read_workspace_settings(self._connection, workspace)
        return self._settings[workspace]

    def give_back(self, counters: Connection) -> None:
        """Take back what the runs admitted here reserved, on the `counters` connection (where the
        counters are not in the claim's transaction and it failed)."""
        for spender, reserved in self.admitted:
            charge(counters, spender, -1, -reserved.estimate, -reserved.estimate_usd)


@cache
def _keys_insert(postgres: bool) -> Any:
    """Insert claim rows unless their key was claimed before, returning the keys inserted; built
    once per dialect, and executed with the keys' rows as one multi-row statement (see
    `bot.db.spend.charge`)."""
    upsert = postgresql.insert if postgres else sqlite.insert
    return upsert(claims).on_conflict_do_nothing().returning(claims.c.key)


@cache
def _taking_on_postgres() -> Any:
    """PostgreSQL: `Claim.take` in one statement, built once: the keys' insert (``keys``, an
    array) and the thread's upsert as CTEs, which PostgreSQL runs whether or not they are read, and
    the count of keys inserted beside the workspace's settings row (all NULL without one)."""
    now = bindparam("claimed_at", type_=claims.c.claimed_at.type)
    new_keys = (
        postgresql.insert(claims)
        .from_select(["key", "claimed_at"], select(func.unnest(bindparam("keys", type_=ARRAY(Text))), now))
        .on_conflict_do_nothing()
        .returning(claims.c.key)
        .cte("new_keys")
    )
    settings = WORKSPACE_SETTINGS.subquery("settings")
    inserted = select(func.count()).select_from(new_keys).scalar_subquery().label("new_keys")
    return (
        select(inserted, *settings.c)
        .select_from(select(literal(1)).subquery("one").outerjoin(settings, true()))
        .add_cte(thread_upsert_at(now).cte("thread"))
    )


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


class RunTransactions(UsageStore):
    """A run's start and end, and its iterations' messages."""

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

        def started(connection: Connection) -> int:
            claim = Claim(connection, partial(self._spending, connection))
            return claim.start_run(thread, request_ts, requester=requester, quota=quota)

        async with self._write() as connection:
            return await connection.run_sync(started)

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
            if lease is not None and not await hold(connection, run_id, lease):
                return AttemptStart([], (), None, holds_run=False)
            interrupted = await claim_interrupted(connection, CLAIM_INTERRUPTED_IN_THREAD, run_thread(thread))
            if material is None:
                unread = unread_of(await connection.scalar(unread_query(run_id)))
            else:
                await connection.execute(RUN_UPDATE, material_values(run_id, material))
                unread = tuple(material.files_unread)
            rubric = (
                await connection.scalar(CHANNEL_RUBRIC, channel_columns(thread.workspace, thread.channel))
                if channel_rubric
                else None
            )
            stored = None
            if settings:
                stored = await connection.run_sync(read_workspace_settings, thread.workspace)
        if lease is not None:
            lease.taking = False  # taken for good: later attempts check it
        return AttemptStart(interrupted, unread, rubric, stored)

    async def record_posted(
        self, run_id: int, step: Step, part: int, message_ts: str, evaluation: PostedEvaluation | None = None
    ) -> bool:
        """Record that part ``part`` of the run's ``step`` is in the thread as ``message_ts`` (with the
        evaluation it shows, if given: one transaction for an iteration's message).

        False (changing nothing) if that part was recorded before: it is already in the thread.
        """
        async with self._write() as connection:
            inserted = (
                await connection.execute(
                    ledger_insert(self._postgres), ledger_row(run_id, step, part, message_ts)
                )
            ).first()
            if inserted is not None and evaluation is not None:
                evaluation = await _versioned(connection, evaluation)
                await connection.execute(
                    evaluation_upsert(self._postgres), evaluation_row(message_ts, evaluation)
                )
        return inserted is not None

    async def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        tokens: int | None = None,
        posted: Sequence[PostedPart] = (),
        cost: PricedRun | None = None,
    ) -> None:
        """Record that a run ended with ``status``, having used ``tokens`` (worker plus grader) at
        ``cost`` if known; and, in the same transaction, its closing messages in the thread not
        recorded yet (`posted`; see `record_posted`)."""
        values: dict[str, Any] = {"status": status, "finished_at": utc_now()}
        # A run not priced (no pricing configured) settles its money reservation at nothing.
        usd = cost.usd if cost is not None else 0.0
        if tokens is not None:
            values["tokens"] = values["charged_tokens"] = tokens
            values["charged_usd"] = usd
        if cost is not None:
            values |= cost_values(cost)
        async with self._write() as connection:
            for part in posted:
                await connection.execute(
                    ledger_insert(self._postgres), ledger_row(run_id, part.step, part.part, part.message_ts)
                )
            if tokens is not None:  # the reservation gives way to what the run used
                await self._recharge(connection, run_id, requests=0, tokens=tokens, usd=usd)
            await connection.execute(RUN_UPDATE, {"of_run": run_id, **values})

    async def mark_interrupted(self, run_id: int) -> None:
        """Record that a run was stopped before finishing; it is reported until acknowledged."""
        await self.finish_run(run_id, INTERRUPTED)

    async def delete_run(self, run_id: int) -> None:
        """Forget a run that never started (its request was deleted while queued)."""
        async with self._write() as connection:
            await self._recharge(connection, run_id, requests=-1, tokens=0, usd=0.0)  # it never spent
            await connection.execute(delete(posted).where(posted.c.run_id == run_id))
            await connection.execute(delete(runs).where(runs.c.run_id == run_id))

    async def start_audit(self, start: audits_db.AuditStart) -> bool:
        """Record that the run's audit starts; False if it was started before (a run is audited once)."""
        values = {**asdict(start), "created_at": utc_now()}
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
        query = audits_db.finished_audits(in_scope(audits, workspace, channel, since))
        return [audits_db.AuditRow(**row) for row in await self._rows(query)]


async def _versioned(connection: AsyncConnection, shown: PostedEvaluation) -> PostedEvaluation:
    """`shown` with its provenance's rubric version: the latest channel version with its rubric's
    text (read in the transaction that saves it), else the text's hash."""
    if shown.provenance is None:
        return shown
    thread = shown.thread
    number = await connection.scalar(version_numbered(thread.workspace, thread.channel, shown.rubric_text))
    found = rubric_version(number, shown.rubric_text)
    return replace(shown, provenance={**shown.provenance, "rubric_version": found})
