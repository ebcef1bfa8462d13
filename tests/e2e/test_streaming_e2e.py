"""A run's progress streamed as a plan, through the real bot over HTTP (`bot.streaming`).

The run streams one message in the request's thread whose tasks follow the loop and which ends with
the answer; each iteration's results, with their review buttons, are messages of their own after
it. Where Slack refuses the stream, or ends it mid-run (the stand-in's `end_streams`, as Slack does
past its streaming window), the thread still gets every iteration and the answer, once each. The
bots here stream whatever `E2E_STREAMING` says; the suites it switches cover streaming off.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.slack.client import SLACK_RETRIES
from bot.threads.progress import DRAFTING, REVISING, REVISING_MESSAGES, WRITING_MESSAGES
from tests.e2e.conftest import CRITERIA, RUBRIC, Service, evaluations, finals, metrics, shared_service, value
from tests.standins.model_api import REVISED_ANSWER, ChatRequest, Json, Script, grade, scripted_revision
from tests.standins.slack_api import SlackMessage

PLAN = [
    "Writing a draft",
    "Grading iteration 1/3: 1 of 2 criteria met",
    f"Revising: {CRITERIA[0]}",
    "Grading iteration 2/3: all met",
]
"""The plan of a run whose first answer fails the first criterion and whose revision passes."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("streaming"), {"RUBRIC_BOT_STREAMING": "on"}) as service:
        yield service


@pytest.fixture
def s(service: Service) -> Service:
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


def streamed(thread: list[SlackMessage]) -> list[SlackMessage]:
    return [m for m in thread if m.streamed]


def ask(s: Service, channel: str) -> str:
    """A thread with the rubric and one request in it; its root."""
    root = s.mention(f"rubric:\n{RUBRIC}", channel)
    s.wait_text(channel, root, "Rubric set")
    s.mention("Is coffee healthy?", channel, thread_ts=root)
    return root


def test_a_run_streams_one_message_whose_plan_names_each_iteration_and_ends_with_the_answer(s):
    root = ask(s, "C1")
    (final,) = s.wait_finals("C1", root, 1)

    thread = s.thread("C1", root)
    (stream,) = streamed(thread)
    assert stream.ts == final.ts and not stream.streaming
    assert stream.task_titles() == PLAN
    assert {task["status"] for task in stream.tasks.values()} == {"complete"}
    graded = [stream.tasks["grade-1"], stream.tasks["grade-2"]]
    assert [task["output"] for task in graded] == ["Needs revision", "Passed: the rubric is satisfied"]
    assert f"Failed: {CRITERIA[0]}" in graded[0]["details"] and "details" not in graded[1]
    assert REVISED_ANSWER in stream.all_text
    # Each iteration's results follow the streamed message, with their review buttons.
    after = thread[thread.index(stream) + 1 :]
    assert [m.event_type for m in after] == ["rubric_evaluation", "rubric_evaluation"]
    assert all("review_agree" in str(m.blocks) for m in after)
    # The thread status is still set, for clients that do not show streams.
    statuses = [
        c.args["status"]
        for c in s.slack.calls("assistant.threads.setStatus")
        if c.args.get("thread_ts") == root
    ]
    assert any("grading iteration 1/3" in status for status in statuses)
    writing = [
        c.args.get("loading_messages")
        for c in s.slack.calls("assistant.threads.setStatus")
        if c.args.get("thread_ts") == root and c.args["status"] in (DRAFTING, REVISING)
    ]
    assert WRITING_MESSAGES in writing and REVISING_MESSAGES in writing


