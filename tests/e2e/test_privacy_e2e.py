"""What the bot's log keeps, end to end: no message text and no token, at the levels the README
recommends (INFO, and DEBUG when troubleshooting), on SQLite and PostgreSQL.

On PostgreSQL each request, edit and deletion is a job of the queue whose arguments carry the text;
at DEBUG the Slack client's bodies and SQLite's statement parameters carry it too. The test waits
for the thread's next answer, which the queue runs after the edit and the deletion, so every line
about them has been written when the log is read.
"""

from __future__ import annotations

import pytest

from bot.lifecycle.forget import DELETED_LINE
from tests.e2e.conftest import BOT_TOKEN, CRITERIA, RUBRIC, RUN_TIMEOUT, Service, finals
from tests.e2e.stored_rows import tables_containing
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import scripted_revision

CANARY = "CANARY-7d1f"
"""A word in a request, which is then edited and deleted: it must never be in the log."""

EDITED = "EDITED-3b9a"
"""The word the request's edit puts in its place: it must never be in the log either."""


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_a_request_its_edit_and_its_deletion_leave_no_text_and_no_token_in_the_log(
    start_bot, slack_api, model_api, database_url, level
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    env = {"RUBRIC_BOT_DB": database_url, "RUBRIC_BOT_LOG_LEVEL": level}
    s = Service(slack_api, model_api, start_bot(env=env))
    root = s.mention(f"rubric:\n{RUBRIC}", "C1")
    s.wait_text("C1", root, "Rubric set")
    asked = f"What rhymes with {CANARY}?"
    ts = s.say(asked, "C1", thread_ts=root)
    s.wait_finals("C1", root, 1)

    edited = f"What rhymes with {EDITED}?"
    s.send(sr.event_callback(sr.message_changed(edited, "C1", ts, root, previous_text=asked)))
    wait_for(lambda: tables_containing(database_url, EDITED), RUN_TIMEOUT, message="the edit stored")
    s.send(sr.event_callback(sr.message_deleted("C1", ts, root, previous_text=edited)))
    wait_for(lambda: not tables_containing(database_url, EDITED), RUN_TIMEOUT, message="the deletion applied")
    s.say("And the weather tomorrow?", "C1", thread_ts=root)
    s.wait_thread("C1", root, lambda messages: len(finals(messages)) >= 2)

    log = s.bot.stderr_text()
    assert level == "INFO" or " DEBUG bot." in log  # the bot's own detail is there at DEBUG
    for secret in (CANARY, EDITED, BOT_TOKEN):
        lines = [line for line in log.splitlines() if secret in line]
        assert not lines, lines[:3]


def test_an_earlier_message_edited_then_deleted_leaves_what_the_bot_read_of_it(
    start_bot, slack_api, model_api, database_url
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_DB": database_url}))
    s.slack.add_user("UANA", "Ana")
    root, earlier = sr.new_ts(), sr.new_ts()
    pasted = f"the staging key is {CANARY}\nand it rotates monthly"
    s.slack.add_thread_messages(
        "C2",
        root,
        {"type": "message", "user": "UANA", "text": "Deploy notes", "ts": root},
        {"type": "message", "user": "UANA", "text": pasted, "ts": earlier},
    )
    s.mention("summarize this thread", "C2", thread_ts=root)  # the bot reads the thread's messages
    s.wait_finals("C2", root, 1)
    assert s.worker_requests_for(CANARY)

    # Edited (the bot keeps what it read), then deleted: Slack's deletion carries the newest text.
    edited = "nothing to see here"
    s.send(sr.event_callback(sr.message_changed(edited, "C2", earlier, root, "UANA", previous_text=pasted)))
    s.send(sr.event_callback(sr.message_deleted("C2", earlier, root, "UANA", previous_text=edited)))
    wait_for(lambda: not tables_containing(database_url, CANARY), RUN_TIMEOUT, message="the deletion applied")
    s.say("And the next step?", "C2", thread_ts=root)
    s.wait_finals("C2", root, 2)

    later = s.worker_requests_for("And the next step?")
    assert later and all(CANARY not in r.all_text and "rotates monthly" not in r.all_text for r in later)
    assert all(DELETED_LINE in r.all_text and "Deploy notes" in r.all_text for r in later)
