"""Retention: with `RUBRIC_BOT_RETENTION_DAYS`, a daily sweep deletes threads idle for longer; and
every day, whatever the setting, the dedupe claims older than Slack's retries are pruned.

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
from bot.lifecycle.uploads import ClientFor
from bot.queue.jobs import JobQueue

logger = logging.getLogger(__name__)

RETENTION_JOB = "retention"
"""Name of the daily sweep among the queue's jobs."""


def schedule_retention(
    queue: JobQueue, store: Store, checkpointer: BaseCheckpointSaver, days: int, clients: ClientFor
) -> None:
    """Have `queue` run the sweep daily (before the queue starts); `clients` delete old charts."""
    queue.every_day(RETENTION_JOB, partial(sweep, store, checkpointer, days, clients))


CLAIMS_JOB = "prune_claims"
"""Name of the daily pruning of dedupe claims among the queue's jobs."""


def schedule_claims_pruning(queue: JobQueue, store: Store) -> None:
    """Have `queue` prune the dedupe claims daily (before the queue starts): they matter only while
    Slack may still deliver a message again, and a process that runs for months would otherwise
    keep every one."""
    queue.every_day(CLAIMS_JOB, partial(prune_claims, store))


async def prune_claims(store: Store) -> None:
    """Forget the dedupe claims past Slack's retries, logging how many."""
    logger.info("pruned %d dedupe claims", await store.prune_claims())


async def sweep(store: Store, checkpointer: BaseCheckpointSaver, days: int, clients: ClientFor) -> None:
    """Delete the threads idle for more than `days` days (and charts uploaded as long ago), logging
    what went."""
    erased = await prune(store, checkpointer, days, clients)
    logger.info("retention (%d days): deleted %s", days, describe(erased))
