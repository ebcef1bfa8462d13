"""Summarizing a long thread for the worker: what is kept, what the grader sees, what it cost."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from bot.agent.models import ModelPair
from bot.agent.summary import ThreadSummary, summary_usage
from bot.agent.turn import summarize_turn
from bot.config import DEFAULT_CONTEXT_TOKENS
from grading.grader import GRADER_SOURCE, build_transcript, is_summary_message

SUMMARY_USAGE = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}


def summarizer() -> FakeMessagesListChatModel:
    # langchain's usage callback counts an answer's tokens under the model name it reports.
    answer = AIMessage("The summary.", usage_metadata=SUMMARY_USAGE, response_metadata={"model_name": "fake"})
    return FakeMessagesListChatModel(responses=[answer])


def thread(turns: int, chars: int) -> list:
    """`turns` answered requests, then the current one with a draft and the grader's feedback."""
    messages = []
    for n in range(turns):
        messages += [
            HumanMessage(f"request {n} " + "r" * chars, id=f"q{n}"),
            AIMessage("a" * chars, id=f"a{n}"),
        ]
    feedback = HumanMessage(
        "Grader feedback: fix it", id="fb", additional_kwargs={"lc_source": GRADER_SOURCE}
    )
    return [
        *messages,
        HumanMessage("the current request", id="now"),
        AIMessage("draft", id="draft"),
        feedback,
    ]


def summarized(middleware: ThreadSummary, messages: list) -> list:
    update = middleware.before_model({"messages": list(messages)}, None)
    assert update is not None, "nothing was summarized"
    first, *rest = update["messages"]
    assert isinstance(first, RemoveMessage) and first.id == REMOVE_ALL_MESSAGES
    return rest


def test_a_thread_past_the_limit_keeps_the_current_run_and_the_latest_turns_after_one_summary():
    messages = thread(turns=40, chars=1000)

    after = summarized(ThreadSummary(summarizer(), context_tokens=8000), messages)

    assert is_summary_message(after[0]) and "The summary." in after[0].text
    assert [m.id for m in after[-3:]] == ["now", "draft", "fb"]
    kept = [m.id for m in after[1:]]
    assert kept == [m.id for m in messages[-len(kept) :]]  # the latest turns, word for word
    assert 3 < len(kept) < len(messages) / 2


def test_the_current_request_is_never_summarized_even_past_the_limit():
    messages = [*thread(turns=2, chars=100)[:-3], HumanMessage("x " * 20_000, id="now"), AIMessage("draft")]

    after = summarized(ThreadSummary(summarizer(), context_tokens=500), messages)

    assert after[1].id == "now" and after[1].text == messages[-2].text


def test_a_thread_under_the_limit_is_left_alone():
    assert (
        ThreadSummary(summarizer(), context_tokens=8000).before_model({"messages": thread(3, 100)}, None)
        is None
    )


def test_the_graders_transcript_is_the_same_with_the_summary_as_without_it():
    messages = thread(turns=60, chars=1000)

    after = summarized(ThreadSummary(summarizer(), context_tokens=DEFAULT_CONTEXT_TOKENS), messages)

    assert len(after) < len(messages)
    assert build_transcript(after) == build_transcript(messages)


def test_the_summarys_tokens_ride_on_the_summary_message():
    after = summarized(ThreadSummary(summarizer(), context_tokens=8000), thread(turns=40, chars=1000))

    assert summary_usage(after) == [SUMMARY_USAGE]


def test_a_summary_is_priced_at_the_summary_models_rate_not_the_workers():
    summarized_thread = summarized(ThreadSummary(summarizer(), context_tokens=8000), thread(40, 1000))
    worker_usage = {"input_tokens": 2_000, "output_tokens": 300, "total_tokens": 2_300}
    answer = AIMessage("the answer", id="answer", usage_metadata=worker_usage)

    outcome = summarize_turn({}, [*summarized_thread, answer], []).priced(
        ModelPair(worker="openai:gpt-4o", grader="openai:gpt-4o"), summary_model="openai:gpt-4o-mini"
    )

    assert outcome.cost is not None
    roles = outcome.cost.roles
    assert (roles["summary"].model, roles["summary"].total_tokens) == ("openai:gpt-4o-mini", 940)
    assert roles["worker"].total_tokens == 2_300  # the summary's tokens are not the worker's
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 output; gpt-4o: $2.50 and $10.
    assert roles["summary"].usd == pytest.approx((900 * 0.15 + 40 * 0.60) / 1e6)
    assert outcome.cost.usd == pytest.approx((900 * 0.15 + 40 * 0.60 + 2_000 * 2.50 + 300 * 10.0) / 1e6)
    assert outcome.usage is not None and outcome.usage["total_tokens"] == 2_300 + 940
