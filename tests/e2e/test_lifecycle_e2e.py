"""The data's life, end to end on SQLite and PostgreSQL: deleted means gone, edited means changed,
uninstall / prune / purge delete whole threads, the database file is private, and a long thread's
worker input stays bounded.

"Gone" is checked the blunt way: no row of any table (checkpoint blobs and writes, the job queue's
tables included) holds the text, whichever column it would be in (see `stored_rows`).
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import stat
import subprocess
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.messages.utils import count_tokens_approximately

from bot.lifecycle.forget import DELETED_LINE, DROPPED_SUMMARY
from tests.e2e.conftest import BOT_COMMAND
from tests.e2e.stored_rows import files_containing, tables_containing
from tests.e2e.test_bot_e2e import CRITERIA, RUBRIC, RUN_TIMEOUT, Service
from tests.e2e.test_cost_e2e import list_price
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import DEFAULT_GAP, NO_ANSWER, ChatRequest, Script, grade, scripted_revision

SECRET = "sk-SECRET-4b1d"
"""Pasted into a request, then deleted: it must leave the database."""

OTHER = "OTHER-CHANNEL-77c2"
"""Said in another channel: it must stay when only the first channel's data is deleted."""


@pytest.fixture
def service(database_url, start_bot, slack_api, model_api) -> Service:
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    return Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_DB": database_url}))


def graded_thread(s: Service, channel: str) -> str:
    """A thread with the test rubric set; its root's ts."""
    root = s.mention(f"rubric:\n{RUBRIC}", channel)
    s.wait_text(channel, root, "Rubric set")
    return root


def ask(s: Service, channel: str, root: str, text: str) -> str:
    """Ask `text` in the thread and wait for its answer; the request's ts."""
    done = len(s.finals(channel, root))
    ts = s.say(text, channel, thread_ts=root)
    s.wait_finals(channel, root, done + 1)
    return ts


def wait_until_stored(database: str, *, present: tuple[str, ...] = (), absent: tuple[str, ...] = ()) -> None:
    """Wait until every `present` text is in some row and no `absent` text is in any."""

    def settled() -> bool:
        return all(tables_containing(database, text) for text in present) and not any(
            tables_containing(database, text) for text in absent
        )

    wait_for(settled, RUN_TIMEOUT, message=lambda: f"{present} stored and {absent} gone from every table")


def worker_inputs(s: Service, text: str) -> list[ChatRequest]:
    requests = s.worker_requests_for(text)
    assert requests, f"no worker request mentions {text!r}"
    return requests


# -- deleted and edited messages -----------------------------------------------------------------


def test_a_deleted_request_leaves_every_table_and_the_next_requests_worker_input(service, database_url):
    s = service
    root = graded_thread(s, "C1")
    pasted = f"My key is {SECRET}, what now?"
    secret_ts = ask(s, "C1", root, pasted)
    assert tables_containing(database_url, SECRET)

    s.send(sr.event_callback(sr.message_deleted("C1", secret_ts, root, previous_text=pasted)))
    wait_until_stored(database_url, absent=(SECRET,))
    ask(s, "C1", root, "And the weather tomorrow?")

    later = worker_inputs(s, "And the weather tomorrow?")
    assert all(SECRET not in request.all_text for request in later)
    graders = [r for r in s.model.requests("grader") if "And the weather tomorrow?" in r.all_text]
    assert graders and all(SECRET not in request.all_text for request in graders)
    assert not tables_containing(database_url, SECRET)
    assert not files_containing(database_url, SECRET)  # nor a free page or the write-ahead log


