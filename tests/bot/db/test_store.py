"""The bot's tables, on a real temporary SQLite file and on a real PostgreSQL (each test runs on both)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError

from bot.db.database import DatabaseError
from bot.db.ledger import PostedPart
from bot.db.material import MaterialTally, RunMaterial
from bot.db.reviews import ReviewVerdict
from bot.db.runs import RunLease
from bot.db.store import Store
from bot.db.transactions import AttemptStart
from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.unread import Unread
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
T2 = Workspace("T2")

THREAD = ThreadKey("T1", "C1", "1700000000.000100")


@pytest.fixture
def db_path(database_url):
    """The database of the test: a SQLite path or a postgresql:// URL (see tests/conftest.py)."""
    return database_url


@pytest.fixture
async def store(db_path):
    opened = await Store.open(db_path)
    yield opened
    await opened.close()


async def reopen(store, db_path):
    await store.close()
    return await Store.open(db_path)


def evaluation(run="run-1", iteration=0, **extra):
    return {"grading_run_id": run, "iteration": iteration, "result": "needs_revision", "criteria": []} | extra


def verdicts(*items):
    return [ReviewVerdict(criterion, grader, human, comment) for criterion, grader, human, comment in items]


# --- dedupe -------------------------------------------------------------------------------------


async def test_claim_runs_each_message_once(store):
    assert await store.claim("event:Ev1", "msg:C1:1700.0001")
    assert not await store.claim("event:Ev1", "msg:C1:1700.0001")
    # A mention delivered again as a `message` event has a new event id but the same ts.
    assert not await store.claim("event:Ev2", "msg:C1:1700.0001")


async def test_a_refused_claim_records_none_of_its_keys(store):
    assert await store.claim("a", "b")
    assert not await store.claim("b", "c")
    assert await store.claim("c")


async def test_claim_is_atomic_under_concurrent_tasks(store):
    results = await asyncio.gather(*(store.claim(f"event:E{i}", "msg:C1:42.0") for i in range(25)))
    assert results.count(True) == 1


async def test_claim_is_atomic_across_connections(db_path, store):
    other = await Store.open(db_path)
    try:
        results = await asyncio.gather(
            *(s.claim("event:E", "msg:C:1.0") for _ in range(10) for s in (store, other))
        )
    finally:
        await other.close()
    assert results.count(True) == 1


async def test_claims_survive_a_restart(store, db_path):
    await store.claim("event:Ev1")
    store = await reopen(store, db_path)
    try:
        assert not await store.claim("event:Ev1")
    finally:
        await store.close()


async def test_prune_claims_forgets_only_old_claims(store):
    await store.claim("event:old")
    assert await store.prune_claims() == 0
    assert not await store.claim("event:old")
    assert await store.prune_claims(older_than_days=0) == 1
    assert await store.claim("event:old")


# --- threads, channel rubrics, settings -----------------------------------------------------------


async def test_threads_the_bot_takes_part_in(store, db_path):
    assert not await store.has_thread(ThreadKey("T1", "C1", "1.0"))
    await store.add_thread(ThreadKey("T1", "C1", "1.0"))
    await store.add_thread(ThreadKey("T1", "C1", "1.0"))  # again: no error
    assert await store.has_thread(ThreadKey("T1", "C1", "1.0"))
    assert not await store.has_thread(ThreadKey("T1", "C2", "1.0"))
    store = await reopen(store, db_path)
    try:
        assert await store.has_thread(ThreadKey("T1", "C1", "1.0"))
    finally:
        await store.close()


async def test_channel_rubric_set_replace_clear(store):
    assert await store.get_channel_rubric(T1, "C1") is None
    await store.set_channel_rubric(T1, "C1", "- Be brief", "U1")
    await store.set_channel_rubric(T1, "C2", "- Other channel", "U1")
    await store.set_channel_rubric(T1, "C1", "- Be kind", "U2")
    assert await store.get_channel_rubric(T1, "C1") == "- Be kind"
    assert await store.get_channel_rubric(T2, "C1") is None
    cleared = await store.clear_channel_rubric(T1, "C1", "U3")
    assert cleared is not None and cleared.rubric_text is None and cleared.set_by == "U3"
    assert await store.clear_channel_rubric(T1, "C1", "U3") is None
    assert await store.get_channel_rubric(T1, "C1") is None
    assert await store.get_channel_rubric(T1, "C2") == "- Other channel"


