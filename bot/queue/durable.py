"""`DurableQueue`, the job queue in PostgreSQL: procrastinate jobs whose lock is the thread key, so a
thread's jobs run one at a time in creation order across every `serve` and `worker` process. Jobs
outlive processes: a stopping process leaves them for the others (or its successor), and a job whose
process died is found by its missing heartbeat and run again. A job read back from the database is
validated against its kind's model first (`MalformedJob` if it does not fit). Also `open_queue`, the
queue that suits the database, and `erase_jobs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import procrastinate
import psycopg
import psycopg_pool
from procrastinate import JobContext
from procrastinate.exceptions import ConnectorException
from psycopg.types.json import Jsonb

from bot.config import DEFAULT_CONCURRENCY, DEFAULT_STALLED_AFTER
from bot.db.database import Database
from bot.queue.jobs import MAX_ATTEMPTS, Abandoned, JobKind, JobPayload, JobQueue, Revision
from bot.queue.retries import RetryUnlessMalformed, WritesOutlastRestarts
from bot.queue.scheduler import ThreadScheduler
from bot.vocabulary.thread import ThreadKey

logger = logging.getLogger("bot.queue.jobs")
"""The queue's parts log as the queue: the name operators filter by and the README quotes."""


TASK_PREFIX = "rubric_bot."
"""Prefix of the procrastinate task names of job kinds (`rubric_bot.request`, ...)."""

HEARTBEATS_PER_TIMEOUT = 3
"""Workers beat (and look for dead workers' jobs) this many times per stalled-after period: a
live worker is never mistaken for a dead one unless its event loop stalls for two beats."""

FETCH_POLL_SECONDS = 1.0
"""How often an idle worker looks for jobs without being woken. Wake-ups (PostgreSQL notifications)
make this a fallback, but procrastinate drops one that arrives while it is already fetching, so a
thread's next job may wait up to this long."""

WORKER_RESTART_SECONDS = 1.0
"""Pause before a worker that stopped on its own (its connection lost when the database restarted,
say) is started again: the process keeps taking jobs once the database is back."""

POOL_TIMEOUT_SECONDS = 5.0
"""How long a queue statement waits for a connection from the pool (psycopg's default is 30 s): a
statement that finds the database unreachable fails that much sooner, and a process stopping in an
outage ends after two such waits (its listener's and its worker's farewell) instead of a minute."""

POOL_MAX_CONNECTIONS = 5
"""Connections the queue's pool may open per process (jobs touch the queue at start and end only);
the worker's wake-up listener holds one more of its own."""

DAILY_CRON = "17 3 * * *"
"""When the durable queue runs daily jobs: 03:17 UTC, a quiet hour for most teams. procrastinate
defers each day's run once, whichever processes are up, and one worker runs it."""

SWEEP_LOCK = 72_190_002
"""PostgreSQL advisory lock key held while one process re-queues dead workers' jobs, so two
processes never re-queue the same job (the second could catch it already running again)."""


