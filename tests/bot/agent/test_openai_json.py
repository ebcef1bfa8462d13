"""OpenAI models whose messages and tools skip the SDK's parameter walk send the very request the
plain `ChatOpenAI` sends: a worker's conversation (tool calls and their results included) and a
grader's call with evidence tools and a structured answer, through a real openai client."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages import content as message_content
from langchain_openai import AzureChatOpenAI, ChatOpenAI
from openai import LengthFinishReasonError, omit
from pydantic import BaseModel

from bot.agent.openai_json import ChatOpenAIAsJson, as_json
from grading import EVIDENCE_TOOLS
from grading.grader import GraderPayload
from grading.grader_agent import GraderAgent, GraderMeter
from tests.grading.scripted import ScriptedChatModel


class Verdict(BaseModel):
    passed: bool
    gap: str


class RecordedOpenAI:
    """An OpenAI endpoint (httpx's mock transport) that records each request body and answers
    with `content`."""

    def __init__(self, content: str, finish_reason: str = "stop") -> None:
        self.bodies: list[dict[str, Any]] = []
        self.content = content
        self.finish_reason = finish_reason

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": self.content}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        choice = {"index": 0, "finish_reason": self.finish_reason, "message": message}
        return httpx.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [choice],
                "usage": usage,
            },
        )

    def model(self) -> ChatOpenAI:
        return ChatOpenAI(
            model="gpt-4o-mini",
            api_key="sk-test",
            timeout=12.0,
            http_client=httpx.Client(transport=httpx.MockTransport(self.answer)),
            http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(self.answer)),
        )


STRUCTURED_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema(), "strict": True},
}
"""A structured answer's format as langchain's agents ask for it: JSON, not a class."""

CONVERSATION = [
    SystemMessage("You are a helpful teammate."),
    HumanMessage("How many words are in 'the quick brown fox'?"),
    AIMessage("", tool_calls=[{"id": "c1", "name": "count_words", "args": {"text": "the quick brown fox"}}]),
    ToolMessage("4", tool_call_id="c1"),
    AIMessage("Four."),
    HumanMessage([{"type": "text", "text": "And in 'jumps over'?"}]),
]


async def test_a_workers_conversation_is_sent_as_the_plain_model_sends_it():
    endpoint = RecordedOpenAI("Two.")
    plain = endpoint.model()

    answered = await as_json(plain).ainvoke(CONVERSATION)
    await plain.ainvoke(CONVERSATION)

    ours, theirs = endpoint.bodies
    assert ours == theirs and len(ours["messages"]) == len(CONVERSATION)
    assert answered.text == "Two."


def test_a_sync_call_is_sent_as_the_plain_model_sends_it_too():
    endpoint = RecordedOpenAI("Two.")
    plain = endpoint.model()

    as_json(plain).invoke(CONVERSATION)
    plain.invoke(CONVERSATION)

    ours, theirs = endpoint.bodies
    assert ours == theirs


async def test_a_graders_call_with_evidence_tools_and_a_structured_answer_is_sent_as_plainly():
    endpoint = RecordedOpenAI(json.dumps({"passed": False, "gap": "No river named."}))
    plain = endpoint.model()
    payload = GraderPayload("Rubric:\n- Mentions the river", "Transcript: Paris.")

    def grader(model: ChatOpenAI) -> GraderAgent:
        return GraderAgent.build(model, EVIDENCE_TOOLS, "Grade.", Verdict)

    ours = await grader(as_json(plain)).aask(payload, GraderMeter(3))
    theirs = await grader(plain).aask(payload, GraderMeter(3))

    sent, expected = endpoint.bodies
    assert sent == expected
    assert [tool["function"]["name"] for tool in sent["tools"]] == [tool.name for tool in EVIDENCE_TOOLS]
    assert sent["response_format"]["type"] == "json_schema"
    assert ours == theirs == Verdict(passed=False, gap="No river named.")


def test_the_model_keeps_its_settings_and_clients():
    plain = RecordedOpenAI("").model()

    model = as_json(plain)

    assert isinstance(model, ChatOpenAIAsJson)
    assert (model.model_name, model.request_timeout) == ("gpt-4o-mini", 12.0)
    assert model.root_async_client is plain.root_async_client


@pytest.mark.parametrize(
    "other",
    [
        AzureChatOpenAI(
            azure_endpoint="https://example.openai.azure.com", api_key="k", api_version="2024-06-01"
        ),
        ScriptedChatModel(script=lambda messages: AIMessage("hi")),
    ],
    ids=["azure", "another provider"],
)
def test_other_models_are_left_as_they_are(other):
    assert as_json(other) is other


def test_the_sdk_gets_the_messages_and_tools_as_json_it_does_not_walk():
    model = as_json(RecordedOpenAI("").model()).bind_tools(EVIDENCE_TOOLS)

    payload = model.bound._get_request_payload(CONVERSATION, **model.kwargs)  # type: ignore[attr-defined]

    assert payload["messages"] == []  # the SDK's walk sees no message, no tool and no model name
    assert "tools" not in payload and payload["model"] is omit
    assert len(payload["extra_body"]["messages"]) == len(CONVERSATION)
    assert len(payload["extra_body"]["tools"]) == len(EVIDENCE_TOOLS)
    assert payload["extra_body"]["model"] == "gpt-4o-mini"


def test_a_structured_answers_format_is_sent_as_json_the_sdk_does_not_walk():
    endpoint = RecordedOpenAI("")
    model = as_json(endpoint.model()).bind(response_format=STRUCTURED_FORMAT)

    payload = model.bound._get_request_payload(CONVERSATION, **model.kwargs)  # type: ignore[attr-defined]

    assert payload["response_format"] is omit  # still sent through the SDK's parse, as langchain does
    assert payload["extra_body"]["response_format"]["json_schema"]["name"] == "Verdict"


async def test_a_structured_answer_cut_short_by_the_token_limit_is_still_refused():
    endpoint = RecordedOpenAI('{"passed": false, "gap": "No riv', finish_reason="length")

    with pytest.raises(LengthFinishReasonError):
        await as_json(endpoint.model()).bind(response_format=STRUCTURED_FORMAT).ainvoke(CONVERSATION)


def test_langchain_cores_data_block_types_are_built_once_and_the_same():
    built = message_content._get_data_content_block_types
    fresh = getattr(built, "__wrapped__", built)()

    as_json(RecordedOpenAI("").model())

    assert message_content._get_data_content_block_types() == fresh
    assert message_content._get_data_content_block_types() is message_content._get_data_content_block_types()
    assert message_content.is_data_content_block({"type": "image", "url": "https://example.com/a.png"})
    assert not message_content.is_data_content_block({"type": "text", "text": "Grade this."})
