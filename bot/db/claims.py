"""Dedupe claims: a message's keys, recorded at once by whichever delivery of it comes first.

A claim is one INSERT of unique keys, which only one process can win; what it admits commits with it
(see `bot.db.transactions.Claim`).

A claim is what Slack's acknowledgement waits for, and under a burst the acknowledgements wait for
each other's. So a claim's statements are synchronous. On SQLite, where the writes take turns, its
whole transaction is one call to the store's SQLite thread (about 1 ms, where the same statements
through the async engine take about 5: see `bot.db.base`). On PostgreSQL the claims that
come while one is being written wait for it and then go together, in one transaction of six
statements whatever their number (keys and threads, spend counters, runs, jobs): each statement
costs the one event loop about the same CPU for one claim as for fifty, and the acknowledgements of
a burst wait for that CPU. A batch that fails for what one of its claims holds is written again a
claim at a time, so that only that claim fails: one message never sinks other people's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any, Generic

import psycopg
import sqlalchemy.exc
from sqlalchemy import Connection, delete
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.db.database import Database
from bot.db.schema import claims
from bot.db.scope import utc_now
from bot.db.transactions import Claim, ClaimRecord, ClaimRequest, Recorded
from bot.db.usage import UsageStore
from bot.vocabulary.thread import ThreadKey

Enqueue = Callable[[Sequence[tuple[ThreadKey, Any]], Any], Awaitable[object]]
"""Queues what claims recorded, each in its thread, in the claims' own transaction given the
driver's connection (PostgreSQL); on SQLite, where no job queue is durable, with None once the
claim commits."""

logger = logging.getLogger(__name__)

BATCH_LIMIT = 100
"""At most this many claims share a PostgreSQL transaction (the rest wait for the next): bounds
its statements' size and how long a claim waits for those before it."""