async def test_every_rubric_change_is_kept_as_a_numbered_version_per_channel(store):
    await store.set_channel_rubric(T1, "C1", "- Be brief", "U1")
    await store.set_channel_rubric(T1, "C2", "- Other channel", "U1")
    await store.set_channel_rubric(T1, "C1", "- Be kind", "U2")
    await store.clear_channel_rubric(T1, "C1", "U3")

    history = await store.rubric_versions(T1, "C1", limit=10)
    assert [(v.version, v.rubric_text, v.set_by) for v in history] == [
        (3, None, "U3"),
        (2, "- Be kind", "U2"),
        (1, "- Be brief", "U1"),
    ]
    assert [v.version for v in await store.rubric_versions(T1, "C1", limit=2)] == [3, 2]
    assert (await store.rubric_version(T1, "C1", 1)).rubric_text == "- Be brief"
    assert await store.rubric_version(T1, "C1", 4) is None
    assert [v.version for v in await store.rubric_versions(T1, "C2", limit=10)] == [1]


async def test_concurrent_rubric_changes_take_different_version_numbers(store):
    await asyncio.gather(*(store.set_channel_rubric(T1, "C1", f"- Rule {n}", "U1") for n in range(6)))

    versions = await store.rubric_versions(T1, "C1", limit=10)
    assert sorted(v.version for v in versions) == [1, 2, 3, 4, 5, 6]


async def test_calibration_is_on_until_switched_off(store, db_path):
    assert await store.calibration_enabled(T1, "C1")
    await store.set_calibration(T1, "C1", False)
    assert not await store.calibration_enabled(T1, "C1")
    assert await store.calibration_enabled(T1, "C2")
    store = await reopen(store, db_path)
    try:
        assert not await store.calibration_enabled(T1, "C1")
        await store.set_calibration(T1, "C1", True)
        assert await store.calibration_enabled(T1, "C1")
    finally:
        await store.close()


# --- runs -----------------------------------------------------------------------------------------


async def test_runs_an_earlier_process_left_unfinished_are_claimed_once(store, db_path):
    finished = await store.start_run(THREAD, "1700000001.0")
    crashed = await store.start_run(THREAD, "1700000002.0")
    elsewhere = await store.start_run(ThreadKey("T1", "C9", "1.0"), "1.0")
    await store.finish_run(finished, "satisfied")

    store = await reopen(store, db_path)  # the process died and came back
    try:
        booted = datetime.now(UTC)
        mine = await store.start_run(THREAD, "1700000003.0")
        claimed = await store.claim_abandoned_runs(booted)
        assert [r.run_id for r in claimed] == [crashed, elsewhere]  # not the finished one, nor mine
        run = claimed[0]
        assert (run.channel, run.thread_ts, run.request_ts) == ("C1", "1700000000.000100", "1700000002.0")
        assert run.status == "interrupted" and run.finished_at is not None
        assert await store.claim_abandoned_runs(booted) == []
        assert await store.claim_interrupted_runs(THREAD) == []
        assert mine not in [r.run_id for r in await store.claim_abandoned_runs(booted)]
    finally:
        await store.close()


async def test_processes_starting_together_claim_each_abandoned_run_once(store, db_path):
    runs = {await store.start_run(ThreadKey("T1", "C1", f"{n}.0"), f"{n}.0") for n in range(20)}
    booted = datetime.now(UTC)
    others = [await Store.open(db_path) for _ in range(3)]
    try:
        claims = await asyncio.gather(*(s.claim_abandoned_runs(booted) for s in [store, *others]))
    finally:
        for other in others:
            await other.close()
    claimed = [run.run_id for batch in claims for run in batch]
    assert sorted(claimed) == sorted(runs)


async def test_an_interrupted_run_whose_report_failed_is_claimed_again(store):
    run_id = await store.start_run(THREAD, "2.0")
    await store.mark_interrupted(run_id)
    (run,) = await store.claim_interrupted_runs(THREAD)
    assert run.status == "interrupted" and run.finished_at is not None
    assert await store.claim_interrupted_runs(THREAD) == []

    await store.release_interrupted(run_id)  # the notice could not be posted
    assert [r.run_id for r in await store.claim_abandoned_runs(datetime.now(UTC))] == [run_id]
    await store.release_interrupted(run_id)
    assert [r.run_id for r in await store.claim_interrupted_runs(THREAD)] == [run_id]


