"""Retention: with `RUBRIC_BOT_RETENTION_DAYS`, a daily sweep deletes threads idle for longer.

`serve` and `worker` each schedule it on their job queue, which runs it once a day: the embedded
queue in its one process (at start, then daily), PostgreSQL's as a procrastinate periodic task that
one process of them all runs. `rubric-bot db prune` runs the same sweep at once.
"""

from __future__ import annotations

import logging
from functools import partial

from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.db.store import Store
from bot.lifecycle.erase import describe, prune
from bot.queue.jobs import JobQueue

logger = logging.getLogger(__name__)

RETENTION_JOB = "retention"
"""Name of the daily sweep among the queue's jobs."""


def schedule_retention(queue: JobQueue, store: Store, checkpointer: BaseCheckpointSaver, days: int) -> None:
    """Have `queue` run the sweep daily (before the queue starts)."""
    queue.every_day(RETENTION_JOB, partial(sweep, store, checkpointer, days))


async def sweep(store: Store, checkpointer: BaseCheckpointSaver, days: int) -> None:
    """Delete the threads idle for more than `days` days, logging what went."""
    erased = await prune(store, checkpointer, days)
    logger.info("retention (%d days): deleted %s", days, describe(erased))
