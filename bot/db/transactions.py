"""The transactions that span aggregates, composed here from the parts' statements and nowhere else:

- the claim that admits requests (`Claim`: their dedupe keys, their threads, the workspaces' limits
  and settings, their runs, and the jobs queued in the same transaction);
- a run's start (`RunTransactions.start_run`, `RunTransactions.start_attempt`: the lease, the thread's
  interrupted runs, the request's material, the channel rubric, the workspace's settings);
- an iteration's message (`RunTransactions.record_posted`: its ledger entry with its evaluation, whose
  provenance takes the channel rubric's version read in the same transaction);
- a run's end (`RunTransactions.finish_run`: its closing messages' ledger entries with its status,
  its tokens and cost replacing what its admission reserved on the spend counters);
- an audit's end (`RunTransactions.finish_audit`: its result, its tokens and money counted with its
  run's, its reservation settled);
- a queued run forgotten (`RunTransactions.delete_run`: its ledger, its row, its spend given back).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from functools import cache, partial
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Integer, Text, and_, bindparam, delete, func, literal, select, true
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY

from bot.db import audits as audits_db
from bot.db.evaluations import PostedEvaluation, evaluation_row, evaluation_upsert
from bot.db.ledger import PostedPart, Step, ledger_insert, ledger_row
from bot.db.material import RunMaterial, material_values, unread_of
from bot.db.review_modes import ReviewModes, modes_in_force
from bot.db.rubrics import CHANNEL_RUBRIC_VERSIONED, version_numbered
from bot.db.runs import (
    CLAIM_INTERRUPTED_IN_THREAD,
    RUN_UPDATE,
    RunLease,
    RunRecord,
    RunStart,
    claim_interrupted,
    hold,
    insert_runs,
    run_thread,
)
from bot.db.schema import audits, claims, evaluations, posted, runs, workspace_settings
from bot.db.scope import (
    CHANNEL_KEYS,
    WORKSPACE_KEYS,
    channel_columns,
    in_scope,
    thread_columns,
    utc_now,
    workspace_columns,
)
from bot.db.spend import QuotaExceeded, RunQuota, Spender, admit_all, charge
from bot.db.threads import threads_upsert_from, upsert_thread
from bot.db.usage import PricedRun, SyncSpending, UsageStore, cost_values
from bot.db.workspace_settings import (
    WorkspaceSettingsRow,
    read_workspace_settings,
    settings_of,
)
from bot.vocabulary.provenance import UNKNOWN, rubric_version
from bot.vocabulary.statuses import INTERRUPTED, RunStatus
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.unread import Unread
from bot.vocabulary.workspace import Tenant, Workspace

Recorded = TypeVar("Recorded")
"""What a claim records besides its keys (the job it queues, say)."""


@dataclass(frozen=True)
class Starting(Generic[Recorded]):
    """What a claim records when it starts a run: the `run`, and what `then` makes of the run's id
    (or of the cap that refused it, nothing recorded)."""

    run: RunStart
    then: Callable[[int | QuotaExceeded], Recorded]


ClaimRecord = Callable[["Claim"], "Recorded | Starting[Recorded]"]
"""What a claim records besides its keys, given the open claim (whose workspaces' settings it may
read): the thing itself, or the run it starts and what to make of it (`Starting`)."""


@dataclass(frozen=True)
class ClaimRequest(Generic[Recorded]):
    """One message's claim: its dedupe `keys` (distinct), the `thread` to remember as one the bot
    takes part in, and what else it records if every key is new."""

    keys: list[str]
    thread: ThreadKey | None
    record: ClaimRecord[Recorded]


class Claim:
    """The open transaction of messages being claimed (see `ClaimStore.claiming`): what it records
    commits with the claims. Its statements are synchronous, so that a claim's whole transaction can
    be one call to the database's thread on SQLite (see `bot.db.claims`); on PostgreSQL the claims
    that come together share it, and each of its statements serves them all."""

    def __init__(self, connection: Connection, spending: SyncSpending) -> None:
        self._connection = connection
        self._spending = spending
        self._postgres = connection.dialect.name == "postgresql"
        self._settings: dict[Workspace, WorkspaceSettingsRow | None] = {}
        """The workspaces' settings read in this transaction (see `workspace_settings`)."""
        self.admitted: list[tuple[Spender, RunQuota]] = []
        """The runs admitted in this transaction: who spends, and what they reserved (for giving it
        back where the counters are not in the transaction and it fails)."""

    def record_all(self, requests: Sequence[ClaimRequest[Any]]) -> list[Any]:
        """Take each claim's keys and thread (see `take_all`), and what each claim whose keys were
        all new records, the runs they start started together (see `start_runs`); None for a claim
        whose keys were not all new (it records nothing)."""
        taken = self.take_all([(request.keys, request.thread) for request in requests])
        asked = [request.record(self) if won else None for request, won in zip(requests, taken, strict=True)]
        started = iter(self.start_runs([one.run for one in asked if isinstance(one, Starting)]))
        return [one.then(next(started)) if isinstance(one, Starting) else one for one in asked]

    def take_all(self, claimed: Sequence[tuple[list[str], ThreadKey | None]]) -> list[bool]:
        """Insert each claim's dedupe keys and remember its thread (that the bot takes part in it,
        and that it is active now), for the claims whose keys are all new; whether each one's were.
        No two claims may share a key. A claim whose keys were not all new leaves none behind.

        On PostgreSQL this is one statement for all the claims, which also reads their workspaces'
        settings for `workspace_settings`: each statement of a claim is a round trip the
        acknowledgements wait for, and the event loop pays about 0.14 ms of CPU for each. On SQLite,
        where a claim is alone in its transaction, they are statements of a few microseconds each
        in the store's SQLite thread (see `bot.db.base`).
        """
        if self._postgres:
            return self._take_on_postgres(claimed)
        return [self._take(keys, thread) for keys, thread in claimed]

    def _take(self, keys: list[str], thread: ThreadKey | None) -> bool:
        now = utc_now()
        rows = [{"key": key, "claimed_at": now} for key in keys]
        inserted = list(self._connection.execute(_KEYS_INSERT, rows).scalars())
        if len(inserted) < len(keys):
            self._give_back_keys(inserted)
            return False
        if thread is not None:
            upsert_thread(self._connection, thread)
        return True

    def _take_on_postgres(self, claimed: Sequence[tuple[list[str], ThreadKey | None]]) -> list[bool]:
        numbered = [(number, key) for number, (keys, _) in enumerate(claimed) for key in keys]
        in_threads = [(number, thread) for number, (_, thread) in enumerate(claimed) if thread is not None]
        threads = [thread_columns(thread) for _, thread in in_threads]
        workspaces = [
            workspace_columns(w) for w in dict.fromkeys(thread.workspace for _, thread in in_threads)
        ]
        values = {
            "claim_numbers": [number for number, _ in numbered],
            "keys": [key for _, key in numbered],
            "thread_claims": [number for number, _ in in_threads],
            **{f"thread_{key}": [columns[key] for columns in threads] for key in _THREAD_KEYS},
            **{f"workspace_{key}": [columns[key] for columns in workspaces] for key in WORKSPACE_KEYS},
            "claimed_at": utc_now(),
        }
        rows = self._connection.execute(_taking_on_postgres(), values).mappings().all()
        for row in rows:
            if row["asked_team"] is not None:
                self._settings[Workspace(row["asked_team"], row["asked_enterprise"])] = settings_of(row)
        inserted = set(rows[0]["new_keys"] or ())
        won = [all(key in inserted for key in keys) for keys, _ in claimed]
        # A claim racing another process's for one of its keys inserted only the rest.
        lost = [keys for (keys, _), ok in zip(claimed, won, strict=True) if not ok]
        self._give_back_keys([key for keys in lost for key in keys if key in inserted])
        return won

    def _give_back_keys(self, keys: list[str]) -> None:
        """Delete the keys this transaction inserted for a claim that lost one of its others."""
        if keys:
            self._connection.execute(delete(claims).where(claims.c.key.in_(keys)))

    def start_runs(self, starts: Sequence[RunStart]) -> list[int | QuotaExceeded]:
        """Record that the runs `starts` started, those with a quota only within it (see
        `bot.db.spend.admit_all`: their requester, channel, workspace and the deployment are each
        charged a request and the run's estimated tokens and dollars, unless one had already reached
        a cap); one statement admits them all and one records their rows. Each run's id, or the cap
        that refused it (recording nothing)."""
        refusals: dict[int, QuotaExceeded] = {}
        quotas = [(n, start, start.quota) for n, start in enumerate(starts) if start.quota is not None]
        if quotas:
            spenders = [
                (Spender(quota.day, start.thread.workspace, start.thread.channel, start.requester), quota)
                for _, start, quota in quotas
            ]
            with self._spending() as connection:
                refused = admit_all(connection, spenders)
            for (n, _, _), admission, refusal in zip(quotas, spenders, refused, strict=True):
                if refusal is None:
                    self.admitted.append(admission)
                else:
                    refusals[n] = refusal
        ids = iter(insert_runs(self._connection, [s for n, s in enumerate(starts) if n not in refusals]))
        return [refusals[n] if n in refusals else next(ids) for n in range(len(starts))]

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


