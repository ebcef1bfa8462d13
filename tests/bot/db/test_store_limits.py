"""The store's side of the guardrails: daily quotas at admission, usage per day, replay locks and
cooldowns, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

import psycopg
import pytest
from langchain_core.messages import UsageMetadata
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import DBAPIError

from bot.config import load_settings
from bot.db.audits import AuditResult
from bot.db.database import SPEND_POOL_SIZE, STORE_POOL_SIZE, Database
from bot.db.replays import ReplayLease, ReplayRefused
from bot.db.spend import Cap, QuotaExceeded, RunQuota, Spender
from bot.db.store import Store
from bot.db.usage import REPLAYS, Spent
from bot.limits.prices import run_cost
from bot.limits.quota import NO_LIMIT, DailyLimits, MoneyLimits
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
"""The workspace the tests' rows are filed under."""


def midnight() -> datetime:
    """The start of today (UTC), read when a test asks, as the bot reads it for each admission: read
    once at import, a run of the suite across midnight would count today's runs under yesterday."""
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def quota(estimate=0, day=None, **caps):
    """Today's quota reserving `estimate` tokens per run, with a `Cap` per level named."""
    return RunQuota(day=day or midnight().date(), estimate=estimate, caps=caps)


async def start(store, channel="C1", requester="U1", quota=None, ts="1.0", team="T1"):
    return await store.start_run(ThreadKey(team, channel, ts), ts, requester=requester, quota=quota)


async def test_a_requester_past_the_daily_request_limit_is_refused_and_others_are_not(store):
    two = quota(person=Cap(requests=2))
    await start(store, quota=two)
    await start(store, channel="C2", quota=two)  # the limit spans channels

    with pytest.raises(QuotaExceeded) as refused:
        await start(store, quota=two)
    assert (refused.value.quota, refused.value.limit) == ("requests", 2)
    await start(store, requester="U2", quota=two)
    # Runs of an earlier day do not count.
    assert await start(store, quota=quota(day=midnight().date() + timedelta(days=1), person=Cap(requests=2)))


async def test_concurrent_admissions_cannot_both_take_the_last_place(store):
    three = quota(person=Cap(requests=3))
    results = await asyncio.gather(
        *(start(store, quota=three, ts=f"{n}.0") for n in range(8)), return_exceptions=True
    )
    assert sum(isinstance(r, int) for r in results) == 3
    assert all(isinstance(r, QuotaExceeded) for r in results if not isinstance(r, int))


async def test_a_channel_at_its_token_budget_refuses_new_runs_and_another_channel_does_not(store):
    budget = quota(estimate=40, channel=Cap(tokens=100))
    run = await start(store, quota=budget)
    await start(store, quota=budget)  # 40 reserved: room for another
    await store.finish_run(run, "answered", tokens=70)  # 70 used + 40 still reserved

    with pytest.raises(QuotaExceeded) as refused:
        await start(store, requester="U2", quota=budget)
    assert (refused.value.quota, refused.value.limit) == ("tokens", 100)
    await start(store, channel="C2", quota=budget)


async def test_a_burst_against_a_budget_of_one_run_starts_at_most_one_run_more(store):
    """Twenty requests at once against a channel budget of one run's tokens: the reservation of
    each admitted run counts before any has finished, so at most two start (one past the budget:
    the one that found it just under), not all twenty."""
    one_run = 500
    budget = quota(estimate=one_run, channel=Cap(tokens=one_run))
    results = await asyncio.gather(
        *(start(store, requester=f"U{n}", quota=budget, ts=f"{n}.0") for n in range(20)),
        return_exceptions=True,
    )
    started = [r for r in results if isinstance(r, int)]
    assert 1 <= len(started) <= 2
    assert all(
        isinstance(r, QuotaExceeded) and r.quota == "tokens" for r in results if not isinstance(r, int)
    )


async def test_a_run_settles_its_reservation_at_the_tokens_it_used_and_a_deleted_one_gives_all_back(store):
    budget = quota(estimate=1_000)
    spender = Spender(midnight().date(), T1, "C1", "U1")
    finished, deleted = await start(store, quota=budget), await start(store, quota=budget, ts="2.0")
    assert (await store.spent_today(spender))["channel"].tokens == 2_000

    await store.finish_run(finished, "answered", tokens=321)
    await store.delete_run(deleted)  # its request was deleted before it ran

    spent = await store.spent_today(spender)
    assert {level: (s.requests, s.tokens) for level, s in spent.items()} == {
        level: (1, 321) for level in ("person", "channel", "workspace", "deployment")
    }
    await store.finish_run(finished, "answered", tokens=321)  # settling twice changes nothing
    assert (await store.spent_today(spender))["deployment"].tokens == 321


