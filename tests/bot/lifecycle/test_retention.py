"""The daily jobs of every serving process: the dedupe claims pruned each day, not only at start."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from sqlalchemy import update

from bot.db.schema import claims
from bot.db.scope import utc_now
from bot.db.store import Store
from bot.lifecycle.retention import CLAIMS_JOB, schedule_claims_pruning
from bot.queue.scheduler import ThreadScheduler


class DailyJobs(ThreadScheduler):
    """The embedded queue, keeping the daily jobs it is given so that the test runs "a day" at will."""

    def __init__(self) -> None:
        super().__init__()
        self.daily: dict[str, Callable[[], Awaitable[None]]] = {}

    def every_day(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        self.daily[name] = job
        super().every_day(name, job)


async def test_the_dedupe_claims_past_slacks_retries_are_pruned_every_day(database_url):
    store = await Store.open(database_url)
    try:
        queue = DailyJobs()
        schedule_claims_pruning(queue, store)
        assert await store.claim("event:last-week") and await store.claim("event:today")
        async with store._write() as connection:  # a claim from eight days ago
            eight_days = utc_now() - timedelta(days=8)
            await connection.execute(
                update(claims).where(claims.c.key == "event:last-week").values(claimed_at=eight_days)
            )

        await queue.daily[CLAIMS_JOB]()  # the day's run

        assert await store.claim("event:last-week")  # forgotten: free again
        assert not await store.claim("event:today")  # kept while Slack may retry it
    finally:
        await store.close()
