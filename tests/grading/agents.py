"""A real langchain agent with `RubricMiddleware`, scripted worker and grader models, and ways to run it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from grading.middleware import RubricMiddleware
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

HAIKU_RUBRIC = "- The poem has three lines\n- The theme is spring\n- No rhyme"
SEED_YAML = """
dimensions:
  - name: Correctness
    weight: 0.5
    fail_below: 3
    anchors: {5: All facts correct., 3: Minor inaccuracies., 1: Contains false information.}
  - name: Completeness
    weight: 0.2
    anchors: {5: Complete., 3: Some gaps., 1: More than half missing.}
  - name: Clarity
    weight: 0.15
    anchors: {5: Understood on first read., 3: Needs a re-read., 1: Incomprehensible.}
  - name: Tone
    weight: 0.15
    anchors: {5: Polite and professional., 3: A bit off., 1: Rude.}
"""


def criteria(*verdicts: tuple[str, bool], gap: str = "fix it") -> list[dict[str, Any]]:
    return [{"name": n, "passed": p, **({} if p else {"gap": f"{gap}: {n}"})} for n, p in verdicts]


def list_grade(*verdicts: tuple[str, bool], explanation: str = "Checked.") -> AIMessage:
    failing = any(not p for _, p in verdicts)
    result = "needs_revision" if failing else "satisfied"
    return grade_call(
        "RubricGrade", {"result": result, "explanation": explanation, "criteria": criteria(*verdicts)}
    )


def grader_that_wants(marker: str) -> Any:
    """Fails 'The theme is spring' until the latest answer contains `marker`."""

    def script(messages: list[Any]) -> AIMessage:
        payload = payload_of(messages)
        transcript = payload.split("<transcript-")[-1]
        answers_seen = re.findall(r"\[assistant\]\n(.*)", transcript)
        ok = bool(answers_seen) and marker in answers_seen[-1]
        return list_grade(("The poem has three lines", True), ("The theme is spring", ok), ("No rhyme", True))

    return script


def build(
    worker_script: Any,
    grader_script: Any,
    *,
    worker_tools: Sequence[BaseTool] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    **middleware: Any,
) -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    """A checkpointed worker agent graded by `RubricMiddleware(model=grader, **middleware)`."""
    worker = ScriptedChatModel(script=worker_script)
    grader = ScriptedChatModel(script=grader_script)
    agent = create_agent(
        model=worker,
        tools=list(worker_tools),
        middleware=[RubricMiddleware(model=grader, **middleware)],
        checkpointer=checkpointer or InMemorySaver(),
    )
    return agent, worker, grader


def ask(text: str, rubric: str | None = None) -> dict[str, Any]:
    inputs: dict[str, Any] = {"messages": [HumanMessage(text)]}
    if rubric is not None:
        inputs["rubric"] = rubric
    return inputs


def thread(tid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid}}


def invoke_sync(agent: Any, inputs: dict[str, Any], tid: str = "t") -> dict[str, Any]:
    """Invoke, then read the whole state (private keys are not part of the output schema)."""
    agent.invoke(inputs, thread(tid))
    return agent.get_state(thread(tid)).values


def invoke_async(agent: Any, inputs: dict[str, Any], tid: str = "t") -> dict[str, Any]:
    """The same through `ainvoke`/`aget_state`, so every behaviour is checked on both paths."""
    return asyncio.run(arun(agent, inputs, tid))


async def arun(agent: Any, inputs: dict[str, Any], tid: str = "t") -> dict[str, Any]:
    await agent.ainvoke(inputs, thread(tid))
    return (await agent.aget_state(thread(tid))).values
