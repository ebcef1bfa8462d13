"""Both job queues: per-thread order, cross-thread concurrency, draining; and what only the durable
(PostgreSQL) queue does: order across processes, runs that outlive a dead or stopped process.

A "process" here is one `DurableQueue` with its own connection pool and procrastinate worker; two
of them in one test behave towards PostgreSQL exactly as two bot processes do.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import psycopg
import pytest
from procrastinate.periodic import PeriodicDeferrer
from sqlalchemy import make_url

from bot.db.database import Database, schema_lock
from bot.db.queue_schema import apply_schema
from bot.queue.durable import DurableQueue
from bot.queue.jobs import (
    MAX_ATTEMPTS,
    Abandoned,
    JobKind,
    JobPayload,
    JobQueue,
    MalformedJob,
    RequestJob,
)
from bot.queue.scheduler import DAY_SECONDS, ThreadScheduler
from bot.slack.conversation import UserMessage
from bot.vocabulary.thread import ThreadKey
from tests.standins.tcp_link import TcpLink, via_link

EVENT_TIMEOUT = 60.0
"""A generous bound so a broken queue fails instead of hanging (dead-worker detection included)."""

STALLED_AFTER = 15.0
"""Heartbeat timeout of the durable queues under test: generous, so a live queue slowed down by a
busy machine is never taken for dead (and its job run twice). A worker is dead only when a test
makes it so, dating its last heartbeat back; the live queues' sweep, every 5 s, then finds its job."""


class Step(JobPayload):
    """The payload of the test's one kind of job."""

    kind: ClassVar[str] = "step"
    name: str


class Said(JobPayload):
    """The payload of a job about a person's message (a request, say)."""

    kind: ClassVar[str] = "said"
    message: UserMessage


def said(ts: str, text: str) -> Said:
    return Said(message=UserMessage(team="T1", channel="C1", ts=ts, thread_ts="t1", user="U1", text=text))


def thread(name: str) -> ThreadKey:
    """A thread of the test's workspace and channel, named by its root ts."""
    return ThreadKey("T1", "C1", name)


@dataclass
class Recorder:
    """A job kind `step` that logs its start and end; a step named in `gates` waits for its gate."""

    log: list[str] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    attempts: dict[str, list[int]] = field(default_factory=dict)
    failures: set[str] = field(default_factory=set)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def kind(self) -> JobKind[Step]:
        return JobKind(Step, self._run, self._abandon)

    def kinds(self) -> list[JobKind[Any]]:
        """`step`, and `said`, which logs the text it was given (and fails as malformed on "bad")."""
        return [self.kind(), JobKind(Said, self._said, self._abandon_said)]

    async def _said(self, payload: Said, attempt: int) -> None:
        if payload.message.text == "bad":
            raise MalformedJob("bad")
        self._note(f"said {payload.message.text}")

    async def _abandon_said(self, payload: Said, why: Abandoned) -> None:
        self._note(f"abandoned said {payload.message.text}")

    async def _run(self, payload: Step, attempt: int) -> None:
        name = payload.name
        self.attempts.setdefault(name, []).append(attempt)
        self._note(f"start {name}")
        if name in self.failures:
            raise RuntimeError(f"{name} failed")
        if name in self.gates:
            await asyncio.wait_for(self.gates[name].wait(), EVENT_TIMEOUT)
        self._note(f"end {name}")

    async def _abandon(self, payload: Step, why: Abandoned) -> None:
        self._note(f"abandoned {payload.name} ({why.value})")

    def _note(self, entry: str) -> None:
        self.log.append(entry)
        self.changed.set()

    async def wait_for(self, entry: str) -> None:
        async def seen() -> None:
            while entry not in self.log:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(seen(), EVENT_TIMEOUT)


# -- fixtures ------------------------------------------------------------------------------------


QueueFactory = Callable[..., Awaitable[Any]]
"""Opens a queue running a recorder's kind: `factory(recorder, start=True)`."""