async def test_a_workspace_and_the_deployment_cap_every_channel_of_theirs(store):
    caps = quota(estimate=100, workspace=Cap(tokens=150), deployment=Cap(tokens=250))
    await start(store, channel="C1", quota=caps)
    await start(store, channel="C2", quota=caps)  # 100 of 150: still under
    with pytest.raises(QuotaExceeded) as workspace:
        await start(store, channel="C3", requester="U2", quota=caps)
    assert (workspace.value.quota, workspace.value.limit) == ("workspace_tokens", 150)

    await start(store, team="T2", quota=caps)  # another workspace: 200 of the deployment's 250
    with pytest.raises(QuotaExceeded) as deployment:
        await start(store, team="T3", quota=caps)
    assert (deployment.value.quota, deployment.value.limit) == ("deployment_tokens", 250)
    # Refusals gave back what they counted: T1 has its two runs, the deployment three.
    spent = await store.spent_today(Spender(midnight().date(), T1, "C3", "U2"))
    assert (spent["workspace"].requests, spent["deployment"].requests) == (2, 3)
    assert "person" not in spent or spent["person"].requests == 0


async def test_replay_tokens_and_cost_count_toward_the_channel_workspace_and_deployment(store):
    await store.charge_replay(T1, "C1", 700, 0.25)
    spent = await store.spent_today(Spender(midnight().date(), T1, "C1", "U1"))
    assert {level: (s.requests, s.tokens, s.usd) for level, s in spent.items()} == {
        "channel": (0, 700, 0.25),
        "workspace": (0, 700, 0.25),
        "deployment": (0, 700, 0.25),
    }
    with pytest.raises(QuotaExceeded):
        await start(store, quota=quota(channel=Cap(tokens=700)))
    with pytest.raises(QuotaExceeded) as money:
        await start(store, quota=quota(workspace=Cap(usd=0.25)))
    assert money.value.quota == "workspace_usd"


async def test_a_replay_is_refused_by_a_spent_budget_of_its_channel_workspace_or_deployment_not_a_persons(
    store,
):
    await start(store, quota=quota(person=Cap(requests=1)))  # U1 at their request limit: not a replay's
    await store.charge_replay(T1, "C1", 700)

    assert (
        await store.replay_refusal(T1, "C1", quota(person=Cap(requests=1), channel=Cap(tokens=701))) is None
    )
    for caps, refused in [
        ({"channel": Cap(tokens=700)}, ("tokens", 700)),
        ({"workspace": Cap(tokens=500)}, ("workspace_tokens", 500)),
        ({"deployment": Cap(tokens=700)}, ("deployment_tokens", 700)),
    ]:
        found = await store.replay_refusal(T1, "C1", quota(**caps))
        assert found is not None and (found.quota, found.limit) == refused
    # Another channel of the workspace: its own budget has room, the workspace's does not.
    assert await store.replay_refusal(T1, "C2", quota(channel=Cap(tokens=700))) is None
    found = await store.replay_refusal(T1, "C2", quota(workspace=Cap(tokens=700)))
    assert found is not None and found.quota == "workspace_tokens"


async def test_a_replay_is_refused_by_a_spent_money_budget(store):
    spent = {"input_tokens": 100_000, "output_tokens": 10_000, "total_tokens": 110_000}
    run = await start(store)
    await store.finish_run(
        run, "answered", tokens=110_000, cost=run_cost({"worker": ("openai:gpt-4o-mini", spent)})
    )

    assert await store.replay_refusal(T1, "C1", quota(channel=Cap(usd=0.05))) is None
    found = await store.replay_refusal(T1, "C1", quota(channel=Cap(usd=0.02)))
    assert found is not None and (found.quota, found.limit) == ("channel_usd", 0.02)


async def test_usage_per_day_channel_and_requester(store):
    first = await start(store)
    await store.finish_run(first, "answered", tokens=30)
    second = await start(store, ts="2.0")
    await store.finish_run(second, "answered", tokens=12)
    await start(store, requester="U2")
    await start(store, channel="C2")

    rows = await store.usage(T1, "C1", midnight())
    day = datetime.now(UTC).date()
    assert [(r.day, r.channel, r.requester, r.requests, r.tokens) for r in rows] == [
        (day, "C1", "U1", 2, 42),
        (day, "C1", "U2", 1, 0),
    ]
    assert {r.channel for r in await store.usage(None, None, midnight())} == {"C1", "C2"}
    assert await store.usage(T1, "C1", datetime.now(UTC) + timedelta(seconds=1)) == []
    assert isinstance(rows[0].day, date)