_KEYS_INSERT = sqlite.insert(claims).on_conflict_do_nothing().returning(claims.c.key)
"""SQLite: insert claim rows unless their key was claimed before, returning the keys inserted;
executed with the keys' rows as one multi-row statement (see `bot.db.spend.charge`)."""

_THREAD_KEYS = (*CHANNEL_KEYS, "thread_ts")
"""The columns that say which thread a row belongs to (see `bot.db.scope.thread_columns`)."""


@cache
def _taking_on_postgres() -> Any:
    """PostgreSQL: `Claim.take_all` in one statement, built once. Its CTEs, which PostgreSQL runs
    whether or not they are read: the claims whose keys were taken before; the other claims' keys
    inserted (arrays ``claim_numbers`` and ``keys``, one element per key); their threads upserted
    (``thread_claims`` and a ``thread_<column>`` array per column of `_THREAD_KEYS`). It returns the
    keys inserted (``new_keys``) beside each asked workspace's settings row (a ``workspace_<column>``
    array per column of `WORKSPACE_KEYS`; all NULL without a row), and one row without any
    workspace."""
    now = bindparam("claimed_at", type_=claims.c.claimed_at.type)
    wanted = _unnested("wanted", {"claim_number": ("claim_numbers", Integer), "key": ("keys", Text)})
    taken = select(wanted.c.claim_number).join(claims, claims.c.key == wanted.c.key).cte("taken")
    new_keys = (
        postgresql.insert(claims)
        .from_select(
            ["key", "claimed_at"],
            select(wanted.c.key, now).where(wanted.c.claim_number.not_in(select(taken.c.claim_number))),
        )
        .on_conflict_do_nothing()
        .returning(claims.c.key)
        .cte("new_keys")
    )
    asked = _unnested(
        "asked",
        {
            "claim_number": ("thread_claims", Integer),
            **{key: (f"thread_{key}", Text) for key in _THREAD_KEYS},
        },
    )
    thread_keys = [asked.c[name] for name in _THREAD_KEYS]
    winning_threads = (
        select(*thread_keys, now, now)
        .ext(postgresql.distinct_on(*thread_keys))
        .where(asked.c.claim_number.not_in(select(taken.c.claim_number)))
    )
    workspaces = _unnested("workspaces", {key: (f"workspace_{key}", Text) for key in WORKSPACE_KEYS})
    settings = (
        select(
            workspaces.c.enterprise.label("asked_enterprise"),
            workspaces.c.team.label("asked_team"),
            *workspace_settings.c,
        )
        .select_from(
            workspaces.outerjoin(
                workspace_settings,
                and_(*(workspace_settings.c[name] == workspaces.c[name] for name in WORKSPACE_KEYS)),
            )
        )
        .subquery("settings")
    )
    inserted = select(func.array_agg(new_keys.c.key)).scalar_subquery().label("new_keys")
    return (
        select(inserted, *settings.c)
        .select_from(select(literal(1)).subquery("one").outerjoin(settings, true()))
        .add_cte(threads_upsert_from(winning_threads).cte("thread"))
    )