def test_an_edited_request_is_stored_with_its_new_text_without_a_new_run(service, database_url):
    s = service
    root = graded_thread(s, "C2")
    old_ts = ask(s, "C2", root, "Tell me about ORIGINALWORD")
    worker_calls = len(s.model.requests("worker"))

    edited = sr.message_changed(
        "Tell me about EDITEDWORD", "C2", old_ts, root, previous_text="Tell me about ORIGINALWORD"
    )
    s.send(sr.event_callback(edited))
    wait_until_stored(database_url, present=("EDITEDWORD",), absent=("ORIGINALWORD",))
    assert len(s.model.requests("worker")) == worker_calls  # no new run
    ask(s, "C2", root, "Next question?")

    later = worker_inputs(s, "Next question?")
    assert all("EDITEDWORD" in r.all_text and "ORIGINALWORD" not in r.all_text for r in later)
    assert len(s.finals("C2", root)) == 2


def test_an_edit_over_the_limit_is_cut_there_and_the_thread_is_told_once(service, database_url):
    s = service
    root = graded_thread(s, "C11")
    asked = "Tell me about SHORTWORD"
    request_ts = ask(s, "C11", root, asked)
    long_edit = "Tell me about LONGWORD " + "y" * 25_000

    edit = sr.message_changed(long_edit, "C11", request_ts, root, previous_text=asked)
    s.send(sr.event_callback(edit))
    s.send(sr.event_callback(edit))  # Slack delivering the same edit again
    notice = s.wait_text("C11", root, "That edit is too long for me")
    ask(s, "C11", root, "Next question?")  # queued after anything the edits queued

    assert f"{len(long_edit):,} characters" in notice.all_text and "the limit is 20,000" in notice.all_text
    assert [m.ts for m in s.thread("C11", root) if "too long" in m.all_text] == [notice.ts]
    later = worker_inputs(s, "Next question?")
    assert all("LONGWORD" in r.all_text and "the rest of this edit was cut" in r.all_text for r in later)


def test_a_deleted_message_the_bot_read_from_the_thread_is_gone_from_the_next_worker_input(
    service, database_url
):
    s = service
    s.slack.add_user("UANA", "Ana")
    root, secret_ts = sr.new_ts(), sr.new_ts()
    pasted = f"the staging key is {SECRET}"
    s.slack.add_thread_messages(
        "C10",
        root,
        {"type": "message", "user": "UANA", "text": "Deploy notes", "ts": root},
        {"type": "message", "user": "UANA", "text": pasted, "ts": secret_ts},
    )
    s.mention("summarize this thread", "C10", thread_ts=root)  # the bot reads the thread's messages
    s.wait_finals("C10", root, 1)
    assert s.worker_requests_for(SECRET)

    s.send(sr.event_callback(sr.message_deleted("C10", secret_ts, root, "UANA", previous_text=pasted)))
    wait_until_stored(database_url, absent=(SECRET,))
    ask(s, "C10", root, "And the next step?")

    later = worker_inputs(s, "And the next step?")
    assert all(SECRET not in r.all_text and DELETED_LINE in r.all_text for r in later)
    assert all("Deploy notes" in r.all_text for r in later)  # the rest of the thread stays


def first_run_held(s: Service, channel: str, root: str) -> None:
    """Hold the model stand-in's answers and start a run in the thread: what follows queues behind it."""
    s.model.hold()
    s.say("First question?", channel, thread_ts=root)
    wait_for(lambda: s.worker_requests_for("First question?"), RUN_TIMEOUT, message="the first run to start")


def test_a_request_deleted_while_queued_never_reaches_a_model(service, database_url):
    s = service
    root = graded_thread(s, "C3")
    first_run_held(s, "C3", root)
    pasted = f"My key is {SECRET}, what now?"
    queued = s.say(pasted, "C3", thread_ts=root)

    s.send(sr.event_callback(sr.message_deleted("C3", queued, root, previous_text=pasted)))
    s.model.release()
    s.say("Last question?", "C3", thread_ts=root)  # queued behind whatever the thread had queued
    s.wait_finals("C3", root, 2)

    assert not [r for r in s.model.requests() if SECRET in r.all_text]
    assert len(s.finals("C3", root)) == 2  # the first and the last question's
    wait_until_stored(database_url, absent=(SECRET,))