async def test_replays_grader_calls_are_in_the_cost_history_apart_from_runs_until_a_purge(store):
    run = await start(store)
    await store.finish_run(run, "answered", tokens=30)
    for channel, tokens, usd in [("C1", 1_100, 0.0025), ("C1", 900, 0.0015), ("C2", 500, 0.001)]:
        await store.settle_replay_call(
            T1, channel, midnight().date(), reserved=Spent(0, 0.0), used=Spent(tokens, usd)
        )

    rows = await store.usage(T1, "C1", midnight())
    day = datetime.now(UTC).date()
    assert [(r.day, r.channel, r.requester, r.requests, r.tokens) for r in rows] == [
        (day, "C1", "U1", 1, 30),
        (day, "C1", REPLAYS, 0, 2_000),
    ]
    assert rows[1].usd == pytest.approx(0.004)
    tally = await store.cost_tally(T1, "C1")
    assert (tally.replay_calls, tally.replay_usd) == (2, pytest.approx(0.004))
    assert (await store.cost_tally(T1, None)).replay_calls == 3
    assert await store.usage(Workspace("T2"), None, midnight()) == []

    erased = await store.erase_channel_settings(T1, "C1")
    assert erased["replay spend"] == 2
    assert [r.requester for r in await store.usage(T1, None, midnight())] == ["U1", REPLAYS]


async def test_one_replay_per_channel_at_a_time_then_a_cooldown(store):
    lease = await store.start_replay(T1, "C1", "U1", timedelta(hours=1))
    assert isinstance(lease, ReplayLease)

    running = await store.start_replay(T1, "C1", "U2", timedelta(0))
    assert running == ReplayRefused(running=True, started_by="U1")
    other = await store.start_replay(T1, "C2", "U2", timedelta(hours=1))
    assert isinstance(other, ReplayLease)
    await other.release()

    await lease.release()
    cooling = await store.start_replay(T1, "C1", "U2", timedelta(hours=1))
    assert isinstance(cooling, ReplayRefused) and not cooling.running and cooling.started_by == "U1"
    assert cooling.next_start is not None
    assert timedelta(minutes=59) < cooling.next_start - datetime.now(UTC) <= timedelta(hours=1)

    again = await store.start_replay(T1, "C1", "U2", timedelta(0))
    assert isinstance(again, ReplayLease)
    await again.release()


async def test_a_replay_that_graded_nothing_starts_no_cooldown(store):
    hour = timedelta(hours=1)
    first = await store.start_replay(T1, "C1", "U1", timedelta(0))
    assert isinstance(first, ReplayLease)
    await first.release(graded=False)  # the channel had no start before it: it has none again
    graded = await store.start_replay(T1, "C1", "U2", hour)
    assert isinstance(graded, ReplayLease)
    await graded.release()

    empty = await store.start_replay(T1, "C1", "U3", timedelta(0))
    assert isinstance(empty, ReplayLease)
    await empty.release(graded=False)

    cooling = await store.start_replay(T1, "C1", "U3", hour)
    assert isinstance(cooling, ReplayRefused) and cooling.started_by == "U2"  # U2's start counts


@pytest.mark.postgres
async def test_a_replay_lock_is_held_across_stores_and_freed_when_its_holder_goes(postgres_url):
    first, second = await Store.open(postgres_url), await Store.open(postgres_url)
    try:
        lease = await first.start_replay(T1, "C1", "U1", timedelta(0))
        assert isinstance(lease, ReplayLease)
        assert await second.start_replay(T1, "C1", "U2", timedelta(0)) == ReplayRefused(True, "U1")
        await _drop_advisory_lock_holders(second)  # as if the holder's process died
        freed = await second.start_replay(T1, "C1", "U2", timedelta(0))
        assert isinstance(freed, ReplayLease)
        await freed.release()
        with contextlib.suppress(DBAPIError):  # its session is gone: only the connection is given back
            await lease.release()
    finally:
        await first.close()
        await second.close()