def _unnested(name: str, columns: dict[str, tuple[str, Any]]) -> Any:
    """``unnest`` of one bound array per column, as the table `name` with those columns; `columns`
    gives each one's array's parameter name and element type."""
    arrays = [bindparam(parameter, type_=ARRAY(kind)) for parameter, kind in columns.values()]
    return func.unnest(*arrays).table_valued(*columns).render_derived(name)


@dataclass(frozen=True)
class AttemptStart:
    """What an attempt at a run learns as it starts (see `Store.start_attempt`), from one transaction."""

    interrupted: list[RunRecord]
    """The thread's interrupted runs nobody had reported, now marked reported: the attempt tells them."""
    unread: tuple[Unread, ...]
    """What the request shared that was not read."""
    channel_rubric: str | None
    """The channel's default rubric (None if it has none, or it was not asked for)."""
    rubric_version: int | None = None
    """The channel's number for the rubric the run grades with (the one given, else its default), as
    `bot.vocabulary.provenance.rubric_version` reads it: None when no version of it set that text."""
    settings: WorkspaceSettingsRow | None = None
    """What the workspace's admins set (None if they never did, or it was not asked for)."""
    holds_run: bool = True
    """False if the lease the attempt held was taken over by another attempt (nothing recorded)."""
    stopped_by: str | None = None
    """Who asked to stop the run before this attempt started, if anyone (see `Store.request_stop`)."""
    review_modes: ReviewModes = field(default_factory=ReviewModes)
    """The channel's review modes as the attempt started (its iterations' messages follow them)."""


