"""`rubric-bot db upgrade` and `rubric-bot db copy`, on a real SQLite file and a real PostgreSQL.

The copied conversation is a real agent's (scripted models, the real checkpointers): after the
copy it continues on PostgreSQL with its history and its rubric.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import make_url

from bot.agent.turn import run_turn
from bot.agent.worker import agent_config, build_agent
from bot.cli.main import main
from bot.db import admin as dbadmin
from bot.db.database import Database, open_checkpointer
from bot.db.migrations import alembic_config
from bot.db.reviews import ReviewVerdict
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from tests.grading.scripted import ScriptedChatModel, grader_wanting

T1 = Workspace("T1")

THREAD = ThreadKey("T1", "C1", "1700000000.000100")
RUBRIC = "- Names the capital\n- Mentions the river"


async def converse(database: Database, text: str, worker: ScriptedChatModel, rubric: str | None = None):
    """One turn of the thread's conversation on ``database``; its outcome and evaluations."""
    evaluations: list[dict[str, Any]] = []

    async def keep(evaluation: dict[str, Any]) -> None:
        evaluations.append(evaluation)

    inputs: dict[str, Any] = {"messages": [HumanMessage(text)]}
    if rubric:
        inputs["rubric"] = rubric
    async with open_checkpointer(database) as checkpointer:
        agent = build_agent(
            worker,
            ScriptedChatModel(script=grader_wanting("Seine")),
            max_iterations=3,
            checkpointer=checkpointer,
        )
        outcome = await run_turn(agent, inputs, agent_config(THREAD.thread_id), keep)
    return outcome, evaluations


async def fill(database: Database) -> int:
    """A team's history on ``database``: a graded conversation, its run, evaluation and review."""
    await dbadmin.upgrade(database)
    worker = ScriptedChatModel(
        script=lambda messages: "Paris." if len(messages) < 3 else "Paris, on the Seine."
    )
    outcome, evaluations = await converse(database, "What is the capital of France?", worker, RUBRIC)
    assert outcome.status == "satisfied" and len(evaluations) == 2
    store = await Store.open(database)
    try:
        await store.claim("event:Ev1")
        await store.add_thread(THREAD)
        await store.set_channel_rubric(T1, "C1", RUBRIC, "U1")
        await store.set_calibration(T1, "C1", False)
        run_id = await store.start_run(THREAD, "1700000000.000200")
        for evaluation in evaluations:
            await store.save_evaluation(THREAD, "1.5", evaluation, RUBRIC)
        await store.save_review(
            THREAD, evaluations[0]["grading_run_id"], 0, "U2",
            [ReviewVerdict("Mentions the river", "fail", "fail", "agreed")],
        )  # fmt: skip
        await store.record_posted(run_id, "final", 0, "1.9")
        await store.finish_run(run_id, "satisfied")
    finally:
        await store.close()
    return run_id


async def test_a_copied_conversation_continues_on_postgresql_with_its_history_and_rubric(
    tmp_path, postgres_url
):
    source, target = Database.parse(str(tmp_path / "bot.sqlite")), Database.parse(postgres_url)
    run_id = await fill(source)

    report = await dbadmin.copy(source, target)

    assert report.threads == 1 and report.checkpoints > 0
    assert report.rows["evaluations"] == 2 and report.rows["reviews"] == 1 and report.rows["runs"] == 1
    worker = ScriptedChatModel(script=lambda messages: "Paris, on the Seine. Lyon is on the Rhône.")
    outcome, evaluations = await converse(target, "And Lyon?", worker)
    # The follow-up, with no rubric of its own, is graded against the copied thread's rubric...
    assert outcome.status == "satisfied"
    assert [c["name"] for c in evaluations[0]["criteria"]] == ["Names the capital", "Mentions the river"]
    # ...and the worker sees the conversation so far.
    seen = [m.text for m in worker.calls[0] if m.type in ("human", "ai")]
    assert seen[0] == "What is the capital of France?" and "Paris, on the Seine." in seen
    assert seen[-1] == "And Lyon?"

    store = await Store.open(target)
    try:
        assert not await store.claim("event:Ev1")
        assert await store.has_thread(THREAD)
        assert await store.get_channel_rubric(T1, "C1") == RUBRIC
        assert not await store.calibration_enabled(T1, "C1")
        record = await store.get_evaluation(T1, evaluations[0]["grading_run_id"], 0)
        assert record is None  # the follow-up's evaluations were not saved; the copied ones were:
        copied = await store.evaluations_in_channel(T1, "C1", datetime.now(UTC) - timedelta(hours=1))
        assert [e["iteration"] for e in copied] == [0, 1]
        (review,) = await store.reviews_in_channel(T1, "C1")
        assert review.comment == "agreed"
        assert [m.message_ts for m in await store.posted_messages(run_id)] == ["1.9"]
        assert await store.start_run(THREAD, "2.0") == run_id + 1
    finally:
        await store.close()


