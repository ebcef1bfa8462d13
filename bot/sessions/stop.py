"""Stopping runs: a person's request recorded on the runs, and the watch that ends a run's turn.

The request is recorded in the database (`Store.request_stop`), so the process that runs the run
(or takes its queued job later) sees it within `STOP_POLL_SECONDS`, asking about all its running
runs in one query; the process that received the request also signals its own runs at once
(`LOCAL_STOPS`). A turn asked to stop is cancelled
where it is, in-flight model call included, and `stoppable` raises `RunStopped`: the runner then
ends the run as ``stopped`` (see `bot.threads.answering`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T = TypeVar("T")

STOP_POLL_SECONDS = 1.0
"""How often a process asks the database whether someone asked to stop one of its running turns:
how long a Stop received by another process takes at most to reach it (one small query for all
of them)."""


class RunStopped(Exception):
    """A person asked to stop the run (`person` is their Slack user id)."""

    def __init__(self, person: str) -> None:
        super().__init__(f"stopped by {person}")
        self.person = person


class StopSignals:
    """This process's running turns, asked about together: those of one store every
    `STOP_POLL_SECONDS` in one query (not one query per run), and at once when a stop is asked for
    here."""

    def __init__(self) -> None:
        self._polls: dict[Store, _StorePoll] = {}

    async def asked(self, store: Store, run_id: int) -> str:
        """Who asked to stop run `run_id` (running here, recorded in `store`), once someone has;
        what the database raised if it failed meanwhile."""
        poll = self._polls.get(store)
        if poll is None:
            poll = self._polls[store] = _StorePoll(store)
        try:
            return await poll.asked(run_id)
        finally:
            if poll.idle:  # the next run starts a poll of its own
                poll.close()
                if self._polls.get(store) is poll:
                    del self._polls[store]

    def signal(self, run_ids: Iterable[int]) -> None:
        """Wake the turns of `run_ids` that run in this process: their stores are asked now."""
        wanted = set(run_ids)
        for poll in self._polls.values():
            poll.wake(wanted)


class _StorePoll:
    """The runs of one store running in this process, and the task asking the store about them."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._waiting: dict[int, asyncio.Future[str]] = {}
        self._woken = asyncio.Event()
        self._task = asyncio.create_task(self._poll())

    @property
    def idle(self) -> bool:
        """Whether no run waits on this poll any longer."""
        return not self._waiting

    async def asked(self, run_id: int) -> str:
        waiting = self._waiting[run_id] = asyncio.get_running_loop().create_future()
        try:
            return await waiting
        finally:
            del self._waiting[run_id]

    def wake(self, run_ids: set[int]) -> None:
        if not run_ids.isdisjoint(self._waiting):
            self._woken.set()

    def close(self) -> None:
        self._task.cancel()

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), STOP_POLL_SECONDS)
            self._woken.clear()
            asking = dict(self._waiting)
            try:
                people = await self._store.stops_requested(list(asking))
            except Exception as exc:  # each run's attempt ends with it, as its own query's would
                for waiting in asking.values():
                    if not waiting.done():
                        waiting.set_exception(exc)
                continue
            for run_id, person in people.items():
                if not asking[run_id].done():
                    asking[run_id].set_result(person)


LOCAL_STOPS = StopSignals()
"""The turns running in this process (one per process: the listeners and the runner share it)."""


async def ask_to_stop(store: Store, thread: ThreadKey, person: str) -> list[int]:
    """Ask, as `person`, to stop the thread's unfinished runs; the runs newly asked (none: nothing
    was running, or it is being stopped already)."""
    run_ids = await store.request_stop(thread, person)
    LOCAL_STOPS.signal(run_ids)
    return run_ids


async def ask_to_stop_mine(store: Store, workspace: Workspace, channel: str, person: str) -> list[int]:
    """Ask to stop the unfinished runs `person` asked for in `channel` (`/rubric stop`)."""
    run_ids = await store.request_stop_of(workspace, channel, person)
    LOCAL_STOPS.signal(run_ids)
    return run_ids


async def stoppable(
    store: Store, run_id: int, turn: Callable[[], Awaitable[T]], *, stopped_by: str | None
) -> T:
    """Await the `turn` (of run `run_id`) it starts, or cancel it and raise `RunStopped` once someone
    asks to stop the run; one asked to stop before it began (`stopped_by`, as the attempt's start
    read it) raises at once, no turn started."""
    if stopped_by is not None:
        raise RunStopped(stopped_by)
    working = asyncio.ensure_future(turn())
    watching = asyncio.create_task(LOCAL_STOPS.asked(store, run_id))
    try:
        await asyncio.wait({working, watching}, return_when=asyncio.FIRST_COMPLETED)
        if working.done():
            return working.result()
        person = watching.result()  # what the database raised, if it failed, ends the attempt
        raise RunStopped(person)
    finally:
        for task in (working, watching):
            task.cancel()
        await asyncio.gather(working, watching, return_exceptions=True)