def durable_factory(stack: AsyncExitStack, url: str) -> QueueFactory:
    """Opens `DurableQueue`s ("processes") on one database."""

    async def open_queue(recorder: Recorder, *, start: bool = True) -> DurableQueue:
        await apply_schema(url)
        queue = await stack.enter_async_context(
            DurableQueue.open(url, concurrency=10, stalled_after=STALLED_AFTER)
        )
        for kind in recorder.kinds():
            queue.register(kind)
        if start:
            await queue.start()
        return queue

    return open_queue


@pytest.fixture
async def durable_queues(postgres_url: str) -> AsyncIterator[QueueFactory]:
    async with AsyncExitStack() as stack:
        yield durable_factory(stack, postgres_url)


@pytest.fixture(params=["embedded", pytest.param("durable", marks=pytest.mark.postgres)])
async def queues(request: pytest.FixtureRequest) -> AsyncIterator[QueueFactory]:
    """Either queue: the embedded one is one in-process scheduler, the durable one a process."""
    async with AsyncExitStack() as stack:
        if request.param == "durable":
            yield durable_factory(stack, request.getfixturevalue("postgres_url"))
            return
        scheduler = ThreadScheduler()
        stack.push_async_callback(scheduler.drain, 0)

        async def open_scheduler(recorder: Recorder) -> JobQueue:
            for kind in recorder.kinds():
                scheduler.register(kind)
            await scheduler.start()
            return scheduler

        yield open_scheduler


async def submit(queue: JobQueue, key: str, *names: str) -> None:
    for name in names:
        assert await queue.submit(thread(key), Step(name=name))


# -- what both queues do -------------------------------------------------------------------------


async def test_jobs_of_one_thread_run_one_at_a_time_in_arrival_order(queues: QueueFactory):
    recorder = Recorder(gates={"a": asyncio.Event()})
    queue = await queues(recorder)
    await submit(queue, "t1", "a", "b", "c")
    await recorder.wait_for("start a")
    await submit(queue, "t2", "other")
    await recorder.wait_for("end other")
    assert "start b" not in recorder.log  # b waits for a, however long a takes

    recorder.gates["a"].set()
    await recorder.wait_for("end c")
    thread = [entry for entry in recorder.log if "other" not in entry]
    assert thread == ["start a", "end a", "start b", "end b", "start c", "end c"]


async def test_different_threads_run_concurrently(queues: QueueFactory):
    # Each job ends only once the other has started: a serial queue times out.
    recorder = Recorder(gates={"one": asyncio.Event(), "two": asyncio.Event()})
    queue = await queues(recorder)
    await submit(queue, "t1", "one")
    await submit(queue, "t2", "two")
    await recorder.wait_for("start one")
    await recorder.wait_for("start two")
    for gate in recorder.gates.values():
        gate.set()
    await recorder.wait_for("end one")
    await recorder.wait_for("end two")


async def test_a_failing_job_does_not_strand_the_next(queues: QueueFactory):
    recorder = Recorder(failures={"boom"})
    queue = await queues(recorder)
    await submit(queue, "t1", "boom", "next")
    await recorder.wait_for("end next")
    assert recorder.log.index("start boom") < recorder.log.index("start next")


def revised(job: JobPayload) -> JobPayload:
    assert isinstance(job, Said)
    return job.model_copy(update={"message": replace(job.message, text=f"{job.message.text}, edited")})


async def test_a_queued_jobs_message_can_be_withdrawn_or_revised_before_it_runs(queues: QueueFactory):
    recorder = Recorder(gates={"running": asyncio.Event()})
    queue = await queues(recorder)
    await submit(queue, "t1", "running")
    await recorder.wait_for("start running")
    for job in (said("1.1", "first"), said("1.2", "deleted"), said("1.3", "third")):
        assert await queue.submit(thread("t1"), job)

    assert await queue.withdraw(thread("t1"), "1.2") == [said("1.2", "deleted")]
    assert await queue.revise_queued(thread("t1"), "1.3", revised) == 1
    assert await queue.withdraw(thread("t2"), "1.1") == []  # another thread's message
    recorder.gates["running"].set()
    await recorder.wait_for("said third, edited")

    ran = [entry for entry in recorder.log if entry.startswith("said")]
    assert ran == ["said first", "said third, edited"]


