"""Dedupe claims: a message's keys, recorded at once by whichever delivery of it comes first.

A claim is one INSERT of unique keys, which only one process can win; what it admits commits with it
(see `bot.db.transactions.Claim`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import partial

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.schema import claims
from bot.db.scope import utc_now
from bot.db.spend import charge
from bot.db.transactions import Claim
from bot.db.usage import UsageStore


class ClaimStore(UsageStore):
    """The dedupe keys of the messages claimed."""

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
        now = utc_now()
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
                        await charge(counters, spender, -1, -reserved.estimate, -reserved.estimate_usd)
            raise

    async def prune_claims(self, older_than_days: int = 7) -> int:
        """Forget claims older than the given days (Slack stops retrying within hours); the count."""
        cutoff = utc_now() - timedelta(days=older_than_days)
        async with self._write() as connection:
            result = await connection.execute(delete(claims).where(claims.c.claimed_at < cutoff))
        return result.rowcount
