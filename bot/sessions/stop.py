"""Stopping runs: a person's request recorded on the runs, and the watch that ends a run's turn.

The request is recorded in the database (`Store.request_stop`), so the process that runs the run
(or takes its queued job later) sees it within `STOP_POLL_SECONDS`; the process that received the
request also signals its own runs at once (`LOCAL_STOPS`). A turn asked to stop is cancelled
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
"""How often a running turn asks the database whether someone asked to stop it: how long a Stop
received by another process takes at most to reach it (one small query per running run)."""


class RunStopped(Exception):
    """A person asked to stop the run (`person` is their Slack user id)."""

    def __init__(self, person: str) -> None:
        super().__init__(f"stopped by {person}")
        self.person = person


class StopSignals:
    """This process's running turns, woken at once when a stop is asked for here."""

    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}

    def watch(self, run_id: int) -> asyncio.Event:
        """The event set when run `run_id` is asked to stop in this process."""
        return self._events.setdefault(run_id, asyncio.Event())

    def forget(self, run_id: int) -> None:
        """Run `run_id`'s turn ended here."""
        self._events.pop(run_id, None)

    def signal(self, run_ids: Iterable[int]) -> None:
        """Wake the turns of `run_ids` that run in this process."""
        for run_id in run_ids:
            if run_id in self._events:
                self._events[run_id].set()


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
    watching = asyncio.create_task(_asked_to_stop(store, run_id))
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
        LOCAL_STOPS.forget(run_id)


async def _asked_to_stop(store: Store, run_id: int) -> str:
    """Who asked to stop the run, once someone has: the database asked every `STOP_POLL_SECONDS`
    (a turn shorter than that asks it nothing), and at once when this process is told."""
    woken = LOCAL_STOPS.watch(run_id)
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), STOP_POLL_SECONDS)
        person = await store.stop_requested(run_id)
        if person is not None:
            return person
