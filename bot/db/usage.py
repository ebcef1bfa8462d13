"""Usage: the runs, tokens and cost of each requester and channel per day, and the daily spend
counters a run's admission charges (`bot.db.spend`) on a connection of their own on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial
from typing import Any, Literal, NamedTuple, Protocol

from sqlalchemy import Connection, bindparam, event, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.db.audits import AUDIT_ROLE
from bot.db.base import StoreBase
from bot.db.database import SPEND_POOL_SIZE, Database, pool_size
from bot.db.schema import claims, replay_spend, runs, shadow_grades
from bot.db.scope import in_scope, utc_now
from bot.db.spend import (
    LevelSpend,
    QuotaExceeded,
    RunQuota,
    SpendCounter,
    Spender,
    SpendLevel,
    admit_all,
    charge,
    counters_of,
    reached,
    spent,
)
from bot.vocabulary.workspace import Workspace


class PricedRun(Protocol):
    """A run's tokens and money per role, as its end records them (`bot.limits.prices.RunCost`
    prices them; the store keeps what it says)."""

    @property
    def usd(self) -> float:
        """The money of the priced roles."""
        ...

    @property
    def unpriced(self) -> list[str]:
        """Models whose tokens could not be priced (empty: the cost is complete)."""
        ...

    def role_usd(self, role: Literal["grader"]) -> float:
        """One role's money."""
        ...

    def model_dump(self, *, mode: Literal["json"]) -> dict[str, Any]:
        """The cost as JSON: ``{"roles": {role: {"model", "input_tokens", …, "usd"}}}``."""
        ...


def cost_values(cost: PricedRun) -> dict[str, Any]:
    """The `runs` columns keeping a run's `cost` (see `bot.db.schema.runs`)."""
    return {
        "cost_usd": cost.usd,
        "grader_cost_usd": cost.role_usd("grader"),
        "cost_unpriced": bool(cost.unpriced),
        "token_usage": cost.model_dump(mode="json")["roles"],
    }


class Spent(NamedTuple):
    """Tokens and what they cost: a replay call's reservation, or what it used."""

    tokens: int
    usd: float


REPLAYS = "replays"
"""The requester of a usage row of `/rubric replay`'s grader calls (no Slack user id is lowercase)."""

SHADOW = "shadow"
"""The requester of a usage row of the shadow grader's grades (`bot.shadow`): not a request either."""


@dataclass(frozen=True)
class UsageRow:
    """Runs one requester started in one channel on one UTC day, and the tokens they used."""

    day: date
    channel: str
    requester: str
    """The Slack user who asked; "" for runs from before requesters were kept; `REPLAYS` for the
    grader calls of replays, `SHADOW` for the shadow grader's (no requests: neither is one)."""
    requests: int
    tokens: int
    usd: float = 0.0
    """What their priced model calls cost, in US dollars."""
    unpriced: int = 0
    """Of the runs, how many used a model the price table does not know (their cost is partial)."""
    workspace: str = ""
    """The Slack workspace (team id) of the channel."""


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
    audit_usd: float = 0.0
    """The audit grader's part of `usd` (`bot.audit`: a share of runs graded again once finished)."""
    audits: int = 0
    """Of the runs, those the audit grader graded again."""
    replay_calls: int = 0
    """Grader calls of `/rubric replay` (not runs: their cost is not in `usd`)."""
    replay_usd: float = 0.0
    """US dollars of those calls."""


