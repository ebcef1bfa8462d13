"""Claims that come together (a burst of Slack events), on SQLite and PostgreSQL: each message is
still claimed once, each request admitted within its limits as if they came one by one, and on
PostgreSQL they share one transaction (see `bot.db.claims`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy.exc import StatementError

from bot.db.queue_schema import apply_schema
from bot.db.runs import RunStart
from bot.db.spend import Cap, QuotaExceeded, RunQuota, Spender
from bot.db.store import Store
from bot.db.transactions import Claim, Starting
from bot.queue.durable import DurableQueue
from bot.queue.jobs import PromptJob
from bot.slack.conversation import UserMessage
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
"""The workspace every claim here is in."""


def today() -> RunQuota:
    """Today's quota with no cap and no estimate (see `requesting`)."""
    return RunQuota(day=datetime.now(UTC).date())


def requesting(thread: ThreadKey, ts: str, quota: RunQuota, requester: str = "U1"):
    """A claim's record like a request's: it starts a run; the run id, or the cap that refused it."""

    def record(claim: Claim) -> Starting[int | QuotaExceeded]:
        return Starting(RunStart(thread, ts, requester, quota), lambda started: started)

    return record


def request(store: Store, n: int, quota: RunQuota, *keys: str, requester: str = "U1"):
    """Claim the message ``n.0`` in its own thread of channel C1 (by `keys`, else its own key) as a
    request."""
    thread = ThreadKey("T1", "C1", f"{n}.0")
    own = keys or (thread.message_key(thread.thread_ts),)
    return store.claiming(own, requesting(thread, thread.thread_ts, quota, requester), thread=thread)


async def test_requests_claimed_together_are_admitted_as_if_one_by_one(store):
    """A burst from one person with three requests left today: three runs start, the others are
    refused by the request limit; twins of one message in the burst and a message claimed before
    record nothing; what the refused runs reserved is given back."""
    three = RunQuota(day=datetime.now(UTC).date(), estimate=100, caps={"person": Cap(requests=3)})
    assert await store.claim("event:before") is True
    outcomes = await asyncio.gather(
        *(request(store, n, three, f"event:E{n}", f"msg:{n}") for n in range(8)),
        request(store, 100, three, "event:twin", "msg:0"),  # the other twin of message 0
        request(store, 101, three, "event:before", "msg:101"),  # delivered again
    )
    started = [o for o in outcomes[:8] if isinstance(o, int)]
    assert len(started) == 3
    assert len(set(started)) == 3
    assert [o.quota for o in outcomes[:8] if isinstance(o, QuotaExceeded)] == ["requests"] * 5
    assert outcomes[8:] == [None, None]
    spent = await store.spent_today(Spender(three.day, T1, "C1", "U1"))
    assert (spent["person"].requests, spent["person"].tokens) == (3, 300)
    assert (spent["deployment"].requests, spent["deployment"].tokens) == (3, 300)


async def test_a_claim_refused_in_a_burst_leaves_none_of_its_keys(store):
    assert await store.claim("a", "b")
    outcomes = await asyncio.gather(store.claim("b", "c"), store.claim("d"))
    assert outcomes == [False, True]
    assert await store.claim("c")


async def test_requests_of_several_people_against_a_channel_budget_are_admitted_in_turn(store):
    budget = RunQuota(day=datetime.now(UTC).date(), estimate=10, caps={"channel": Cap(tokens=25)})
    outcomes = await asyncio.gather(
        *(request(store, n, budget, requester=f"U{n}") for n in range(5)),
    )
    assert sum(isinstance(o, int) for o in outcomes) == 3  # 0, 10 and 20 reserved were under 25
    for n in range(5):
        spent = await store.spent_today(Spender(budget.day, T1, "C1", f"U{n}"))
        assert spent["person"].requests == int(isinstance(outcomes[n], int))
        assert spent["channel"].tokens == 30