class DurableQueue:
    """Jobs in PostgreSQL through procrastinate: the lock of each job is its thread key.

    Every process that `start`s runs a procrastinate worker (`concurrency` jobs at once) that beats
    every `stalled_after / 3` seconds. Each of them also looks, as often, for jobs left `doing` by
    workers whose heartbeat is older than `stalled_after` and re-queues them; a job whose process
    died therefore runs again within `stalled_after * 4 / 3` seconds (40 s by default), as a later
    attempt, before any later job of its thread. A database restart neither stops a worker for good
    (it is started again) nor loses what it was writing (a job's end, its heartbeat: tried again).
    """

    def __init__(
        self,
        app: procrastinate.App,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        stalled_after: float = DEFAULT_STALLED_AFTER,
    ) -> None:
        self._app = app
        self._concurrency = concurrency
        self._stalled_after = stalled_after
        self._running: set[asyncio.Task[Any]] = set()
        self._kinds: dict[str, JobKind[Any]] = {}
        self._worker: asyncio.Task[None] | None = None
        self._draining = False
        self._sweeper: asyncio.Task[None] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        url: str,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        stalled_after: float = DEFAULT_STALLED_AFTER,
    ) -> AsyncIterator[DurableQueue]:
        """The queue in the PostgreSQL database at `url` (its schema applied: see `bot.db.queue_schema`)."""
        app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=url, max_size=POOL_MAX_CONNECTIONS, timeout=POOL_TIMEOUT_SECONDS
            )
        )
        app.job_manager = WritesOutlastRestarts(app.connector)
        async with app.open_async():
            queue = cls(app, concurrency=concurrency, stalled_after=stalled_after)
            try:
                yield queue
            finally:
                await queue.drain(0)

    @property
    def durable(self) -> bool:
        """Jobs live in PostgreSQL."""
        return True

    @property
    def busy(self) -> int:
        """Jobs running in this process (queued ones wait in the database)."""
        return len(self._running)

    def register(self, kind: JobKind[Any]) -> None:
        """Register `kind` as a procrastinate task, retried when cut short (unless malformed)."""
        self._kinds[kind.name] = kind

        async def run(context: JobContext, /, **stored: Any) -> None:
            payload = kind.read(stored)
            attempt = context.job.attempts
            if attempt >= MAX_ATTEMPTS:
                await kind.abandon(payload, Abandoned.GAVE_UP)
                return
            # procrastinate runs each job in a task of its own: `drain` cancels it after the grace.
            task = asyncio.current_task()
            assert task is not None
            self._running.add(task)
            try:
                await kind.run(payload, attempt)
            finally:
                self._running.discard(task)

        self._app.task(
            name=TASK_PREFIX + kind.name,
            pass_context=True,
            # One more try than MAX_ATTEMPTS: the last one tells the thread it was given up.
            retry=RetryUnlessMalformed(max_attempts=MAX_ATTEMPTS),
        )(run)

    def every_day(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Register `job` as a procrastinate periodic task run at `DAILY_CRON`."""

        async def run(timestamp: int) -> None:
            await job()

        task = self._app.task(name=TASK_PREFIX + name, queueing_lock=TASK_PREFIX + name)(run)
        self._app.periodic(cron=DAILY_CRON, periodic_id=name)(task)

    async def withdraw(self, thread: ThreadKey, message_ts: str) -> list[JobPayload]:
        """Delete the thread's jobs about `message_ts` that no worker is running: those not taken yet
        (their payloads are returned) and those ended (failed ones keep their arguments)."""
        async with self._pool().connection() as connection:
            deleted = await connection.execute(
                "DELETE FROM procrastinate_jobs WHERE lock = %s AND status <> 'doing' "
                "AND args -> 'message' ->> 'ts' = %s RETURNING status::text, task_name, args",
                (thread.thread_id, message_ts),
            )
            rows = await deleted.fetchall()
        return [self._payload(task, args) for status, task, args in rows if status == "todo"]

    async def revise_queued(self, thread: ThreadKey, message_ts: str, revise: Revision) -> int:
        """Rewrite the arguments of the thread's jobs about `message_ts` no worker has taken yet
        (locked meanwhile, so none is taken half-changed)."""
        changed = 0
        async with self._pool().connection() as connection, connection.transaction():
            queued = await connection.execute(
                "SELECT id, task_name, args FROM procrastinate_jobs WHERE lock = %s AND status = 'todo' "
                "AND args -> 'message' ->> 'ts' = %s FOR UPDATE",
                (thread.thread_id, message_ts),
            )
            for job_id, task, args in await queued.fetchall():
                payload = self._payload(task, args)
                if (revised := revise(payload)) != payload:
                    await connection.execute(
                        "UPDATE procrastinate_jobs SET args = %s WHERE id = %s",
                        (Jsonb(revised.model_dump(mode="json")), job_id),
                    )
                    changed += 1
        return changed

    def _payload(self, task_name: str, args: Mapping[str, Any]) -> JobPayload:
        """A stored job's arguments as its kind's payload."""
        return self._kinds[task_name.removeprefix(TASK_PREFIX)].read(args)

    async def start(self) -> None:
        """Run a worker and the dead-worker sweep in the background until `drain`."""
        heartbeat = self._stalled_after / HEARTBEATS_PER_TIMEOUT
        self._worker = asyncio.create_task(self._work_forever(heartbeat), name="procrastinate worker")
        self._sweeper = asyncio.create_task(self._sweep_forever(heartbeat), name="stalled job sweep")

    async def _work_forever(self, heartbeat: float) -> None:
        """Run procrastinate's worker until cancelled (`drain`), starting it again whenever it stops
        on its own: a worker whose connection died in a database restart stops taking jobs."""
        while True:
            try:
                await self._app.run_worker_async(
                    name=f"{socket.gethostname()}:{os.getpid()}",
                    concurrency=self._concurrency,
                    install_signal_handlers=False,
                    fetch_job_polling_interval=FETCH_POLL_SECONDS,
                    update_heartbeat_interval=heartbeat,
                    stalled_worker_timeout=self._stalled_after,
                    delete_jobs="successful",
                )
                why = "it stopped"
            except (ConnectorException, psycopg.Error, OSError) as exc:
                why = f"it failed: {type(exc).__name__}"
            if self._draining:
                return
            logger.warning(
                "the job worker stopped taking jobs (%s); starting it again in %gs",
                why,
                WORKER_RESTART_SECONDS,
            )
            await asyncio.sleep(WORKER_RESTART_SECONDS)

    async def submit(self, thread: ThreadKey, payload: JobPayload) -> bool:
        """Store the job in PostgreSQL behind the thread's earlier jobs."""
        await self._submit([(thread, payload)], None)
        return True

    async def submit_claimed(self, jobs: Sequence[tuple[ThreadKey, JobPayload]], connection: Any) -> None:
        """Store the jobs in PostgreSQL in `connection`'s transaction, in one statement, each behind
        its thread's earlier jobs."""
        await self._submit(jobs, connection)

    async def _submit(self, jobs: Sequence[tuple[ThreadKey, JobPayload]], connection: Any) -> None:
        """Defer the jobs in one statement (through `connection` if given), each with its thread as
        its lock."""
        deferred = [
            self._app.configure_task(TASK_PREFIX + payload.kind, lock=thread.thread_id).make_new_job(
                **payload.model_dump(mode="json")
            )
            for thread, payload in jobs
        ]
        await self._app.job_manager.batch_defer_jobs_async(deferred, connection=connection)

    async def drain(self, grace: float) -> None:
        """Stop fetching jobs; running ones get `grace` seconds, then are cut short and re-queued."""
        sweeper, worker, self._sweeper, self._worker = self._sweeper, self._worker, None, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        if worker is None:
            return
        # A cancelled procrastinate worker fetches no more jobs and waits for the running ones;
        # those cut short after the grace end as aborted, and the retry strategy re-queues them.
        self._draining = True
        worker.cancel()
        done, _ = await asyncio.wait([worker], timeout=grace)
        if not done:
            for task in list(self._running):
                task.cancel()
            # What the database has not taken by now, it will not before the process ends.
            self._job_manager().stop_retrying()
        await asyncio.gather(worker, return_exceptions=True)

    async def job_counts(self) -> dict[str, int]:
        """The shared queue's jobs per procrastinate status (succeeded ones are deleted)."""
        async with self._pool().connection() as connection:
            cursor = await connection.execute(
                "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
            )
            return {status: count for status, count in await cursor.fetchall()}

    def _job_manager(self) -> WritesOutlastRestarts:
        manager = self._app.job_manager
        assert isinstance(manager, WritesOutlastRestarts)
        return manager

    def _pool(self) -> psycopg_pool.AsyncConnectionPool:
        connector = self._app.connector
        assert isinstance(connector, procrastinate.PsycopgConnector)
        return connector.pool

    async def requeue_stalled(self) -> int:
        """Re-queue the jobs of workers that stopped beating; how many (0 if another process is at it)."""
        async with self._pool().connection() as connection:
            got = await connection.execute("SELECT pg_try_advisory_lock(%s)", (SWEEP_LOCK,))
            row = await got.fetchone()
            if not row or not row[0]:
                return 0
            try:
                return await self._requeue(connection)
            finally:
                await connection.execute("SELECT pg_advisory_unlock(%s)", (SWEEP_LOCK,))

    async def _requeue(self, connection: psycopg.AsyncConnection[Any]) -> int:
        manager = self._app.job_manager
        stalled = await manager.get_stalled_jobs(seconds_since_heartbeat=self._stalled_after)
        count = 0
        for job in stalled:
            try:
                await manager.retry_job(job)
            except ConnectorException:
                logger.warning("job %s finished before it could be re-queued", job.id)
                continue
            logger.warning("re-queued job %s of thread %s: its worker stopped beating", job.id, job.lock)
            count += 1
        return count

    async def _sweep_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.requeue_stalled()
            except (ConnectorException, psycopg.Error):
                logger.exception("looking for stalled jobs failed; trying again in %.0f s", interval)


@contextlib.asynccontextmanager
async def open_queue(
    database: Database,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    stalled_after: float = DEFAULT_STALLED_AFTER,
) -> AsyncIterator[JobQueue]:
    """The queue that suits the database: procrastinate's in PostgreSQL, the in-process one with SQLite."""
    if not database.is_postgres:
        yield ThreadScheduler()
        return
    async with DurableQueue.open(
        database.conninfo, concurrency=concurrency, stalled_after=stalled_after
    ) as queue:
        yield queue


async def erase_jobs(database: Database, thread_ids: Sequence[str], *, finished_only: bool) -> int:
    """Delete the jobs of the threads `thread_ids` from PostgreSQL's queue (their arguments quote
    messages): finished ones or, unless `finished_only`, queued ones too; how many. A running job
    is left to finish. With SQLite, jobs live in memory only: there is nothing to delete."""
    if not database.is_postgres or not thread_ids:
        return 0
    statuses = ["succeeded", "failed", "cancelled", "aborted"] + ([] if finished_only else ["todo"])
    async with await psycopg.AsyncConnection.connect(database.conninfo, autocommit=True) as connection:
        present = await connection.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
        row = await present.fetchone()
        if not (row and row[0]):
            return 0
        deleted = await connection.execute(
            "DELETE FROM procrastinate_jobs WHERE lock = ANY(%s) AND status::text = ANY(%s)",
            (list(thread_ids), statuses),
        )
        return deleted.rowcount