async def test_a_reported_interruption_is_not_claimed(store):
    run_id = await store.start_run(THREAD, "2.0")
    await store.mark_interrupted(run_id)
    await store.acknowledge_interrupted(run_id)
    assert await store.claim_interrupted_runs(THREAD) == []
    assert await store.claim_abandoned_runs(datetime.now(UTC)) == []


async def test_an_attempt_starts_in_one_write_claiming_interruptions_recording_and_reading(store):
    lost = await store.start_run(THREAD, "2.0")
    await store.mark_interrupted(lost)  # its notice could not be posted
    await store.set_channel_rubric(T1, "C1", "- Be brief", "U9")
    run_id = await store.start_run(THREAD, "3.0")
    shared = RunMaterial(2, ["spec.pdf"], [Unread("chart.png", "an image")])

    first = await store.start_attempt(run_id, THREAD, shared, channel_rubric=True)

    assert [run.run_id for run in first.interrupted] == [lost]
    assert first.unread == (Unread("chart.png", "an image"),)
    assert first.channel_rubric == "- Be brief"
    assert first.rubric_version == 1  # what the iteration messages name it: v1
    assert await store.material_tally(T1, "C1") == MaterialTally(
        runs=1, thread_messages=2, files_read=1, files_unread=1
    )
    # A later attempt (the first was cut short) reads back what was not read; the notice is out.
    again = await store.start_attempt(run_id, THREAD, None, channel_rubric=False)
    assert again == AttemptStart(interrupted=[], unread=first.unread, channel_rubric=None)
    # A thread's own rubric: numbered when a version of the channel's set that text, else not.
    own = await store.start_attempt(run_id, THREAD, None, channel_rubric=False, rubric_text="- Be brief")
    assert own.rubric_version == 1
    other = await store.start_attempt(run_id, THREAD, None, channel_rubric=False, rubric_text="- Be kind")
    assert other.rubric_version is None


async def test_an_attempt_takes_its_lease_as_it_starts_and_one_taken_over_records_nothing(store):
    run_id = await store.start_run(THREAD, "2.0")
    lease = RunLease("first")

    assert (await store.start_attempt(run_id, THREAD, None, channel_rubric=False, lease=lease)).holds_run
    assert await store.holds_run(run_id, "first")
    # The run's job was re-queued meanwhile and another process took the run over.
    taken_over = await store.take_run(run_id)
    interrupted = await store.start_run(THREAD, "3.0")
    await store.mark_interrupted(interrupted)
    shared = RunMaterial(2, ["spec.pdf"], [])

    assert not lease.taking  # the next attempt checks it
    again = await store.start_attempt(run_id, THREAD, shared, channel_rubric=False, lease=lease)

    assert again == AttemptStart([], (), None, holds_run=False)
    assert await store.holds_run(run_id, taken_over)
    # The interruption is left for the attempt holding the run to report.
    assert [run.run_id for run in await store.claim_interrupted_runs(THREAD)] == [interrupted]
    assert await store.material_tally(T1, "C1") == MaterialTally(0, 0, 0, 0)


async def test_an_attempt_reads_its_workspaces_settings_as_it_starts_when_asked(store):
    chosen = WorkspaceSettingsRow("openai:gpt-4.1", None, None, None, None, "UADMIN", datetime.now(UTC))
    await store.save_workspace_settings(T1, chosen)
    run_id = await store.start_run(THREAD, "2.0")

    asked = await store.start_attempt(run_id, THREAD, None, channel_rubric=False, settings=True)
    not_asked = await store.start_attempt(run_id, THREAD, None, channel_rubric=False)

    assert asked.settings == chosen
    assert not_asked.settings is None


async def test_a_run_ends_with_its_closing_messages_in_the_ledger(store):
    run_id = await store.start_run(THREAD, "2.0")
    await store.record_posted(run_id, 0, 0, "2.1")

    await store.finish_run(run_id, "satisfied", 40, posted=[PostedPart("final", 0, "2.2")])

    assert [(p.step, p.part, p.message_ts) for p in await store.posted_messages(run_id)] == [
        (0, 0, "2.1"),
        ("final", 0, "2.2"),
    ]
    (row,) = await store.usage(T1, "C1", datetime.now(UTC) - timedelta(days=1))
    assert (row.requests, row.tokens) == (1, 40)


