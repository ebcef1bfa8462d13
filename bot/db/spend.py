"""Daily spend counters (`bot.db.schema.daily_spend`): what each budget level spent on a UTC day,
and admission against the levels' caps in one statement.

A run's admission adds one request and a reserved estimate of its tokens and of their cost to every
level it spends from (its requester, channel, workspace and the deployment) in one multi-row
upsert, and reads the counters back from the same statement: no count of the day's runs, no lock
held past the statement. A level already at its cap before the run refuses it, and the same rows
are given back (`QuotaExceeded`); so a burst starts at most one run past a token or money budget
(the one that found it just under), not every run admitted before the first finished. The runs
of a batch of claims (see `bot.db.claims`) are admitted in one statement the same way
(`admit_all`). When the run ends, its counters are settled: the reservation is replaced by the
tokens it really used and what they cost, once however often the settlement is retried (see
`bot.db.usage.UsageStore._recharge`). Replays add their grader tokens and cost to the levels
they spend from the same way.

The rows of one statement are always written in one order (`LEVELS` order, then by key), so two
admissions on PostgreSQL lock the rows they share in the same order and cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from functools import cache
from typing import Any, Literal

from sqlalchemy import Connection, RowMapping, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.schema import daily_spend
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace

SpendLevel = Literal["person", "channel", "workspace", "deployment"]
"""Whose budget a counter is: a person's (in a workspace), a channel's, a workspace's, or the whole
deployment's."""

LEVELS: tuple[SpendLevel, ...] = ("person", "channel", "workspace", "deployment")
"""Every level, narrowest first: the order a statement writes their rows in."""

QuotaName = Literal[
    "requests",
    "tokens",
    "workspace_tokens",
    "deployment_tokens",
    "channel_usd",
    "workspace_usd",
    "deployment_usd",
]
"""Which daily limit a refused run met: its requester's requests, or its channel's, workspace's or
the deployment's tokens or money."""

Amount = Literal["requests", "tokens", "usd"]
"""What a counter counts: requests, model tokens, or the US dollars those tokens cost."""

_QUOTA_OF: dict[tuple[SpendLevel, str], QuotaName] = {
    ("person", "requests"): "requests",
    ("channel", "tokens"): "tokens",
    ("workspace", "tokens"): "workspace_tokens",
    ("deployment", "tokens"): "deployment_tokens",
    ("channel", "usd"): "channel_usd",
    ("workspace", "usd"): "workspace_usd",
    ("deployment", "usd"): "deployment_usd",
}
"""The caps there are, by level and amount, and the limit each is as a refusal names it."""


@dataclass(frozen=True)
class Cap:
    """One level's daily caps (those `_QUOTA_OF` names: a person's requests, the other levels'
    tokens); None: that amount is not capped at this level."""

    requests: int | None = None
    tokens: int | None = None
    usd: float | None = None
    """US dollars: a run reserves its estimated cost at admission, settled to its cost when it ends."""


@dataclass(frozen=True)
class RunQuota:
    """What a new run reserves and the caps it must stay within, on the UTC `day` it starts."""

    day: date
    estimate: int = 0
    """Tokens reserved for the run until it ends and its real tokens replace them."""
    estimate_usd: float = 0.0
    """US dollars reserved for the run until it ends and its real cost replaces them."""
    caps: dict[SpendLevel, Cap] | None = None
    """Each capped level's caps; a level not named is counted but not capped."""

    def cap(self, level: SpendLevel) -> Cap:
        return (self.caps or {}).get(level, Cap())


class QuotaExceeded(Exception):
    """A run was not started: one of its levels met the day's limit (``quota``)."""

    def __init__(self, quota: QuotaName, limit: float) -> None:
        super().__init__(f"daily {quota} limit of {limit} reached")
        self.quota: QuotaName = quota
        self.limit = limit


