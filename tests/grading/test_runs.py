"""Grading runs: every new request starts a fresh one, a resumed checkpoint continues its own.

A run can end early in many ways (the worker fails on a revision, the grader fails, the process
is stopped, a tool interrupts); whatever state it is left in, the next request in the thread is
graded from iteration 1 of N with a new run id and the whole iteration budget.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.types import interrupt

from tests.grading.agents import (
    HAIKU_RUBRIC,
    arun,
    ask,
    build,
    grader_that_wants,
    invoke_sync,
    thread,
)
from tests.grading.scripted import tool_call

Script = Callable[[list[BaseMessage]], AIMessage | str]
"""A model's reply to the messages it receives."""

Step = str | AIMessage | BaseException | Script
"""One scripted model reply: text, a message, an exception to raise, or a script giving a reply."""


def steps(*planned: Step) -> Script:
    """A model script taking the planned steps in order, across invocations."""
    queue = list(planned)

    def script(messages: list[BaseMessage]) -> AIMessage | str:
        step = queue.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step(messages) if callable(step) else step

    return script


@tool
def ask_a_human(question: str) -> str:
    """Ask the person who made the request; the run pauses until they answer."""
    return interrupt(question)


SECOND_REQUEST = ("winter", "still winter", "spring at last")
"""The worker's answers to the second request: only the third passes, so only a run with its
whole budget of three iterations can end satisfied."""


def assert_fresh_run(result: dict[str, Any], seen: list[dict[str, Any]], earlier: set[str]) -> None:
    """The second request was graded as a new run: labels from 0, a new id, the full budget."""
    run = [e for e in seen if e["grading_run_id"] not in earlier]
    assert [e["iteration"] for e in run] == [0, 1, 2]
    assert len({e["grading_run_id"] for e in run}) == 1
    assert result["_rubric_status"] == "satisfied"
    assert result["messages"][-1].text == "spring at last"


def run_ids(seen: list[dict[str, Any]]) -> set[str]:
    return {e["grading_run_id"] for e in seen}


def test_a_new_request_after_the_worker_failed_on_its_revision_starts_a_fresh_run(run):
    seen: list[dict[str, Any]] = []
    worker = steps("winter", RuntimeError("provider 500"), *SECOND_REQUEST)
    agent, _, _ = build(worker, grader_that_wants("spring"), on_evaluation=seen.append)
    with pytest.raises(RuntimeError, match="provider 500"):
        run(agent, ask("Write a haiku", HAIKU_RUBRIC))
    assert [e["result"] for e in seen] == ["needs_revision"]  # left waiting for a revision

    result = run(agent, ask("Try a new one"))
    assert_fresh_run(result, seen, run_ids(seen[:1]))


def test_a_new_request_after_a_grader_error_starts_a_fresh_run(run):
    seen: list[dict[str, Any]] = []
    wants_spring = grader_that_wants("spring")
    grader = steps(TimeoutError("grader timed out"), *(wants_spring for _ in range(3)))
    agent, _, _ = build(steps("winter", *SECOND_REQUEST), grader, on_evaluation=seen.append)
    first = run(agent, ask("Write a haiku", HAIKU_RUBRIC))
    assert first["_rubric_status"] == "grader_error"

    result = run(agent, ask("Try a new one"))
    assert_fresh_run(result, seen, run_ids(seen[:1]))


def test_a_new_request_after_an_interrupt_mid_run_starts_a_fresh_run(run):
    seen: list[dict[str, Any]] = []
    worker = steps("winter", tool_call("ask_a_human", {"question": "Which spring?"}), *SECOND_REQUEST)
    agent, _, _ = build(
        worker, grader_that_wants("spring"), on_evaluation=seen.append, worker_tools=[ask_a_human]
    )
    paused = run(agent, ask("Write a haiku", HAIKU_RUBRIC))
    assert paused["_rubric_status"] == "needs_revision"  # paused in the revision, never resumed

    result = run(agent, ask("Never mind, try a new one"))
    assert_fresh_run(result, seen, run_ids(seen[:1]))


def test_a_new_request_after_a_keyboard_interrupt_mid_run_starts_a_fresh_run():
    seen: list[dict[str, Any]] = []
    wants_spring = grader_that_wants("spring")
    grader = steps(wants_spring, KeyboardInterrupt(), *(wants_spring for _ in range(3)))
    agent, _, _ = build(steps("winter", "autumn", *SECOND_REQUEST), grader, on_evaluation=seen.append)
    with pytest.raises(KeyboardInterrupt):
        invoke_sync(agent, ask("Write a haiku", HAIKU_RUBRIC))

    result = invoke_sync(agent, ask("Try a new one"))
    assert_fresh_run(result, seen, run_ids(seen[:1]))


async def test_a_new_request_after_a_cancellation_mid_run_starts_a_fresh_run():
    seen: list[dict[str, Any]] = []
    grading_again, release = threading.Event(), threading.Event()
    wants_spring = grader_that_wants("spring")

    def held(messages: list[BaseMessage]) -> AIMessage:
        grading_again.set()
        release.wait()
        return wants_spring(messages)

    grader = steps(wants_spring, held, *(wants_spring for _ in range(3)))
    agent, _, _ = build(steps("winter", "autumn", *SECOND_REQUEST), grader, on_evaluation=seen.append)
    task = asyncio.create_task(arun(agent, ask("Write a haiku", HAIKU_RUBRIC)))
    await asyncio.to_thread(grading_again.wait)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task

    result = await arun(agent, ask("Try a new one"))
    assert_fresh_run(result, seen, run_ids(seen[:1]))


def resume_sync(agent: Any, tid: str = "t") -> dict[str, Any]:
    for _ in agent.stream(None, thread(tid)):
        pass
    return agent.get_state(thread(tid)).values


def resume_async(agent: Any, tid: str = "t") -> dict[str, Any]:
    async def resume() -> dict[str, Any]:
        async for _ in agent.astream(None, thread(tid)):
            pass
        return (await agent.aget_state(thread(tid))).values

    return asyncio.run(resume())


@pytest.mark.parametrize("resume", [resume_sync, resume_async], ids=["sync", "async"])
def test_resuming_from_the_checkpoint_continues_the_same_run(resume):
    seen: list[dict[str, Any]] = []
    worker = steps("winter", RuntimeError("provider 500"), "spring")
    agent, _, _ = build(worker, grader_that_wants("spring"), on_evaluation=seen.append)
    with pytest.raises(RuntimeError):
        invoke_sync(agent, ask("Write a haiku", HAIKU_RUBRIC))

    result = resume(agent)  # no new input: pick up the failed revision where it stopped
    assert [(e["iteration"], e["result"]) for e in seen] == [(0, "needs_revision"), (1, "satisfied")]
    assert len(run_ids(seen)) == 1
    assert result["_rubric_status"] == "satisfied"
    assert result["_rubric_iterations"] == 2