class UsageStore(StoreBase):
    """Runs, tokens and cost per day, channel and requester, and the daily spend counters."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        super().__init__(engine, database)
        self._counters: AsyncEngine | None = None
        """PostgreSQL: the spend counters' own autocommit engine, opened when first needed (see
        `_spending`)."""

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
            .where(*in_scope(runs, workspace, channel, since, runs.c.started_at))
            .group_by(day, runs.c.team, runs.c.channel, requester)
            .order_by(day, runs.c.team, runs.c.channel, requester)
        )
        ran = [
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
        replayed = await self._replay_usage(workspace, channel, since)
        return sorted([*ran, *replayed], key=lambda row: (row.day, row.workspace, row.channel, row.requester))

    async def _replay_usage(
        self, workspace: Workspace | None, channel: str | None, since: datetime
    ) -> list[UsageRow]:
        """Replays' grader calls and shadow grades from ``since`` on, per UTC day, workspace and
        channel, each under its own requester (`REPLAYS`, `SHADOW`)."""
        rows = []
        for table, requester in ((replay_spend, REPLAYS), (shadow_grades, SHADOW)):
            day = self._utc_day(table.c.created_at)
            query = (
                select(
                    day.label("day"),
                    table.c.team,
                    table.c.channel,
                    func.sum(table.c.tokens).label("tokens"),
                    func.coalesce(func.sum(table.c.usd), 0).label("usd"),
                )
                .where(*in_scope(table, workspace, channel, since))
                .group_by(day, table.c.team, table.c.channel)
            )
            rows += [
                UsageRow(
                    day=date.fromisoformat(row["day"]),
                    channel=row["channel"],
                    requester=requester,
                    requests=0,
                    tokens=int(row["tokens"]),
                    usd=float(row["usd"]),
                    workspace=row["team"],
                )
                for row in await self._rows(query)
            ]
        return rows

    async def settle_replay_call(
        self, workspace: Workspace, channel: str, day: date, *, reserved: Spent, used: Spent
    ) -> None:
        """Settle one grader call of a replay of `channel`: its reservation on `day`'s counters
        replaced by what it `used`, and what it used kept for the cost history, in one transaction:
        a fault between the two leaves neither (the call still reserved, and not in the history),
        never spend charged but missing from the history or the other way round."""
        spender = Spender(day, workspace, channel)
        row = {
            "enterprise": workspace.enterprise,
            "team": workspace.team,
            "channel": channel,
            "tokens": used.tokens,
            "usd": used.usd,
            "created_at": utc_now(),
        }
        change = Spent(used.tokens - reserved.tokens, used.usd - reserved.usd)
        async with self._write() as connection:
            await connection.run_sync(self._settle_replay_call, spender, change, row)

    def _settle_replay_call(
        self, transaction: Connection, spender: Spender, change: Spent, row: dict[str, object]
    ) -> None:
        with self._counters_transaction(transaction) as counters:
            charge(counters, spender, 0, change.tokens, change.usd)
            counters.execute(insert(replay_spend).values(row))

    def _utc_day(self, moment: Any) -> Any:
        """The UTC calendar day of a timestamp column, as ``YYYY-MM-DD`` text, in SQL."""
        if self._postgres:
            return func.to_char(func.timezone("UTC", moment), "YYYY-MM-DD")
        return func.substr(moment, 1, 10)  # SQLite keeps ISO-8601 UTC text

    async def cost_tally(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> CostTally:
        """What the runs started from ``since`` on cost (None filters match all)."""
        audit = runs.c.token_usage[(AUDIT_ROLE, "usd")].as_float()
        audited = runs.c.token_usage[(AUDIT_ROLE, "output_tokens")].as_integer()
        query = select(
            func.count().label("runs"),
            func.count().filter(runs.c.status == "satisfied").label("satisfied"),
            func.coalesce(func.sum(runs.c.cost_usd), 0).label("usd"),
            func.coalesce(func.sum(runs.c.grader_cost_usd), 0).label("grader_usd"),
            func.count().filter(runs.c.cost_unpriced).label("unpriced"),
            func.coalesce(func.sum(audit), 0).label("audit_usd"),
            func.count().filter(audited.is_not(None)).label("audits"),
        ).where(runs.c.cost_usd.is_not(None), *in_scope(runs, workspace, channel, since, runs.c.started_at))
        (row,) = await self._rows(query)
        replayed = select(
            func.count().label("calls"), func.coalesce(func.sum(replay_spend.c.usd), 0).label("usd")
        ).where(*in_scope(replay_spend, workspace, channel, since))
        (replays,) = await self._rows(replayed)
        return CostTally(
            runs=int(row["runs"]),
            satisfied=int(row["satisfied"]),
            usd=float(row["usd"]),
            grader_usd=float(row["grader_usd"]),
            unpriced=int(row["unpriced"]),
            audit_usd=float(row["audit_usd"]),
            audits=int(row["audits"]),
            replay_calls=int(replays["calls"]),
            replay_usd=float(replays["usd"]),
        )

    async def spent_today(self, spender: Spender) -> dict[SpendLevel, LevelSpend]:
        """What the spender's levels spent on its day, reservations of unfinished runs included."""
        async with self._turns, self._reader.connect() as connection:
            return await spent(connection, spender)

    async def counters_of(self, day: date) -> list[SpendCounter]:
        """Every spend counter of a UTC day, of every workspace (for the terminal's usage)."""
        async with self._turns, self._reader.connect() as connection:
            return await counters_of(connection, day)

    async def replay_refusal(
        self, workspace: Workspace, channel: str, quota: RunQuota
    ) -> QuotaExceeded | None:
        """The first of `quota`'s caps that the channel, its workspace or the deployment (the levels a
        replay spends from) has already reached on the quota's day; None: a replay may start."""
        return reached((await self.spent_today(Spender(quota.day, workspace, channel))).values(), quota)

    async def charge_replay(
        self, workspace: Workspace, channel: str, tokens: int, usd: float = 0.0, day: date | None = None
    ) -> None:
        """Count a replay's grader `tokens` and what they cost (`usd`; either negative: a reservation
        given back) against the budgets of its channel, its workspace and the deployment on `day`
        (today by default; no person's: a replay is not a request)."""
        spender = Spender(day or utc_now().date(), workspace, channel)
        async with self._write() as connection:
            await connection.run_sync(self._charge, spender, 0, tokens, usd)

    async def reserve_replay(
        self, workspace: Workspace, channel: str, quota: RunQuota
    ) -> QuotaExceeded | None:
        """Reserve `quota`'s estimate for a replay's next grader call from the budgets it spends from
        (its channel's, its workspace's, the deployment's, on the quota's day), as a run's admission
        does (see `bot.db.spend.admit_all`), no request counted; the cap that refuses it (nothing
        reserved), else None."""
        spender = Spender(quota.day, workspace, channel)
        async with self._write() as connection:
            return await connection.run_sync(self._admit_spending, spender, quota)

    async def reserve_audit(self, run_id: int, quota: RunQuota) -> QuotaExceeded | None:
        """Reserve `quota`'s estimate for the audit of run `run_id` from the budgets its run spends
        from (its channel's, its workspace's, the deployment's, and its requester's counters) on the
        quota's day, no request counted (see `reserve_replay`); the cap that refuses it (nothing
        reserved), else None. `finish_audit` settles it, `release_audit` gives it back."""
        async with self._write() as connection:
            row = (await connection.execute(_RUN_SPENDER, {"of_run": run_id})).one()
            return await connection.run_sync(self._admit_spending, _spender_of(row, quota.day), quota)

    async def release_audit(self, run_id: int, quota: RunQuota) -> None:
        """Give back what the audit of run `run_id` reserved (`quota`), its grader never done."""
        async with self._write() as connection:
            row = (await connection.execute(_RUN_SPENDER, {"of_run": run_id})).one()
            spender = _spender_of(row, quota.day)
            await connection.run_sync(self._charge, spender, 0, -quota.estimate, -quota.estimate_usd)

    def _admit_spending(
        self, transaction: Connection, spender: Spender, quota: RunQuota
    ) -> QuotaExceeded | None:
        with self._spending(transaction) as counters:
            return admit_all(counters, [(spender, quota)], requests=0)[0]

    def _recharge(
        self,
        connection: Connection,
        run_id: int,
        settlement: Settlement,
        *,
        requests: int,
        tokens: int,
        usd: float | None = None,
        more: bool = False,
        day: date | None = None,
    ) -> None:
        """Settle the run (`settlement`: its end, its audit's, or its deletion's) once: change what
        it added to its day's spend counters to `tokens` and, when given, `usd` (`more`: by `tokens`
        and `usd` more, on `day`'s counters: an audit's, settling its own reservation) and `requests`
        more requests, in the transaction of `connection` where the counters are in it. What it
        added before is what the run's row says it charged (its reservation, or what an earlier
        settling set); the caller records the new amounts on the row in `connection`'s transaction.

        A settlement carries the run's id and applies once (see `_settle`): on PostgreSQL the
        counters commit on their own, so a settlement whose transaction failed after them (a fault
        of the database, say) and is retried finds the row unchanged but the counters settled, and
        must not charge them again (the change counted twice, counters gone negative)."""
        row = connection.execute(_RUN_SPENDER, {"of_run": run_id}).first()
        if row is None:
            return
        spender = _spender_of(row, day)
        money = 0.0 if usd is None else usd if more else usd - row.charged_usd
        added = tokens if more else tokens - row.charged_tokens
        key = f"{SETTLEMENT_KEY_PREFIX}{settlement}:{run_id}"
        self._settle(connection, key, spender, requests, added, money)

    def _charge(
        self, transaction: Connection, spender: Spender, requests: int, tokens: int, usd: float
    ) -> None:
        """`charge` the spender's counters on their connection (see `_spending`)."""
        with self._spending(transaction) as counters:
            charge(counters, spender, requests, tokens, usd)

    def _settle(
        self, transaction: Connection, key: str, spender: Spender, requests: int, tokens: int, usd: float
    ) -> None:
        """`charge` the spender's counters unless the settlement `key` was claimed before: the key
        claimed (see `bot.db.claims`) in the counters' transaction, so that the charge and its key
        commit together."""
        with self._counters_transaction(transaction) as counters:
            if _first_claim(counters, key, postgres=self._postgres):
                charge(counters, spender, requests, tokens, usd)

    @contextmanager
    def _counters_transaction(self, transaction: Connection) -> Iterator[Connection]:
        """A connection to update the spend counters on together with what must commit with them
        (a settlement's key, a replay call's line in the cost history): SQLite's `transaction`; on
        PostgreSQL a transaction of its own on the counters' connection (see `_spending`), which
        is otherwise in autocommit."""
        with self._spending(transaction) as counters:
            if not self._postgres:
                yield counters
                return
            together = counters.execution_options(isolation_level="READ COMMITTED")
            with together.begin():
                yield together

    @contextmanager
    def _spending(self, transaction: Connection) -> Iterator[Connection]:
        """A connection to update the spend counters on: SQLite's in `transaction` (one writer at a
        time anyway); on PostgreSQL one of their own pool in autocommit, so that a counter row is
        locked for its statement only, not until a claim's transaction (which waits on this
        process's event loop) commits: a burst from one person would queue behind it. Synchronous,
        like the claim's statements: on PostgreSQL it runs in SQLAlchemy's greenlet, and the async
        pool's connection is checked out through it."""
        if not self._postgres:
            yield transaction
            return
        with self._counters_engine().sync_engine.connect() as connection:
            yield connection

    def _counters_engine(self) -> AsyncEngine:
        """The spend counters' own pool, in autocommit (PostgreSQL only; opened when first used)."""
        if self._counters is None:
            size = min(SPEND_POOL_SIZE, pool_size(self._engine))
            self._counters = self._database.create_engine(
                pool_size=size, autocommit=True, flushed_commits=False
            )
            for one, other in ((self._engine, self._counters), (self._counters, self._engine)):
                event.listen(one.sync_engine, "handle_error", partial(_drop_pool_on_disconnect, other))
        return self._counters

    async def _close_counters(self) -> None:
        """Close the spend counters' own connections, if any were opened."""
        if self._counters is not None:
            await self._counters.dispose()