async def test_recent_graded_runs_newest_first_without_plain_answers(store):
    graded = await store.start_run(THREAD, "2.0")
    plain = await store.start_run(THREAD, "3.0")
    running = await store.start_run(THREAD, "4.0")
    await store.start_run(ThreadKey("T1", "C9", "1.0"), "1.0")
    await store.finish_run(graded, "satisfied")
    await store.finish_run(plain, "answered")
    assert [r.run_id for r in await store.recent_graded_runs(T1, "C1", limit=5)] == [running, graded]
    assert [r.run_id for r in await store.recent_graded_runs(T1, "C1", limit=1)] == [running]


async def test_undelivered_runs_are_listed_by_channel(store):
    delivered = await store.start_run(THREAD, "2.0")
    lost = await store.start_run(THREAD, "3.0")
    lost_elsewhere = await store.start_run(ThreadKey("T1", "C9", "1.0"), "1.0")
    for run_id in (delivered, lost, lost_elsewhere):
        await store.finish_run(run_id, "satisfied")
    await store.mark_undelivered(lost)
    await store.mark_undelivered(lost_elsewhere)

    (run,) = await store.undelivered_runs(T1, "C1")
    assert (run.run_id, run.status, run.undelivered) == (lost, "satisfied", True)
    assert [r.run_id for r in await store.undelivered_runs(None, None)] == [lost, lost_elsewhere]
    assert await store.undelivered_runs(None, None, since=datetime.now(UTC) + timedelta(days=1)) == []


async def test_what_a_run_read_is_recorded_and_totalled_per_channel(store, db_path):
    plain = await store.start_run(THREAD, "2.0")
    called_in = await store.start_run(THREAD, "3.0")
    elsewhere = await store.start_run(ThreadKey("T1", "C9", "1.0"), "1.0")
    await store.start_run(THREAD, "4.0")  # not read yet
    await store.record_material(plain, 0, [], [])
    await store.record_material(called_in, 3, ["spec.pdf", "notes.csv"], [Unread("chart.png", "an image")])
    await store.record_material(elsewhere, 0, ["a.txt"], [])
    store = await reopen(store, db_path)

    assert await store.unread_material(called_in) == (Unread("chart.png", "an image"),)
    assert await store.unread_material(plain) == ()
    assert await store.material_tally(T1, "C1") == MaterialTally(
        runs=1, thread_messages=3, files_read=2, files_unread=1
    )
    assert await store.material_tally(None, None) == MaterialTally(
        runs=2, thread_messages=3, files_read=3, files_unread=1
    )
    await store.close()


async def test_a_database_from_before_delivery_tracking_gets_the_column(tmp_path):
    old = str(tmp_path / "old.sqlite")
    with closing(sqlite3.connect(old)) as connection:
        connection.execute(
            "CREATE TABLE runs (run_id INTEGER NOT NULL PRIMARY KEY, thread_id TEXT NOT NULL, "
            "team TEXT NOT NULL, channel TEXT NOT NULL, thread_ts TEXT NOT NULL, request_ts TEXT NOT NULL, "
            "status TEXT, started_at TEXT NOT NULL, finished_at TEXT, "
            "acknowledged INTEGER NOT NULL DEFAULT 0)"
        )
        connection.commit()
    store = await Store.open(old)
    try:
        run_id = await store.start_run(THREAD, "2.0")
        await store.mark_undelivered(run_id)
        assert [r.run_id for r in await store.undelivered_runs(None, None)] == [run_id]
    finally:
        await store.close()


# --- evaluations ------------------------------------------------------------------------------------


async def test_evaluations_are_kept_by_run_and_iteration(store, db_path):
    await store.save_evaluation(
        ThreadKey("T1", "C1", "1.0"), "1.5", evaluation(explanation="first"), "- Be brief"
    )
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.6", evaluation(iteration=1), "- Be brief")
    store = await reopen(store, db_path)
    try:
        record = await store.get_evaluation(T1, "run-1", 0)
        assert record is not None
        assert (record.channel, record.thread_ts, record.message_ts) == ("C1", "1.0", "1.5")
        assert record.evaluation["explanation"] == "first"
        assert record.rubric_text == "- Be brief"
        assert (await store.get_evaluation(T1, "run-1", 1)).message_ts == "1.6"
        assert await store.get_evaluation(T1, "run-1", 2) is None
        # Posting the same iteration again (e.g. a re-post) updates it in place.
        await store.save_evaluation(
            ThreadKey("T1", "C1", "1.0"), "1.9", evaluation(explanation="again"), "- Be brief"
        )
        record = await store.get_evaluation(T1, "run-1", 0)
        assert (record.message_ts, record.evaluation["explanation"]) == ("1.9", "again")
    finally:
        await store.close()


