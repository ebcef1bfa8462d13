"""Background jobs per Slack thread: one at a time per thread, in arrival order, many threads at once.

Listeners ack at once and submit a job (a `JobPayload`: one pydantic model per kind of job) under
the thread's key. Two queues do that behind one small protocol, `JobQueue`:

- `ThreadScheduler`, the embedded default (SQLite): asyncio tasks in this process. Jobs live in
  memory, so a stopping process abandons what it has not reached (the thread is told).
- `DurableQueue` (PostgreSQL): procrastinate jobs whose lock is the thread key, so a thread's jobs
  run one at a time in creation order across every `serve` and `worker` process. Jobs outlive
  processes: a stopping process leaves them for the others (or its successor), and a job whose
  process died is found by its missing heartbeat and run again (see `DurableQueue`). A job read
  back from the database is validated against its kind's model first (`MalformedJob` if it does
  not fit).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import procrastinate
import psycopg
import psycopg_pool
from procrastinate import JobContext
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Job, Status
from procrastinate.manager import JobManager
from procrastinate.retry import RetryDecision
from procrastinate.schema import SchemaManager
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, ValidationError

from bot.config import DEFAULT_CONCURRENCY, DEFAULT_STALLED_AFTER
from bot.db.database import Database, describe_database_error, unavailable_error
from bot.db.spend import QuotaName
from bot.material.sources import Sources
from bot.slack.payloads import problems
from bot.threads.conversation import MessageChange, ThreadKey, UserMessage

logger = logging.getLogger(__name__)


# -- payloads ------------------------------------------------------------------------------------


class JobPayload(BaseModel):
    """A job's arguments, one subclass per kind of job; a durable job is stored as its JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ClassVar[str]
    """The kind of job this payload is for (the procrastinate task is `TASK_PREFIX` + kind)."""

    @property
    def thread(self) -> ThreadKey | None:
        """The Slack thread the job works in (None for a job of no thread)."""
        return None


class _MessageJob(JobPayload):
    message: UserMessage
    """The person's message the job answers in its thread."""

    @property
    def thread(self) -> ThreadKey:
        """The message's thread."""
        return self.message.thread


class PromptJob(_MessageJob):
    """A mention with nothing to do: answered with the rubric in force and "what should I do?".
    Queued so that it names the rubric in force after any earlier `rubric:` message in the thread."""

    kind: ClassVar[str] = "prompt"


class RubricJob(_MessageJob):
    """A `rubric:` message: it replaces the thread's rubric after the thread's earlier jobs."""

    kind: ClassVar[str] = "rubric"

    rubric: str
    """The rubric text after `rubric:`."""


class _RunJob(_MessageJob):
    run_id: int
    """The run recorded for the request (see `bot.db.store.Store.start_run`)."""


class RequestJob(_RunJob):
    """A request for the agent: run it, posting each evaluation and the answer."""

    kind: ClassVar[str] = "request"

    sources: Sources = Sources()
    """What the request shares besides its text (none in jobs queued before requests carried it)."""


class ReplyJob(_MessageJob):
    """A notice in answer to a message the bot does not act on otherwise (e.g. one too long to
    read); its message carries no text."""

    kind: ClassVar[str] = "reply"

    title: str
    """What is wrong, the notice's first line."""
    detail: str
    """What to do about it."""


class LimitJob(_MessageJob):
    """A request refused by a daily limit: its thread is told which limit and when it resets."""

    kind: ClassVar[str] = "limit"

    quota: QuotaName
    """The limit it met: the person's requests or the channel's tokens."""
    limit: int | float
    """The limit's value: requests or tokens, or US dollars for a money budget."""
    refused_at: datetime
    """When it was refused (the limit resets at the next midnight UTC)."""


class NoticeJob(_RunJob):
    """Telling a thread that an earlier process died in its run (the request and that run)."""

    kind: ClassVar[str] = "interrupted_notice"


class _ChangeJob(JobPayload):
    message: MessageChange
    """The deleted or edited message."""

    @property
    def thread(self) -> ThreadKey:
        """The message's thread."""
        return self.message.thread

    kept: int | None = None
    """Where jobs live in memory: the id of the change's row in `message_changes`, deleted once the
    change is applied (until then, a process starting applies it; see `bot.db.store.record_change`)."""


