"""The worker's prompt caching: with an Anthropic worker, its instructions carry a cache breakpoint
and a revision's request starts with the earlier request's messages, so the provider can serve that
prefix from its cache; other providers' workers get no Anthropic middleware."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bot.agent.worker import WORKER_SYSTEM_PROMPT, build_agent, prompt_caching
from tests.grading.recording_anthropic import recording_anthropic
from tests.grading.scripted import ScriptedChatModel, grader_wanting

RUBRIC = "- Names the capital\n- Mentions the river"


def worker_reply(payload: dict[str, Any]) -> AIMessage:
    revising = len(payload["messages"]) > 1
    return AIMessage("Paris, on the Seine." if revising else "Paris.")


def test_an_anthropic_workers_instructions_and_earlier_turns_are_a_cached_stable_prefix():
    worker = recording_anthropic(worker_reply)
    agent = build_agent(
        worker,
        ScriptedChatModel(script=grader_wanting("Seine")),
        max_iterations=3,
        checkpointer=InMemorySaver(),
    )

    agent.invoke(
        {"messages": [HumanMessage("What is the capital of France?")], "rubric": RUBRIC},
        {"configurable": {"thread_id": "t1"}},
    )

    first, revision = worker.sent
    assert first["system"][-1]["cache_control"]["type"] == "ephemeral"
    assert first["system"][-1]["text"] == WORKER_SYSTEM_PROMPT
    assert revision["system"] == first["system"]
    earlier = first["messages"]
    assert [m["content"] for m in revision["messages"][: len(earlier)]] == [m["content"] for m in earlier]


def test_a_worker_of_another_provider_gets_no_anthropic_middleware():
    assert prompt_caching(ScriptedChatModel(script=lambda messages: "ok")) == []
