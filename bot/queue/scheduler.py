"""`ThreadScheduler`, the embedded job queue (SQLite): asyncio tasks in this process, one at a time per
thread. Jobs live in memory, so a stopping process abandons what it has not reached (the thread is
told).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.queue.jobs import Abandoned, JobKind, JobPayload, Revision, message_ts_of
from bot.vocabulary.thread import ThreadKey

logger = logging.getLogger("bot.queue.jobs")
"""The queue's parts log as the queue: the name operators filter by and the README quotes."""


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
        taken = [payload for _, payload in queue if message_ts_of(payload) == message_ts]
        kept = [(kind, payload) for kind, payload in queue if message_ts_of(payload) != message_ts]
        queue.clear()
        queue.extend(kept)
        return taken

    async def revise_queued(self, thread: ThreadKey, message_ts: str, revise: Revision) -> int:
        """Replace the thread's queued jobs about `message_ts` in memory, in place."""
        queue = self._queues.get(thread, deque())
        changed = 0
        for index, (kind, payload) in enumerate(queue):
            if message_ts_of(payload) == message_ts and (revised := revise(payload)) != payload:
                queue[index] = (kind, revised)
                changed += 1
        return changed

    async def submit(self, thread: ThreadKey, payload: JobPayload) -> bool:
        """Queue the job behind the thread's earlier jobs; False once draining has begun."""
        if self._closed:
            return False
        self._queues.setdefault(thread, deque()).append((self._kinds[payload.kind], payload))
        if thread not in self._workers:
            self._workers[thread] = asyncio.create_task(self._work(thread), name=f"thread {thread.thread_id}")
        return True

    async def submit_claimed(self, jobs: Sequence[tuple[ThreadKey, JobPayload]], connection: Any) -> None:
        """Queue each job, or tell its thread it was abandoned once draining has begun (jobs live in
        memory, so there is no transaction to join: `connection` is not used)."""
        for thread, payload in jobs:
            if not await self.submit(thread, payload):
                await self._kinds[payload.kind].abandon(payload, Abandoned.STOPPING)

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