@dataclass(frozen=True)
class Spender:
    """Who spends: the levels one run (or replay) charges, on one UTC day."""

    day: date
    workspace: Workspace
    channel: str
    requester: str | None = None
    """The person whose requests count; None (a replay, or a run from before requesters were
    kept): no person's counter is charged."""

    def rows(self, requests: int, tokens: int, usd: float = 0.0) -> list[dict[str, object]]:
        """The counter rows of every level, in `LEVELS` order, each adding `requests`, `tokens` and
        `usd`."""
        ws = self.workspace
        subjects: dict[SpendLevel, tuple[str, str, str]] = {
            "channel": (ws.enterprise, ws.team, self.channel),
            "workspace": (ws.enterprise, ws.team, ""),
            "deployment": (NO_ENTERPRISE, "", ""),
        }
        if self.requester:
            subjects = {"person": (ws.enterprise, ws.team, self.requester), **subjects}
        return [
            {
                "day": self.day.isoformat(),
                "level": level,
                "enterprise": subjects[level][0],
                "team": subjects[level][1],
                "subject": subjects[level][2],
                "requests": requests,
                "tokens": tokens,
                "usd": usd,
            }
            for level in LEVELS
            if level in subjects
        ]


@dataclass(frozen=True)
class LevelSpend:
    """What one level has spent on the day so far (reservations of runs still going included)."""

    level: SpendLevel
    requests: int
    tokens: int
    usd: float = 0.0


def charge(
    connection: Connection, spender: Spender, requests: int, tokens: int, usd: float = 0.0
) -> list[LevelSpend]:
    """Add `requests`, `tokens` and `usd` (any may be negative: a give-back) to each of the
    spender's levels in one statement; each level's counters after it. Synchronous, like every
    statement of a claim (see `bot.db.claims`); an async caller runs it with ``run_sync``."""
    rows = spender.rows(requests, tokens, usd)
    after = _charge_rows(connection, rows)
    return [after[_key_of(row)] for row in rows]


def _charge_rows(connection: Connection, rows: list[dict[str, object]]) -> dict[_Key, LevelSpend]:
    """Add the counter `rows` in one statement; each counter after it, by its key."""
    result = connection.execute(_charging(connection.dialect.name == "postgresql"), rows)
    return {
        _key_of(row._mapping): LevelSpend(row.level, int(row.requests), int(row.tokens), float(row.usd))
        for row in result
    }


@cache
def _charging(postgres: bool) -> Any:
    """The counters' upsert, built once per dialect: executed with many rows, SQLAlchemy sends them
    as one multi-row statement in the rows' order and compiles it once (a statement built with its
    rows inline is compiled again on every admission)."""
    upsert = postgresql.insert if postgres else sqlite.insert
    adding = upsert(daily_spend)
    return adding.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={
            "requests": daily_spend.c.requests + adding.excluded.requests,
            "tokens": daily_spend.c.tokens + adding.excluded.tokens,
            "usd": daily_spend.c.usd + adding.excluded.usd,
        },
    ).returning(*(daily_spend.c[k] for k in (*_KEY, "requests", "tokens", "usd")))


def admit_all(
    connection: Connection, admissions: Sequence[tuple[Spender, RunQuota]], *, requests: int = 1
) -> list[QuotaExceeded | None]:
    """Count new runs against every level of their spenders and reserve each one's estimated tokens
    and dollars, in one statement however many runs there are; for each run, in order, None if it
    was admitted, else the cap that refused it (what it reserved is given back, in one more
    statement).

    Each counts as `requests` requests (a replay's case: none). Each run is judged as if the runs
    were admitted one after another: against the counters as they
    were before this statement, plus what the runs before it here that were admitted reserved. A
    counter several runs share (their person's, the deployment's) is written once with their sum,
    since one statement cannot update a row twice.
    """
    reserved = [spender.rows(requests, quota.estimate, quota.estimate_usd) for spender, quota in admissions]
    totals = _summed(row for rows in reserved for row in rows)
    after = _charge_rows(connection, totals)
    spent = {_key_of(row): _added(after[_key_of(row)], row, -1) for row in totals}
    refusals: list[QuotaExceeded | None] = []
    for (_, quota), rows in zip(admissions, reserved, strict=True):
        refusal = reached([spent[_key_of(row)] for row in rows], quota)
        refusals.append(refusal)
        if refusal is None:
            spent.update({_key_of(row): _added(spent[_key_of(row)], row) for row in rows})
    refused = [row for rows, refusal in zip(reserved, refusals, strict=True) if refusal for row in rows]
    if refused:
        _charge_rows(connection, _summed(refused, -1))
    return refusals