async def test_withdrawing_a_message_deletes_its_failed_jobs_kept_in_postgresql(durable_queues, postgres_url):
    recorder = Recorder()
    queue = await durable_queues(recorder)
    await queue.submit(thread("t1"), said("1.1", "bad"))
    await submit(queue, "t1", "next")
    await recorder.wait_for("end next")

    async def jobs_about_the_message() -> list[tuple[str]]:
        async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
            query = "SELECT status::text FROM procrastinate_jobs WHERE args->'message'->>'ts' = '1.1'"
            return await (await connection.execute(query)).fetchall()

    assert await jobs_about_the_message() == [("failed",)]
    assert await queue.withdraw(thread("t1"), "1.1") == []  # nothing was waiting to run
    assert await jobs_about_the_message() == []


# -- daily jobs (retention's sweep) -------------------------------------------------------------


async def test_the_embedded_queue_runs_a_daily_job_when_it_starts():
    ran = asyncio.Event()

    async def sweep() -> None:
        ran.set()

    scheduler = ThreadScheduler()
    scheduler.every_day("sweep", sweep)
    await scheduler.start()
    try:
        await asyncio.wait_for(ran.wait(), EVENT_TIMEOUT)
    finally:
        await scheduler.drain(0)


async def test_a_daily_job_is_queued_once_a_day_whichever_processes_are_up(durable_queues, postgres_url):
    sweeps: list[str] = []
    swept = asyncio.Event()

    async def sweep() -> None:
        sweeps.append("sweep")
        swept.set()

    recorder = Recorder()
    processes = [await durable_queues(recorder, start=False) for _ in range(2)]
    for queue in processes:
        queue.every_day("sweep", sweep)

    async def defer_todays(queue: DurableQueue) -> None:
        """What a process's periodic deferrer does when the day's time comes."""
        deferrer = PeriodicDeferrer(queue._app.periodic_registry)
        now = time.time()
        (task,) = deferrer.registry.periodic_tasks.values()
        (today,) = deferrer.get_timestamps(task, since=int(now - DAY_SECONDS), until=now)
        await deferrer.defer_jobs([(task, today)])

    async def sweeps_queued() -> int:
        async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
            query = "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'rubric_bot.sweep'"
            row = await (await connection.execute(query)).fetchone()
            return row[0] if row else 0

    for queue in processes:
        await defer_todays(queue)
    assert await sweeps_queued() == 1  # both processes came to it: one job
    for queue in processes:
        await queue.start()
    await asyncio.wait_for(swept.wait(), EVENT_TIMEOUT)
    # The sweep ran; its job's row goes once the worker records its end, just after.
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        gone = "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE task_name = %s)"
        await asyncio.wait_for(eventually(admin, gone, ("rubric_bot.sweep",)), EVENT_TIMEOUT)
    await defer_todays(processes[1])  # a process starting later the same day
    assert await sweeps_queued() == 0 and sweeps == ["sweep"]


# -- the embedded queue when its process stops ---------------------------------------------------


async def test_drain_abandons_queued_jobs_and_cancels_what_outlives_the_grace():
    recorder = Recorder(gates={"running": asyncio.Event()})
    scheduler = ThreadScheduler()
    scheduler.register(recorder.kind())
    await submit(scheduler, "t1", "running", "queued")
    await submit(scheduler, "t2", "quick")
    await recorder.wait_for("start running")

    await scheduler.drain(grace=0.2)

    assert "abandoned queued (stopping)" in recorder.log and "start queued" not in recorder.log
    assert "end quick" in recorder.log
    assert "end running" not in recorder.log  # cancelled after the grace period
    assert scheduler.busy == 0
    assert not await scheduler.submit(thread("t3"), Step(name="late"))


