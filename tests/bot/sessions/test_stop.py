"""The stop watch of a process's running turns: all of them asked about in one query a poll, on
SQLite and PostgreSQL; a Stop recorded by another process ends only its run, one received here
wakes the watch at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Engine, event

from bot.db.store import Store
from bot.sessions import stop
from bot.sessions.stop import RunStopped, ask_to_stop, stoppable
from bot.vocabulary.thread import ThreadKey

TURNS = 5
EVENT_TIMEOUT = 10.0
"""A bound on each wait, so a broken watch fails instead of hanging."""


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(database_url)
    yield opened
    await opened.close()


class StopQueries:
    """The stop watch's queries the store sends: how many runs each asks about."""

    def __init__(self) -> None:
        self.runs_asked: list[int] = []

    def __call__(self, _connection: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "runs.stopped_by IS NOT NULL" in statement:
            self.runs_asked.append(len(parameters))  # one bound run id each

    async def after(self, count: int) -> None:
        while len(self.runs_asked) < count:
            await asyncio.sleep(0.01)


async def test_a_process_asks_about_all_its_running_turns_in_one_query_and_stops_only_the_one_asked(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(stop, "STOP_POLL_SECONDS", 0.05)
    threads = [ThreadKey("T1", f"C{n}", "1.0") for n in range(TURNS)]
    run_ids = [await store.start_run(thread, "1.0") for thread in threads]
    release = asyncio.Event()

    async def turn() -> str:
        await release.wait()
        return "answered"

    queries = StopQueries()
    event.listen(Engine, "before_cursor_execute", queries)
    try:
        turns = [asyncio.create_task(stoppable(store, run_id, turn, stopped_by=None)) for run_id in run_ids]
        await asyncio.wait_for(queries.after(3), EVENT_TIMEOUT)
        # Recorded by another process: no signal here, the next poll finds it.
        await store.request_stop(threads[0], "U2")
        with pytest.raises(RunStopped) as stopped:
            await asyncio.wait_for(turns[0], EVENT_TIMEOUT)
        # Received here: the watch asks at once.
        monkeypatch.setattr(stop, "STOP_POLL_SECONDS", EVENT_TIMEOUT * 10)
        await asyncio.wait_for(queries.after(len(queries.runs_asked) + 1), EVENT_TIMEOUT)
        await ask_to_stop(store, threads[1], "U3")
        with pytest.raises(RunStopped) as stopped_here:
            await asyncio.wait_for(turns[1], EVENT_TIMEOUT)
        release.set()
        answered = await asyncio.wait_for(asyncio.gather(*turns[2:]), EVENT_TIMEOUT)
    finally:
        event.remove(Engine, "before_cursor_execute", queries)

    assert (stopped.value.person, stopped_here.value.person) == ("U2", "U3")
    assert answered == ["answered"] * (TURNS - 2)
    # One query a poll, each about every turn still running (five, then four once one stopped).
    assert queries.runs_asked[:3] == [TURNS] * 3
    assert set(queries.runs_asked) <= {TURNS, TURNS - 1, TURNS - 2}
