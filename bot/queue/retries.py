"""The durable queue's retries: a job run again unless its stored arguments can never be read, and the
worker's writes (a job's end, its heartbeat) tried until the database takes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial

import procrastinate
import psycopg
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Job, Status
from procrastinate.manager import JobManager
from procrastinate.retry import RetryDecision

from bot.db.database import describe_database_error, unavailable_error
from bot.queue.jobs import MalformedJob

logger = logging.getLogger("bot.queue.jobs")
"""The queue's parts log as the queue: the name operators filter by and the README quotes."""


WORKER_WRITE_RETRY_SECONDS = 5.0
"""Longest pause between tries at recording a job's end or a worker's heartbeat while the database
is unreachable (the first pause is a tenth of it, doubling). A worker keeps trying for as long as it
lives: a job left `doing` under a live worker would hold its thread's later jobs back for good."""


class RetryUnlessMalformed(procrastinate.RetryStrategy):
    """procrastinate's retries, except for a job whose stored arguments can never be read."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        """No retry for `MalformedJob`; the strategy's decision otherwise."""
        if isinstance(exception, MalformedJob):
            return None
        return super().get_retry_decision(exception=exception, job=job)


class WritesOutlastRestarts(JobManager):
    """procrastinate's job manager, whose worker writes (a job's end: finished, or re-queued for a
    retry; the worker's heartbeat) are tried again until the database takes them, or until the
    process, stopping, has waited out its grace (`stop_retrying`).

    procrastinate tries each once. A database restart that cuts off a job's end leaves the job
    `doing` under a worker that lives on, its thread stuck behind it; one that cuts off a heartbeat
    ends the worker's heartbeats for good (procrastinate stops the worker only while it also runs
    periodic jobs), so every job it takes afterwards is soon taken for a dead worker's and run again.
    A job whose end a stopping process gave up on is re-queued as a dead worker's.
    """

    def __init__(self, connector: procrastinate.BaseConnector) -> None:
        super().__init__(connector)
        self._stopping = asyncio.Event()

    def stop_retrying(self) -> None:
        """Fail the writes waiting for the database, and those to come, at their next try."""
        self._stopping.set()

    async def finish_job(self, job: Job, status: Status, delete_job: bool) -> None:
        await self._until_written(
            f"the end of job {job.id}", partial(super().finish_job, job, status, delete_job)
        )

    async def retry_job(
        self,
        job: Job,
        retry_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        retry = partial(super().retry_job, job, retry_at, priority, queue, lock)
        await self._until_written(f"the end of job {job.id}", retry)

    async def update_heartbeat(self, worker_id: int) -> None:
        await self._until_written(
            f"worker {worker_id}'s heartbeat", partial(super().update_heartbeat, worker_id)
        )

    async def _until_written(self, what: str, write: Callable[[], Awaitable[None]]) -> None:
        """`write` `what`, again after each failure to reach the database (logged once).

        A later try that procrastinate refuses because the job is no longer `doing` means an
        earlier one was committed and only its answer lost."""
        pause = WORKER_WRITE_RETRY_SECONDS / 10
        cut_off = False
        while True:
            try:
                await write()
                return
            except ConnectorException as exc:
                cause = exc.__cause__
                if cut_off and isinstance(cause, psycopg.errors.RaiseException):
                    return
                # procrastinate wraps every error of the driver, a wrong statement's too.
                failure = unavailable_error(cause) if cause is not None else None
                if failure is None or self._stopping.is_set():
                    raise
                if not cut_off:
                    logger.warning(
                        "could not record %s (%s); trying until the database answers",
                        what,
                        describe_database_error(failure),
                    )
                cut_off = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            pause = min(pause * 2, WORKER_WRITE_RETRY_SECONDS)