async def test_drain_lets_running_jobs_finish_within_the_grace():
    recorder = Recorder(gates={"running": asyncio.Event()})
    scheduler = ThreadScheduler()
    scheduler.register(recorder.kind())
    await submit(scheduler, "t1", "running")
    await recorder.wait_for("start running")
    asyncio.get_running_loop().call_later(0.1, recorder.gates["running"].set)

    await scheduler.drain(grace=EVENT_TIMEOUT)

    assert recorder.log == ["start running", "end running"]


# -- the durable queue across processes ----------------------------------------------------------


async def test_a_threads_jobs_keep_their_order_whichever_process_queued_them(durable_queues):
    recorder = Recorder()
    first, second = await durable_queues(recorder), await durable_queues(recorder)
    for number in range(6):
        await submit(first if number % 2 else second, "t1", f"job{number}")
    await recorder.wait_for("end job5")
    expected = [f"{edge} job{number}" for number in range(6) for edge in ("start", "end")]
    assert recorder.log == expected


async def heartbeat_stopped_long_ago(url: str, worker_id: int) -> None:
    """Date the worker's last heartbeat back an hour: it died long ago, as far as the queue can tell."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connection.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = %s",
            (worker_id,),
        )


async def test_a_job_whose_process_died_runs_again_before_the_threads_next_job(durable_queues, postgres_url):
    recorder = Recorder()
    # The "dead" process: it took the job and then stopped beating (a SIGKILL does exactly that).
    dead = await durable_queues(recorder, start=False)
    await submit(dead, "t1", "cut short", "next")
    manager = dead._app.job_manager
    worker_id = await manager.register_worker()
    taken = await manager.fetch_job(queues=None, worker_id=worker_id)
    assert taken is not None and taken.task_kwargs == {"name": "cut short"}
    await heartbeat_stopped_long_ago(postgres_url, worker_id)

    await durable_queues(recorder)
    await recorder.wait_for("end next")

    assert recorder.log == ["start cut short", "end cut short", "start next", "end next"]
    assert recorder.attempts["cut short"] == [1]  # a later attempt: it knows to resume


async def test_a_job_cut_short_by_a_restart_is_resumed_by_another_process(durable_queues):
    recorder = Recorder(gates={"long": asyncio.Event()})
    stopping, other = await durable_queues(recorder), await durable_queues(recorder, start=False)
    await submit(stopping, "t1", "long", "queued behind")
    await recorder.wait_for("start long")

    await stopping.drain(grace=0.1)
    recorder.gates["long"].set()
    await other.start()
    await recorder.wait_for("end queued behind")

    assert not any(entry.startswith("abandoned") for entry in recorder.log)
    assert recorder.log == [
        "start long",
        "start long",
        "end long",
        "start queued behind",
        "end queued behind",
    ]
    assert recorder.attempts["long"] == [0, 1]


async def named_queue(
    stack: AsyncExitStack, postgres_url: str, recorder: Recorder
) -> tuple[DurableQueue, str]:
    """A durable queue (started) whose connections carry a name of their own, and that name."""
    name = f"rubric-bot-test-{uuid.uuid4().hex[:8]}"
    url = make_url(postgres_url).update_query_dict({"application_name": name})
    return await durable_factory(stack, url.render_as_string(hide_password=False))(recorder), name


async def cut_off_writing(postgres_url: str, name: str, rows: str, write: Callable[[], None]) -> None:
    """Hold `rows` (`SELECT … FOR UPDATE`), `write` (so that the queue named `name` goes to write them),
    and once its connection waits for them cut it, as a database restart would; then let them go."""
    waiting = "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"
    async with (
        await psycopg.AsyncConnection.connect(postgres_url) as holder,
        await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin,
    ):
        await holder.execute(rows)
        write()
        await asyncio.wait_for(eventually(admin, waiting, (name,)), EVENT_TIMEOUT)
        # Only the waiting connection: cutting the queue's others too would also stop its worker,
        # whose restart writes a new heartbeat of its own instead of the one cut off.
        await admin.execute(waiting.replace("SELECT 1", "SELECT pg_terminate_backend(pid)"), (name,))
        await holder.rollback()


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "bot.queue.jobs"]


async def test_a_job_whose_end_is_cut_off_by_a_database_restart_still_frees_its_thread(
    postgres_url: str, caplog: pytest.LogCaptureFixture
):
    """The end is recorded once the database answers again, so the thread's next job runs (and the
    ended one does not run again)."""
    recorder = Recorder(gates={"ending": asyncio.Event()})
    async with AsyncExitStack() as stack:
        queue, name = await named_queue(stack, postgres_url, recorder)
        await submit(queue, "t1", "ending", "next")
        await recorder.wait_for("start ending")
        jobs_row = "SELECT id FROM procrastinate_jobs WHERE status = 'doing' FOR UPDATE"
        await cut_off_writing(postgres_url, name, jobs_row, recorder.gates["ending"].set)
        await recorder.wait_for("end next")

    assert recorder.log == ["start ending", "end ending", "start next", "end next"]
    assert recorder.attempts["ending"] == [0]
    [warning] = warnings_logged(caplog)
    assert warning.startswith("could not record the end of job 1 (terminating connection")
    assert warning.endswith("; trying until the database answers")


async def test_a_heartbeat_cut_off_by_a_database_restart_is_written_once_it_answers(
    postgres_url: str, caplog: pytest.LogCaptureFixture
):
    """A worker whose heartbeats stopped would have its later jobs taken for a dead worker's and run twice."""
    async with AsyncExitStack() as stack:
        _, name = await named_queue(stack, postgres_url, Recorder())
        workers_row = "SELECT id FROM procrastinate_workers FOR UPDATE"
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            # The worker writes its row once it runs: held before that, no heartbeat would wait on it.
            await asyncio.wait_for(
                eventually(admin, "SELECT 1 FROM procrastinate_workers", ()), EVENT_TIMEOUT
            )
        # The heartbeat comes on its own, every STALLED_AFTER / 3 seconds.
        await cut_off_writing(postgres_url, name, workers_row, lambda: None)
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            cut = await (await admin.execute("SELECT now()")).fetchone()
            beat = "SELECT 1 FROM procrastinate_workers WHERE last_heartbeat > %s"
            await asyncio.wait_for(eventually(admin, beat, cut), EVENT_TIMEOUT)

    [warning] = warnings_logged(caplog)
    assert (
        warning.startswith("could not record worker ") and "'s heartbeat (terminating connection" in warning
    )


