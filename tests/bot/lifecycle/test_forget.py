"""Deleted and edited messages through the thread runner, with the real agent on a real SQLite file:
a request still queued is taken back or answered as edited, a request folded into the summary of
older turns takes the summary with it, and a deleted `rubric:` message takes the thread's rubric.

"Gone" is checked in every row of every table of the database (see `tests.e2e.stored_rows`) and in
what the models are sent next.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from bot.agent.worker import agent_config
from bot.lifecycle.erase import purge_tenant
from bot.lifecycle.forget import DROPPED_SUMMARY
from bot.slack.conversation import UserMessage
from bot.vocabulary.thread import MessageChange
from bot.vocabulary.workspace import Workspace
from tests.bot.threads.runner_harness import Harness, open_harness
from tests.e2e.stored_rows import tables_containing
from tests.grading.scripted import answers, grader_wanting

RUBRIC = "- Names the capital\n- Mentions the river"
SECRET = "sk-SECRET-91ac"
EVENT_TIMEOUT = 10.0


@pytest.fixture
async def harness(tmp_path) -> AsyncIterator[Harness]:
    async with open_harness(tmp_path) as opened:
        yield opened


def deleted(message: UserMessage) -> MessageChange:
    """The deletion of `message`, as `message_change` reads Slack's event."""
    return MessageChange(message.team, message.channel, message.thread_ts, message.ts, message.text)


def edited(message: UserMessage, text: str) -> MessageChange:
    return MessageChange(
        message.team, message.channel, message.thread_ts, message.ts, text, previous_text=message.text
    )


def sent(calls: list[list[BaseMessage]]) -> list[str]:
    """The text of each model call: everything the model was sent."""
    return ["\n".join(m.text for m in call) for call in calls]


def held_first_answer(release: threading.Event, started: threading.Event) -> Any:
    """A worker whose first answer waits for `release` (a slow model), so later requests queue."""
    calls = 0

    def script(messages: list[BaseMessage]) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            release.wait(EVENT_TIMEOUT)
        return "Paris, on the Seine."

    return script


async def queued_behind_a_slow_run(
    harness: Harness, text: str
) -> tuple[UserMessage, UserMessage, threading.Event]:
    """A run under way, and a request (saying `text`) queued behind it; the event releases the run."""
    release, started = threading.Event(), threading.Event()
    runner = harness.use(held_first_answer(release, started), grader_wanting("Seine"))
    await harness.store.set_channel_rubric(Workspace("T1"), "C1", RUBRIC, "U9")
    first = harness.message("What is the capital of France?")
    queued = harness.message(text, thread_ts=first.ts)
    await runner.submit_request(first)
    await runner.submit_request(queued)
    assert await asyncio.to_thread(started.wait, EVENT_TIMEOUT)
    return first, queued, release


async def test_a_request_deleted_while_queued_never_reaches_a_model(harness):
    first, queued, release = await queued_behind_a_slow_run(harness, f"My key is {SECRET}")
    runner = harness.runner
    assert runner is not None

    await runner.forget(deleted(queued))
    release.set()
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert harness.worker is not None and harness.grader is not None
    assert not [text for text in sent(harness.worker.calls + harness.grader.calls) if SECRET in text]
    assert [ts for ts, _, _ in harness.runs()] == [first.ts]  # the deleted request has no run
    assert sum(m.event_type == "rubric_final" for m in harness.thread(first.ts)) == 1
    assert not tables_containing(harness.db_path, SECRET)


async def test_a_request_edited_while_queued_is_answered_as_edited(harness):
    first, queued, release = await queued_behind_a_slow_run(harness, "Tell me about ORIGINALWORD")
    runner = harness.runner
    assert runner is not None

    await runner.revise(edited(queued, "Tell me about EDITEDWORD"))
    release.set()
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert harness.worker is not None
    worker_input = sent(harness.worker.calls)
    assert [text for text in worker_input if "EDITEDWORD" in text]
    assert not [text for text in worker_input if "ORIGINALWORD" in text]
    assert [ts for ts, _, _ in harness.runs()] == [first.ts, queued.ts]
    assert not tables_containing(harness.db_path, "ORIGINALWORD")


# -- summarized requests -------------------------------------------------------------------------

CONTEXT_TOKENS = 400
"""A limit a few of the test's turns pass, so older turns are summarized."""

FILLER = " ".join(f"word{n}" for n in range(60))


def long_answers(messages: list[BaseMessage]) -> str:
    return f"An answer. {FILLER}"


def marker_summary(messages: list[BaseMessage]) -> str:
    """A summary naming the markers (secrets, ORIGINAL/EDITED words, topics) of what it summarized."""
    text = "\n".join(m.text for m in messages)
    return "Summary: " + " ".join(sorted(set(re.findall(r"sk-SECRET-\w+|\w+WORD|topic\d+", text))))