class ForgetJob(_ChangeJob):
    """A deleted message: it leaves the thread's conversation (see `bot.lifecycle.forget`)."""

    kind: ClassVar[str] = "forget"


class ReviseJob(_ChangeJob):
    """An edited request: its stored copy takes the new text (see `bot.lifecycle.forget`)."""

    kind: ClassVar[str] = "revise"


Revision = Callable[[JobPayload], JobPayload]
"""A change to a queued job's payload (an edited request's new text, say); the payload itself if
it does not apply."""

P = TypeVar("P", bound=JobPayload)
"""The payload model of one kind of job."""


class MalformedJob(ValueError):
    """A stored job's arguments do not fit its kind's model: it can never run, so it is not retried."""


class Abandoned(enum.Enum):
    """Why a job will never be done."""

    STOPPING = "stopping"
    """The embedded queue's process stopped before it reached the job."""
    GAVE_UP = "gave_up"
    """The job was cut short `MAX_ATTEMPTS` times (crashes or restarts mid-run)."""


@dataclass(frozen=True)
class JobKind(Generic[P]):
    """One kind of job: its payload model, how to do it, and what to tell its thread when it will
    never be done."""

    payload: type[P]
    run: Callable[[P, int], Awaitable[None]]
    """Does the job; the int counts earlier attempts that were cut short (0 on the first try),
    so a later attempt knows to resume rather than start."""
    abandon: Callable[[P, Abandoned], Awaitable[None]]

    @property
    def name(self) -> str:
        """The kind's name, as its payloads say."""
        return self.payload.kind

    def read(self, stored: Mapping[str, Any]) -> P:
        """A stored job's arguments as this kind's payload; `MalformedJob` naming what is wrong."""
        try:
            return self.payload.model_validate(stored)
        except ValidationError as exc:
            raise MalformedJob(f"a stored {self.name} job does not fit its payload: {problems(exc)}") from exc


