"""The thread runner: per-thread order, cross-thread concurrency, draining, and what a run posts.

Scheduling is tested with plain jobs; runs use the real agent (langchain + RubricMiddleware) with
scripted models, the real SQLite store, and a real Slack client talking to the local Slack stand-in.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

import aiohttp
import httpx
import openai
import pytest
import sqlalchemy.exc
from langchain_core.messages import AIMessage
from sqlalchemy import Engine, event

from bot.agent.worker import agent_config
from bot.db.runs import RunLease
from bot.db.schema import FINAL_STEP
from bot.material.files import shared_files
from bot.material.reader import MaterialReader
from bot.material.sources import Sources
from bot.queue.jobs import MAX_ATTEMPTS, Abandoned, JobKind, JobPayload
from bot.review.calibration import calibration_source
from bot.sessions import stop
from bot.slack.conversation import UserMessage
from bot.threads import runner_base
from bot.threads.progress import WORKING_REACTION
from bot.threads.runner import ThreadRunner
from bot.threads.runner_base import RunnerPorts
from bot.trust.thresholds import trust_source
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from bot.workspaces.clients import WorkspaceClients
from tests.bot.review.test_review_flow import NamedEditors
from tests.bot.threads.runner_harness import TOKEN, Harness, open_harness
from tests.grading.scripted import answers, grade_call, grader_wanting, payload_of

T1 = Workspace("T1")
"""The workspace the tests' rows are filed under."""

RUBRIC = "- Names the capital\n- Mentions the river"
EVENT_TIMEOUT = 10.0  # a generous bound so a broken scheduler fails instead of hanging


# -- ThreadRunner with the real agent --------------------------------------------------------------


@pytest.fixture
async def harness(tmp_path) -> AsyncIterator[Harness]:
    async with open_harness(tmp_path) as opened:
        yield opened