# --- reviews ----------------------------------------------------------------------------------------


async def review(store, reviewer, items, run="run-1", iteration=0, channel="C1", *, editor=True):
    await store.save_review(
        ThreadKey("T1", channel, "1.0"), run, iteration, reviewer, verdicts(*items), editor=editor
    )


async def test_a_reviewers_latest_review_replaces_their_earlier_one(store, db_path):
    await review(store, "U1", [("Clarity", "pass", "fail", "too long"), ("Tone", "pass", "pass", "")])
    await review(store, "U2", [("Clarity", "pass", "pass", "")])
    await review(store, "U1", [("Clarity", "pass", "pass", "on reflection, fine")])
    store = await reopen(store, db_path)
    try:
        rows = await store.reviews_for_iteration(T1, "run-1", 0)
    finally:
        await store.close()
    by_reviewer = {(r.reviewer, r.criterion): r for r in rows}
    assert set(by_reviewer) == {("U1", "Clarity"), ("U2", "Clarity")}
    assert by_reviewer["U1", "Clarity"].reviewer_verdict == "pass"
    assert by_reviewer["U1", "Clarity"].comment == "on reflection, fine"
    assert by_reviewer["U2", "Clarity"].created_at.tzinfo is not None


async def test_a_failed_review_leaves_the_earlier_one_in_place(store):
    await review(store, "U1", [("Clarity", "pass", "fail", "")])
    with pytest.raises(IntegrityError):
        # The same criterion twice in one review breaks the primary key mid-transaction.
        await review(store, "U1", [("Tone", "3", "4", ""), ("Tone", "3", "2", "")])
    rows = await store.reviews_for_iteration(T1, "run-1", 0)
    assert [(r.criterion, r.reviewer_verdict) for r in rows] == [("Clarity", "fail")]


async def test_reviews_of_an_iteration_stay_separate_from_other_iterations(store):
    await review(store, "U1", [("Clarity", "pass", "fail", "")], iteration=0)
    await review(store, "U1", [("Clarity", "pass", "pass", "")], iteration=1)
    assert [r.reviewer_verdict for r in await store.reviews_for_iteration(T1, "run-1", 0)] == ["fail"]
    assert [r.reviewer_verdict for r in await store.reviews_for_iteration(T1, "run-1", 1)] == ["pass"]


async def test_reviews_in_channel_since(store):
    await review(store, "U1", [("Clarity", "pass", "fail", "")])
    await review(store, "U1", [("Clarity", "pass", "fail", "")], run="run-2", channel="C2")
    now = datetime.now(UTC)
    rows = await store.reviews_in_channel(T1, "C1")
    assert [(r.channel, r.criterion) for r in rows] == [("C1", "Clarity")]
    assert len(await store.reviews_in_channel(T1, "C1", since=now - timedelta(days=1))) == 1
    assert await store.reviews_in_channel(T1, "C1", since=now + timedelta(minutes=1)) == []


async def test_recent_disagreements_newest_first_and_by_rubric(store):
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.1", evaluation("run-a"), "- Rubric A")
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.2", evaluation("run-b"), "- Rubric B")
    await review(store, "U1", [("Clarity", "pass", "fail", "old"), ("Tone", "pass", "pass", "")], run="run-a")
    await review(store, "U2", [("Clarity", "fail", "pass", "newer")], run="run-b")
    await review(store, "U3", [("Tone", "2", "4", "newest")], run="run-a")

    rows = await store.recent_disagreements(T1, "C1", limit=10)
    assert [r.comment for r in rows] == ["newest", "newer", "old"]
    assert all(r.disagrees for r in rows)
    assert [r.comment for r in await store.recent_disagreements(T1, "C1", limit=2)] == ["newest", "newer"]
    by_rubric = await store.recent_disagreements(T1, "C1", "- Rubric A", limit=10)
    assert [r.comment for r in by_rubric] == ["newest", "old"]
    assert await store.recent_disagreements(T1, "C2", limit=10) == []