class JobQueue(Protocol):
    """Where the runner puts work: per key (a thread) one job at a time, in submission order."""

    @property
    def durable(self) -> bool:
        """Whether queued and running jobs outlive this process (and so are never abandoned)."""
        ...

    @property
    def busy(self) -> int:
        """Jobs queued or running in this process (for the shutdown log)."""
        ...

    def register(self, kind: JobKind[Any]) -> None:
        """Make `kind` known; every kind is registered before `start`."""
        ...

    async def start(self) -> None:
        """Begin running jobs."""
        ...

    async def submit(self, thread: ThreadKey, payload: JobPayload, *, connection: Any = None) -> bool:
        """Queue a job behind the thread's earlier ones; False if the queue no longer takes jobs.

        A durable queue inserts the job through `connection` when given (the driver connection of an
        open transaction, see `bot.db.store.Claim`), so that it is queued only if that commits.
        """
        ...

    async def withdraw(self, thread: ThreadKey, message_ts: str) -> list[JobPayload]:
        """Take back the thread's queued (not yet running) jobs about the Slack message `message_ts`;
        their payloads. Finished jobs about it that the queue keeps (PostgreSQL's failed ones) go too."""
        ...

    async def revise_queued(self, thread: ThreadKey, message_ts: str, revise: Revision) -> int:
        """Replace each of the thread's queued (not yet running) jobs about the Slack message
        `message_ts` with `revise(job)`; how many changed."""
        ...

    def every_day(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` once a day (by one process of all sharing the queue); called before `start`."""
        ...

    async def drain(self, grace: float) -> None:
        """Stop: give running jobs `grace` seconds to finish, then cut them short."""
        ...

    async def job_counts(self) -> dict[str, int]:
        """How many jobs wait (``todo``) and run (``doing``), and on PostgreSQL ended otherwise."""
        ...


# -- embedded ------------------------------------------------------------------------------------


@dataclass
class ThreadScheduler:
    """The in-process queue: runs jobs one at a time per key, in submission order, keys concurrently.

    Each busy key has one asyncio task that empties its queue and then exits, so idle threads cost
    nothing and thousands of threads can be known without thousands of tasks.
    """

    _kinds: dict[str, JobKind[Any]] = field(default_factory=dict)
    _queues: dict[ThreadKey, deque[tuple[JobKind[Any], JobPayload]]] = field(default_factory=dict)
    _workers: dict[ThreadKey, asyncio.Task[None]] = field(default_factory=dict)
    _daily: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    _daily_tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _closed: bool = False

    @property
    def durable(self) -> bool:
        """Jobs live in this process's memory only."""
        return False

    @property
    def busy(self) -> int:
        """How many keys have work queued or running."""
        return len(self._workers)

    def register(self, kind: JobKind[Any]) -> None:
        """Make `kind` known to `submit`."""
        self._kinds[kind.name] = kind

    async def start(self) -> None:
        """Start the daily jobs (each submitted key gets its own task as it comes)."""
        self._daily_tasks = [
            asyncio.create_task(_daily(name, job), name=f"daily {name}") for name, job in self._daily.items()
        ]

    def every_day(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` at start and then every `DAY_SECONDS` while the process runs (it is the only one)."""
        self._daily[name] = job

    async def withdraw(self, thread: ThreadKey, message_ts: str) -> list[JobPayload]:
        """Remove the thread's queued jobs about `message_ts` from memory."""
        queue = self._queues.get(thread, deque())
        taken = [payload for _, payload in queue if _message_ts(payload) == message_ts]
        kept = [(kind, payload) for kind, payload in queue if _message_ts(payload) != message_ts]
        queue.clear()
        queue.extend(kept)
        return taken

    async def revise_queued(self, thread: ThreadKey, message_ts: str, revise: Revision) -> int:
        """Replace the thread's queued jobs about `message_ts` in memory, in place."""
        queue = self._queues.get(thread, deque())
        changed = 0
        for index, (kind, payload) in enumerate(queue):
            if _message_ts(payload) == message_ts and (revised := revise(payload)) != payload:
                queue[index] = (kind, revised)
                changed += 1
        return changed

    async def submit(self, thread: ThreadKey, payload: JobPayload, *, connection: Any = None) -> bool:
        """Queue the job behind the thread's earlier jobs; False once draining has begun (jobs live in
        memory, so there is no transaction to join: `connection` is not used)."""
        if self._closed:
            return False
        self._queues.setdefault(thread, deque()).append((self._kinds[payload.kind], payload))
        if thread not in self._workers:
            self._workers[thread] = asyncio.create_task(self._work(thread), name=f"thread {thread.thread_id}")
        return True

    async def job_counts(self) -> dict[str, int]:
        """This process's jobs: each busy key runs one and holds the rest in its queue."""
        return {"todo": sum(len(queue) for queue in self._queues.values()), "doing": len(self._workers)}

    async def _work(self, key: ThreadKey) -> None:
        queue = self._queues[key]
        try:
            while queue:
                kind, payload = queue.popleft()
                try:
                    await kind.run(payload, 0)
                except Exception:
                    # One failed job must not strand the ones queued behind it.
                    logger.exception("%s job for thread %s failed", kind.name, key.thread_id)
        finally:
            del self._queues[key]
            del self._workers[key]

    async def drain(self, grace: float) -> None:
        """Stop taking jobs, abandon queued ones, give running ones `grace` seconds, cancel the rest."""
        self._closed = True
        for task in self._daily_tasks:
            task.cancel()
        await asyncio.gather(*self._daily_tasks, return_exceptions=True)
        queued = [job for queue in self._queues.values() for job in queue]
        for queue in self._queues.values():
            queue.clear()
        await asyncio.gather(
            *(kind.abandon(payload, Abandoned.STOPPING) for kind, payload in queued),
            return_exceptions=True,
        )
        running = list(self._workers.values())
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


DAY_SECONDS = 24 * 60 * 60
"""How often the embedded queue runs a daily job."""


async def _daily(name: str, job: Callable[[], Awaitable[None]]) -> None:
    while True:
        try:
            await job()
        except Exception:
            # A failed sweep is tried again tomorrow; it must not stop the process.
            logger.exception("daily job %s failed", name)
        await asyncio.sleep(DAY_SECONDS)


def _message_ts(payload: JobPayload) -> str | None:
    """The ts of the Slack message a job is about, if it is about one."""
    message = getattr(payload, "message", None)
    return message.ts if isinstance(message, UserMessage | MessageChange) else None


# -- durable (PostgreSQL) ------------------------------------------------------------------------

TASK_PREFIX = "rubric_bot."
"""Prefix of the procrastinate task names of job kinds (`rubric_bot.request`, ...)."""

MAX_ATTEMPTS = 3
"""How many times a job may be cut short (its process crashed or was stopped mid-run) before it is
given up and its thread told; each new attempt resumes from the conversation's checkpoint."""

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

WORKER_WRITE_RETRY_SECONDS = 5.0
"""Longest pause between tries at recording a job's end or a worker's heartbeat while the database
is unreachable (the first pause is a tenth of it, doubling). A worker keeps trying for as long as it
lives: a job left `doing` under a live worker would hold its thread's later jobs back for good."""

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

LOCK_RELEASED_TRIGGER = """
CREATE OR REPLACE FUNCTION rubric_bot_notify_lock_released() RETURNS trigger
    LANGUAGE plpgsql
AS $$
DECLARE
    payload TEXT := json_build_object('type', 'job_inserted', 'job_id', OLD.id)::text;
BEGIN
    PERFORM pg_notify('procrastinate_queue_v1#' || OLD.queue_name, payload);
    PERFORM pg_notify('procrastinate_any_queue_v1', payload);
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS rubric_bot_lock_released ON procrastinate_jobs;
CREATE TRIGGER rubric_bot_lock_released
    AFTER UPDATE OF status OR DELETE ON procrastinate_jobs
    FOR EACH ROW WHEN (old.status = 'doing' AND old.lock IS NOT NULL)
    EXECUTE PROCEDURE rubric_bot_notify_lock_released();
"""
"""Wakes the workers when a job with a lock stops running (finished, deleted or re-queued).
procrastinate notifies them only when a job is inserted, so a thread's next job, held back by the
lock, would otherwise wait for the next poll; this sends procrastinate's own "job inserted"
notification when the lock frees up."""


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
        """The queue in the PostgreSQL database at `url` (its schema applied: see `apply_schema`)."""
        app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=url, max_size=POOL_MAX_CONNECTIONS, timeout=POOL_TIMEOUT_SECONDS
            )
        )
        app.job_manager = _WritesOutlastRestarts(app.connector)
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
            retry=_RetryUnlessMalformed(max_attempts=MAX_ATTEMPTS),
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

    async def submit(self, thread: ThreadKey, payload: JobPayload, *, connection: Any = None) -> bool:
        """Store the job in PostgreSQL behind the thread's earlier jobs (in `connection`'s transaction
        if given)."""
        task = self._app.configure_task(
            TASK_PREFIX + payload.kind, lock=thread.thread_id, connection=connection
        )
        await task.defer_async(**payload.model_dump(mode="json"))
        return True

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

    def _job_manager(self) -> _WritesOutlastRestarts:
        manager = self._app.job_manager
        assert isinstance(manager, _WritesOutlastRestarts)
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


class _RetryUnlessMalformed(procrastinate.RetryStrategy):
    """procrastinate's retries, except for a job whose stored arguments can never be read."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        """No retry for `MalformedJob`; the strategy's decision otherwise."""
        if isinstance(exception, MalformedJob):
            return None
        return super().get_retry_decision(exception=exception, job=job)


class _WritesOutlastRestarts(JobManager):
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


async def apply_schema(url: str) -> bool:
    """Create procrastinate's tables, functions and our wake-up trigger in `url`'s database if absent;
    whether it created them.

    The caller holds `bot.db.database.schema_lock`, so processes starting together apply it once.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        present = await connection.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
        row = await present.fetchone()
        if row and row[0]:
            return False
        async with connection.transaction():
            await connection.execute(SchemaManager.get_schema())
            await connection.execute(LOCK_RELEASED_TRIGGER)
        return True


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
