"""`--team` alone in the terminal's commands finds a workspace of an Enterprise Grid org (its data
is filed under the org too) on SQLite and PostgreSQL: `usage`, `report`, `export` and `db purge`
keep to it; a workspace whose data is filed under two orgs is a one-line error asking for
`--enterprise`."""

from __future__ import annotations

import asyncio
import json

from bot.cli.main import main
from bot.db.admin import upgrade
from bot.db.database import Database
from bot.db.store import Store
from bot.limits.prices import run_cost
from bot.vocabulary.thread import ThreadKey

GRID = ThreadKey("T5", "C1", "1.0", enterprise="E1")
"""A thread of workspace T5 of org E1 (served by the org-wide installation, say)."""
ALONE = ThreadKey("T6", "C1", "2.0")
"""A thread of a workspace of no org."""
MOVED = [ThreadKey("T7", "C1", "3.0"), ThreadKey("T7", "C1", "4.0", enterprise="E2")]
"""Threads of a workspace from before and after it joined org E2."""


async def seed(database_url: str) -> None:
    await upgrade(Database.parse(database_url))
    store = await Store.open(database_url)
    try:
        for thread in (GRID, ALONE, *MOVED):
            await store.add_thread(thread)
            run = await store.start_run(thread, thread.thread_ts, requester="U1")
            spent = {"input_tokens": 10, "output_tokens": 0, "total_tokens": 10}
            cost = run_cost({"worker": ("openai:gpt-4o-mini", spent)})
            await store.finish_run(run, "answered", tokens=10, cost=cost)
    finally:
        await store.close()


async def run(*argv: str) -> int:
    """`main` runs its own event loop, so it runs in a thread of its own here."""
    return await asyncio.to_thread(main, list(argv))


async def test_team_alone_finds_a_workspace_of_an_enterprise_grid_org(database_url, capsys):
    await seed(database_url)

    assert await run("usage", "--db", database_url, "--team", "T5", "--json") == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(row["channel"], row["requests"]) for row in rows] == [("C1", 1)]
    assert await run("report", "--db", database_url, "--team", "T5", "--json") == 0
    assert json.loads(capsys.readouterr().out)["runs"]["cost"]["runs"] == 1
    # Named with its org, as before.
    assert await run("usage", "--db", database_url, "--team", "T5", "--enterprise", "E1", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 1

    assert await run("db", "purge", "--db", database_url, "--team", "T5", "--yes") == 0
    out = capsys.readouterr().out
    assert "team T5 of Enterprise Grid org E1" in out and "threads:" in out
    store = await Store.open(database_url)
    try:
        assert {thread.team for thread in await store.threads_in(None)} == {"T6", "T7"}
    finally:
        await store.close()


async def test_a_workspace_filed_under_two_orgs_is_one_line_asking_for_the_enterprise(database_url, capsys):
    await seed(database_url)

    for command in (["usage"], ["report"], ["export"], ["db", "purge", "--yes"]):
        assert await run(*command, "--db", database_url, "--team", "T7") == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line == (
            "rubric-bot: workspace T7 has data filed under more than one Enterprise Grid org "
            "(none, E2): add --enterprise E to name one"
        )
    assert await run("usage", "--db", database_url, "--team", "T7", "--enterprise", "E2", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 1


async def test_enterprise_without_team_is_one_line(database_url, capsys):
    await seed(database_url)

    assert await run("usage", "--db", database_url, "--enterprise", "E1") == 2
    assert capsys.readouterr().err.strip() == (
        "rubric-bot: --enterprise names the org of the workspace given with --team; add --team T"
    )