async def summarized_thread(harness: Harness, first_text: str) -> UserMessage:
    """A thread whose first request says `first_text`, answered until it is in the thread's summary."""
    runner = harness.use(
        long_answers, grader_wanting("x"), context_tokens=CONTEXT_TOKENS, summarizer=marker_summary
    )
    first = harness.message(first_text)
    await runner.submit_request(first)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    for number in range(8):
        state = (await harness.agent.aget_state(agent_config(first.thread_id))).values
        if any(first_text.split()[-1] in m.text for m in state["messages"] if "Summary:" in m.text):
            return first
        await runner.submit_request(harness.message(f"What about topic{number}?", thread_ts=first.ts))
        await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    raise AssertionError("the first request never reached the thread's summary")


async def ask_next(harness: Harness, first: UserMessage) -> str:
    """Ask one more request in the thread; the text of the worker's input for it."""
    assert harness.runner is not None and harness.worker is not None
    calls = len(harness.worker.calls)
    await harness.runner.submit_request(harness.message("And the next thing?", thread_ts=first.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    (worker_input,) = sent(harness.worker.calls[calls:])
    return worker_input


async def test_a_deleted_request_already_in_the_threads_summary_takes_the_summary_with_it(harness):
    first = await summarized_thread(harness, f"Remember {SECRET}")
    assert harness.runner is not None

    await harness.runner.forget(deleted(first))
    worker_input = await ask_next(harness, first)

    assert SECRET not in worker_input and DROPPED_SUMMARY in worker_input
    assert not tables_containing(harness.db_path, SECRET)


async def test_an_edited_request_already_in_the_threads_summary_takes_the_summary_with_it(harness):
    first = await summarized_thread(harness, "Tell me about ORIGINALWORD")
    assert harness.runner is not None

    await harness.runner.revise(edited(first, "Tell me about EDITEDWORD"))
    worker_input = await ask_next(harness, first)

    assert "ORIGINALWORD" not in worker_input and DROPPED_SUMMARY in worker_input
    assert not tables_containing(harness.db_path, "ORIGINALWORD")


# -- rubric messages -----------------------------------------------------------------------------


async def test_a_deleted_rubric_message_takes_the_threads_rubric_and_the_thread_is_told(harness):
    runner = harness.use(answers("Paris, on the Seine."), grader_wanting("Seine"))
    root = harness.message("Let's talk about capitals")
    rubric_message = harness.message(f"rubric: {RUBRIC}", thread_ts=root.ts)
    await runner.submit_rubric(rubric_message, RUBRIC)
    await runner.submit_request(harness.message("What is the capital of France?", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    assert tables_containing(harness.db_path, RUBRIC)

    await runner.forget(deleted(rubric_message))
    await runner.submit_request(harness.message("And of Italy?", thread_ts=root.ts))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    texts = [m.all_text for m in harness.thread(root.ts)]
    notice = next(i for i, text in enumerate(texts) if "set this thread's rubric was deleted" in text)
    assert "not graded until a new rubric is set" in texts[notice]
    assert "No rubric here" in texts[-1]  # the next answer was not graded against the deleted rubric
    assert not tables_containing(harness.db_path, RUBRIC)
    state = (await harness.agent.aget_state(agent_config(root.thread_id))).values
    assert not state.get("rubric")


# -- a process stopping ---------------------------------------------------------------------------


async def test_a_deletion_a_stopping_process_did_not_apply_is_applied_by_the_next_one(harness):
    runner = harness.use(answers("Noted."), grader_wanting("x"))
    request = harness.message(f"Remember {SECRET}")
    await runner.submit_request(request)
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    await runner.drain(grace=0)

    await runner.forget(deleted(request))  # it arrives as the process stops: too late to apply
    assert tables_containing(harness.db_path, SECRET)

    restarted = harness.use(answers("Noted."), grader_wanting("x"))
    assert await restarted.resume_changes() == 1
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)
    assert not tables_containing(harness.db_path, SECRET)
    assert await restarted.resume_changes() == 0  # applied once, then no longer kept


# -- a thread deleted while the bot works in it ---------------------------------------------------


async def test_a_thread_purged_while_a_run_is_under_way_keeps_nothing_of_it_and_runs_nothing_queued(harness):
    *_, release = await queued_behind_a_slow_run(harness, f"My key is {SECRET}")

    await purge_tenant(harness.store, harness.checkpointer, Workspace("T1"))  # an uninstall, say
    release.set()
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)

    assert harness.worker is not None and harness.grader is not None
    assert not [text for text in sent(harness.worker.calls + harness.grader.calls) if SECRET in text]
    for text in ("What is the capital of France?", "Paris, on the Seine.", SECRET):
        assert not tables_containing(harness.db_path, text)