@pytest.mark.postgres
async def test_replays_running_at_once_leave_the_stores_connections_to_everyone_else(postgres_url):
    """More replays than the store keeps connections, all holding their channel's lock: the store
    still answers other queries (a replay's lock is on a connection of its own, not the pool's)."""
    store = await Store.open(postgres_url)
    try:
        leases = [
            await store.start_replay(T1, f"CR{n}", "U1", timedelta(0)) for n in range(STORE_POOL_SIZE + 2)
        ]
        assert all(isinstance(lease, ReplayLease) for lease in leases)
        await store.ping()
        assert await start(store, channel="COTHER")  # a request elsewhere is admitted and recorded
        for lease in leases:
            assert isinstance(lease, ReplayLease)
            await lease.release()
    finally:
        await store.close()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("pool_size", "connections"), [(STORE_POOL_SIZE, STORE_POOL_SIZE + SPEND_POOL_SIZE), (3, 3 + 3)]
)
async def test_a_store_with_its_pools_filled_admits_a_burst_without_opening_a_connection(
    postgres_url, pool_size, connections
):
    """The pools are filled as a process starts (`RUBRIC_BOT_DB_POOL_SIZE` for the tables, as many
    for the spend counters up to theirs): the first burst of requests after it does not wait for
    connections to be opened and authenticated."""
    store = await Store.open(postgres_url, pool_size=pool_size)
    try:
        await store.fill_pools()
        filled = await _server_clock(store)
        assert await _backends_started(store, datetime.min.replace(tzinfo=UTC), filled) == connections
        everyone = quota(person=Cap(requests=100))
        await asyncio.gather(*(start(store, channel=f"C{n}", ts=f"{n}.0", quota=everyone) for n in range(40)))
        assert await _backends_started(store, filled, await _server_clock(store)) == 0
    finally:
        await store.close()


@pytest.mark.postgres
async def test_after_the_server_drops_every_connection_one_failed_admission_is_all_it_takes(postgres_url):
    """A database restart leaves the store's pools full of dead connections: the first admission
    after it fails (and Slack delivers it again), the next is admitted, the spend counters' pool
    dropped with the store's."""
    store = await Store.open(postgres_url)
    try:
        await store.fill_pools()
        everyone = quota(person=Cap(requests=100))
        await start(store, channel="CBEFORE", quota=everyone)
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with pytest.raises(DBAPIError):
            await start(store, channel="CFIRST", quota=everyone)
        assert await start(store, channel="CSECOND", quota=everyone)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_every_connection_a_store_opens_carries_its_processs_name(postgres_url):
    """An operator tells the processes apart by their connections' names in ``pg_stat_activity``
    (README): the spend counters' pool and a replay's lock connection are named like the tables'."""
    name = f"rubric-bot test ({uuid.uuid4().hex[:8]})"
    store = await Store.open(Database.parse(postgres_url).named(name), pool_size=3)
    try:
        await store.fill_pools()
        lease = await store.start_replay(T1, "CNAMED", "U1", timedelta(0))
        assert isinstance(lease, ReplayLease)
        async with store._engine.connect() as connection:
            named = await connection.scalar(
                text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"), {"name": name}
            )
        await lease.release()
        assert named == 3 + 3 + 1  # the tables' pool, the counters' and the replay's lock
    finally:
        await store.close()


async def _server_clock(store: Store) -> datetime:
    async with store._engine.connect() as connection:
        return (await connection.execute(text("SELECT clock_timestamp()"))).scalar_one()


async def _backends_started(store: Store, since: datetime, until: datetime) -> int:
    """Connections to the test's database that the server accepted between `since` and `until`."""
    async with store._engine.connect() as connection:
        found = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_start > :since AND backend_start <= :until"
            ),
            {"since": since, "until": until},
        )
        return found.scalar_one()


async def _drop_advisory_lock_holders(store: Store) -> None:
    """End the database sessions (of this test's database) that hold an advisory lock."""
    async with store._engine.connect() as connection:
        await connection.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND pid <> pg_backend_pid()"
            )
        )