async def test_copy_refuses_a_target_that_holds_data(tmp_path, postgres_url):
    source, target = Database.parse(str(tmp_path / "bot.sqlite")), Database.parse(postgres_url)
    await fill(source)
    await dbadmin.copy(source, target)
    with pytest.raises(dbadmin.CopyError, match="not empty"):
        await dbadmin.copy(source, target)


def test_db_copy_command_reports_what_it_moved_and_refuses_twice(tmp_path, postgres_url, capsys):
    source = tmp_path / "bot.sqlite"
    # A file from the SQLite default: the command upgrades it before reading.
    with closing(sqlite3.connect(source)) as db:
        db.execute("CREATE TABLE claims (key TEXT NOT NULL PRIMARY KEY, claimed_at TEXT NOT NULL)")
        db.execute("INSERT INTO claims VALUES ('event:Ev1', '2025-01-01T00:00:00.000000+00:00')")
        db.commit()

    assert main(["db", "copy", "--from", f"sqlite:{source}", "--to", postgres_url]) == 0
    out = capsys.readouterr().out
    assert "claims 1" in out and "0 threads" in out
    password = make_url(postgres_url).password
    assert f":{password}@" not in out and ":***@" in out  # named, the password masked

    assert main(["db", "copy", "--from", f"sqlite:{source}", "--to", postgres_url]) == 2
    assert "not empty (claims has 1 rows)" in capsys.readouterr().err


def test_db_copy_command_explains_bad_arguments(tmp_path, capsys):
    assert main(["db", "copy", "--from", str(tmp_path / "missing.sqlite"), "--to", "sqlite:x"]) == 2
    assert "no database at" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["db", "copy", "--from", "mysql://h/db", "--to", "postgresql://h/db"])
    assert exit_.value.code == 2
    assert "mysql:// is not supported" in capsys.readouterr().err


def test_db_upgrade_command_makes_a_database_ready_and_says_what_it_applied(tmp_path, postgres_url, capsys):
    for database in (str(tmp_path / "new.sqlite"), postgres_url):
        assert main(["db", "upgrade", "--db", database]) == 0
        assert main(["db", "upgrade", "--db", database]) == 0  # again: nothing to do
    sqlite_first, sqlite_again, postgres_first, postgres_again = capsys.readouterr().out.splitlines()
    # In the order they apply, which is the chain's, not the files' (numbers were handed out ahead).
    chain = ScriptDirectory.from_config(alembic_config()).walk_revisions()
    revisions = ", ".join(reversed([script.revision for script in chain]))
    assert sqlite_first.endswith(f": applied the bot's migrations {revisions}; 1 checkpoint migration(s)")
    assert postgres_first.endswith("checkpoint migration(s); the job queue's schema")
    assert f": applied the bot's migrations {revisions}; " in postgres_first
    assert sqlite_again.endswith(": up to date") and postgres_again.endswith(": up to date")
    with closing(sqlite3.connect(tmp_path / "new.sqlite")) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"alembic_version", "runs", "posted", "checkpoints", "writes"} <= tables


def test_db_upgrade_command_names_an_unreachable_server_in_one_line_and_exits_2(capsys):
    url = "postgresql://someone:hunter2@127.0.0.1:1/nowhere"
    assert main(["db", "upgrade", "--db", url]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "rubric-bot: cannot use the database postgresql://someone:***@127.0.0.1:1/nowhere:"
    )
    assert "Connection refused" in line and "--wait-for-db" in line and "hunter2" not in line
