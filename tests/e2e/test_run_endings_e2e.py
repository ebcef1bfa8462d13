"""How a run can end early, through the real bot over HTTP: timeouts, crashes, shutdowns, model errors.

The model stand-in plays a provider that accepts a call and never answers (``NO_ANSWER``) or fails it
(``ErrorReply``). Whatever ended a run, its thread is told in words (after a crash, as soon as the bot
is back), its working status goes, and the thread's next request starts a fresh grading run: labels
from 1/3, a new grading run id and all three iterations. That processes starting together report a
crashed run once is pinned at the store (tests/bot/db/test_store.py), where the claim is made.
"""

from __future__ import annotations

import re
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import closing

import pytest

from tests.e2e.conftest import (
    CRITERIA,
    RUBRIC,
    BotProcess,
    Service,
    evaluations,
    shared_service,
    wait_until_working,
)
from tests.standins import wait_for
from tests.standins.model_api import (
    DEFAULT_GAP,
    NO_ANSWER,
    ChatRequest,
    ErrorReply,
    Json,
    Script,
    Silence,
    grade,
)
from tests.standins.slack_api import SlackMessage

MODEL_TIMEOUT = 2
"""Seconds per model call for the bot of the tests of that timeout (`impatient`): a hung call is given
up after this (and the OpenAI client's two retries). Every other test's bot keeps the default, so a
call expected to succeed never races it on a busy machine."""
SHUTDOWN_GRACE = "0.5"
"""Seconds the module's bots let runs finish on SIGTERM."""
DOOMED = "Doomed question"
"""The request whose revision the tests make end early."""
PASSING_ATTEMPT = 3
"""The scripted grader passes only a request's third answer, so a request needs the whole budget."""
NOTICE_TIMEOUT = 40.0
"""Bound for a notice to appear: a hung call takes three attempts of MODEL_TIMEOUT, plus backoff."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One bot for the module's tests whose model calls end some other way than by the model timeout;
    tests that restart it leave it running."""
    env = {"RUBRIC_BOT_SHUTDOWN_GRACE": SHUTDOWN_GRACE}
    with shared_service(tmp_path_factory.mktemp("run-endings"), env) as service:
        yield service


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One bot for the tests of the model timeout, which it sets to MODEL_TIMEOUT."""
    env = {"RUBRIC_BOT_MODEL_TIMEOUT": str(MODEL_TIMEOUT), "RUBRIC_BOT_SHUTDOWN_GRACE": SHUTDOWN_GRACE}
    with shared_service(tmp_path_factory.mktemp("model-timeout"), env) as service:
        yield service


def reset(service: Service) -> Service:
    """`service` with the models answering at once, scripted by `numbered_attempts`."""
    service.model.latency = 0.0
    service.model.worker, service.model.grader = numbered_attempts(NO_ANSWER)
    return service


@pytest.fixture
def fresh(service: Service) -> Service:
    return reset(service)


@pytest.fixture
def fresh_impatient(impatient: Service) -> Service:
    return reset(impatient)


def numbered_attempts(ending: ErrorReply | Silence) -> Script:
    """The worker numbers its answers within a request ("Attempt 1", "Attempt 2", …) and the grader
    passes only attempt PASSING_ATTEMPT; revising the DOOMED request gets `ending` instead."""

    def worker(request: ChatRequest) -> str | ErrorReply | Silence:
        asked, revisions = _latest_request(request)
        if revisions and DOOMED in asked:
            return ending
        return f"Attempt {revisions + 1}"

    def grader(request: ChatRequest) -> Json:
        attempts = re.findall(r"Attempt (\d+)", request.all_text)
        passed = bool(attempts) and int(attempts[-1]) >= PASSING_ATTEMPT
        return grade(CRITERIA, failing=() if passed else CRITERIA[:1], gap=DEFAULT_GAP)

    return Script(worker, grader)


def _latest_request(request: ChatRequest) -> tuple[str, int]:
    """The latest user request the worker is shown, and how many grader feedbacks came after it."""
    asked, revisions = "", 0
    for message in request.messages:
        if message.get("role") != "user":
            continue
        text = str(message.get("content"))
        if DEFAULT_GAP in text:
            revisions += 1
        else:
            asked, revisions = text, 0
    return asked, revisions


def revision_requested(s: Service) -> bool:
    """Whether the worker has been asked to revise the DOOMED request."""
    latest = [_latest_request(r) for r in s.model.requests("worker")]
    return any(DOOMED in asked and revisions for asked, revisions in latest)


def run_id(message: SlackMessage) -> str:
    return message.metadata["event_payload"]["grading_run_id"]


def label(message: SlackMessage) -> str:
    """An evaluation's iteration label, e.g. ``1/3``."""
    found = re.search(r"Iteration (\d+/\d+)", message.text)
    assert found, message.text
    return found.group(1)


def run_statuses(bot: BotProcess) -> list[tuple[str, str | None]]:
    """(request ts, status) of every recorded run, as an operator would query them."""
    with closing(sqlite3.connect(bot.env["RUBRIC_BOT_DB"])) as db:
        return db.execute("SELECT request_ts, status FROM runs ORDER BY run_id").fetchall()