async def test_a_run_posts_each_iteration_then_the_revised_answer(harness):
    runner = harness.use(answers("Paris.", "Paris, on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")

    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    posted = harness.thread(request.ts)
    kinds = [m.event_type for m in posted]
    assert kinds == ["rubric_evaluation", "rubric_evaluation", "rubric_final"]
    first, second, final = posted
    assert "1/3" in first.all_text and "No river named." in first.all_text
    assert "2/3" in second.all_text
    assert "Rubric satisfied" in final.all_text and "Paris, on the Seine." in final.all_text
    assert re.search(r"Tokens this run: [\d,]+ in", final.all_text)
    # The evaluation messages are recorded for reviews, with the rubric they were graded against.
    run_id = first.metadata["event_payload"]["grading_run_id"]
    record = await harness.store.get_evaluation(T1, run_id, 0)
    assert record is not None and record.message_ts == first.ts and record.rubric_text == RUBRIC
    # The thread's status said what was happening at each step, and is gone.
    assert statuses(harness) == [
        "is writing a draft…",
        "is grading iteration 1/3…",
        "is revising…",
        "is grading iteration 2/3…",
    ]  # the answer's post takes the status off: no call to clear it
    assert {c.args["thread_ts"] for c in harness.slack.calls("assistant.threads.setStatus")} == {request.ts}
    assert harness.slack.thread_status("C1", request.ts) == ""
    assert not [c for c in harness.slack.calls() if c.method.startswith("reactions.")]


async def test_a_request_whose_acknowledgement_is_cancelled_while_it_is_claimed_is_still_answered(harness):
    # A claim commits in a thread of its own on SQLite: the request it claimed must be queued even
    # if what waits for it (Slack's request, the process stopping) is cancelled meanwhile.
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")

    acknowledging = asyncio.create_task(runner.submit_request(request))
    await asyncio.sleep(0)  # the claim is under way in its thread
    acknowledging.cancel()

    async def answered() -> None:
        while not any(m.event_type == "rubric_final" for m in harness.thread(request.ts)):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(answered(), EVENT_TIMEOUT)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert [m.event_type for m in harness.thread(request.ts)] == ["rubric_evaluation", "rubric_final"]
    assert not await harness.store.claim(*request.dedupe_keys)  # claimed once, answered once


@pytest.fixture
def no_stop_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop watch asks nothing within a run (on a busy machine a run can take a poll's second):
    what a test counts is the run's own statements."""
    monkeypatch.setattr(stop, "STOP_POLL_SECONDS", EVENT_TIMEOUT * 10)


async def statements_of_a_revised_run(harness: Any, runner: Any, request: Any, starting: str) -> list[str]:
    """The statements starting with `starting` that `request`'s run sent, on every engine (on SQLite
    most of the store's transactions run on its SQLite thread's synchronous engine); the run is
    checked to have posted two iterations and its ending."""
    sent: list[str] = []

    def count(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith(starting):
            sent.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        await runner.submit_request(request)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert [m.event_type for m in harness.thread(request.ts)] == [
        "rubric_evaluation",
        "rubric_evaluation",
        "rubric_final",
    ]
    return sent


@pytest.mark.usefixtures("no_stop_polls")
async def test_a_run_writes_once_as_it_starts_once_per_iteration_and_once_as_it_ends(harness):
    runner = harness.use(answers("Paris.", "Paris, on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")
    # How the store starts each transaction on SQLite: "BEGIN IMMEDIATE" to write, else "BEGIN".
    transactions = await statements_of_a_revised_run(harness, runner, request, "BEGIN")
    # Queued (claim, thread, run), started, two iterations (each: its intent before it is posted,
    # then its message and evaluation), ended (closing message and status).
    assert transactions.count("BEGIN IMMEDIATE") == 7
    # Besides, whether the thread's data is still kept, as the job starts and as it ends: nothing
    # else is read apart from these writes.
    assert transactions.count("BEGIN") == 2
    # What the last one recorded: how the run ended, and its closing message in the ledger.
    assert [status for _, status, _ in harness.runs()] == ["satisfied"]
    run = await harness.store.request_run(T1, "C1", request.ts)
    assert run is not None
    final = harness.thread(request.ts)[-1]
    assert [(p.step, p.message_ts) for p in await harness.store.posted_messages(run.run_id)][-1] == (
        "final",
        final.ts,
    )


@pytest.mark.usefixtures("no_stop_polls")
async def test_a_run_reads_its_rubric_version_team_examples_and_trust_thresholds_once(harness):
    store = harness.store
    runner = harness.use(
        answers("Paris.", "Paris, on the Seine."),
        grader_wanting("Seine"),
        calibration=calibration_source(store, NamedEditors()),
        trust=trust_source(store),
    )
    await store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    await store.set_trust_level(T1, "C1", 0.9, "U9")
    request = harness.message("What is the capital of France?")
    reads = await statements_of_a_revised_run(harness, runner, request, "SELECT")

    def reads_of(table: str) -> int:
        return sum(f"FROM {table} " in statement for statement in reads)

    # Two iterations, each graded with the team's examples under the channel's trust level: what
    # the run reads for them is read as it starts (the channel's rubric with its version's number,
    # in one query; the channel's review modes) or as its first grading does (examples, level,
    # thresholds), not again.
    assert len([statement for statement in reads if "channel_rubric" in statement]) == 1
    tables = ("channel_rubric_versions", "review_modes", "reviews", "trust_levels")
    assert {table: reads_of(table) for table in tables} == dict.fromkeys(tables, 1)
    # Whether someone asked to stop the run is read with the run's row its start writes anyway.
    assert not [statement for statement in reads if statement.startswith("SELECT runs.stopped_by FROM")]
    first, second = [
        await store.get_evaluation(T1, m.metadata["event_payload"]["grading_run_id"], n)
        for n, m in enumerate(harness.thread(request.ts)[:2])
    ]
    assert first is not None and second is not None
    assert first.provenance["rubric_version"] == second.provenance["rubric_version"] == "v1"


async def test_items_the_grader_flagged_outside_the_rubric_are_posted_and_stored(harness):
    def grader(messages: list[Any]) -> AIMessage:
        criteria = [
            {"name": "Names the capital", "passed": True},
            {"name": "Mentions the river", "passed": True},
            {"name": "Gives the population", "passed": False, "gap": "No population given."},
        ]
        return grade_call(
            "RubricGrade", {"result": "needs_revision", "explanation": "Hm.", "criteria": criteria}
        )

    runner = harness.use(answers("Paris, on the Seine."), grader)
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")

    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    evaluation, final = harness.thread(request.ts)
    assert "The grader also flagged" in evaluation.all_text
    assert "❌ Gives the population\n> No population given." in evaluation.all_text
    assert "Rubric satisfied" in final.all_text
    stored = await harness.store.get_evaluation(T1, evaluation.metadata["event_payload"]["grading_run_id"], 0)
    assert stored is not None
    assert [item["name"] for item in stored.evaluation["unmatched"]] == ["Gives the population"]


def statuses(harness: Harness) -> list[str]:
    return [c.args["status"] for c in harness.slack.calls("assistant.threads.setStatus")]


async def test_where_the_thread_status_is_refused_the_request_gets_the_reaction_instead(harness):
    runner = harness.use(answers("Paris.", "Paris, on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")
    harness.slack.error_next("assistant.threads.setStatus", "missing_scope")

    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert [m.event_type for m in harness.thread(request.ts)][-1] == "rubric_final"
    assert statuses(harness) == ["is writing a draft…"]  # refused once, not asked again this run
    assert [
        (c.method, c.args["name"]) for c in harness.slack.calls() if c.method.startswith("reactions.")
    ] == [
        ("reactions.add", WORKING_REACTION),
        ("reactions.remove", WORKING_REACTION),
    ]
    assert harness.slack.reactions("C1", request.ts) == set()


async def test_follow_up_is_graded_against_the_threads_rubric_not_a_newer_channel_default(harness):
    runner = harness.use(answers("Paris on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    first = harness.message("Capital of France?")
    await runner.submit_request(first)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    await harness.store.set_channel_rubric(T1, "C1", "- Something else entirely", "U9")

    await runner.submit_request(harness.message("And again, please", thread_ts=first.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert harness.grader is not None
    payloads = [payload_of(call) for call in harness.grader.calls]
    assert len(payloads) == 2
    assert "Mentions the river" in payloads[1] and "Something else" not in payloads[1]


async def test_rubric_message_replaces_the_threads_rubric(harness):
    runner = harness.use(answers("Paris."), grader_wanting("never"))
    root = harness.message("rubric: ...")

    await runner.submit_rubric(root, "- Is exactly one word")
    await runner.submit_request(harness.message("Capital of France?", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    posted = harness.thread(root.ts)
    assert "Is exactly one word" in posted[0].all_text  # the confirmation lists the criterion
    assert harness.grader is not None and harness.grader.calls
    assert "Is exactly one word" in payload_of(harness.grader.calls[0])
    state = await harness.agent.aget_state(agent_config(root.thread_id))
    assert state.values["rubric"] == "- Is exactly one word"


async def test_a_rubric_that_does_not_parse_leaves_the_old_one(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    root = harness.message("rubric: ...")
    await runner.submit_rubric(root, RUBRIC)

    await runner.submit_rubric(harness.message("rubric:", thread_ts=root.ts), "")
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert "didn't parse" in harness.thread(root.ts)[-1].all_text
    state = await harness.agent.aget_state(agent_config(root.thread_id))
    assert state.values["rubric"] == RUBRIC


async def test_without_a_rubric_the_answer_is_plain_with_a_hint(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    request = harness.message("Capital of France?")

    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (final,) = harness.thread(request.ts)
    assert "Paris." in final.all_text and "rubric:" in final.all_text
    assert harness.grader is not None and harness.grader.calls == []


async def test_a_bare_mention_names_the_channels_default_rubric_and_asks_for_the_request(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    mention = harness.message("")

    await runner.ask_for_request(mention)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (prompt,) = harness.thread(mention.ts)
    assert "What should I do?" in prompt.all_text
    assert "this channel's default rubric" in prompt.all_text
    assert "Names the capital" in prompt.all_text and "Mentions the river" in prompt.all_text
    assert "No rubric here" not in prompt.all_text and "wasn't graded" not in prompt.all_text
    assert harness.grader is not None and harness.grader.calls == []  # nothing was run


async def test_a_bare_mention_after_a_rubric_message_names_the_threads_new_rubric(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    root = harness.message("rubric: - Is exactly one word")

    await runner.submit_rubric(root, "- Is exactly one word")
    await runner.ask_for_request(harness.message("", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    _, prompt = harness.thread(root.ts)
    assert "this thread's rubric" in prompt.all_text and "Is exactly one word" in prompt.all_text
    assert "Names the capital" not in prompt.all_text


async def test_a_bare_mention_without_any_rubric_says_how_to_set_one(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    mention = harness.message("")

    await runner.ask_for_request(mention)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (prompt,) = harness.thread(mention.ts)
    assert "What should I do?" in prompt.all_text
    assert "no rubric here yet" in prompt.all_text and "/rubric set" in prompt.all_text


async def test_cap_shows_the_best_iteration_labelled(harness):
    def grader(messages: list[Any]) -> AIMessage:
        latest = payload_of(messages).rsplit("[assistant]", 1)[-1]
        good = "good" in latest
        criteria = [
            {"name": "Names the capital", "passed": good, "gap": "" if good else "Vague."},
            {"name": "Mentions the river", "passed": False, "gap": "No river."},
        ]
        return grade_call(
            "RubricGrade", {"result": "needs_revision", "explanation": "Not yet.", "criteria": criteria}
        )

    runner = harness.use(answers("draft one", "the good one", "draft three"), grader)
    root = harness.message("rubric: ...")
    await runner.submit_rubric(root, RUBRIC)
    await runner.submit_request(harness.message("Capital?", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    final = harness.thread(root.ts)[-1]
    assert final.event_type == "rubric_final"
    assert "Max iterations reached (3/3)" in final.all_text
    assert "iteration 2 of 3" in final.all_text and "the good one" in final.all_text
    assert "draft three" not in final.all_text


def replying(*replies: str | Exception) -> Callable[[list[Any]], str]:
    """A worker that gives these replies in turn, raising those that are errors."""
    left = list(replies)

    def worker(messages: list[Any]) -> str:
        reply = left.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return worker


async def test_a_model_failure_is_reported_and_the_thread_keeps_working(harness, caplog):
    worker = replying(RuntimeError("model exploded for key sk-proj-SECRET"), "Second time lucky.")
    runner = harness.use(worker, grader_wanting("x"))
    first = harness.message("Capital?")
    await runner.submit_request(first)
    await runner.submit_request(harness.message("Try again", thread_ts=first.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    error, answer = harness.thread(first.ts)
    # The notice names a reference, never the error's text; the log line with the text has it.
    assert "The model failed" in error.all_text and "model exploded" not in error.all_text
    assert "sk-proj" not in error.all_text
    reference = re.search(r"ref ([0-9a-f]{6})", error.all_text)
    assert reference is not None
    (logged,) = [r for r in caplog.records if f"ref {reference.group(1)}" in r.getMessage()]
    assert "sk-proj-SECRET" in logged.getMessage()
    assert "Second time lucky." in answer.all_text
    assert [status for _, status, _ in harness.runs()] == ["error", "answered"]


async def test_the_tokens_a_failed_run_spent_count_towards_the_channels_budget(harness):
    # The first draft and its grading are done and checkpointed; the revision's model call fails.
    runner = harness.use(replying("Paris.", RuntimeError("model exploded")), grader_wanting("Seine"))
    assert harness.worker is not None and harness.grader is not None
    harness.worker.usage, harness.grader.usage = (30, 10), (5, 3)
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("Capital?")
    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert "The model failed" in harness.thread(request.ts)[-1].all_text
    assert [status for _, status, _ in harness.runs()] == ["error"]
    (today,) = await harness.store.usage(T1, "C1", datetime.now(UTC).replace(hour=0, minute=0))
    assert (today.requests, today.tokens) == (1, 40 + 8)


async def test_a_run_the_database_fails_on_every_attempt_is_named_the_databases_failure(
    harness, caplog, monkeypatch
):
    monkeypatch.setattr(runner_base, "DATABASE_RETRY_SECONDS", 0.01)
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    request = harness.message("Capital?")
    await runner.submit_request(request)  # claimed and queued; the job has not started yet
    # Another connection holds the database's write lock: each attempt's first write fails after
    # SQLite's busy timeout ("database is locked"), the last one too.
    with closing(sqlite3.connect(harness.db_path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING):
            await wait_until(lambda: harness.thread(request.ts), timeout=EVENT_TIMEOUT * 6)
        holder.execute("ROLLBACK")
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (notice,) = harness.thread(request.ts)
    assert "The bot's database failed, so this request could not be finished" in notice.all_text
    assert "model" not in notice.all_text.lower()
    assert f"given up after {MAX_ATTEMPTS} attempts, the database failing each time" in caplog.text
    assert caplog.text.count("resuming it from its checkpoint") == MAX_ATTEMPTS - 1


async def test_a_job_the_database_fails_as_it_starts_is_tried_again_once_it_answers(
    harness, caplog, monkeypatch
):
    monkeypatch.setattr(runner_base, "DATABASE_RETRY_SECONDS", 0.01)
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    looked_up = harness.store.has_thread
    failures = [sqlalchemy.exc.OperationalError("SELECT", {}, Exception("server closed the connection"))]

    async def has_thread(thread: ThreadKey) -> bool:  # the database restarting as the job starts
        if failures:
            raise failures.pop()
        return await looked_up(thread)

    monkeypatch.setattr(harness.store, "has_thread", has_thread)
    message = harness.message("rubric: ...")

    with caplog.at_level(logging.WARNING):
        await runner.submit_rubric(message, RUBRIC)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (confirmation,) = harness.thread(message.ts)
    assert "Rubric set" in confirmation.all_text
    assert "a rubric job: the database failed (server closed the connection); trying it again" in caplog.text


def hung_call() -> openai.APITimeoutError:
    """What langchain-openai raises when the provider sends nothing within the client's timeout."""
    return openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))


async def test_a_model_call_that_times_out_ends_the_run_in_words_and_the_next_request_runs(harness, caplog):
    replies: list[Any] = [hung_call(), "Second time lucky."]

    def worker(messages: list[Any]) -> str:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    runner = harness.use(worker, grader_wanting("x"), model_timeout=7.5)
    first = harness.message("Capital?")
    await runner.submit_request(first)
    await runner.submit_request(harness.message("Try again", thread_ts=first.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    notice, answer = harness.thread(first.ts)
    assert "The model did not answer within 7.5 s" in notice.all_text
    assert "Traceback" not in caplog.text  # an expected outcome, not a crash
    assert "Second time lucky." in answer.all_text
    assert harness.slack.reactions("C1", first.ts) == set()
    assert [status for _, status, _ in harness.runs()] == ["timed_out", "answered"]


async def test_a_run_longer_than_the_run_timeout_is_ended_and_the_next_request_runs(harness):
    # The slow run is held until the test lets it go, so it outlasts any run timeout; the next
    # request runs under the default timeout, so a busy machine cannot time it out too.
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_worker(messages: list[Any]) -> str:  # a provider that answers each call, but the run drags on
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=EVENT_TIMEOUT)
        return "Too slow."

    timed = harness.use(slow_worker, grader_wanting("x"), run_timeout=0.3)
    first = harness.message("Slow one")
    try:
        await timed.submit_request(first)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)  # ended while its model call still hangs
        (notice,) = harness.thread(first.ts)
        assert "The model did not finish this request within 0.3 s" in notice.all_text

        runner = harness.use(answers("Quick answer."), grader_wanting("x"))
        await runner.submit_request(harness.message("Quick one", thread_ts=first.ts))
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    finally:
        release.set()

    notice, answer = harness.thread(first.ts)
    assert "Quick answer." in answer.all_text and "Too slow." not in answer.all_text
    assert harness.slack.reactions("C1", first.ts) == set()
    assert [status for _, status, _ in harness.runs()] == ["timed_out", "answered"]


async def test_an_answer_slack_never_took_is_recorded_and_logged_as_undelivered(harness, caplog):
    runner = harness.use(answers("Paris on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("Capital?")
    harness.slack.error_next("chat.postMessage", "channel_not_found", times=2)  # evaluation and answer

    with caplog.at_level(logging.WARNING):
        await runner.submit_request(request)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert harness.thread(request.ts) == []
    assert harness.runs() == [(request.ts, "satisfied", 1)]  # graded fine, never seen
    (lost,) = await harness.store.undelivered_runs(T1, "C1")
    assert lost.request_ts == request.ts
    assert f"thread {request.thread_id} ended satisfied, but its answer never reached" in caplog.text


async def test_slack_failures_are_retried_or_logged_without_losing_the_run(harness, caplog):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    request = harness.message("Capital?")
    harness.slack.fail_next("chat.postMessage", status=503)  # retried by the client
    harness.slack.error_next("assistant.threads.setStatus", "not_allowed")  # ⏳ instead …
    harness.slack.error_next("reactions.add", "missing_scope")  # … which fails too: logged

    with caplog.at_level(logging.WARNING):
        await runner.submit_request(request)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    (final,) = harness.thread(request.ts)
    assert "Paris." in final.all_text
    assert "missing_scope" in caplog.text
    assert TOKEN not in caplog.text


async def test_messages_slack_refuses_in_an_outage_are_posted_once_each_in_order_after_it(harness, caplog):
    runner = harness.use(answers("Paris.", "Paris on the Seine."), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("Capital?")
    harness.slack.begin_outage(503)

    with caplog.at_level(logging.WARNING):
        await runner.submit_request(request)
        # The run goes on while Slack is down; its messages wait until the test brings Slack back.
        await wait_until(lambda: "Slack refused a message for thread" in caplog.text)
        assert harness.thread(request.ts) == []
        harness.slack.end_outage()
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT * 3)

    thread = harness.thread(request.ts)
    assert [m.event_type for m in thread] == ["rubric_evaluation", "rubric_evaluation", "rubric_final"]
    assert "Paris on the Seine." in thread[-1].all_text
    assert harness.runs() == [(request.ts, "satisfied", 0)]


async def test_an_answer_slack_refuses_for_longer_than_the_retry_period_is_recorded_as_undelivered(
    harness, caplog
):
    runner = harness.use(answers("Paris on the Seine."), grader_wanting("Seine"), delivery_retry=1.0)
    request = harness.message("Capital?")
    harness.slack.begin_outage(503)

    with caplog.at_level(logging.WARNING):
        await runner.submit_request(request)
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT * 3)

    assert harness.thread(request.ts) == []
    assert harness.runs() == [(request.ts, "answered", 1)]
    assert "Slack refused them for 1s" in caplog.text


async def submit_outside_a_run(runner: ThreadRunner, harness: Harness, kind: str) -> UserMessage:
    """Queue a job whose one message is not a run's: a rubric's confirmation, a notice, a prompt."""
    message = harness.message("rubric: ..." if kind == "rubric" else "Hello?")
    if kind == "rubric":
        await runner.submit_rubric(message, RUBRIC)
    elif kind == "notice":
        await runner.submit_notice(message, "That message is too long for me", "Shorten it.")
    else:
        await runner.ask_for_request(message)
    return message


@pytest.mark.parametrize(
    ("kind", "says"),
    [("rubric", "Rubric set"), ("notice", "too long for me"), ("prompt", "what should I do")],
)
async def test_a_reply_outside_a_run_that_slack_refuses_in_an_outage_is_posted_once_after_it(
    harness, caplog, kind, says
):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    harness.slack.begin_outage(503)

    with caplog.at_level(logging.WARNING):
        message = await submit_outside_a_run(runner, harness, kind)
        await wait_until(lambda: "Slack refused a message for thread" in caplog.text)
        assert harness.thread(message.ts) == []
        harness.slack.end_outage()
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT * 3)

    (reply,) = harness.thread(message.ts)
    assert says.lower() in reply.all_text.lower()


async def test_a_reply_slack_refuses_for_longer_than_the_retry_period_is_given_up_and_logged(harness, caplog):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"), delivery_retry=1.0)
    harness.slack.begin_outage(503)

    with caplog.at_level(logging.WARNING):
        message = await submit_outside_a_run(runner, harness, "rubric")
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT * 3)
        harness.slack.end_outage()

    assert harness.thread(message.ts) == []
    gave_up = f"gave up posting 1 message(s) in thread {message.thread_id}: Slack refused them for 1s"
    assert gave_up in caplog.text


async def wait_until(condition: Any, timeout: float = EVENT_TIMEOUT * 3) -> None:
    """Wait (bounded by `timeout`) until `condition()` holds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def crashed_run(harness: Harness, request: UserMessage) -> None:
    """What a process that died mid-run leaves: a recorded run in a thread the bot knows, and ⏳ on
    the request."""
    await harness.store.add_thread(request.thread)
    await harness.store.start_run(request.thread, request.ts)
    await harness.client.reactions_add(channel="C1", timestamp=request.ts, name=WORKING_REACTION)


async def test_at_start_up_each_run_a_crash_cut_short_is_reported_at_once(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    lost = [harness.message("Capital?"), harness.message("River?")]
    for request in lost:
        await crashed_run(harness, request)
    started = datetime.now(UTC)

    assert await runner.report_abandoned_runs(started) == 2
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    assert await runner.report_abandoned_runs(started) == 0  # once

    for request in lost:
        (notice,) = harness.thread(request.ts)
        assert "interrupted by a restart" in notice.all_text and "Reply in this thread" in notice.all_text
        assert harness.slack.reactions("C1", request.ts) == set()
    assert [status for _, status, _ in harness.runs()] == ["interrupted", "interrupted"]


async def test_a_start_up_notice_slack_refused_is_given_when_the_thread_is_next_used(harness):
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    root = harness.message("Capital?")
    await crashed_run(harness, root)
    harness.slack.error_next("chat.postMessage", "service_unavailable")

    await runner.report_abandoned_runs(datetime.now(UTC))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    assert harness.thread(root.ts) == []

    await runner.submit_request(harness.message("Hello?", thread_ts=root.ts))
    await runner.submit_request(harness.message("Again?", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    texts = [m.all_text for m in harness.thread(root.ts)]
    assert sum("interrupted" in t for t in texts) == 1
    assert "interrupted" in texts[0]


async def test_drain_marks_a_run_that_outlives_the_grace_as_interrupted(harness):
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    working = threading.Event()

    def slow_worker(messages: list[Any]) -> str:
        # Runs in langchain's executor thread; blocks until the test lets it go.
        working.set()
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=EVENT_TIMEOUT)
        return "Too late."

    runner = harness.use(slow_worker, grader_wanting("x"))
    running = harness.message("Slow one")
    queued = harness.message("Queued", thread_ts=running.ts)
    await runner.submit_request(running)
    await runner.submit_request(queued)
    assert await asyncio.to_thread(working.wait, EVENT_TIMEOUT)  # the first run is under way

    await runner.drain(grace=0.2)
    release.set()

    texts = [m.all_text for m in harness.thread(running.ts)]
    assert sum("restarting" in t for t in texts) == 2  # one for each request
    assert all("Too late." not in t for t in texts)
    assert await runner.report_abandoned_runs(datetime.now(UTC)) == 0  # told already


# -- a run cut short and resumed (a durable queue runs it again as a later attempt) ---------------


class HeldQueue:
    """A durable queue whose jobs the test runs itself, as whichever attempt it likes."""

    durable = True
    busy = 0

    def __init__(self) -> None:
        self.kinds: dict[str, JobKind[Any]] = {}
        self.jobs: list[JobPayload] = []

    def register(self, kind: JobKind[Any]) -> None:
        self.kinds[kind.name] = kind

    async def start(self) -> None:
        pass

    async def submit(self, thread: ThreadKey, payload: JobPayload) -> bool:
        self.jobs.append(payload)
        return True

    async def submit_claimed(self, jobs: list[tuple[ThreadKey, JobPayload]], connection: Any) -> None:
        self.jobs.extend(payload for _, payload in jobs)

    async def drain(self, grace: float) -> None:
        pass

    async def attempt(self, number: int) -> None:
        payload = self.jobs[-1]
        await self.kinds[payload.kind].run(payload, number)


def revision_held_until(release: threading.Event, started: threading.Event) -> Any:
    """Drafts "Paris."; the revision waits for `release` (the model is slow), then names the Seine."""
    calls = itertools.count()

    def script(messages: list[Any]) -> str:
        if next(calls) == 0:
            return "Paris."
        started.set()
        release.wait(EVENT_TIMEOUT)
        return "Paris, on the Seine."

    return script


async def test_a_run_cut_short_resumes_from_its_checkpoint_and_posts_each_message_once(harness):
    release, revising = threading.Event(), threading.Event()
    worker = revision_held_until(release, revising)
    queue = HeldQueue()
    harness.use(worker, grader_wanting("Seine"))
    runner = ThreadRunner(
        RunnerPorts(
            agent=harness.agent, store=harness.store, clients=WorkspaceClients(harness.client), queue=queue
        )
    )
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")
    await runner.submit_request(request)

    first = asyncio.create_task(queue.attempt(0))
    await asyncio.wait_for(asyncio.to_thread(revising.wait), EVENT_TIMEOUT)
    first.cancel()  # the process running it dies while the worker revises
    with pytest.raises(asyncio.CancelledError):
        await first
    release.set()
    assert [m.event_type for m in harness.thread(request.ts)] == ["rubric_evaluation"]

    await queue.attempt(1)

    posted = harness.thread(request.ts)
    assert [m.event_type for m in posted] == ["rubric_evaluation", "rubric_evaluation", "rubric_final"]
    assert "1/3" in posted[0].all_text and "2/3" in posted[1].all_text
    assert "Seine" in posted[2].all_text and "2/3" in posted[2].all_text
    assert not any("restarting" in m.all_text for m in posted)  # nothing was lost: no notice
    assert len(harness.grader.calls) == 2  # the first iteration was not graded again
    assert harness.runs() == [(request.ts, "satisfied", 0)]


async def test_an_attempt_after_one_that_posted_everything_adds_nothing(harness):
    queue = HeldQueue()
    harness.use(answers("Paris.", "Paris, on the Seine."), grader_wanting("Seine"))
    runner = ThreadRunner(
        RunnerPorts(
            agent=harness.agent, store=harness.store, clients=WorkspaceClients(harness.client), queue=queue
        )
    )
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    request = harness.message("What is the capital of France?")
    await runner.submit_request(request)
    await queue.attempt(0)
    posted = harness.thread(request.ts)

    await queue.attempt(1)  # its process died after the last post, before the job was marked done

    assert harness.thread(request.ts) == posted
    assert len(harness.grader.calls) == 2


async def test_a_run_cut_short_too_often_ends_with_a_notice(harness):
    queue = HeldQueue()
    harness.use(answers("Paris."), grader_wanting("Seine"))
    runner = ThreadRunner(
        RunnerPorts(
            agent=harness.agent, store=harness.store, clients=WorkspaceClients(harness.client), queue=queue
        )
    )
    request = harness.message("What is the capital of France?")
    await runner.submit_request(request)

    payload = queue.jobs[-1]
    await queue.kinds[payload.kind].abandon(payload, Abandoned.GAVE_UP)

    (notice,) = harness.thread(request.ts)
    assert "could not finish" in notice.all_text and "Send it again" in notice.all_text
    assert harness.runs() == [(request.ts, "error", 0)]


async def test_a_resumed_run_reads_nothing_again_and_still_names_what_was_not_read(harness):
    release, revising = threading.Event(), threading.Event()
    queue = HeldQueue()
    harness.use(revision_held_until(release, revising), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    notes = harness.slack.add_file("notes.txt", b"The river is the Seine", "text/plain")
    photo = harness.slack.add_file("photo.png", b"\x89PNG\r\n\x1a\n", "image/png")
    async with aiohttp.ClientSession() as session:
        reader = MaterialReader(
            session, api_url=harness.slack.api_url, thread_chars=1_000, max_file_bytes=1_000
        )
        ports = RunnerPorts(
            agent=harness.agent,
            store=harness.store,
            clients=WorkspaceClients(harness.client),
            queue=queue,
            reader=reader,
        )
        runner = ThreadRunner(ports)
        request = harness.message("What is the capital of France?")
        await runner.submit_request(request, Sources(files=shared_files({"files": [notes, photo]})))

        first = asyncio.create_task(queue.attempt(0))
        await asyncio.wait_for(asyncio.to_thread(revising.wait), EVENT_TIMEOUT)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        release.set()
        await queue.attempt(1)

    final = harness.thread(request.ts)[-1]
    assert final.event_type == "rubric_final"
    assert "Not read: *photo.png*: an image" in final.all_text
    assert len(harness.slack.calls("files.download")) == 1  # the text file, by the first attempt only


async def test_a_run_given_up_for_the_database_after_another_process_took_it_over_ends_once(harness):
    """The two-endings case: a process cut off from the database gives its run up after its last
    attempt, while another process took the run over (its job re-queued) and answered it. The
    give-up notice goes through the ledger's check like an answer: the thread shows one ending, the
    other process's, and the run stays answered."""
    runner = harness.use(answers("Paris."), grader_wanting("Paris"))
    request = harness.message("Capital?")
    store = harness.store
    run_id = await store.start_run(request.thread, request.ts)
    cut_off = RunLease(await store.take_run(run_id), taking=False)  # the first process's attempt
    taking_over = await runner._delivery(
        harness.client, request, run_id, resumed=True, lease=await store.take_run(run_id)
    )
    await taking_over.post(FINAL_STEP, 0, {"text": "The answer is Paris."})
    await store.finish_run(run_id, "answered", 40, taking_over.unrecorded())

    lost = sqlalchemy.exc.OperationalError("INSERT", {}, Exception("server closed the connection"))
    await runner._tell_database_failed(harness.client, request, run_id, lost, cut_off)

    assert [m.all_text for m in harness.thread(request.ts)] == ["The answer is Paris."]
    assert [status for _, status, _ in harness.runs()] == ["answered"]
