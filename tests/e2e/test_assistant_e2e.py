"""Slack's assistant pane, through the real bot over HTTP (`bot.assistant`).

Opening the pane greets once (however often Slack delivers the event) and offers the suggested
prompts; a request in the pane runs the loop with the rubric of the channel the pane was opened
beside, and titles the pane; the suggested questions are answered, not sent to the worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.assistant.prompts import EXAMPLE_REQUEST, SET_RUBRIC_HELP, PaneQuestion
from tests.e2e.conftest import CRITERIA, RUN_TIMEOUT, Service, evaluations, finals, shared_service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import REVISED_ANSWER, scripted_revision


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("assistant")) as service:
        yield service


@pytest.fixture
def s(service: Service) -> Service:
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


def open_pane(s: Service, dm: str, beside: str) -> str:
    """Open the pane in `dm` beside channel `beside` (Slack delivering the event twice); its thread."""
    root = sr.new_ts()
    started = sr.event_callback(sr.assistant_thread("assistant_thread_started", dm, root, beside))
    s.send(started)
    s.send(started, retry_num=1)  # answered once the bot has seen it: it greets before it acks
    return root


def ask(s: Service, text: str, dm: str, root: str) -> str:
    ts = sr.new_ts()
    s.send(sr.event_callback(sr.message(text, dm, ts, root, channel_type="im")))
    return ts


def test_opening_the_pane_greets_once_and_offers_the_suggested_prompts(s):
    root = open_pane(s, "D1", "C1")

    (greeting,) = s.thread("D1", root)
    assert "<#C1>" in greeting.text and "rubric:" in greeting.text
    prompts = s.slack.suggested_prompts("D1", root)
    assert [p["message"] for p in prompts] == [EXAMPLE_REQUEST, *(q.value for q in PaneQuestion)]


def test_a_request_in_the_pane_is_graded_by_the_neighbouring_channels_rubric_and_titles_the_pane(s):
    s.set_channel_rubric("C2")
    s.slack.join("C2", sr.DEFAULT_USER)
    root = open_pane(s, "D2", "C2")
    ask(s, "Is coffee healthy?", "D2", root)

    (final,) = s.wait_finals("D2", root, 1)
    assert REVISED_ANSWER in final.all_text
    graded = evaluations(s.thread("D2", root))
    assert len(graded) == 2 and all(c in graded[0].all_text for c in CRITERIA)
    assert s.slack.thread_title("D2", root) == "Is coffee healthy?"


def test_the_pane_follows_the_channel_it_moves_beside(s):
    s.set_channel_rubric("C4")
    s.slack.join("C4", sr.DEFAULT_USER)
    root = open_pane(s, "D3", "C3")  # C3 has no rubric
    s.send(sr.event_callback(sr.assistant_thread("assistant_thread_context_changed", "D3", root, "C4")))
    wait_for(
        lambda: s.thread("D3", root)[0].metadata["event_payload"]["channel_id"] == "C4",
        RUN_TIMEOUT,
        message="the greeting to hold the new channel",
    )
    ask(s, "Is tea healthy?", "D3", root)

    s.wait_finals("D3", root, 1)
    assert len(evaluations(s.thread("D3", root))) == 2  # graded, by C4's rubric


def test_the_suggested_questions_are_answered_and_no_model_is_asked(s):
    s.set_channel_rubric("C5")
    s.slack.join("C5", sr.DEFAULT_USER)
    root = open_pane(s, "D5", "C5")
    asked = len(s.model.requests("worker"))
    ask(s, PaneQuestion.RUBRIC.value, "D5", root)
    s.wait_text("D5", root, CRITERIA[0])
    ask(s, PaneQuestion.SET_RUBRIC.value, "D5", root)
    s.wait_text("D5", root, SET_RUBRIC_HELP.split("\n")[0])
    ask(s, PaneQuestion.AGREEMENT.value, "D5", root)
    s.wait_text("D5", root, "Grader agreement")

    assert len(s.model.requests("worker")) == asked
    assert finals(s.thread("D5", root)) == []


def test_a_pane_beside_a_channel_its_person_is_not_in_does_not_use_that_channels_rubric(s):
    s.set_channel_rubric("C6")  # a channel U1 is not a member of
    root = open_pane(s, "D6", "C6")
    ask(s, PaneQuestion.RUBRIC.value, "D6", root)
    s.wait_text("D6", root, "no rubric here yet")
    ask(s, "Is cocoa healthy?", "D6", root)

    s.wait_finals("D6", root, 1)
    assert evaluations(s.thread("D6", root)) == []  # answered, not graded by C6's rubric
    assert CRITERIA[0] not in "\n".join(m.all_text for m in s.thread("D6", root))


def test_another_apps_metadata_in_a_pane_thread_names_no_channel(s):
    s.set_channel_rubric("C7")
    s.slack.join("C7", sr.DEFAULT_USER)
    root = sr.new_ts()
    other_app = {
        "type": "message",
        "user": "UOTHERBOT",
        "bot_id": "BOTHER",
        "text": "hello",
        "ts": root,
        "metadata": {"event_type": "assistant_thread_context", "event_payload": {"channel_id": "C7"}},
    }
    s.slack.add_thread_messages("D7", root, other_app)
    ask(s, "Is mate healthy?", "D7", root)

    s.wait_finals("D7", root, 1)
    assert evaluations(s.thread("D7", root)) == []
