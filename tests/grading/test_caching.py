"""The grader's requests laid out for the providers' prompt caches: a run's iterations share a prefix
covering the instructions, the answer schema, the rubric and the team's examples; an OpenAI request
names its cache, an Anthropic one carries a breakpoint at the end of that prefix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from grading import CalibrationExample, RubricMiddleware, TranscriptGrader
from grading.caching import CACHE_CONTROL, CACHE_KEY_PREFIX
from grading.grader import GRADER_SYSTEM_PROMPT
from tests.grading.recording_anthropic import recording_anthropic
from tests.standins.model_api import ModelApiStandin, scripted_revision

CRITERIA = ["Cites a source", "Names the capital", "Mentions the river"]
EXAMPLES = [
    CalibrationExample(
        criterion="Cites a source",
        grader_verdict="pass",
        team_verdict="fail",
        comment="A bare URL is no source.",
    ),
    CalibrationExample(
        criterion="Mentions the river", grader_verdict="fail", team_verdict="pass", comment=""
    ),
]


@pytest.fixture
def model_api() -> Iterator[ModelApiStandin]:
    with ModelApiStandin() as api:
        api.cache_min_tokens, api.cache_step_tokens = 0, 1  # small prompts: count any shared prefix
        yield api


def openai_model(api: ModelApiStandin) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=api.base_url, api_key="test", max_retries=0)


def shared_prefix(first: str, second: str) -> str:
    """The leading text two prompts share, character for character."""
    length = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), len(first))
    return first[:length]


def test_two_iterations_of_a_run_share_a_prefix_covering_instructions_schema_rubric_and_examples(model_api):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    grader = RubricMiddleware(model=openai_model(model_api), calibration=lambda rubric, runtime: EXAMPLES)
    agent = create_agent(openai_model(model_api), middleware=[grader], checkpointer=InMemorySaver())
    rubric = "\n".join(f"- {name}" for name in CRITERIA)

    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [HumanMessage("What is the capital of France?")], "rubric": rubric}, config)
    result = agent.get_state(config).values

    assert result["_rubric_status"] == "satisfied"
    first, second = model_api.requests("grader")
    schema = (first.body.get("tools"), first.body.get("response_format"))
    assert schema == (second.body.get("tools"), second.body.get("response_format"))
    shared = shared_prefix(first.all_text, second.all_text)
    assert shared.startswith(GRADER_SYSTEM_PROMPT)
    assert all(name in shared for name in CRITERIA)
    assert "A bare URL is no source." in shared  # the team's examples and their comments too
    fixed = first.messages[-1]["content"][0]["text"]
    assert fixed in shared and "<transcript-" not in fixed  # the whole fixed part, only it
    key = first.body["prompt_cache_key"]
    assert key.startswith(CACHE_KEY_PREFIX) and second.body["prompt_cache_key"] == key
    # The stand-in, like OpenAI, bills the shared prefix as cached, and the grader's usage says so.
    assert second.cached_tokens >= len(shared.split())
    cached = result["_rubric_evaluations"][-1]["usage"]["input_token_details"]["cache_read"]
    assert cached == second.cached_tokens


def test_another_rubric_gets_another_cache_key(model_api):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    grader = TranscriptGrader(openai_model(model_api))
    transcript = [HumanMessage("Capital of France?"), AIMessage("Revised answer v2")]
    grader.grade("\n".join(f"- {name}" for name in CRITERIA), transcript)
    grader.grade("\n".join(f"- {name}" for name in reversed(CRITERIA)), transcript)

    keys = {request.body["prompt_cache_key"] for request in model_api.requests("grader")}
    assert len(keys) == 2


def grade_reply(payload: dict[str, Any]) -> AIMessage:
    """A passing grade, as a call of the grader schema's tool when the request offers one."""
    grade = {
        "result": "satisfied",
        "explanation": "Every criterion is met.",
        "criteria": [{"name": name, "passed": True, "gap": ""} for name in CRITERIA],
    }
    tools = [tool["name"] for tool in payload.get("tools", [])]
    schema = next((name for name in tools if name.endswith("RubricGrade")), None)
    if schema is not None:
        return AIMessage("", tool_calls=[{"name": schema, "args": grade, "id": "toolu_1"}])
    return AIMessage(json.dumps(grade))


def test_an_anthropic_graders_request_has_a_cache_breakpoint_after_rubric_and_examples():
    model = recording_anthropic(grade_reply)
    transcript = [HumanMessage("Capital of France?"), AIMessage("Paris, on the Seine.")]

    evaluation = TranscriptGrader(model).grade(
        "\n".join(f"- {name}" for name in CRITERIA), transcript, calibration=EXAMPLES
    )

    assert evaluation["result"] == "satisfied"
    (sent,) = model.sent
    user = next(message for message in sent["messages"] if message["role"] == "user")
    fixed, varying = user["content"]
    assert fixed["cache_control"] == CACHE_CONTROL  # cached: tools, system prompt and this block
    assert all(name in fixed["text"] for name in CRITERIA) and "A bare URL is no source." in fixed["text"]
    assert "cache_control" not in varying and "Paris, on the Seine." in varying["text"]


def test_the_stand_in_reports_no_cache_below_openais_minimum():
    with ModelApiStandin() as api:
        words = ("word",) * 1_100
        assert api._cached_tokens(words) == 0  # nothing before it
        assert api._cached_tokens(words) == 1024  # 1,100 shared: 1,024 plus no full step of 128
        assert api._cached_tokens(("word",) * 1_000) == 0  # under the minimum
