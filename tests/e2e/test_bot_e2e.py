"""The real bot process in HTTP mode, driven as Slack drives it.

Signed requests go into `/slack/events`; the Slack Web API and the OpenAI-compatible models are
local stand-ins that record every call. The tests share one bot process (each in its own channel,
so they cannot see each other's threads); restart and shutdown tests restart it.

Checking that something did *not* happen uses a sentinel: after the requests that must not run,
a later message in the same thread is answered — runs in a thread are serial, so anything that
wrongly ran would have been answered first.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import (
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    Service,
    evaluations,
    shared_service,
    wait_until_working,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import (
    DEFAULT_GAP,
    DRAFT_ANSWER,
    NO_ANSWER,
    REVISED_ANSWER,
    WorkerHandler,
    scripted_revision,
)

SHUTDOWN_GRACE = "0.5"  # seconds the shared bot lets runs finish on SIGTERM
SLOW = "Slow question"
"""A request the model stand-in never answers: its run is still going whenever the test stops the bot."""


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Service]:
    """One bot process for the module; tests that restart it leave it running."""
    env = {"RUBRIC_BOT_SHUTDOWN_GRACE": SHUTDOWN_GRACE}
    with shared_service(tmp_path_factory.mktemp("shared-bot"), env) as service:
        yield service


@pytest.fixture
def fresh(service: Service) -> Service:
    """The shared service with the default scripts: the first answer needs one revision."""
    service.model.latency = 0.0
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


# -- a conversation ------------------------------------------------------------------------------


def test_a_thread_is_graded_revised_and_keeps_its_rubric_until_replaced(fresh):
    s = fresh
    root = s.mention(f"rubric:\n{RUBRIC}", "C1")
    confirmation = s.wait_text("C1", root, "Rubric set")
    assert all(name in confirmation.all_text for name in CRITERIA)

    s.mention("Is coffee healthy?", "C1", thread_ts=root)
    (final,) = s.wait_finals("C1", root, 1)

    first, second = evaluations(s.thread("C1", root))
    assert "1/3" in first.all_text and DEFAULT_GAP in first.all_text
    assert "2/3" in second.all_text
    assert "Rubric satisfied" in final.all_text and REVISED_ANSWER in final.all_text
    assert DRAFT_ANSWER not in final.all_text

    # A follow-up without a mention and without a rubric is graded against the same rubric.
    s.say("And tea?", "C1", thread_ts=root)
    s.wait_finals("C1", root, 2)
    latest = evaluations(s.thread("C1", root))[-1]
    assert all(name in latest.all_text for name in CRITERIA)

    # `rubric:` replaces it.
    s.model.worker, s.model.grader = scripted_revision(["Mentions caffeine"])
    s.say("rubric: - Mentions caffeine", "C1", thread_ts=root)
    s.say("What about mate?", "C1", thread_ts=root)
    s.wait_finals("C1", root, 3)
    latest = evaluations(s.thread("C1", root))[-1]
    assert "Mentions caffeine" in latest.all_text
    assert not any(name in latest.all_text for name in CRITERIA)


def test_a_new_conversation_gets_the_channel_default_and_a_bare_one_a_hint(fresh):
    s = fresh
    plain = s.mention("Hello there", "C2")
    (final,) = s.wait_finals("C2", plain, 1)
    assert "rubric:" in final.all_text and "/rubric set" in final.all_text
    assert evaluations(s.thread("C2", plain)) == []

    answer = s.send(sr.slash_command(f"set {RUBRIC}", "C2")).json()
    assert "Channel default rubric set" in answer["text"]
    graded = s.mention("Is coffee healthy?", "C2")
    s.wait_finals("C2", graded, 1)
    assert len(evaluations(s.thread("C2", graded))) == 2


def test_a_bare_mention_in_a_channel_with_a_default_rubric_shows_it_and_asks_for_the_request(fresh):
    s = fresh
    s.send(sr.slash_command(f"set {RUBRIC}", "C10"))
    mention = s.mention("", "C10")

    prompt = s.wait_text("C10", mention, "What should I do?")

    assert "this channel's default rubric" in prompt.all_text
    assert all(name in prompt.all_text for name in CRITERIA)
    assert "wasn't graded" not in prompt.all_text
    assert s.finals("C10", mention) == []  # nothing was run


def test_in_a_slack_connect_channel_a_guest_orgs_request_gets_the_channels_default_rubric(fresh):
    s = fresh
    assert "Channel default rubric set" in s.send(sr.slash_command(f"set {RUBRIC}", "CX")).json()["text"]
    # Someone from another organisation asks in the shared channel: the event names their team,
    # its authorization the workspace the bot is installed in, where the channel's rubric is.
    root = sr.new_ts()
    s.send(
        sr.event_callback(
            sr.app_mention("Is coffee healthy?", "CX", root, team="T2"), team="T2", installed_team="T1"
        )
    )

    s.wait_finals("CX", root, 1)
    assert len(evaluations(s.thread("CX", root))) == 2  # graded against the channel default
    reply = sr.message("And tea?", "CX", sr.new_ts(), root, team="T2")  # no mention: the bot's thread
    s.send(sr.event_callback(reply, team="T2", installed_team="T1"))
    s.wait_finals("CX", root, 2)


def test_a_direct_message_starts_a_thread_and_replies_continue_it(fresh):
    s = fresh
    s.model.worker = lambda request: f"Answer to {request.last_user_text.strip()}"
    root = s.say("Hi bot", "D1", channel_type="im")
    (first,) = s.wait_finals("D1", root, 1)
    s.say("More please", "D1", thread_ts=root, channel_type="im")
    answers = s.wait_finals("D1", root, 2)

    assert "Answer to Hi bot" in first.all_text  # answered in the DM, in a thread under the message
    assert "Answer to More please" in answers[1].all_text
    (follow_up,) = s.worker_requests_for("More please")
    assert "Hi bot" in follow_up.all_text and "Answer to Hi bot" in follow_up.all_text  # one conversation


# -- reliability -----------------------------------------------------------------------------------


def test_retried_deliveries_and_the_mention_twin_run_once(fresh):
    s = fresh
    ts = sr.new_ts()
    mention = sr.app_mention("Count me once", "C3", ts)
    envelope = sr.event_callback(mention)
    s.send(envelope)
    s.send(envelope, retry_num=1, retry_reason="http_timeout")  # Slack redelivers: same event_id
    s.send(sr.event_callback(sr.message(mention["text"], "C3", ts)))  # the `message` twin
    s.wait_finals("C3", ts, 1)

    s.say("Sentinel", "C3", thread_ts=ts)
    finals = s.wait_finals("C3", ts, 2)

    assert len(finals) == 2
    assert len([r for r in s.model.requests("worker") if r.last_user_text == "Count me once"]) == 1


def test_slack_gets_its_acknowledgement_over_http_while_the_work_is_still_under_way(fresh):
    s = fresh
    s.model.hold()  # no model answers until released: the run cannot end before then
    try:
        root = sr.new_ts()
        acked = s.send(sr.event_callback(sr.app_mention("Acknowledge me first", "C13", root)))
        wait_for(
            lambda: s.worker_requests_for("Acknowledge me first"), RUN_TIMEOUT, message="the run to start"
        )
        assert acked.status == 200 and s.finals("C13", root) == []  # acknowledged, the answer to come
    finally:
        s.model.release()
    s.wait_finals("C13", root, 1)


def test_a_bad_signature_gets_401_and_runs_nothing(fresh):
    s = fresh
    ts = sr.new_ts()
    forged = s.bot.sender.send(
        sr.event_callback(sr.app_mention("Forged request", "C4", ts)), bad_signature=True
    )
    forged_command = s.bot.sender.send(sr.slash_command(f"set {RUBRIC}", "C4"), bad_signature=True)
    assert forged.status == 401 and forged_command.status == 401

    sentinel = s.mention("Sentinel", "C4")
    (final,) = s.wait_finals("C4", sentinel, 1)

    assert s.thread("C4", ts) == []
    assert s.worker_requests_for("Forged request") == []
    assert "rubric:" in final.all_text  # no channel default was set by the forged command


def test_bots_edits_deletions_and_oversize_input_do_not_run(fresh):
    s = fresh
    root = s.mention("Hello", "C5")
    s.wait_finals("C5", root, 1)

    s.send(sr.event_callback(sr.bot_message("From myself", "C5", sr.new_ts(), root)))
    s.say("From another bot", "C5", thread_ts=root, bot_id="BOTHER")
    s.say("Integration post", "C5", thread_ts=root, subtype="bot_message")
    s.send(sr.event_callback(sr.message_changed("Edited text", "C5", root, previous_text="Hello")))
    s.say("x" * 20_001, "C5", thread_ts=root)
    s.wait_text("C5", root, "too long")

    s.say("Sentinel", "C5", thread_ts=root)
    s.wait_finals("C5", root, 2)

    asked = [r.last_user_text for r in s.model.requests("worker")]
    for text in ("From myself", "From another bot", "Integration post", "Edited text", "x" * 20_001):
        assert text not in asked
    assert "Sentinel" in asked


# -- /rubric and the editor ------------------------------------------------------------------------


def test_rubric_command_manages_the_channel_default(fresh):
    s = fresh

    def command(text: str) -> str:
        return s.send(sr.slash_command(text, "C6")).json()["text"]

    assert "/rubric set" in command("help")
    assert "no default rubric" in command("show")
    assert "Channel default rubric set" in command(f"set {RUBRIC}")
    assert "- Cites a source" in command("show")
    assert "didn't parse" in command("set dimensions: [")
    assert "- Cites a source" in command("show")  # a bad rubric leaves the old one
    assert "not a /rubric subcommand" in command("frobnicate")
    assert "Cleared" in command("clear")
    assert "no default rubric" in command("show")


def test_rubric_editor_opens_prefilled_and_validates_inline(fresh):
    s = fresh
    s.send(sr.slash_command(f"set {RUBRIC}", "C7"))
    trigger = sr.new_trigger_id()
    s.send(sr.slash_command("edit", "C7", trigger_id=trigger))

    opened = wait_for(
        lambda: [c for c in s.slack.calls("views.open") if c.args.get("trigger_id") == trigger],
        RUN_TIMEOUT,
        message="views.open for the rubric editor",
    )[0]
    view = opened.args["view"]
    assert json.dumps(view).count("Cites a source") == 1  # pre-filled
    metadata = view["private_metadata"]

    def submit(text: str) -> Any:
        values = sr.text_input("rubric", "rubric_text", text)
        return s.send(sr.view_submission(view["callback_id"], values, metadata))

    rejected = submit("dimensions: [").json()
    assert rejected["response_action"] == "errors" and rejected["errors"]["rubric"]

    accepted = submit("- Answers in French")
    assert accepted.body == ""  # closes the modal
    shown = s.send(sr.slash_command("show", "C7")).json()["text"]
    assert "- Answers in French" in shown


# -- restarts --------------------------------------------------------------------------------------


def never_answering(text: str, worker: WorkerHandler) -> WorkerHandler:
    """`worker`, except that a request whose latest user message holds `text` is never answered."""
    return lambda request: NO_ANSWER if text in request.last_user_text else worker(request)


def test_after_a_crash_and_restart_the_thread_keeps_its_rubric_and_hears_about_the_lost_run(fresh):
    s = fresh
    root = s.mention(f"rubric:\n{RUBRIC}", "C8")
    s.wait_text("C8", root, "Rubric set")
    s.model.worker = never_answering(SLOW, s.model.worker)
    s.mention(SLOW, "C8", thread_ts=root)
    wait_until_working(s.slack, "C8", root)

    s.bot.stop(signal.SIGKILL)
    s.bot.start()
    s.say("Still there?", "C8", thread_ts=root)  # no mention: the bot remembers the thread
    s.wait_finals("C8", root, 1)

    messages = s.thread("C8", root)
    assert len([m for m in messages if "interrupted" in m.all_text]) == 1
    latest = evaluations(messages)[-1]
    assert all(name in latest.all_text for name in CRITERIA)


def test_sigterm_marks_a_run_past_the_grace_interrupted_and_tells_the_thread_once(fresh):
    s = fresh
    s.model.worker = never_answering(SLOW, s.model.worker)
    root = s.mention(SLOW, "C9")
    wait_until_working(s.slack, "C9", root)

    assert s.bot.stop(signal.SIGTERM) == 0

    (notice,) = s.thread("C9", root)
    assert "restarting" in notice.all_text
    assert s.slack.thread_status("C9", root) == ""

    s.bot.start()
    s.say("Back?", "C9", thread_ts=root)
    s.wait_finals("C9", root, 1)
    assert not any("interrupted" in m.all_text for m in s.thread("C9", root))