async def test_a_channel_at_its_money_budget_refuses_new_runs_whichever_budget_is_reached_first(store):
    spent = {"input_tokens": 100_000, "output_tokens": 10_000, "total_tokens": 110_000}
    cost = run_cost({"worker": ("openai:gpt-4o-mini", spent)})  # $0.021 at list prices
    budget = quota(channel=Cap(tokens=1_000_000, usd=0.02), workspace=Cap(usd=1.0))
    run = await start(store, quota=budget)
    await start(store, quota=budget)  # nothing spent yet (it reserves no money): room for another
    await store.finish_run(run, "answered", tokens=110_000, cost=cost)
    await store.finish_run(run, "answered", tokens=110_000, cost=cost)  # recorded twice, counted once

    with pytest.raises(QuotaExceeded) as refused:
        await start(store, requester="U2", quota=budget)
    assert (refused.value.quota, refused.value.limit) == ("channel_usd", 0.02)
    await start(store, channel="C2", quota=budget)  # the workspace's $1 has room
    spender = Spender(midnight().date(), T1, "C1")
    assert (await store.spent_today(spender))["channel"].usd == pytest.approx(cost.usd)


async def test_a_burst_against_a_money_budget_of_one_run_starts_at_most_one_run_more_and_settles(store):
    """Twenty requests at once against a channel budget of one run's estimated cost: each admitted
    run's estimated cost is reserved before any has finished, so at most two start; when they end,
    the day's money is what they really cost, no reservation left behind."""
    models = ("openai:gpt-4o-mini", "openai:gpt-4o")
    one_run = DailyLimits.of(NO_LIMIT, NO_LIMIT, run_estimate=20_000, models=models).run_estimate_usd
    limits = DailyLimits.of(
        NO_LIMIT, NO_LIMIT, run_estimate=20_000, money=MoneyLimits(per_channel=one_run), models=models
    )
    results = await asyncio.gather(
        *(
            start(store, requester=f"U{n}", quota=limits.quota(datetime.now(UTC)), ts=f"{n}.0")
            for n in range(20)
        ),
        return_exceptions=True,
    )
    started = [r for r in results if isinstance(r, int)]
    assert 1 <= len(started) <= 2
    assert all(
        isinstance(r, QuotaExceeded) and r.quota == "channel_usd" for r in results if not isinstance(r, int)
    )

    costs = [
        run_cost(
            {
                "worker": ("openai:gpt-4o-mini", _usage(1_000 * (n + 1))),
                "grader": ("openai:gpt-4o", _usage(500)),
            }
        )
        for n in range(len(started))
    ]
    for run, cost in zip(started, costs, strict=True):
        await store.finish_run(run, "answered", tokens=cost.roles["worker"].total_tokens, cost=cost)
    spent = await store.spent_today(Spender(midnight().date(), T1, "C1"))
    assert spent["channel"].usd == pytest.approx(sum(cost.usd for cost in costs))
    assert spent["deployment"].usd == pytest.approx(sum(cost.usd for cost in costs))


async def test_a_run_deleted_before_it_ran_gives_back_the_money_it_reserved(store):
    budget = RunQuota(day=midnight().date(), estimate=1_000, estimate_usd=0.05)
    run = await start(store, quota=budget)
    spender = Spender(midnight().date(), T1, "C1", "U1")
    assert (await store.spent_today(spender))["channel"].usd == pytest.approx(0.05)

    await store.delete_run(run)
    assert (await store.spent_today(spender))["channel"].usd == pytest.approx(0.0)