def test_a_request_edited_while_queued_is_answered_as_edited(service, database_url):
    s = service
    root = graded_thread(s, "C4")
    first_run_held(s, "C4", root)
    queued = s.say("Tell me about ORIGINALWORD", "C4", thread_ts=root)

    edit = sr.message_changed(
        "Tell me about EDITEDWORD", "C4", queued, root, previous_text="Tell me about ORIGINALWORD"
    )
    s.send(sr.event_callback(edit))
    s.model.release()
    s.wait_finals("C4", root, 2)

    assert s.worker_requests_for("EDITEDWORD")
    assert not [r for r in s.model.requests() if "ORIGINALWORD" in r.all_text]
    wait_until_stored(database_url, present=("EDITEDWORD",), absent=("ORIGINALWORD",))


def test_a_deleted_rubric_message_is_forgotten_and_the_thread_says_what_grades_it_now(service, database_url):
    s = service
    root = s.mention("Let's work on answers here", "C5")
    s.wait_finals("C5", root, 1)
    rubric_ts = s.say(f"rubric:\n{RUBRIC}", "C5", thread_ts=root)
    s.wait_text("C5", root, "Rubric set")
    ask(s, "C5", root, "Is coffee healthy?")
    assert tables_containing(database_url, RUBRIC)

    s.send(sr.event_callback(sr.message_deleted("C5", rubric_ts, root, previous_text=f"rubric:\n{RUBRIC}")))

    notice = s.wait_text("C5", root, "set this thread's rubric was deleted")
    assert "not graded until a new rubric is set" in notice.all_text
    wait_until_stored(database_url, absent=(RUBRIC,))
    graders = len(s.model.requests("grader"))
    ask(s, "C5", root, "Is tea healthy?")
    assert len(s.model.requests("grader")) == graders  # nothing graded against the forgotten rubric
    assert "No rubric here" in s.finals("C5", root)[-1].all_text


def test_a_deletion_the_bot_had_not_applied_when_it_stopped_is_applied_when_it_starts(service, database_url):
    s = service
    root = graded_thread(s, "C6")
    pasted = f"Remember {SECRET}"
    secret_ts = ask(s, "C6", root, pasted)
    first_run_held(s, "C6", root)
    s.send(sr.event_callback(sr.message_deleted("C6", secret_ts, root, previous_text=pasted)))

    s.bot.stop(signal.SIGTERM)  # the deletion waited behind the held run: not applied
    assert tables_containing(database_url, SECRET)
    s.model.release()
    s.bot.start()

    wait_until_stored(database_url, absent=(SECRET,))


# -- whole threads: uninstall, prune, purge ------------------------------------------------------


def two_channels(s: Service) -> None:
    """A finished thread quoting SECRET in C1 and one quoting OTHER in C2."""
    ask(s, "C1", graded_thread(s, "C1"), f"Remember {SECRET}")
    ask(s, "C2", graded_thread(s, "C2"), f"Remember {OTHER}")