def test_a_satisfied_run_with_a_criterion_the_grader_cannot_tell_streams_no_not_met(s):
    # The grader passes the first criterion and cannot tell the second: the rubric is satisfied (a
    # can't-tell is left to people, not failed), and the plan says so rather than "1 of 2 met".
    s.model.grader = lambda request: grade(CRITERIA, cannot_tell=(CRITERIA[1],))
    root = ask(s, "C6")
    (final,) = s.wait_finals("C6", root, 1)

    (stream,) = streamed(s.thread("C6", root))
    assert stream.ts == final.ts
    assert stream.task_titles() == ["Writing a draft", "Grading iteration 1/3: all met, 1 can't tell"]
    assert "not met" not in stream.all_text and "Revising" not in stream.all_text
    assert stream.tasks["grade-1"]["output"] == "Passed: the rubric is satisfied"
    assert len(evaluations(s.thread("C6", root))) == 1


def test_a_stream_slack_ends_mid_run_still_gets_every_iteration_and_the_answer_once(s):
    draft, grader = s.model.worker, s.model.grader

    def ending_the_stream(request: ChatRequest) -> Json:
        s.slack.end_streams()  # as Slack does once its streaming window is over
        return grader(request)

    s.model.worker, s.model.grader = Script(draft, ending_the_stream)
    root = ask(s, "C2")
    (final,) = s.wait_finals("C2", root, 1)

    thread = s.thread("C2", root)
    (stream,) = streamed(thread)
    assert stream.ts == final.ts  # the answer went into the streamed message with chat.update
    assert stream.edits == 1 and REVISED_ANSWER in stream.all_text
    titles = stream.task_titles()  # the plan as far as Slack took it
    assert titles[0] == "Writing a draft" and len(titles) < len(PLAN)
    assert len(evaluations(thread)) == 2
    assert sum(REVISED_ANSWER in m.all_text for m in thread) == 1


def test_a_stream_slack_refuses_leaves_the_run_posting_its_messages(s):
    s.slack.error_next("chat.startStream", "not_allowed_token_type")
    root = ask(s, "C3")
    s.wait_finals("C3", root, 1)

    thread = s.thread("C3", root)
    assert streamed(thread) == []
    assert [m.event_type for m in thread[1:]] == ["rubric_evaluation", "rubric_evaluation", "rubric_final"]
    assert len(finals(thread)) == 1


def test_a_run_that_meets_slacks_stream_rate_limit_falls_back_logged_and_counted(s):
    fallbacks = "rubric_bot_stream_fallbacks_total"
    before = value(metrics(s.bot), fallbacks, reason="refused_for_now")
    s.slack.fail_next("chat.startStream", status=429, retry_after=0, times=SLACK_RETRIES + 1)
    root = ask(s, "C4")
    s.wait_finals("C4", root, 1)

    assert streamed(s.thread("C4", root)) == []
    assert len(evaluations(s.thread("C4", root))) == 2
    assert value(metrics(s.bot), fallbacks, reason="refused_for_now") == before + 1
    logged = s.bot.stderr_text().splitlines()
    (line,) = [line for line in logged if "falls back to plain messages" in line and root in line]
    assert "ratelimited" in line


def test_a_streamed_run_calls_slack_once_per_change_the_thread_shows(s):
    # A run that revises once: the stream is started, then grows by one call per step (grading 1,
    # graded 1 with revising, grading 2), and closes with the answer (graded 2 with it); the thread
    # status is set as drafting, grading 1, revising and grading 2 start, and not cleared before
    # the answer: iteration 2's message took it off. Nothing Slack already shows is sent again.
    root = ask(s, "C5")
    s.wait_finals("C5", root, 1)

    calls = [
        c
        for c in s.slack.calls()
        if "C5" in (c.args.get("channel"), c.args.get("channel_id")) and c.method != "chat.postMessage"
    ]
    statuses = [c.args["status"] for c in calls if c.method == "assistant.threads.setStatus"]
    assert [c.method for c in calls if c.method.startswith("chat.")] == [
        "chat.startStream",
        "chat.appendStream",
        "chat.appendStream",
        "chat.appendStream",
        "chat.stopStream",
    ]
    assert statuses == [
        "is writing a draft…",
        "is grading iteration 1/3…",
        "is revising…",
        "is grading iteration 2/3…",
    ]
    assert s.slack.thread_status("C5", root) == ""