MATERIAL_RECORDED = RUN_UPDATE.returning(runs.c.stopped_by)
"""Record what a run's request shared (`material_values`); who asked to stop the run, if anyone."""

UNREAD_AND_STOPPED = select(runs.c.files_unread, runs.c.stopped_by).where(
    runs.c.run_id == bindparam("run_id")
)
"""What the run recorded as shared but not read (see `unread_query`), and who asked to stop it."""


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
        """Record that the request ``request_ts`` in the thread, from `requester`, started running;
        its run id. With a `quota`, only within it: else `QuotaExceeded`, recording nothing (see
        `Claim.start_runs`)."""

        def started(connection: Connection) -> int | QuotaExceeded:
            claim = Claim(connection, partial(self._spending, connection))
            return claim.start_runs([RunStart(thread, request_ts, requester, quota)])[0]

        async with self._write() as connection:
            run = await connection.run_sync(started)
        if isinstance(run, QuotaExceeded):
            raise run
        return run

    async def start_attempt(
        self,
        run_id: int,
        thread: ThreadKey,
        material: RunMaterial | None,
        *,
        channel_rubric: bool,
        rubric_text: str | None = None,
        lease: RunLease | None = None,
        settings: bool = False,
    ) -> AttemptStart:
        """Everything an attempt at a run records and reads as it starts, in one transaction: it
        takes or checks its `lease` on the run (see `take_run`), claims the thread's unreported
        interrupted runs (see `claim_interrupted_runs`), records the request's `material` (a first
        attempt read it) or reads back what an earlier attempt recorded as unread (None), reads the
        channel's default rubric if `channel_rubric`, the channel's version number of the rubric the
        run grades with (`rubric_text`, else that default), the workspace's settings if `settings`,
        whether someone asked to stop the run meanwhile, and the channel's review modes.

        An attempt whose lease was taken over records nothing and learns only that
        (``holds_run`` False); once one started with it, the lease is checked, no longer taken.
        """

        def start(connection: Connection) -> AttemptStart:
            if lease is not None and not hold(connection, run_id, lease):
                return AttemptStart([], (), None, holds_run=False)
            interrupted = claim_interrupted(connection, CLAIM_INTERRUPTED_IN_THREAD, run_thread(thread))
            # Whether someone asked to stop the run meanwhile, read with what the attempt reads or
            # writes of the run's row anyway.
            if material is None:
                recorded, stopped_by = connection.execute(UNREAD_AND_STOPPED, {"run_id": run_id}).one()
                unread = unread_of(recorded)
            else:
                stopped_by = connection.scalar(MATERIAL_RECORDED, material_values(run_id, material))
                unread = tuple(material.files_unread)
            rubric, number = None, None
            if channel_rubric:  # with its version's number, in one query
                found = connection.execute(
                    CHANNEL_RUBRIC_VERSIONED, channel_columns(thread.workspace, thread.channel)
                )
                rubric, number = found.first() or (None, None)
            if rubric_text:  # graded with it, not the channel's
                number = connection.scalar(version_numbered(thread.workspace, thread.channel, rubric_text))
            stored = read_workspace_settings(connection, thread.workspace) if settings else None
            modes = modes_in_force(connection, thread.workspace, thread.channel)
            return AttemptStart(
                interrupted, unread, rubric, number, stored, stopped_by=stopped_by, review_modes=modes
            )

        started = await self.in_thread(start)
        if lease is not None and started.holds_run:
            lease.taking = False  # taken for good: later attempts check it
        return started

    async def record_posted(
        self, run_id: int, step: Step, part: int, message_ts: str, evaluation: PostedEvaluation | None = None
    ) -> bool:
        """Record that part ``part`` of the run's ``step`` is in the thread as ``message_ts`` (with the
        evaluation it shows, if given: one transaction for an iteration's message).

        False (changing nothing) if that part was recorded before: it is already in the thread.
        """
        insert, upsert = ledger_insert(self._postgres), evaluation_upsert(self._postgres)

        def record(connection: Connection) -> bool:
            inserted = connection.execute(insert, ledger_row(run_id, step, part, message_ts)).first()
            if inserted is not None and evaluation is not None:
                connection.execute(upsert, evaluation_row(message_ts, _versioned(connection, evaluation)))
            return inserted is not None

        return await self.in_thread(record)

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
        insert = ledger_insert(self._postgres)

        def finish(connection: Connection) -> None:
            for part in posted:
                connection.execute(insert, ledger_row(run_id, part.step, part.part, part.message_ts))
            if tokens is not None:  # the reservation gives way to what the run used
                self._recharge(connection, run_id, "end", requests=0, tokens=tokens, usd=usd)
            connection.execute(RUN_UPDATE, {"of_run": run_id, **values})

        await self.in_thread(finish)

    async def mark_interrupted(self, run_id: int) -> None:
        """Record that a run was stopped before finishing; it is reported until acknowledged."""
        await self.finish_run(run_id, INTERRUPTED)

    async def delete_run(self, run_id: int) -> None:
        """Forget a run that never started (its request was deleted while queued)."""

        def forget(connection: Connection) -> None:
            # It never spent: its request and its reservation are given back.
            self._recharge(connection, run_id, "deleted", requests=-1, tokens=0, usd=0.0)
            connection.execute(delete(posted).where(posted.c.run_id == run_id))
            connection.execute(delete(runs).where(runs.c.run_id == run_id))

        await self.in_thread(forget)

    async def start_audit(self, start: audits_db.AuditStart) -> bool:
        """Record that the run's audit starts; False if it was started before (a run is audited once)."""
        values = {**asdict(start), "created_at": utc_now()}
        async with self._write() as connection:
            started = await connection.execute(
                self._upsert(audits).values(values).on_conflict_do_nothing().returning(audits.c.run_id)
            )
            return started.first() is not None

    async def finish_audit(
        self, run_id: int, result: audits_db.AuditResult, reserved: RunQuota | None = None
    ) -> None:
        """Record the audit's result, count its tokens and money with its run's, and settle what it
        `reserved` (see `reserve_audit`; None: nothing, its spend charged on today's counters) at
        what it used."""
        tokens = result.tokens or 0
        usd = result.cost.usd or 0.0 if result.cost is not None else 0.0
        day = reserved.day if reserved is not None else utc_now().date()

        def settle(connection: Connection) -> None:
            connection.execute(audits_db.FINISH_AUDIT, {"of_run": run_id, **audits_db.result_values(result)})
            self._recharge(
                connection,
                run_id,
                "audit",
                requests=0,
                tokens=tokens - (reserved.estimate if reserved else 0),
                usd=usd - (reserved.estimate_usd if reserved else 0.0),
                more=True,
                day=day,
            )
            if tokens:
                connection.execute(
                    audits_db.ADD_RUN_TOKENS, {"of_run": run_id, "audit_tokens": tokens, "audit_usd": usd}
                )
            if result.cost is not None:
                recorded = connection.execute(audits_db.RUN_COST, {"of_run": run_id}).one()
                connection.execute(
                    audits_db.SET_RUN_COST,
                    {"of_run": run_id, **audits_db.with_audit_cost(recorded, result.cost)},
                )

        await self.in_thread(settle)

    async def audits_in_channel(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> list[audits_db.AuditRow]:
        """The finished audits of a channel (None: of every one), oldest first; from ``since`` on if given."""
        query = audits_db.finished_audits(in_scope(audits, workspace, channel, since))
        return [audits_db.AuditRow(**row) for row in await self._rows(query)]

    async def graded_runs_by_iterations(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> dict[int, int]:
        """How many runs of a channel (None: of every one) the loop's grader graded, by the number of
        iterations each took; from ``since`` on if given (by their evaluations' time)."""
        query = audits_db.graded_runs_by_iterations(in_scope(evaluations, workspace, channel, since))
        return {int(row["iterations"]): int(row["runs"]) for row in await self._rows(query)}


def _versioned(connection: Connection, shown: PostedEvaluation) -> PostedEvaluation:
    """`shown` with its provenance's rubric version where it has none yet: the latest channel
    version with its rubric's text (read in the transaction that saves it), else the text's hash."""
    if shown.provenance is None or shown.provenance["rubric_version"] != UNKNOWN:
        return shown
    thread = shown.thread
    number = connection.scalar(version_numbered(thread.workspace, thread.channel, shown.rubric_text))
    found = rubric_version(number, shown.rubric_text)
    return replace(shown, provenance={**shown.provenance, "rubric_version": found})