def _drop_pool_on_disconnect(other: AsyncEngine, context: ExceptionContext) -> None:
    """A connection of one of the store's two pools found the server gone (restarted, or it cut
    its connections): the other pool's connections went with it. SQLAlchemy drops the pool that
    saw it; drop the other's too, rather than fail one more admission on each of its connections."""
    if context.is_disconnect:
        other.sync_engine.dispose(close=False)


Settlement = Literal["end", "audit", "deleted"]
"""Which settlement of a run's spend counters: its end (the reservation replaced by what it used),
its audit's tokens added, or its deletion before it ran (its request given back)."""

SETTLEMENT_KEY_PREFIX = "settled:"
"""The dedupe key of a run's settlement is ``settled:<settlement>:<run id>``, claimed with the charge
(see `UsageStore._settle`); pruned with the messages' claims, long after any retry."""


def _first_claim(connection: Connection, key: str, *, postgres: bool) -> bool:
    """Claim the dedupe `key` in `connection`'s transaction; False if it was claimed before."""
    upsert = postgresql.insert if postgres else sqlite.insert
    statement = upsert(claims).values(key=key, claimed_at=utc_now()).on_conflict_do_nothing()
    return connection.execute(statement.returning(claims.c.key)).first() is not None


SyncSpending = Callable[[], AbstractContextManager[Connection]]
"""Opens the connection a claim updates the spend counters on (see `UsageStore._spending`)."""

_RUN_SPENDER = select(
    runs.c.enterprise,
    runs.c.team,
    runs.c.channel,
    runs.c.requester,
    runs.c.started_at,
    runs.c.charged_tokens,
    runs.c.charged_usd,
).where(runs.c.run_id == bindparam("of_run"))
"""Whose spend counters a run charged, on which day, and how many tokens and dollars it charged them."""


def _spender_of(row: Any, day: date | None = None) -> Spender:
    """Who a run (a `_RUN_SPENDER` row) spends as, on `day` (None: the UTC day it started)."""
    return Spender(
        day=day or row.started_at.astimezone(UTC).date(),
        workspace=Workspace(row.team, row.enterprise),
        channel=row.channel,
        requester=row.requester,
    )