def db_command(s: Service, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`rubric-bot db ARGS` against the bot's database, as an operator runs it beside the bot."""
    return subprocess.run(
        [*BOT_COMMAND[:3], "db", *args, "--db", s.bot.env["RUBRIC_BOT_DB"]],
        env=s.bot.env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def closed_sessions(s: Service) -> list[tuple[str, str]]:
    """The (channel, thread ts) of each agent session the bot asked Slack to close, in order."""
    calls = s.slack.calls("agents.sessions.setStatus")
    return [(c.args["channel_id"], c.args["thread_ts"]) for c in calls if c.args["status"] == "closed"]


def test_uninstalling_deletes_the_workspaces_data(service, database_url):
    s = service
    two_channels(s)
    before = len(s.bot.stderr_text())

    s.send(sr.event_callback(sr.app_uninstalled()))

    line = f"deleted every thread, rubric and setting of team {sr.TEAM_ID}"
    wait_for(lambda: line in s.bot.stderr_text()[before:], RUN_TIMEOUT, message="the uninstall's log line")
    assert not any(tables_containing(database_url, text) for text in (SECRET, OTHER, "Cites a source"))
    assert not any(files_containing(database_url, text) for text in (SECRET, OTHER))
    assert s.bot.stderr_text()[before:].count(line) == 1
    assert closed_sessions(s) == []  # Slack revoked the token: no call is tried


def test_uninstalling_while_a_run_is_under_way_keeps_nothing_of_it_and_runs_nothing_queued(
    service, database_url
):
    s = service
    root = graded_thread(s, "C7")
    s.model.hold()
    s.say(f"Remember {SECRET}", "C7", thread_ts=root)
    wait_for(lambda: s.worker_requests_for(SECRET), RUN_TIMEOUT, message="the run to start")
    s.say(f"And remember {OTHER}", "C7", thread_ts=root)  # queued behind it
    before = len(s.bot.stderr_text())

    s.send(sr.event_callback(sr.app_uninstalled()))
    wait_for(lambda: "deleted every thread" in s.bot.stderr_text()[before:], RUN_TIMEOUT, message="the purge")
    s.model.release()

    wait_for(
        lambda: "deleted what it left" in s.bot.stderr_text()[before:], RUN_TIMEOUT, message="the run's end"
    )
    wait_until_stored(database_url, absent=(SECRET, OTHER, "Cites a source"))
    assert not [r for r in s.model.requests() if OTHER in r.all_text]


def test_a_thread_purged_while_its_run_is_under_way_ends_with_its_session_closed(service, database_url):
    s = service
    root = graded_thread(s, "C8")
    s.model.hold()
    s.say(f"Remember {SECRET}", "C8", thread_ts=root)
    wait_for(lambda: s.worker_requests_for(SECRET), RUN_TIMEOUT, message="the run to start")
    before = len(s.bot.stderr_text())

    purged = db_command(s, "purge", "--thread", f"C8:{root}", "--yes")
    assert purged.returncode == 0, purged.stderr
    assert closed_sessions(s) == [("C8", root)]  # closed while the run still works
    s.model.release()

    wait_for(
        lambda: "deleted what it left" in s.bot.stderr_text()[before:], RUN_TIMEOUT, message="the run's end"
    )
    # However the run ended (with SQLite it sets its session active as it ends; with PostgreSQL its
    # lease went with its row, so it leaves the thread), its session stays closed.
    assert s.slack.session("C8", root).status == "closed"
    wait_until_stored(database_url, absent=(SECRET,))


def test_a_revoked_bot_token_deletes_the_workspaces_data_and_a_user_token_nothing(service, database_url):
    s = service
    two_channels(s)

    # The bot takes a revocation before it answers Slack (see bot.listeners.events): once the
    # user token's is answered, whatever it would delete is gone.
    s.send(sr.event_callback(sr.tokens_revoked(bot=False)))
    assert all(tables_containing(database_url, text) for text in (SECRET, OTHER, "Cites a source"))

    s.send(sr.event_callback(sr.tokens_revoked(bot=True)))

    wait_until_stored(database_url, absent=(SECRET, OTHER))


def test_prune_days_0_deletes_finished_threads_and_keeps_one_still_running(service, database_url):
    s = service
    ask(s, "C1", graded_thread(s, "C1"), f"Remember {SECRET}")
    base = s.model.worker
    s.model.worker = lambda request: NO_ANSWER if OTHER in request.last_user_text else base(request)
    running = graded_thread(s, "C2")
    s.say(f"Remember {OTHER}", "C2", thread_ts=running)
    wait_for(lambda: s.worker_requests_for(OTHER), RUN_TIMEOUT, message="the C2 run to start")

    pruned = db_command(s, "prune", "--days", "0")

    assert pruned.returncode == 0, pruned.stderr
    assert re.search(r"conversations:\s+1\b", pruned.stdout), pruned.stdout
    assert re.search(r"agent sessions closed:\s+1\b", pruned.stdout), pruned.stdout
    assert not tables_containing(database_url, SECRET)
    assert tables_containing(database_url, OTHER)
    (closed,) = closed_sessions(s)
    assert closed[0] == "C1" and s.slack.session(*closed).status == "closed"
    assert s.slack.session("C2", running).status == "processing"


CHANNEL_RUBRIC = "- Names CHANNEL-RUBRIC-5e1"
"""C1's default rubric (`/rubric set`) in the purge test: it must go with the channel."""


def test_with_retention_days_serve_sweeps_finished_threads_as_it_starts(start_bot, slack_api, model_api):
    # The embedded queue's daily sweep runs at start (PostgreSQL's is a periodic job: see test_jobs).
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(slack_api, model_api, start_bot())
    swept = graded_thread(s, "C1")
    ask(s, "C1", swept, f"Remember {SECRET}")
    ask(s, "C2", graded_thread(s, "C2"), f"Remember {OTHER}")
    s.bot.stop()
    with sqlite3.connect(s.db_path) as database:  # C1's thread was last active two days ago
        two_days_ago = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="microseconds")
        database.execute("UPDATE threads SET last_activity = ? WHERE channel = 'C1'", (two_days_ago,))

    s.bot.env["RUBRIC_BOT_RETENTION_DAYS"] = "1"
    s.bot.start()

    line = "retention (1 days): deleted 1 conversations"
    wait_for(lambda: line in s.bot.stderr_text(), RUN_TIMEOUT, message="the sweep's log line")
    assert not tables_containing(str(s.db_path), SECRET)
    assert tables_containing(str(s.db_path), OTHER)
    assert closed_sessions(s) == [("C1", swept)] and "1 agent sessions closed" in s.bot.stderr_text()


def test_purge_channel_deletes_that_channel_only_after_confirmation(service, database_url):
    s = service
    two_channels(s)
    s.send(sr.slash_command(f"set {CHANNEL_RUBRIC}", "C1"))
    wait_until_stored(database_url, present=(CHANNEL_RUBRIC,))

    refused = db_command(s, "purge", "--channel", "C1", stdin="")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert tables_containing(database_url, SECRET)

    purged = db_command(s, "purge", "--channel", "C1", "--yes")

    assert purged.returncode == 0, purged.stderr
    assert re.search(r"channel rubrics:\s+1\b", purged.stdout), purged.stdout
    assert not tables_containing(database_url, SECRET)
    assert not tables_containing(database_url, CHANNEL_RUBRIC)  # the rubric and its versions
    assert tables_containing(database_url, OTHER)


def test_purge_thread_by_its_slack_link_deletes_that_thread_only(service, database_url):
    s = service
    root = graded_thread(s, "C1")
    ask(s, "C1", root, f"Remember {SECRET}")
    other = graded_thread(s, "C1")  # another thread of the same channel
    ask(s, "C1", other, f"Remember {OTHER}")
    link = f"https://example.slack.com/archives/C1/p{root.replace('.', '')}"

    purged = db_command(s, "purge", "--thread", link, "--yes")

    assert purged.returncode == 0, purged.stderr
    assert re.search(r"conversations:\s+1\b", purged.stdout), purged.stdout
    assert not tables_containing(database_url, SECRET)
    assert tables_containing(database_url, OTHER)
    assert closed_sessions(s) == [("C1", root)]
    assert s.slack.session("C1", root).status == "closed" and s.slack.session("C1", other).status == "active"


def test_purge_team_deletes_every_channel_of_the_team_and_closes_each_threads_session(service, database_url):
    s = service
    two_channels(s)
    rubric_only = graded_thread(s, "C3")  # no request ran there: no session to close

    purged = db_command(s, "purge", "--team", sr.TEAM_ID, "--yes")

    assert purged.returncode == 0, purged.stderr
    assert re.search(r"conversations:\s+3\b", purged.stdout), purged.stdout
    assert re.search(r"agent sessions closed:\s+2\b", purged.stdout), purged.stdout
    assert not any(tables_containing(database_url, text) for text in (SECRET, OTHER, RUBRIC))
    assert sorted(channel for channel, _ in closed_sessions(s)) == ["C1", "C2"]
    assert ("C3", rubric_only) not in closed_sessions(s)


# -- private files ------------------------------------------------------------------------------


def test_the_sqlite_file_and_its_wal_and_shm_are_private_and_a_wider_file_is_tightened(start_bot, tmp_path):
    database = tmp_path / "bot.sqlite"
    database.touch()
    database.chmod(0o644)

    bot = start_bot()

    files = [database, Path(f"{database}-wal"), Path(f"{database}-shm")]
    wait_for(lambda: all(path.exists() for path in files), RUN_TIMEOUT, message="the WAL files")
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {p.name: 0o600 for p in files}
    assert "was readable by other accounts (mode 644)" in bot.stderr_text()


# -- long threads --------------------------------------------------------------------------------

SMALL_LIMIT = 1200
"""RUBRIC_BOT_CONTEXT_TOKENS of the long-thread test: a few turns of its answers."""

FILLER = " ".join(f"point{n}" for n in range(40))
"""Makes each answer long enough that a dozen turns pass the small limit several times over."""


def long_answers() -> Script:
    """Answers with FILLER; each run's first answer ("Draft") needs one revision ("Revised")."""

    def worker(request: ChatRequest) -> str:
        revising = DEFAULT_GAP in request.last_user_text
        return f"{'Revised' if revising else 'Draft'} answer: {FILLER}"

    def grader(request: ChatRequest) -> dict:
        text = request.all_text
        revised = text.rfind("Revised answer") > text.rfind("Draft answer")
        return grade(CRITERIA, failing=() if revised else (CRITERIA[0],), scored=request.is_scored)

    return Script(worker, grader)


def test_a_long_threads_worker_input_stays_under_a_small_limit_with_the_latest_request_intact(
    start_bot, slack_api, model_api, database_url
):
    model_api.worker, model_api.grader = long_answers()
    env = {"RUBRIC_BOT_DB": database_url, "RUBRIC_BOT_CONTEXT_TOKENS": str(SMALL_LIMIT)}
    s = Service(slack_api, model_api, start_bot(env=env))
    root = graded_thread(s, "C9")
    questions = [f"Question number {n}: what about topic{n}?" for n in range(12)]

    for question in questions:
        ask(s, "C9", root, question)

    current: list[str] = []
    for request in s.model.requests("worker"):
        history = [m for m in request.messages if m["role"] != "system"]
        assert count_tokens_approximately(history) <= SMALL_LIMIT
        users = [m["content"] for m in history if m["role"] == "user"]
        if users[-1].startswith("Grader feedback"):  # a revision: the feedback follows its request
            feedback = users.pop()
            assert f"{CRITERIA[0]}: {DEFAULT_GAP}" in feedback  # the current run's feedback, whole
        current.append(users[-1])
    assert set(current) == set(questions)  # each request reached the worker whole, as the latest
    # The grader's view is not summarized: every grading saw the whole rubric.
    assert all(name in r.all_text for r in s.model.requests("grader") for name in CRITERIA)
    summaries = s.model.requests("summary")
    assert 0 < len(summaries) < len(questions) / 2  # kept in the checkpoint, not redone every turn
    # Every token the models were sent, summaries' included, is in some run's usage line.
    shown = [re.search(r"Tokens this run: ([\d,]+) in", m.all_text) for m in s.finals("C9", root)]
    assert sum(int(m[1].replace(",", "")) for m in shown if m) == sum(
        r.prompt_tokens for r in s.model.requests()
    )


def test_a_threads_summary_is_priced_at_the_summary_models_rate_not_the_workers(
    start_bot, slack_api, model_api
):
    model_api.worker, model_api.grader = long_answers()
    env = {"RUBRIC_BOT_CONTEXT_TOKENS": str(SMALL_LIMIT), "RUBRIC_BOT_SUMMARY_MODEL": SUMMARY_MODEL}
    s = Service(slack_api, model_api, start_bot(env=env))
    root = graded_thread(s, "C7")
    asked = 0
    while not s.model.requests("summary"):
        assert asked < 8, "the thread was never summarized"
        ask(s, "C7", root, f"What about topic{asked}?")
        asked += 1

    roles = recorded_roles(s, "C7", asked)
    summaries = [run["summary"] for run in roles if "summary" in run]
    assert summaries and all(summary["model"] == SUMMARY_MODEL for summary in summaries)
    assert all(run["worker"]["model"] == "openai:gpt-4o-mini" for run in roles)
    # Each model's tokens are its own role's: the summaries' are not counted as the worker's.
    assert sum(summary["input_tokens"] for summary in summaries) == sum(
        r.prompt_tokens for r in s.model.requests("summary")
    )
    assert sum(run["worker"]["input_tokens"] for run in roles) == sum(
        r.prompt_tokens for r in s.model.requests("worker")
    )
    assert all(summary["usd"] == pytest.approx(list_price(summary)) for summary in summaries)


SUMMARY_MODEL = "openai:gpt-4o"
"""The summary model of the pricing test: dearer than the worker's (gpt-4o-mini)."""


def recorded_roles(s: Service, channel: str, runs: int) -> list[dict]:
    """The tokens per role of the channel's `runs` runs, once each run's end is recorded."""

    def recorded() -> list[dict] | None:
        with closing(sqlite3.connect(s.db_path)) as db:
            rows = db.execute(
                "SELECT token_usage FROM runs WHERE channel = ? AND token_usage IS NOT NULL", (channel,)
            ).fetchall()
        return [json.loads(usage) for (usage,) in rows] if len(rows) == runs else None

    return wait_for(recorded, RUN_TIMEOUT, message=f"the cost of the {runs} runs in {channel}")


def marker_summary(request: ChatRequest) -> str:
    """A summary naming the secrets and topics of what it summarized (as a real summary would)."""
    markers = sorted(set(re.findall(r"sk-SECRET-\w+|topic\d+", request.all_text)))
    return "Summary of earlier turns: " + " ".join(markers)


def test_a_deleted_request_already_summarized_is_nowhere_in_the_next_worker_input(
    start_bot, slack_api, model_api, database_url
):
    model_api.worker, model_api.grader = long_answers()
    model_api.summarizer = marker_summary
    env = {"RUBRIC_BOT_DB": database_url, "RUBRIC_BOT_CONTEXT_TOKENS": str(SMALL_LIMIT)}
    s = Service(slack_api, model_api, start_bot(env=env))
    root = graded_thread(s, "C8")
    pasted = f"Remember {SECRET}"
    secret_ts = ask(s, "C8", root, pasted)
    for number in range(8):
        if any(SECRET in request.all_text for request in s.model.requests("summary")):
            break
        ask(s, "C8", root, f"What about topic{number}?")
    assert any(SECRET in r.all_text for r in s.model.requests("summary")), "not summarized yet"

    s.send(sr.event_callback(sr.message_deleted("C8", secret_ts, root, previous_text=pasted)))
    wait_until_stored(database_url, absent=(SECRET,))
    ask(s, "C8", root, "And the next one?")

    later = worker_inputs(s, "And the next one?")
    assert all(SECRET not in request.all_text for request in later)
    assert all(DROPPED_SUMMARY in request.all_text for request in later)