def _usage(tokens: int) -> UsageMetadata:
    """A model's reported usage of `tokens` input tokens and a tenth of them as output."""
    return {"input_tokens": tokens, "output_tokens": tokens // 10, "total_tokens": tokens + tokens // 10}


@contextlib.contextmanager
def failing_once(store: Store, statement_start: str, *, counters: bool = False):
    """The store's next statement starting with `statement_start` fails, as a database fault would
    (on PostgreSQL the spend counters, on a pool of their own, are not affected unless `counters`)."""
    failed: list[str] = []

    def fail(conn, cursor, statement, parameters, context, executemany):
        if not failed and statement.lstrip().upper().startswith(statement_start):
            failed.append(statement)
            raise ConnectionResetError("the database went away mid-transaction")

    # On SQLite the store's transactions run on an engine of its SQLite thread too: every engine's.
    engines: set[Any] = {store._engine.sync_engine} if store.database.is_postgres else {Engine}
    if counters and store.database.is_postgres:
        engines.add(store._counters_engine().sync_engine)
    for engine in engines:
        event.listen(engine, "before_cursor_execute", fail)
    try:
        yield failed
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", fail)


async def test_a_settlement_retried_after_a_fault_counts_once(store):
    """A run's end, its audit and a deleted run's give-back each fail once at their last statement
    (after the spend counters, which on PostgreSQL commit on their own) and are retried: each counts
    once, and no counter goes below zero."""
    budget = quota(estimate=1_000)
    spender = Spender(midnight().date(), T1, "C1", "U1")
    finished, deleted = await start(store, quota=budget), await start(store, quota=budget, ts="2.0")
    audited = AuditResult("pass", "Fine.", "audit-model", None, {"result": "pass"}, tokens=79)

    for settle, last in (
        (lambda: store.finish_run(finished, "answered", tokens=321), "UPDATE RUNS"),
        (lambda: store.finish_audit(finished, audited), "UPDATE RUNS"),
        (lambda: store.delete_run(deleted), "DELETE FROM RUNS"),
    ):
        with failing_once(store, last) as failed, pytest.raises(ConnectionResetError):
            await settle()
        assert failed
        await settle()

    spent = await store.spent_today(spender)
    assert {level: (s.requests, s.tokens) for level, s in spent.items()} == {
        level: (1, 400) for level in ("person", "channel", "workspace", "deployment")
    }


async def test_with_a_deployment_budget_a_workspace_is_capped_at_a_quarter_of_it_unless_set(
    store, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.delenv("RUBRIC_BOT_WORKSPACE_DAILY_USD", raising=False)
    monkeypatch.setenv("RUBRIC_BOT_DAILY_USD", "0.08")
    spent = {"input_tokens": 100_000, "output_tokens": 10_000, "total_tokens": 110_000}
    cost = run_cost({"worker": ("openai:gpt-4o-mini", spent)})  # $0.021, over a quarter of $0.08
    by_default = DailyLimits.from_settings(load_settings()).quota(datetime.now(UTC))
    run = await start(store, quota=by_default)
    await store.finish_run(run, "answered", tokens=110_000, cost=cost)

    with pytest.raises(QuotaExceeded) as refused:
        await start(store, requester="U2", channel="C2", quota=by_default)
    assert (refused.value.quota, refused.value.limit) == ("workspace_usd", 0.02)
    await start(store, quota=by_default, team="T2")  # another workspace: the deployment has room
    monkeypatch.setenv("RUBRIC_BOT_WORKSPACE_DAILY_USD", "0")  # the operator's choice: no workspace cap
    unset = DailyLimits.from_settings(load_settings()).quota(datetime.now(UTC))
    await start(store, requester="U2", channel="C2", quota=unset)


async def test_a_replays_grader_calls_are_reserved_within_the_channel_budget_and_settled(store):
    """Each of a replay's grader calls reserves its estimate like a run (no request counted) until
    the channel's budget refuses one; settling replaces a reservation by what the call used."""
    budget = quota(estimate=400, channel=Cap(tokens=1_000))
    admitted = [await store.reserve_replay(T1, "C1", budget) for _ in range(4)]
    assert admitted[:3] == [None, None, None]  # 0, 400 and 800 reserved were under 1,000
    assert admitted[3] is not None and admitted[3].quota == "tokens"
    for _ in range(3):
        await store.charge_replay(T1, "C1", 250 - 400, day=budget.day)  # each call used 250

    spent = await store.spent_today(Spender(budget.day, T1, "C1"))
    assert {level: (s.requests, s.tokens) for level, s in spent.items()} == {
        level: (0, 750) for level in ("channel", "workspace", "deployment")
    }


async def test_a_replay_calls_charge_and_its_line_in_the_cost_history_are_kept_together_or_not_at_all(store):
    """A fault at the cost history's insert, after the counters were charged in the same
    settlement, leaves neither: the call stays reserved and out of the history; settled again, it
    counts once in both."""
    budget = quota(estimate=400)
    assert await store.reserve_replay(T1, "C1", budget) is None
    settle = partial(
        store.settle_replay_call, T1, "C1", budget.day, reserved=Spent(400, 0.0), used=Spent(250, 0.001)
    )

    with (
        failing_once(store, "INSERT INTO REPLAY_SPEND", counters=True) as failed,
        pytest.raises(ConnectionResetError),
    ):
        await settle()
    assert failed
    channel_tokens = lambda spent: spent["channel"].tokens  # noqa: E731
    assert channel_tokens(await store.spent_today(Spender(budget.day, T1, "C1"))) == 400
    assert await store.usage(T1, "C1", midnight()) == []

    await settle()
    assert channel_tokens(await store.spent_today(Spender(budget.day, T1, "C1"))) == 250
    (replays,) = await store.usage(T1, "C1", midnight())
    assert (replays.requester, replays.tokens, replays.usd) == (REPLAYS, 250, pytest.approx(0.001))