@pytest.mark.postgres
async def test_claims_that_come_together_are_written_in_one_transaction(postgres_url):
    """Fifty requests claimed at once on PostgreSQL share one transaction: their keys were all
    inserted by it (one ``xmin``), and so were their runs."""
    store = await Store.open(postgres_url)
    try:
        outcomes = await asyncio.gather(*(request(store, n, today()) for n in range(50)))
        assert all(isinstance(o, int) for o in outcomes)
        assert await _count(postgres_url, "SELECT count(DISTINCT xmin::text) FROM claims") == 1
        assert await _count(postgres_url, "SELECT count(DISTINCT xmin::text) FROM runs") == 1
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_batch_that_fails_records_none_of_its_claims_and_gives_back_what_they_reserved(postgres_url):
    """If the queue is unreachable, every claim in the batch fails (Slack delivers each again),
    none of their keys or runs stays, and their reservations are given back; the next claims of
    the same messages are admitted."""
    store = await Store.open(postgres_url)
    quota = RunQuota(day=datetime.now(UTC).date(), estimate=50, caps={"person": Cap(requests=100)})

    async def unreachable(jobs, connection):
        raise ConnectionError("the queue is unreachable")

    def claimed(n, enqueue=None):
        thread = ThreadKey("T1", "C1", f"{n}.0")
        record = requesting(thread, thread.thread_ts, quota)
        return store.claiming([f"msg:{n}"], record, thread=thread, enqueue=enqueue)

    try:
        failed = await asyncio.gather(*(claimed(n, unreachable) for n in range(5)), return_exceptions=True)
        assert all(isinstance(f, ConnectionError) for f in failed)
        spent = await store.spent_today(Spender(quota.day, T1, "C1", "U1"))
        assert (spent["person"].requests, spent["person"].tokens) == (0, 0)
        assert await _count(postgres_url, "SELECT count(*) FROM runs") == 0
        assert await _count(postgres_url, "SELECT count(*) FROM claims") == 0
        assert all(isinstance(o, int) for o in await asyncio.gather(*(claimed(n) for n in range(5))))
    finally:
        await store.close()


async def _count(postgres_url: str, query: str) -> int:
    async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
        found = await (await connection.execute(query)).fetchone()
    assert found is not None
    return int(found[0])


async def test_claims_racing_in_two_stores_for_one_key_leave_the_losers_other_keys_free(database_url):
    """Two processes claim messages sharing one key (a mention's twins, say) at the same moment:
    one wins, and the key only the loser had stays free for the message it belongs to."""
    stores = [await Store.open(database_url) for _ in range(2)]
    try:
        for n in range(5):
            won = await asyncio.gather(
                stores[0].claim(f"event:A{n}", f"msg:{n}"), stores[1].claim(f"event:B{n}", f"msg:{n}")
            )
            assert sorted(won) == [False, True]
            loser = f"event:B{n}" if won[0] else f"event:A{n}"
            assert await stores[0].claim(loser)
    finally:
        for store in stores:
            await store.close()


async def test_a_claim_the_database_cannot_take_fails_alone_among_claims_that_come_with_it(store):
    """Ten requests at once, one of whose keys holds half a surrogate pair (no driver encodes it):
    on PostgreSQL they share a batch, which fails and is written again claim by claim; only that
    claim is refused, and the nine others start their runs."""
    outcomes = await asyncio.gather(
        *(request(store, n, today()) for n in range(9)),
        request(store, 9, today(), "msg:9\ud800"),
        return_exceptions=True,
    )
    assert all(isinstance(outcome, int) for outcome in outcomes[:9]), outcomes
    assert isinstance(outcomes[9], UnicodeEncodeError | StatementError), outcomes[9]
    assert await store.claim("msg:9")  # its own key was rolled back with it


@pytest.mark.postgres
async def test_a_batch_with_one_message_holding_a_nul_admits_every_other_claim(postgres_url):
    """Requests claimed at once on PostgreSQL, their jobs queued in the claims' transaction; one
    message's text holds ``\\u0000``, which its ``jsonb`` job arguments cannot: every other request
    is admitted and queued, that one alone refused (nothing of it kept)."""
    store = await Store.open(postgres_url)
    await apply_schema(postgres_url)
    try:
        async with DurableQueue.open(postgres_url) as queue:

            def claimed(n: int, text: str):
                thread = ThreadKey("T1", "C1", f"{n}.0")
                ts = f"{n}.0"
                message = UserMessage(team="T1", channel="C1", ts=ts, thread_ts=ts, user="U1", text=text)
                job = PromptJob(message=message)
                return store.claiming(
                    [f"msg:{n}"], lambda _claim: job, thread=thread, enqueue=queue.submit_claimed
                )

            outcomes = await asyncio.gather(
                *(claimed(n, f"request {n}") for n in range(9)),
                claimed(9, "request\u0000 9"),
                return_exceptions=True,
            )
        assert all(isinstance(outcome, PromptJob) for outcome in outcomes[:9]), outcomes
        assert isinstance(outcomes[9], Exception), outcomes[9]
        assert await _count(postgres_url, "SELECT count(*) FROM procrastinate_jobs") == 9
        assert await _count(postgres_url, "SELECT count(*) FROM claims WHERE key = 'msg:9'") == 0
    finally:
        await store.close()