_Key = tuple[str, str, str, str, str]
"""One counter's `_KEY`: its day, level, enterprise, team and subject."""


def _key_of(row: Mapping[str, Any] | RowMapping) -> _Key:
    """Which counter a row (of counter values, or of the table) is."""
    return (str(row["day"]), row["level"], row["enterprise"], row["team"], row["subject"])


def _summed(rows: Iterable[dict[str, object]], sign: int = 1) -> list[dict[str, object]]:
    """One row per counter in `rows`, adding up their amounts (times `sign`), in the order every
    statement writes counters in: by level in `LEVELS` order, then by key (so that two statements on
    PostgreSQL lock the rows they share in the same order, and cannot deadlock)."""
    summed: dict[_Key, dict[str, object]] = {}
    for row in rows:
        key = _key_of(row)
        total = summed.setdefault(key, {**row, "requests": 0, "tokens": 0, "usd": 0.0})
        for amount in ("requests", "tokens", "usd"):
            total[amount] = total[amount] + sign * row[amount]  # type: ignore[operator]
    return [summed[key] for key in sorted(summed, key=lambda k: (LEVELS.index(k[1]), k))]


def _added(spend: LevelSpend, row: Mapping[str, Any], sign: int = 1) -> LevelSpend:
    """`spend` with a counter row's amounts added (times `sign`)."""
    return LevelSpend(
        spend.level,
        spend.requests + sign * row["requests"],
        spend.tokens + sign * row["tokens"],
        spend.usd + sign * row["usd"],
    )


def reached(spends: Iterable[LevelSpend], quota: RunQuota) -> QuotaExceeded | None:
    """The first of `quota`'s caps, narrowest level first, that a level's counters in `spends` have
    reached (what refuses a run, or a replay before it starts)."""
    for spent in sorted(spends, key=lambda s: LEVELS.index(s.level)):
        cap = quota.cap(spent.level)
        limits: tuple[tuple[Amount, float | None, float], ...] = (
            ("requests", cap.requests, spent.requests),
            ("tokens", cap.tokens, spent.tokens),
            ("usd", cap.usd, spent.usd),
        )
        for amount, limit, value in limits:
            if limit is not None and value >= limit:
                return QuotaExceeded(_QUOTA_OF[spent.level, amount], limit)
    return None


async def spent(connection: AsyncConnection, spender: Spender) -> dict[SpendLevel, LevelSpend]:
    """What each of the spender's levels spent on its day (a level with nothing spent is absent)."""
    keys = [tuple(row[k] for k in _KEY) for row in spender.rows(0, 0)]
    query = select(
        daily_spend.c.level, daily_spend.c.requests, daily_spend.c.tokens, daily_spend.c.usd
    ).where(tuple_(*(daily_spend.c[k] for k in _KEY)).in_(keys))
    result = await connection.execute(query)
    return {
        row.level: LevelSpend(row.level, int(row.requests), int(row.tokens), float(row.usd)) for row in result
    }


@dataclass(frozen=True)
class SpendCounter:
    """One level's counters on a day, and whose they are."""

    level: SpendLevel
    enterprise: str
    team: str
    subject: str
    """The person or channel id; "" for a workspace and the deployment."""
    requests: int
    tokens: int
    usd: float


async def counters_of(connection: AsyncConnection, day: date) -> list[SpendCounter]:
    """Every counter of `day`, widest level first, then by workspace and subject."""
    query = (
        select(*(daily_spend.c[k] for k in (*_KEY[1:], "requests", "tokens", "usd")))
        .where(daily_spend.c.day == day.isoformat())
        .order_by(daily_spend.c.enterprise, daily_spend.c.team, daily_spend.c.subject)
    )
    rows = [SpendCounter(**row) for row in (await connection.execute(query)).mappings()]
    return sorted(rows, key=lambda c: -LEVELS.index(c.level))


_KEY = ("day", "level", "enterprise", "team", "subject")
"""The columns that name one counter (`daily_spend`'s primary key)."""