async def eventually(admin: psycopg.AsyncConnection, query: str, params: Any) -> None:
    """Return once `query` finds a row (the database's state is the event awaited)."""
    while not await (await admin.execute(query, params)).fetchone():
        await asyncio.sleep(0.05)


async def test_a_process_stopping_while_the_database_is_unreachable_still_stops(postgres_url: str):
    """A job's end that the database cannot take is tried only until the stop's grace is over: the
    process ends (its job runs again elsewhere, as a dead worker's)."""
    server = make_url(postgres_url)
    recorder = Recorder(gates={"ending": asyncio.Event()})
    with TcpLink(server.host or "127.0.0.1", server.port or 5432) as link:
        async with AsyncExitStack() as stack:
            queue = await durable_factory(stack, via_link(postgres_url, link))(recorder)
            await submit(queue, "t1", "ending")
            await recorder.wait_for("start ending")
            link.cut()
            recorder.gates["ending"].set()
            await recorder.wait_for("end ending")
            await asyncio.wait_for(queue.drain(grace=0.5), EVENT_TIMEOUT)
    # The end the database never took is not recorded: the job is still the stopped worker's, to
    # run again elsewhere as a dead worker's, rather than done or lost.
    async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
        cursor = await connection.execute(
            "SELECT status::text FROM procrastinate_jobs WHERE args->>'name' = 'ending'"
        )
        assert await cursor.fetchall() == [("doing",)]


