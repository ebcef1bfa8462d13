"""Two `rubric-bot serve` processes on one PostgreSQL database, with requests spread over both as a
load balancer would spread them: runs keep their order per thread, a delivery reaches both and runs
once, settings made through one are seen by the other, and a process killed mid-run has its run
finished by the other from the conversation's checkpoint. And a `rubric-bot worker` beside one
`serve` runs what that process has no room for.
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Iterator

import psycopg
import pytest

from tests.e2e.conftest import (
    BOT_COMMAND,
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    Service,
    evaluations,
    finals,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import (
    DRAFT_ANSWER,
    ChatRequest,
    Script,
    fixed_grader,
    scripted_revision,
)

pytestmark = pytest.mark.postgres

STALLED_AFTER = 1.5
"""Heartbeat timeout of the bots under test: a killed one's run resumes elsewhere within ~2 s."""
SLOW_MODEL_SECONDS = 2.0
"""Model latency while a run must still be in flight when its process is killed."""


@pytest.fixture
def pair(start_bot, slack_api, model_api, postgres_url) -> Iterator[Service]:
    env = {
        "RUBRIC_BOT_DB": postgres_url,
        "RUBRIC_BOT_STALLED_AFTER": str(STALLED_AFTER),
        "RUBRIC_BOT_SHUTDOWN_GRACE": "0.5",
    }
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    yield Service(slack_api, model_api, start_bot(env=env), (start_bot(env=env),))


def answering_each_question() -> Script:
    """The worker answers "Answer to <question>", so each request shows which answers it saw."""

    def worker(request: ChatRequest) -> str:
        return f"Answer to {request.last_user_text.strip()}"

    return Script(worker, fixed_grader(CRITERIA))


def wait_for_rows(url: str, table: str, count: int) -> None:
    """Wait until the bot's `table` holds `count` rows."""

    def recorded() -> bool:
        with psycopg.connect(url) as connection:
            row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
            return row is not None and row[0] >= count

    wait_for(recorded, RUN_TIMEOUT, message=f"{count} row(s) in {table}")


def test_a_threads_follow_ups_run_in_order_whichever_process_receives_them(pair, postgres_url):
    root = pair.mention(f"rubric:\n{RUBRIC}", "C1")
    pair.wait_thread("C1", root, lambda messages: any("Rubric set" in m.all_text for m in messages))
    pair.model.worker, pair.model.grader = answering_each_question()
    pair.model.latency = 0.3  # long enough for runs of one thread to overlap if they could

    questions = [f"Question {number}" for number in range(1, 5)]
    for number, question in enumerate(questions):
        pair.say(question, "C1", root, via=number % 2)
        # The order is the order the bot queued them: a few ms after Slack's delivery, unlike a
        # person's messages, a test's could otherwise pass each other between the two processes.
        wait_for_rows(postgres_url, "runs", number + 1)  # the bot records a run as it queues it
    pair.wait_thread("C1", root, lambda messages: len(finals(messages)) == len(questions))

    answers = [m.all_text for m in finals(pair.thread("C1", root))]
    assert [f"Answer to {q}" in answer for q, answer in zip(questions, answers, strict=True)] == [True] * 4
    for earlier, later in itertools.pairwise(questions):
        (request,) = [r for r in pair.model.requests("worker") if r.last_user_text.strip() == later]
        assert f"Answer to {earlier}" in request.all_text  # the earlier run had finished


def test_the_same_event_delivered_to_both_processes_runs_once(pair):
    root = sr.new_ts()
    delivery = sr.event_callback(sr.app_mention(f"rubric:\n{RUBRIC}", "C2", root))
    pair.send(delivery)
    pair.wait_thread("C2", root, lambda messages: any("Rubric set" in m.all_text for m in messages))
    request = sr.event_callback(sr.app_mention("Count me once", "C2", sr.new_ts(), root))
    senders = [threading.Thread(target=pair.send, args=(request,), kwargs={"via": bot}) for bot in (0, 1)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    # A sentinel after it in the same thread: anything that ran twice would be answered first.
    pair.mention("Sentinel", "C2", root, via=1)
    pair.wait_thread("C2", root, lambda messages: len(finals(messages)) == 2)

    thread = pair.thread("C2", root)
    assert sum("Rubric set" in m.all_text for m in thread) == 1
    assert len(evaluations(thread)) == 4  # one revised run each: the request's and the sentinel's
    drafts = [r for r in pair.model.requests("worker") if r.last_user_text.strip() == "Count me once"]
    assert len(drafts) == 1


def test_a_channel_rubric_set_through_one_process_grades_a_request_through_the_other(pair):
    pair.set_channel_rubric("C3")

    root = pair.mention("Is coffee healthy?", "C3", via=1)
    pair.wait_thread("C3", root, lambda messages: len(finals(messages)) == 1)

    first = evaluations(pair.thread("C3", root))[0]
    assert all(criterion in first.all_text for criterion in CRITERIA)


def test_a_process_killed_mid_run_has_the_run_finished_by_the_other_from_its_checkpoint(pair, postgres_url):
    pair.set_channel_rubric("C4", via=1)
    pair.model.latency = SLOW_MODEL_SECONDS
    root = pair.mention("Is coffee healthy?", "C4")
    # The first iteration is graded and posted; the revision is in flight when its process dies.
    pair.wait_thread("C4", root, lambda messages: len(evaluations(messages)) == 1)
    # Killed after its ledger has the post (killed between Slack's answer and that write, a
    # post can show twice: the one window the README names).
    wait_for_rows(postgres_url, "posted", 1)
    running = [bot for bot in pair.bots if "Starting job rubric_bot.request" in bot.stderr_text()]
    assert len(running) == 1
    running[0].stop(signal.SIGKILL)
    pair.model.latency = 0.0

    pair.wait_thread("C4", root, lambda messages: len(finals(messages)) == 1)

    thread = pair.thread("C4", root)
    assert [m.event_type for m in thread] == ["rubric_evaluation", "rubric_evaluation", "rubric_final"]
    assert "1/3" in thread[0].all_text and "2/3" in thread[1].all_text
    drafts = [r for r in pair.model.requests("worker") if DRAFT_ANSWER not in r.all_text]
    assert len(drafts) == 1  # resumed from the checkpoint: the draft was not written again


def test_a_worker_process_runs_the_requests_serve_has_no_room_for(
    start_bot, slack_api, model_api, postgres_url, tmp_path
):
    env = {"RUBRIC_BOT_DB": postgres_url}
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    serving = start_bot(env=env, command=(*BOT_COMMAND, "--concurrency", "1"))
    worker_log = tmp_path / "bot-2.log"  # the second process start_bot starts
    worker = start_bot(
        env=env,
        command=(*BOT_COMMAND[:3], "worker"),
        ready=lambda: worker_log.exists() and "worker running" in worker_log.read_text(),
    )
    service = Service(slack_api, model_api, serving, (worker,))
    service.set_channel_rubric("C5")
    model_api.latency = 1.0  # the first run holds serve's only slot while the second is queued

    roots = [service.mention(f"Question {number}", "C5") for number in (1, 2)]
    for root in roots:
        service.wait_thread("C5", root, lambda messages: len(finals(messages)) == 1)

    assert "Starting job rubric_bot.request" in worker.stderr_text()