@dataclass
class _Waiting(Generic[Recorded]):
    """A PostgreSQL claim waiting for its batch: what it claims and records, where it queues that,
    and its outcome."""

    request: ClaimRequest[Recorded]
    enqueue: Enqueue | None
    outcome: asyncio.Future[Recorded | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ClaimStore(UsageStore):
    """The dedupe keys of the messages claimed."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        super().__init__(engine, database)
        self._waiting: list[_Waiting[Any]] = []
        """PostgreSQL: the claims waiting for the batch being written, in the order they came."""
        self._batches: asyncio.Task[None] | None = None
        """PostgreSQL: the task writing batches of claims while any wait (None when none do)."""

    async def claim(self, *keys: str) -> bool:
        """Record every key at once; False (recording nothing) if any was recorded before."""
        return await self.claiming(keys, _nothing_more) is not None

    async def claiming(
        self,
        keys: Sequence[str],
        record: ClaimRecord[Recorded],
        *,
        thread: ThreadKey | None = None,
        enqueue: Enqueue | None = None,
    ) -> Recorded | None:
        """Claim every key at once and, in the same transaction, remember `thread` as one the bot
        takes part in and `record` what the claim leads to; what `record` returned (see
        `bot.db.transactions.ClaimRecord`), or None (recording nothing) if any key was claimed
        before.

        One transaction inserts the keys, so two deliveries of the same Slack message racing here
        (even in two processes) cannot both win, and a refused claim leaves no key behind. What
        `record` records through the `Claim` (synchronously), and what `enqueue` queues with the
        driver's connection (PostgreSQL's durable queue; on SQLite, where no job queue is durable,
        it is called with None once the claim commits), commits with the keys or not at all: a
        message is either claimed and queued, or neither, and Slack's next delivery of it finds it
        unclaimed. On PostgreSQL the claim may share that transaction with others (see the module's
        docstring): if it fails for what one of them holds, each is written again on its own, and
        only the claim that cannot be written is refused; if the database is unreachable, they all
        are.
        """
        unique = list(dict.fromkeys(keys))
        if not unique:
            raise ValueError("claim needs at least one key")
        if enqueue is not None and thread is None:
            raise ValueError("a claim queues its job in its thread")
        request = ClaimRequest(unique, thread, record)
        if self._postgres:
            return await self._claim_on_postgres(_Waiting(request, enqueue))
        recorded = await self.in_thread(partial(self._claim_on_sqlite, request))
        if recorded is not None and enqueue is not None and thread is not None:
            await enqueue([(thread, recorded)], None)  # no queue can join a transaction in the SQLite thread
        return recorded

    async def _claim_on_postgres(self, waiting: _Waiting[Recorded]) -> Recorded | None:
        """Wait for the claim's batch (starting one if none is being written) and its outcome."""
        self._waiting.append(waiting)
        if self._batches is None:
            self._batches = asyncio.create_task(self._write_batches(), name="claims")
        return await asyncio.shield(waiting.outcome)

    async def _write_batches(self) -> None:
        """Write the waiting claims a batch at a time until none wait."""
        batch: list[_Waiting[Any]] = []
        try:
            while self._waiting:
                batch, self._waiting = _next_batch(self._waiting)
                try:
                    recorded = await self._write_batch(batch)
                except Exception as failure:
                    if len(batch) == 1 or _unreachable(failure):
                        for waiting in batch:
                            waiting.outcome.set_exception(failure)
                    else:
                        await self._write_one_by_one(batch, failure)
                else:
                    for waiting, outcome in zip(batch, recorded, strict=True):
                        waiting.outcome.set_result(outcome)
        except asyncio.CancelledError:  # the loop is closing: no claim waits for ever
            for waiting in [*batch, *self._waiting]:
                waiting.outcome.cancel()
            raise
        finally:
            self._batches = None

    async def _write_one_by_one(self, batch: list[_Waiting[Any]], failure: Exception) -> None:
        """Write each claim of a batch that failed for what one of them holds (a text the database
        cannot take, say) in a transaction of its own: only the claim that cannot be written is
        refused (Slack delivers it again), not everyone's in its batch."""
        logger.warning(
            "a batch of %d claims failed (%s); writing them one by one", len(batch), type(failure).__name__
        )
        for waiting in batch:
            try:
                (outcome,) = await self._write_batch([waiting])
            except Exception as alone:
                waiting.outcome.set_exception(alone)
            else:
                waiting.outcome.set_result(outcome)

    async def _write_batch(self, batch: list[_Waiting[Any]]) -> list[Any]:
        """One transaction for the batch's claims: each one's outcome, in order."""
        claim: Claim | None = None

        def claimed(connection: Connection) -> list[Any]:
            nonlocal claim
            claim = Claim(connection, partial(self._spending, connection))
            return claim.record_all([waiting.request for waiting in batch])

        try:
            async with self._writer.connect() as connection, connection.begin():
                recorded = await connection.run_sync(claimed)
                queues: dict[Enqueue, list[tuple[ThreadKey, Any]]] = {}
                for waiting, outcome in zip(batch, recorded, strict=True):
                    thread = waiting.request.thread
                    if outcome is not None and waiting.enqueue is not None and thread is not None:
                        queues.setdefault(waiting.enqueue, []).append((thread, outcome))
                if queues:
                    raw = await connection.get_raw_connection()
                    for enqueue, jobs in queues.items():
                        await enqueue(jobs, raw.driver_connection)
                return recorded
        except BaseException:
            if claim is not None and claim.admitted:
                # Its admissions were committed on their own: give them back.
                async with self._counters_engine().connect() as counters:
                    await counters.run_sync(claim.give_back)
            raise

    def _claim_on_sqlite(self, request: ClaimRequest[Recorded], connection: Connection) -> Recorded | None:
        """A claim's whole transaction, in the store's SQLite thread."""
        # SQLite's counters are in the claim's transaction: they roll back with it.
        claim = Claim(connection, partial(self._spending, connection))
        recorded: Recorded | None = claim.record_all([request])[0]
        return recorded

    async def _close_claims(self) -> None:
        """Let the claims being written finish (PostgreSQL)."""
        if self._batches is not None:
            await asyncio.gather(self._batches, return_exceptions=True)

    async def prune_claims(self, older_than_days: int = 7) -> int:
        """Forget claims older than the given days (Slack stops retrying within hours); the count."""
        cutoff = utc_now() - timedelta(days=older_than_days)
        async with self._write() as connection:
            result = await connection.execute(delete(claims).where(claims.c.claimed_at < cutoff))
        return result.rowcount


def _next_batch(waiting: list[_Waiting[Any]]) -> tuple[list[_Waiting[Any]], list[_Waiting[Any]]]:
    """The claims to write together, and those left waiting: up to `BATCH_LIMIT`, in the order they
    came, but none sharing a key with one before it in the batch (the twins of one Slack message:
    the later one waits for the next batch, where it finds the key taken or, if the first failed,
    free)."""
    batch: list[_Waiting[Any]] = []
    left: list[_Waiting[Any]] = []
    keys: set[str] = set()
    for one in waiting:
        if len(batch) < BATCH_LIMIT and keys.isdisjoint(one.request.keys):
            batch.append(one)
            keys.update(one.request.keys)
        else:
            left.append(one)
    return batch, left


UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    sqlalchemy.exc.TimeoutError,
)
"""What a batch's failure came from when the database could not be reached or did not answer in
time (the driver's errors, under SQLAlchemy's and procrastinate's wrappers, which also wrap errors of
the data): every claim would fail alone as well, so each is refused at once rather than waiting its
turn to fail again."""


def _unreachable(failure: BaseException) -> bool:
    """Whether `failure`, or an error it came from, is one of `UNREACHABLE_ERRORS`."""
    seen: set[int] = set()
    current: BaseException | None = failure
    while current is not None and id(current) not in seen:
        if isinstance(current, UNREACHABLE_ERRORS):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _nothing_more(claim: Claim) -> bool:
    """A claim that records nothing besides its keys."""
    return True