async def test_a_worker_that_stops_on_its_own_is_started_again(
    durable_queues, postgres_url: str, caplog: pytest.LogCaptureFixture
):
    """procrastinate stops its worker when fetching a job fails (its connection lost as the database
    restarts; here, its function gone a moment); the process starts it again, so jobs still run."""
    recorder = Recorder()
    queue = await durable_queues(recorder)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        await admin.execute("ALTER FUNCTION procrastinate_fetch_job_v2 RENAME TO no_fetching")
        try:
            await asyncio.wait_for(logged(caplog, "the job worker stopped taking jobs"), EVENT_TIMEOUT)
        finally:
            await admin.execute("ALTER FUNCTION no_fetching RENAME TO procrastinate_fetch_job_v2")
    await submit(queue, "t1", "after")
    await recorder.wait_for("end after")

    assert recorder.log == ["start after", "end after"]


async def logged(caplog: pytest.LogCaptureFixture, start: str) -> None:
    """Return once a record starting with `start` has been logged."""
    while not any(message.startswith(start) for message in warnings_logged(caplog)):
        await asyncio.sleep(0.05)


async def test_a_job_cut_short_too_often_is_given_up_and_its_thread_told(durable_queues):
    recorder = Recorder(failures={"doomed"})
    queue = await durable_queues(recorder)
    await submit(queue, "t1", "doomed", "next")
    await recorder.wait_for("end next")

    assert recorder.attempts["doomed"] == list(range(MAX_ATTEMPTS))
    assert recorder.log.index("abandoned doomed (gave_up)") < recorder.log.index("start next")


async def test_processes_starting_together_apply_the_schema_once(postgres_url: str):
    async def apply_locked() -> bool:
        async with schema_lock(Database.parse(postgres_url)):
            return await apply_schema(postgres_url)

    assert sorted(await asyncio.gather(*(apply_locked() for _ in range(3)))) == [False, False, True]
    async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
        cursor = await connection.execute("SELECT count(*) FROM procrastinate_jobs")
        assert await cursor.fetchone() == (0,)


# -- stored payloads -----------------------------------------------------------------------------


def test_a_stored_payload_that_does_not_fit_its_kind_is_refused_naming_what_is_wrong():
    async def never(job: RequestJob, value: Any) -> None:
        raise AssertionError("a malformed job must not be done")

    message = {"team": "T1", "channel": "C1", "thread_ts": "1.0", "user": "U1", "text": "hi"}
    kind = JobKind(RequestJob, never, never)
    with pytest.raises(MalformedJob) as refused:
        kind.read({"message": message, "run_id": "seven"})
    assert str(refused.value) == (
        "a stored request job does not fit its payload: message.ts: Field required; "
        "run_id: Input should be a valid integer, unable to parse string as an integer"
    )
    assert kind.read({"message": {**message, "ts": "1.1"}, "run_id": 7}) == RequestJob(
        message=UserMessage(team="T1", channel="C1", ts="1.1", thread_ts="1.0", user="U1", text="hi"),
        run_id=7,
    )


async def test_a_malformed_stored_job_fails_once_with_its_problem_and_the_thread_goes_on(
    durable_queues, postgres_url: str, caplog: pytest.LogCaptureFixture
):
    recorder = Recorder()
    queue = await durable_queues(recorder)
    # What an older or broken process might have stored: the name is not a string.
    await queue._app.configure_task("rubric_bot.step", lock=thread("t1").thread_id).defer_async(name=["x"])
    await submit(queue, "t1", "next")
    await recorder.wait_for("end next")

    assert recorder.log == ["start next", "end next"]
    async with await psycopg.AsyncConnection.connect(postgres_url) as connection:
        cursor = await connection.execute(
            "SELECT status, attempts FROM procrastinate_jobs WHERE args->'name' = '[\"x\"]'"
        )
        assert await cursor.fetchall() == [("failed", 1)]  # kept for the operator, never retried
    refusals = [
        r.exc_info[1] for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], MalformedJob)
    ]
    assert [str(e) for e in refusals] == [
        "a stored step job does not fit its payload: name: Input should be a valid string"
    ]
