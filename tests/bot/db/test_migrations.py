"""Schema migrations: a database file from before migrations keeps every row, and migrated
databases match the schema the code reads and writes, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from bot.db.admin import upgrade
from bot.db.database import Database
from bot.db.evaluations import EVALUATION_DEFAULTS
from bot.db.migrations import alembic_config
from bot.db.schema import metadata
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")

SCHEMA_BEFORE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS claims (key TEXT NOT NULL PRIMARY KEY, claimed_at TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS threads (team TEXT NOT NULL, channel TEXT NOT NULL,
        thread_ts TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (team, channel, thread_ts))""",
    """CREATE TABLE IF NOT EXISTS channel_rubrics (team TEXT NOT NULL, channel TEXT NOT NULL,
        rubric_text TEXT NOT NULL, set_by TEXT NOT NULL, updated_at TEXT NOT NULL,
        PRIMARY KEY (team, channel))""",
    """CREATE TABLE IF NOT EXISTS channel_settings (team TEXT NOT NULL, channel TEXT NOT NULL,
        calibration INTEGER NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (team, channel))""",
    """CREATE TABLE IF NOT EXISTS runs (run_id INTEGER NOT NULL PRIMARY KEY, thread_id TEXT NOT NULL,
        team TEXT NOT NULL, channel TEXT NOT NULL, thread_ts TEXT NOT NULL, request_ts TEXT NOT NULL,
        status TEXT, started_at TEXT NOT NULL, finished_at TEXT, acknowledged INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread_id, finished_at)",
    """CREATE TABLE IF NOT EXISTS evaluations (grading_run_id TEXT NOT NULL, iteration INTEGER NOT NULL,
        team TEXT NOT NULL, channel TEXT NOT NULL, thread_ts TEXT NOT NULL, message_ts TEXT NOT NULL,
        evaluation TEXT NOT NULL, rubric_text TEXT NOT NULL, created_at TEXT NOT NULL,
        PRIMARY KEY (grading_run_id, iteration))""",
    """CREATE TABLE IF NOT EXISTS reviews (team TEXT NOT NULL, channel TEXT NOT NULL,
        thread_ts TEXT NOT NULL, grading_run_id TEXT NOT NULL, iteration INTEGER NOT NULL,
        criterion TEXT NOT NULL, grader_verdict TEXT NOT NULL, reviewer_verdict TEXT NOT NULL,
        comment TEXT NOT NULL, reviewer TEXT NOT NULL, created_at TEXT NOT NULL,
        PRIMARY KEY (grading_run_id, iteration, criterion, reviewer))""",
    "CREATE INDEX IF NOT EXISTS reviews_by_channel ON reviews (team, channel, created_at)",
)
"""The tables as bot versions from before migrations created them (bot/store.py's SCHEMA then)."""

DELIVERY_COLUMN = "ALTER TABLE runs ADD COLUMN undelivered INTEGER NOT NULL DEFAULT 0"
"""What the last of those versions added to ``runs`` on open (its ADDED_COLUMNS)."""

THREAD = ThreadKey("T1", "C1", "1.0")
EARLIER = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
EVALUATION = {"grading_run_id": "run-1", "iteration": 0, "result": "needs_revision", "criteria": []}


def old_timestamp(moment: datetime) -> str:
    """A timestamp as the old code wrote it: ISO-8601 UTC text with microseconds."""
    return moment.isoformat(timespec="microseconds")


def make_old_database(path: str, *statements: str) -> None:
    """A file with rows in every table, written the way the code before migrations wrote them."""
    at = old_timestamp(EARLIER)
    with closing(sqlite3.connect(path)) as db, db:
        for statement in (*SCHEMA_BEFORE_MIGRATIONS, *statements):
            db.execute(statement)
        db.execute("INSERT INTO claims VALUES ('event:Ev1', ?)", (at,))
        db.execute("INSERT INTO threads VALUES ('T1', 'C1', '1.0', ?)", (at,))
        db.execute("INSERT INTO channel_rubrics VALUES ('T1', 'C1', '- Be brief', 'U1', ?)", (at,))
        db.execute("INSERT INTO channel_settings VALUES ('T1', 'C1', 0, ?)", (at,))
        db.executemany(
            "INSERT INTO runs (thread_id, team, channel, thread_ts, request_ts, status, started_at, "
            "finished_at, acknowledged) VALUES (?, 'T1', 'C1', '1.0', ?, ?, ?, ?, ?)",
            [
                (THREAD.thread_id, "1.1", "satisfied", at, at, 0),
                (THREAD.thread_id, "1.2", None, at, None, 0),  # cut short by a crash, not yet reported
                (THREAD.thread_id, "1.3", "interrupted", at, at, 1),
            ],
        )
        db.execute(
            "INSERT INTO evaluations VALUES ('run-1', 0, 'T1', 'C1', '1.0', '1.5', ?, '- Be brief', ?)",
            (json.dumps(EVALUATION), at),
        )
        db.execute(
            "INSERT INTO reviews VALUES ('T1', 'C1', '1.0', 'run-1', 0, 'Clarity', 'pass', 'fail', "
            "'too long', 'U1', ?)",
            (at,),
        )


@pytest.mark.parametrize("added", [(), (DELIVERY_COLUMN,)], ids=["first-release", "with-delivery-column"])
async def test_a_file_from_before_migrations_keeps_every_row(tmp_path, added):
    path = str(tmp_path / "old.sqlite")
    make_old_database(path, *added)

    store = await Store.open(path)
    try:
        assert not await store.claim("event:Ev1")
        assert await store.has_thread(THREAD)
        assert await store.get_channel_rubric(T1, "C1") == "- Be brief"
        assert not await store.calibration_enabled(T1, "C1")
        assert await store.start_run(THREAD, "1.4") == 4
        (crashed,) = await store.claim_abandoned_runs(EARLIER + timedelta(seconds=1))
        assert (crashed.request_ts, crashed.started_at, crashed.undelivered) == ("1.2", EARLIER, False)
        await store.mark_undelivered(crashed.run_id)
        assert [run.request_ts for run in await store.undelivered_runs(T1, "C1")] == ["1.2"]
        record = await store.get_evaluation(T1, "run-1", 0)
        assert record is not None
        # The evaluation reads back whole, with the keys grading added since filled in.
        stored = EVALUATION_DEFAULTS | EVALUATION
        assert (record.message_ts, record.evaluation, record.created_at) == ("1.5", stored, EARLIER)
        (review,) = await store.reviews_for_iteration(T1, "run-1", 0)
        assert (review.reviewer, review.reviewer_verdict, review.comment) == ("U1", "fail", "too long")
        since = EARLIER - timedelta(days=1)
        assert await store.evaluations_in_channel(T1, "C1", since) == [stored]
        assert len(await store.reviews_in_channel(T1, "C1", EARLIER + timedelta(seconds=1))) == 0
        # The tables added since are there too.
        assert await store.record_posted(crashed.run_id, 0, 0, "1.6")
    finally:
        await store.close()

    with closing(sqlite3.connect(path)) as db:
        (version,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert version == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_opening_again_changes_nothing(tmp_path):
    path = str(tmp_path / "old.sqlite")
    make_old_database(path)
    for _ in range(2):
        store = await Store.open(path)
        await store.close()
    store = await Store.open(path)
    try:
        assert [run.request_ts for run in await store.claim_abandoned_runs(datetime.now(UTC))] == ["1.2"]
        assert await store.get_channel_rubric(T1, "C1") == "- Be brief"
    finally:
        await store.close()


async def test_migrated_database_matches_the_schema(database_url):
    store = await Store.open(database_url)
    await store.close()
    engine = Database.parse(database_url).create_engine()
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata)
            )
    finally:
        await engine.dispose()
    assert differences == []


async def test_processes_starting_together_migrate_once(database_url):
    # Four starts at once, as four processes' `prepare_database` runs them: one applies every
    # migration, and the others, waiting for it (PostgreSQL's schema lock, SQLite's write lock),
    # find nothing left to apply.
    database = Database.parse(database_url)
    reports = await asyncio.gather(*(upgrade(database) for _ in range(4)))
    revisions = [script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()]
    assert sorted(len(report.tables) for report in reports) == [0, 0, 0, len(revisions)]
    if database.is_postgres:  # the checkpointer's and the queue's schema come under the same lock
        assert sorted(report.checkpoint_migrations > 0 for report in reports) == [False, False, False, True]
        assert sorted(report.queue_schema for report in reports) == [False, False, False, True]
    stores = await asyncio.gather(*(Store.open(database_url, upgraded=True) for _ in range(4)))
    try:
        run_ids = [await store.start_run(THREAD, "1.1") for store in stores]
    finally:
        await asyncio.gather(*(store.close() for store in stores))
    assert len(set(run_ids)) == 4