async def test_disagreements_for_calibration_are_none_while_it_is_switched_off(store):
    await review(store, "U1", [("Clarity", "pass", "fail", "overruled")])
    assert [r.comment for r in await store.recent_disagreements(T1, "C1", calibrating_only=True)] == [
        "overruled"
    ]
    await store.set_calibration(T1, "C1", False)
    assert await store.recent_disagreements(T1, "C1", calibrating_only=True) == []
    assert len(await store.recent_disagreements(T1, "C1")) == 1
    await store.set_calibration(T1, "C1", True)
    assert len(await store.recent_disagreements(T1, "C1", calibrating_only=True)) == 1


async def test_the_calibrating_candidates_are_the_undropped_disagreements_and_a_dropped_case_leaves(store):
    # Which of them are trusted (editors, agreeing people) is bot.review.calibration's to decide.
    river = ("Mentions the river", "pass", "fail")
    await review(store, "U3", [(*river, "first voice")], run="seconded", editor=False)
    await review(store, "U9", [(*river, "editor's voice")], run="edited", editor=True)
    await review(store, "U4", [("Mentions the river", "pass", "pass", "")], run="edited", editor=False)

    async def calibrating() -> list[str]:
        return [row.comment for row in await store.recent_disagreements(T1, "C1", calibrating_only=True)]

    assert await calibrating() == ["editor's voice", "first voice"]  # agreeing reviews are no candidates
    await review(store, "U4", [(*river, "second voice")], run="seconded", editor=False)
    assert await calibrating() == ["second voice", "editor's voice", "first voice"]

    (seconded, edited, _) = await store.recent_disagreements(T1, "C1", calibrating_only=True)
    dropped = await store.drop_calibration(T1, "C1", seconded.review_id, "U9")
    assert dropped is not None and dropped.comment == "second voice"
    assert await store.drop_calibration(T1, "C1", seconded.review_id, "U9") is None  # once
    assert await store.drop_calibration(T1, "C2", edited.review_id, "U9") is None  # not that channel's
    assert await calibrating() == ["editor's voice"]  # both reviews of the dropped case
    (drop,) = await store.calibration_drops(T1, "C1", 10)
    assert (drop.review_id, drop.criterion, drop.dropped_by) == (
        seconded.review_id,
        "Mentions the river",
        "U9",
    )
    assert await store.calibration_drops(T1, "C2", 10) == []
    await store.set_calibration(T1, "C1", False)
    assert await calibrating() == []


# --- the file itself --------------------------------------------------------------------------------


