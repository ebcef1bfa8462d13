"""Stopping a run, through the real bots over HTTP on SQLite and PostgreSQL (`bot.sessions`).

Each run is an agent session of its thread: ``processing`` while it works, ``active`` once it ended.
A Stop click (``agent_session_stopped``) mid-run ends the run wherever it runs (on PostgreSQL the
click reaches the other of two replicas): its thread gets one "stopped" line with the best draft so
far, no model is called again, the run is recorded as stopped and its reservation gives way to what
it spent. A Stop after the end changes nothing; `/rubric stop` stops the caller's runs where Slack
has no sessions.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import psycopg
import pytest

from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, Service, evaluations, finals
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import DRAFT_ANSWER, NO_ANSWER, ChatRequest, scripted_revision

STOPPER = "U2"
"""The teammate who clicks Stop."""


@pytest.fixture
def s(launch, database_url: str, start_bot) -> Service:
    """A bot (two replicas on one PostgreSQL database) whose worker never finishes a revision: a
    run hangs in its second model call of the worker until it is stopped."""
    service = launch()
    if database_url.startswith("postgresql"):
        service.others = (start_bot(env={"RUBRIC_BOT_DB": database_url}),)
    draft, grader = scripted_revision(CRITERIA)

    def never_revising(request: ChatRequest) -> Any:
        answer = draft(request)
        return answer if answer == DRAFT_ANSWER else NO_ANSWER

    service.model.worker, service.model.grader = never_revising, grader
    return service


def rows(database: str, query: str) -> list[tuple[Any, ...]]:
    """What `query` returns from the bots' database (a SQLite path or a postgresql:// URL)."""
    if database.startswith("postgresql"):
        with psycopg.connect(database) as connection:
            return connection.execute(query).fetchall()
    with closing(sqlite3.connect(database)) as connection:
        return connection.execute(query).fetchall()


def started_run(s: Service, channel: str) -> str:
    """A thread whose run has posted its first iteration and waits on the worker's revision."""
    root = s.mention(f"rubric:\n{RUBRIC}", channel)
    s.wait_text(channel, root, "Rubric set")
    s.mention("Is coffee healthy?", channel, thread_ts=root)
    s.wait_thread(channel, root, lambda thread: len(evaluations(thread)) == 1)
    wait_for(lambda: len(s.model.requests("worker")) == 2, RUN_TIMEOUT, message="the revision asked for")
    session = s.slack.session(channel, root)
    assert session is not None and session.status == "processing"
    return root


def stop(s: Service, channel: str, root: str) -> None:
    """Click Stop on the thread's session, through the last replica."""
    s.send(sr.event_callback(sr.agent_session_stopped(channel, root, STOPPER)), via=len(s.bots) - 1)


def test_stop_mid_run_ends_it_with_one_line_no_further_model_call_and_its_reservation_given_back(s):
    root = started_run(s, "C1")
    asked = len(s.model.requests())

    stop(s, "C1", root)
    s.wait_thread("C1", root, lambda thread: len(finals(thread)) == 1)

    thread = s.thread("C1", root)
    stopped = [m for m in thread if "Stopped by" in m.all_text]
    assert len(stopped) == 1 and f"Stopped by <@{STOPPER}> after iteration 1 of 3" in stopped[0].all_text
    assert DRAFT_ANSWER in stopped[0].all_text  # the best draft so far
    assert stopped[0].feedback_buttons() is None
    database = s.bot.env["RUBRIC_BOT_DB"]
    wait_for(
        lambda: rows(database, "SELECT status FROM runs") == [("stopped",)],
        RUN_TIMEOUT,
        message="the run recorded as stopped",
    )
    assert len(s.model.requests()) == asked  # the hanging revision was the last model call
    ((tokens, charged, by),) = rows(database, "SELECT tokens, charged_tokens, stopped_by FROM runs")
    assert by == STOPPER and tokens and charged == tokens  # the reservation gave way to what it spent
    spent = rows(database, "SELECT DISTINCT tokens FROM daily_spend WHERE requests > 0")
    assert spent == [(tokens,)]
    # The session leaves `processing` only after the run's end is recorded (a Stop until then must
    # find the run unfinished), so it is waited on rather than read at once.
    wait_for(
        lambda: s.slack.session("C1", root).status == "active", RUN_TIMEOUT, message="the session active"
    )
    assert s.slack.session("C1", root).statuses == ["processing", "active"]


def test_stop_after_the_end_changes_nothing(s):
    s.model.worker, s.model.grader = scripted_revision(CRITERIA)
    root = s.mention(f"rubric:\n{RUBRIC}", "C2")
    s.wait_text("C2", root, "Rubric set")
    s.mention("Is tea healthy?", "C2", thread_ts=root)
    s.wait_finals("C2", root, 1)
    session = lambda: s.slack.session("C2", root)  # noqa: E731
    wait_for(lambda: session().status == "active", RUN_TIMEOUT, message="the session active")
    before = s.thread("C2", root)
    calls = len(s.slack.calls())

    stop(s, "C2", root)
    wait_for(
        lambda: any("with nothing running there" in bot.stderr_text() for bot in s.bots),
        RUN_TIMEOUT,
        message="the click handled",
    )

    assert s.thread("C2", root) == before
    # Nothing was posted, updated or moved (a replica's first request asks Bolt's auth.test).
    assert [c.method for c in s.slack.calls()[calls:] if c.method != "auth.test"] == []
    assert rows(s.bot.env["RUBRIC_BOT_DB"], "SELECT status, stopped_by FROM runs") == [("satisfied", None)]


def test_rubric_stop_stops_the_callers_run_and_says_when_nothing_runs(s):
    root = started_run(s, "C3")

    answer = s.send(sr.slash_command("stop", "C3", sr.DEFAULT_USER)).json()
    assert "Stopping 1 request" in answer["text"]
    s.wait_text("C3", root, f"Stopped by <@{sr.DEFAULT_USER}>")

    again = s.send(sr.slash_command("stop", "C3", sr.DEFAULT_USER)).json()
    assert "nothing to stop" in again["text"]