def wait_text(s: Service, channel: str, root: str, needle: str) -> None:
    wait_for(
        lambda: any(needle in m.all_text for m in s.thread(channel, root)),
        NOTICE_TIMEOUT,
        message=lambda: f"{needle!r} in {channel}/{root}; bot log:\n{s.bot.stderr_text()[-3000:]}",
    )


# -- timeouts ------------------------------------------------------------------------------------


def test_a_model_that_never_answers_ends_the_run_in_words_and_the_next_request_runs(fresh_impatient):
    s = fresh_impatient
    s.model.worker = lambda request: NO_ANSWER if "Hung" in request.last_user_text else "Prompt answer."
    hung = s.mention("Hung question", "T1")
    wait_until_working(s.slack, "T1", hung)
    s.mention("Next question", "T1", thread_ts=hung)  # queued behind the hung one

    wait_text(s, "T1", hung, f"The model did not answer within {MODEL_TIMEOUT} s")
    (final,) = s.wait_finals("T1", hung, 1)

    assert "Prompt answer." in final.all_text
    assert s.slack.thread_status("T1", hung) == ""
    assert (hung, "timed_out") in run_statuses(s.bot)


def test_a_grader_that_never_answers_leaves_the_answer_ungraded_and_says_so(fresh_impatient):
    s = fresh_impatient
    s.model.worker = lambda request: "An answer nobody graded."
    s.model.grader = lambda request: NO_ANSWER
    root = s.mention(f"rubric:\n{RUBRIC}", "T2")
    s.wait_text("T2", root, "Rubric set")
    s.mention("Grade this", "T2", thread_ts=root)

    wait_text(s, "T2", root, "timed out")
    (final,) = s.wait_finals("T2", root, 1)

    (evaluation,) = evaluations(s.thread("T2", root))
    assert "Grader error" in evaluation.all_text and "timed out" in evaluation.all_text
    assert "An answer nobody graded." in final.all_text


def test_a_run_longer_than_the_run_timeout_is_ended_and_the_next_request_runs(
    start_bot, slack_api, model_api
):
    # The next request must fit in the run timeout too, on a loaded machine: a first request pays the
    # new process's slow first calls outside it, and 10 s leaves the rest room (the hung call needs 60).
    bot = start_bot(env={"RUBRIC_BOT_MODEL_TIMEOUT": "60", "RUBRIC_BOT_RUN_TIMEOUT": "10"})
    s = Service(slack_api, model_api, bot)
    model_api.worker = lambda request: NO_ANSWER if "Slow" in request.last_user_text else "Prompt answer."
    s.wait_finals("T4", s.mention("First question", "T4"), 1)
    slow = s.mention("Slow question", "T3")
    wait_until_working(s.slack, "T3", slow)
    s.mention("Next question", "T3", thread_ts=slow)

    wait_text(s, "T3", slow, "The model did not finish this request within 10 s")
    (final,) = s.wait_finals("T3", slow, 1)

    assert "Prompt answer." in final.all_text
    assert s.slack.thread_status("T3", slow) == ""
    assert (slow, "timed_out") in run_statuses(bot)


# -- every early ending, then a fresh run ----------------------------------------------------------

ENDINGS: dict[str, tuple[ErrorReply | Silence, signal.Signals | None, str]] = {
    "worker 500 on the revision": (ErrorReply(500), None, "The model failed"),
    "model timeout": (NO_ANSWER, None, "did not answer within"),
    "crash": (NO_ANSWER, signal.SIGKILL, "interrupted by a restart"),
    "shutdown": (NO_ANSWER, signal.SIGTERM, "restarting"),
}
"""Ways a run ends early: what the worker does when asked to revise, the signal the bot gets
meanwhile (then it is started again), and what the thread is told."""


@pytest.mark.parametrize("ending", ENDINGS)
def test_after_a_run_ends_early_the_next_request_gets_a_fresh_grading_run(request, ending):
    s = request.getfixturevalue("fresh_impatient" if ending == "model timeout" else "fresh")
    reply, stop_signal, notice = ENDINGS[ending]
    s.model.worker, s.model.grader = numbered_attempts(reply)
    channel = f"F{list(ENDINGS).index(ending)}"
    root = s.mention(f"rubric:\n{RUBRIC}", channel)
    s.wait_text(channel, root, "Rubric set")
    s.mention(DOOMED, channel, thread_ts=root)
    wait_for(
        lambda: revision_requested(s) and evaluations(s.thread(channel, root)),
        NOTICE_TIMEOUT,
        message="the first evaluation and the request for a revision",
    )
    if stop_signal is not None:
        s.bot.stop(stop_signal)
        s.bot.start()
    wait_text(s, channel, root, notice)  # after a crash too: told at start-up, before anyone writes
    (doomed,) = evaluations(s.thread(channel, root))
    assert len([m for m in s.thread(channel, root) if notice in m.all_text]) == 1
    assert s.slack.thread_status(channel, root) == ""  # no "is revising…" left behind

    s.say("Fresh question", channel, thread_ts=root)
    (final,) = s.wait_finals(channel, root, 1)

    later = [e for e in evaluations(s.thread(channel, root)) if run_id(e) != run_id(doomed)]
    assert [label(e) for e in later] == ["1/3", "2/3", "3/3"]
    assert len({run_id(e) for e in later}) == 1
    assert "Rubric satisfied (3/3)" in final.all_text and f"Attempt {PASSING_ATTEMPT}" in final.all_text