async def test_sqlite_database_uses_wal_and_shares_the_file(tmp_path):
    db_path = str(tmp_path / "bot.sqlite")
    store = await Store.open(db_path)
    await store.add_thread(ThreadKey("T1", "C1", "1.0"))
    await store.close()
    with closing(sqlite3.connect(db_path)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in other.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    expected = {"claims", "threads", "channel_rubrics", "channel_settings", "runs", "evaluations", "reviews"}
    assert expected <= tables


# --- the posted-message ledger ----------------------------------------------------------------------


async def test_posted_ledger_records_each_part_once(store, db_path):
    run_id = await store.start_run(THREAD, "2.0")
    other_run = await store.start_run(THREAD, "3.0")
    assert await store.record_posted(run_id, 0, 0, "2.1")
    assert await store.record_posted(run_id, 1, 0, "2.2")
    assert await store.record_posted(run_id, "final", 0, "2.3")
    assert await store.record_posted(run_id, "final", 1, "2.4")
    assert await store.record_posted(other_run, 0, 0, "3.1")
    # A resumed run that posts the same part again learns that it is already in the thread.
    assert not await store.record_posted(run_id, 1, 0, "2.9")
    store = await reopen(store, db_path)
    try:
        posted = await store.posted_messages(run_id)
    finally:
        await store.close()
    assert [(m.step, m.part, m.message_ts) for m in posted] == [
        (0, 0, "2.1"),
        (1, 0, "2.2"),
        ("final", 0, "2.3"),
        ("final", 1, "2.4"),
    ]
    assert all(m.run_id == run_id and m.posted_at.tzinfo is not None for m in posted)


async def test_posted_ledger_is_claimed_once_across_processes(db_path, store):
    other = await Store.open(db_path)
    try:
        run_id = await store.start_run(THREAD, "2.0")
        results = await asyncio.gather(
            *(s.record_posted(run_id, "final", 0, ts) for s, ts in ((store, "2.1"), (other, "2.2")) * 5)
        )
    finally:
        await other.close()
    assert results.count(True) == 1
    (only,) = await store.posted_messages(run_id)
    assert only.message_ts in {"2.1", "2.2"}


# --- cross-process correctness -----------------------------------------------------------------------


async def still_waiting(task) -> bool:
    """Whether ``task`` is blocked: given half a second, it has not finished (a stuck task never will)."""
    done, _ = await asyncio.wait([task], timeout=0.5)
    return not done


async def refresh(store):
    async with store.locked_reviews(T1, "run-1", 0) as rows:
        return [r.reviewer for r in rows]


async def test_refreshes_of_one_iteration_take_turns(db_path, store):
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.5", evaluation(), "- Be brief")
    await review(store, "U1", [("Clarity", "pass", "fail", "")])
    # PostgreSQL serves several processes (here two Stores); SQLite one.
    other = await Store.open(db_path) if db_path.startswith("postgresql") else store
    try:
        async with store.locked_reviews(T1, "run-1", 0) as rows:
            assert [r.reviewer for r in rows] == ["U1"]
            second = asyncio.create_task(refresh(other))
            assert await still_waiting(second)
        assert await second == ["U1"]
    finally:
        if other is not store:
            await other.close()


async def test_on_postgresql_a_review_waits_for_a_refresh_in_another_process(postgres_url):
    store, other = await Store.open(postgres_url), await Store.open(postgres_url)
    try:
        await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.5", evaluation(), "- Be brief")
        await review(store, "U1", [("Clarity", "pass", "fail", "")])
        async with store.locked_reviews(T1, "run-1", 0):
            saving = asyncio.create_task(review(other, "U2", [("Clarity", "pass", "pass", "")]))
            assert await still_waiting(saving)
        await saving
        assert await refresh(other) == ["U1", "U2"]
    finally:
        await asyncio.gather(store.close(), other.close())


async def test_on_postgresql_reviews_of_other_iterations_do_not_wait(postgres_url):
    # SQLite has one write lock for the whole file; PostgreSQL locks only the iteration's row.
    store, other = await Store.open(postgres_url), await Store.open(postgres_url)
    try:
        await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.5", evaluation(), "- Be brief")
        await store.save_evaluation(
            ThreadKey("T1", "C1", "1.0"), "1.6", evaluation(iteration=1), "- Be brief"
        )
        async with store.locked_reviews(T1, "run-1", 0):
            await review(other, "U2", [("Clarity", "pass", "pass", "")], iteration=1)
            assert len(await store.reviews_for_iteration(T1, "run-1", 1)) == 1
    finally:
        await asyncio.gather(store.close(), other.close())


async def test_concurrent_channel_rubric_edits_leave_one_whole_edit(db_path, store):
    other = await Store.open(db_path)
    try:
        edits = [(s, f"- Rubric {i}", f"U{i}") for i, s in enumerate((store, other) * 6)]
        await asyncio.gather(*(s.set_channel_rubric(T1, "C1", text, user) for s, text, user in edits))
        assert await store.get_channel_rubric(T1, "C1") in {text for _, text, _ in edits}
        # Whatever the order, the last edit to arrive is the one both processes see.
        await other.set_channel_rubric(T1, "C1", "- Final word", "U9")
        assert await store.get_channel_rubric(T1, "C1") == "- Final word"
        await store.set_calibration(T1, "C1", False)
        assert not await other.calibration_enabled(T1, "C1")
    finally:
        await other.close()


# --- read-only ----------------------------------------------------------------------------------------


async def test_a_read_only_store_reads_but_never_writes(db_path, store):
    await store.set_channel_rubric(T1, "C1", "- Be brief", "U1")
    reader = await Store.open(db_path, read_only=True)
    try:
        assert await reader.get_channel_rubric(T1, "C1") == "- Be brief"
        with pytest.raises(DBAPIError, match=r"read-only|readonly"):
            await reader.set_channel_rubric(T1, "C1", "- Changed", "U2")
    finally:
        await reader.close()
    assert await store.get_channel_rubric(T1, "C1") == "- Be brief"


async def test_a_read_only_store_does_not_create_a_missing_file(tmp_path):
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(DatabaseError, match="no database at"):
        await Store.open(str(missing), read_only=True)
    assert not missing.exists()
