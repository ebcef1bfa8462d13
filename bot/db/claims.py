"""Dedupe claims: a message's keys, recorded at once by whichever delivery of it comes first.

A claim is one INSERT of unique keys, which only one process can win; what it admits commits with it
(see `bot.db.transactions.Claim`).

A claim is what Slack's acknowledgement waits for, and under a burst the acknowledgements wait for
each other's: on SQLite the writes take turns. So a claim's statements are synchronous, and on
SQLite its whole transaction is one call to a thread of its own with a connection of its own
(about 1 ms, where the same statements through the async engine take about 5); on PostgreSQL they
run in SQLAlchemy's greenlet on the async connection, whose transaction a durable job queue joins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, delete
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.db.database import Database
from bot.db.schema import claims
from bot.db.scope import utc_now
from bot.db.transactions import Claim
from bot.db.usage import UsageStore
from bot.vocabulary.thread import ThreadKey

Recorded = TypeVar("Recorded")
"""What a claim's block records and returns (the job it queues, say)."""

Enqueue = Callable[[Recorded, Any], Awaitable[object]]
"""Queues what a claim recorded in the claim's own transaction, given the driver's connection."""


class ClaimStore(UsageStore):
    """The dedupe keys of the messages claimed."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        super().__init__(engine, database)
        self._claims_thread: ThreadPoolExecutor | None = None
        """SQLite: the thread every claim's transaction runs in, on `_claims_engine` (opened when
        the first claim comes)."""
        self._claims_engine: Engine | None = None

    async def claim(self, *keys: str) -> bool:
        """Record every key at once; False (recording nothing) if any was recorded before."""
        return await self.claiming(keys, _nothing_more) is not None

    async def claiming(
        self,
        keys: Sequence[str],
        record: Callable[[Claim], Recorded],
        *,
        thread: ThreadKey | None = None,
        enqueue: Enqueue[Recorded] | None = None,
    ) -> Recorded | None:
        """Claim every key at once and, in the same transaction, remember `thread` as one the bot
        takes part in and `record` what the claim leads to; what `record` returned, or None
        (recording nothing) if any key was claimed before.

        One transaction inserts the keys, so two deliveries of the same Slack message racing here
        (even in two processes) cannot both win, and a refused claim leaves no key behind. What
        `record` records through the `Claim` (synchronously), and what `enqueue` queues with the
        driver's connection (PostgreSQL's durable queue; on SQLite, where no job queue is durable,
        it is called with None once the claim commits), commits with the keys or not at all: a
        message is either claimed and queued, or neither, and Slack's next delivery of it finds it
        unclaimed.
        """
        unique = list(dict.fromkeys(keys))
        if not unique:
            raise ValueError("claim needs at least one key")
        claiming = partial(_claimed, keys=unique, thread=thread, record=record)
        if self._postgres:
            return await self._claim_on_postgres(claiming, enqueue)
        async with self._turns:
            loop = asyncio.get_running_loop()
            recorded = await loop.run_in_executor(self._claim_thread(), self._claim_on_sqlite, claiming)
        if recorded is not None and enqueue is not None:
            await enqueue(recorded, None)  # no queue can join a transaction in the claims thread
        return recorded

    async def _claim_on_postgres(
        self, claiming: Callable[[Claim], Recorded | None], enqueue: Enqueue[Recorded] | None
    ) -> Recorded | None:
        claim: Claim | None = None

        def claimed(connection: Connection) -> Recorded | None:
            nonlocal claim
            claim = Claim(connection, partial(self._spending, connection))
            return claiming(claim)

        try:
            async with self._writer.connect() as connection, connection.begin() as transaction:
                recorded = await connection.run_sync(claimed)
                if recorded is None:
                    await transaction.rollback()
                    return None
                if enqueue is not None:
                    raw = await connection.get_raw_connection()
                    await enqueue(recorded, raw.driver_connection)
                return recorded
        except BaseException:
            if claim is not None and claim.admitted:
                # Its admissions were committed on their own: give them back.
                async with self._counters_engine().connect() as counters:
                    await counters.run_sync(claim.give_back)
            raise

    def _claim_on_sqlite(self, claiming: Callable[[Claim], Recorded | None]) -> Recorded | None:
        """A claim's whole transaction, in the claims thread."""
        if self._claims_engine is None:
            self._claims_engine = self._database.create_claims_engine()
        with self._claims_engine.connect() as connection, connection.begin() as transaction:
            # SQLite's counters are in the claim's transaction: they roll back with it.
            claim = Claim(connection, partial(self._spending, connection))
            recorded = claiming(claim)
            if recorded is None:
                transaction.rollback()
            return recorded

    def _claim_thread(self) -> ThreadPoolExecutor:
        if self._claims_thread is None:
            self._claims_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-claims")
        return self._claims_thread

    async def _close_claims(self) -> None:
        """Close the claims thread's connection (in that thread: sqlite3 wants it) and the thread."""
        thread, engine = self._claims_thread, self._claims_engine
        self._claims_thread = self._claims_engine = None
        if thread is None:
            return
        if engine is not None:
            await asyncio.get_running_loop().run_in_executor(thread, engine.dispose)
        thread.shutdown()

    async def prune_claims(self, older_than_days: int = 7) -> int:
        """Forget claims older than the given days (Slack stops retrying within hours); the count."""
        cutoff = utc_now() - timedelta(days=older_than_days)
        async with self._write() as connection:
            result = await connection.execute(delete(claims).where(claims.c.claimed_at < cutoff))
        return result.rowcount


def _claimed(
    claim: Claim, *, keys: list[str], thread: ThreadKey | None, record: Callable[[Claim], Recorded]
) -> Recorded | None:
    """Take the keys (and `thread`); if every key was new, what `record` records through `claim`,
    else None."""
    return record(claim) if claim.take(keys, thread) else None


def _nothing_more(claim: Claim) -> bool:
    """A claim that records nothing besides its keys."""
    return True
