"""Two `rubric-bot serve` processes on one PostgreSQL database, with requests spread over both as a
load balancer would spread them: runs keep their order per thread, a delivery reaches both and runs
once, settings made through one are seen by the other, and a process killed mid-run has its run
finished by the other from the conversation's checkpoint. And a `rubric-bot worker` beside one
`serve` runs what that process has no room for.

Nothing here waits for a clock: a run that must still be going is held by the model stand-in (a
revision it never answers), and a process is dead only once the test has killed it.
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
    run_messages,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import (
    DEFAULT_GAP,
    DRAFT_ANSWER,
    NO_ANSWER,
    REVISED_ANSWER,
    ChatRequest,
    Script,
    Silence,
    fixed_grader,
    scripted_revision,
)

pytestmark = pytest.mark.postgres

STALLED_AFTER = 30.0
"""Heartbeat timeout of the bots under test: generous, so a live process slowed down by a busy machine
is never taken for dead (and its run done twice). A process dies only when a test kills it, and the
test then dates its last heartbeat back (`heartbeat_stopped_long_ago`) rather than waiting this out;
the survivor's sweep, every third of it, finds the job."""


@pytest.fixture
def pair(postgres_url, start_bot, slack_api, model_api) -> Iterator[Service]:
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


def heartbeat_stopped_long_ago(url: str) -> None:
    """Date back the last heartbeat of the worker running a job, as if it had died an hour ago."""
    with psycopg.connect(url) as connection:
        connection.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' "
            "WHERE id IN (SELECT worker_id FROM procrastinate_jobs WHERE status = 'doing')"
        )


def holding_the_first_revision(script: Script, held: list[ChatRequest]) -> Script:
    """`script`, except that the first revision asked for is never answered (it is put in `held`)."""

    def worker(request: ChatRequest) -> str | Silence:
        revising = DRAFT_ANSWER in request.last_assistant_text or DEFAULT_GAP in request.last_user_text
        if revising and not held:
            held.append(request)
            return NO_ANSWER
        return script.worker(request)

    return Script(worker, script.grader)


def test_a_process_killed_mid_run_has_the_run_finished_by_the_other_from_its_checkpoint(pair, postgres_url):
    pair.set_channel_rubric("C4", via=1)
    held: list[ChatRequest] = []
    pair.model.worker, pair.model.grader = holding_the_first_revision(scripted_revision(CRITERIA), held)
    root = pair.mention("Is coffee healthy?", "C4")
    # The first iteration is graded and posted; its revision is held, so the run cannot end before
    # its process dies. Killed after its ledger has the post (killed between Slack's answer and
    # that write, a post can show twice: the one window the README names).
    wait_for(lambda: held, RUN_TIMEOUT, message="the revision to be asked for")
    pair.wait_thread("C4", root, lambda messages: len(evaluations(messages)) == 1)
    wait_for_rows(postgres_url, "posted", 1)
    (killed,) = [bot for bot in pair.bots if "Starting job rubric_bot.request" in bot.stderr_text()]
    (survivor,) = [bot for bot in pair.bots if bot is not killed]
    killed.stop(signal.SIGKILL)
    heartbeat_stopped_long_ago(postgres_url)

    pair.wait_thread("C4", root, lambda messages: len(finals(messages)) == 1)

    thread = pair.thread("C4", root)
    assert [m.event_type for m in thread] == run_messages(2)  # streamed: the survivor ended the stream
    first, second = evaluations(thread)
    assert "1/3" in first.all_text and "2/3" in second.all_text
    assert REVISED_ANSWER in finals(thread)[0].all_text  # the held revision was asked again, and answered
    assert killed.returncode == -signal.SIGKILL
    assert "Starting job rubric_bot.request" in survivor.stderr_text()  # the other process resumed it
    drafts = [r for r in pair.model.requests("worker") if DRAFT_ANSWER not in r.all_text]
    assert len(drafts) == 1  # resumed from the checkpoint: the draft was not written again


def test_a_worker_process_runs_the_requests_serve_has_no_room_for(
    start_bot, slack_api, model_api, postgres_url, tmp_path
):
    env = {"RUBRIC_BOT_DB": postgres_url}
    held: list[ChatRequest] = []
    model_api.worker, model_api.grader = holding_the_first_revision(scripted_revision(CRITERIA), held)
    serving = start_bot(env=env, command=(*BOT_COMMAND, "--concurrency", "1"))
    service = Service(slack_api, model_api, serving)
    service.set_channel_rubric("C5")
    held_root = service.mention("Question 1", "C5")
    wait_for(lambda: held, RUN_TIMEOUT, message="the first run's revision to be asked for")
    # serve, the only process yet, holds the run in its only slot; then a worker joins.
    worker_log = tmp_path / "bot-2.log"  # the second process start_bot starts
    worker = start_bot(
        env=env,
        command=(*BOT_COMMAND[:3], "worker"),
        ready=lambda: worker_log.exists() and "worker running" in worker_log.read_text(),
    )

    root = service.mention("Question 2", "C5")
    service.wait_thread("C5", root, lambda messages: len(finals(messages)) == 1)

    assert "Starting job rubric_bot.request" in worker.stderr_text()
    assert service.finals("C5", held_root) == []  # still held: serve had no room for Question 2
