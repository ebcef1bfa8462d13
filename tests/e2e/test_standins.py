"""The stand-ins and the bot harness, exercised with the real clients the bot uses.

slack_sdk's WebClient / AsyncWebClient talk to the Slack stand-in, langchain-openai's ChatOpenAI to
the model stand-in, and a real slack_bolt AsyncApp receives what SlackSender sends.
"""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import aiohttp
import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain.chat_models import init_chat_model
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from slack_bolt.async_app import AsyncApp
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from tests.standins import STOP_TIMEOUT, BackgroundServer, wait_for
from tests.standins.model_api import (
    DEFAULT_GAP,
    DRAFT_ANSWER,
    FAILING_SCORE,
    NO_ANSWER,
    PASSING_SCORE,
    REVISED_ANSWER,
    ErrorReply,
    ModelApiStandin,
    call_tool,
    fixed_grader,
    scripted_revision,
)
from tests.standins.slack_api import KNOWN_METHODS, MAX_BLOCKS, SlackApiStandin
from tests.standins.slack_requests import (
    SlackSender,
    app_mention,
    block_actions,
    bot_message,
    event_callback,
    message,
    message_changed,
    new_trigger_id,
    new_ts,
    sign,
    slash_command,
    text_input,
    url_verification,
    view_submission,
)
from tests.standins.triggers import TRIGGER_EXPIRY_SECONDS, ManualClock, TriggerIds

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never via a proxy
CRITERION = "Cites a source"
OTHER = "Under 100 words"


class CriterionGrade(BaseModel):
    name: str
    passed: bool
    gap: str


class RubricGrade(BaseModel):
    result: Literal["satisfied", "needs_revision"]
    explanation: str
    criteria: list[CriterionGrade]


class DimensionGrade(BaseModel):
    name: str
    score: int
    gap: str


class ScoredRubricGrade(BaseModel):
    result: Literal["satisfied", "needs_revision"]
    explanation: str
    criteria: list[DimensionGrade]


@tool
def count_lines(text: str) -> int:
    """Count the lines of a text."""
    return len(text.splitlines())


@pytest.fixture
def web(slack_api: SlackApiStandin) -> WebClient:
    return WebClient(token=slack_api.token, base_url=slack_api.api_url)


@pytest.fixture
def chat(model_api: ModelApiStandin, monkeypatch: pytest.MonkeyPatch) -> ChatOpenAI:
    """Configured as the bot configures it: from the environment, via init_chat_model."""
    monkeypatch.setenv("OPENAI_BASE_URL", model_api.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    return init_chat_model("openai:gpt-4o-mini", max_retries=0)


# ----- Slack Web API stand-in -----


def test_auth_test_names_the_bot_and_the_recorded_call_keeps_no_token(slack_api, web):
    answer = web.auth_test()

    assert (answer["user_id"], answer["bot_id"], answer["team_id"], answer["user"]) == (
        "UBOT",
        "BBOT",
        "T1",
        "rubric-bot",
    )
    [call] = slack_api.calls("auth.test")
    assert call.ok
    assert slack_api.token not in json.dumps([call.headers, call.args])


def test_a_wrong_bot_token_is_refused(slack_api):
    client = WebClient(token="xoxb-someone-else", base_url=slack_api.api_url)

    with pytest.raises(SlackApiError) as raised:
        client.chat_postMessage(channel="C1", text="hi")

    assert raised.value.response["error"] == "invalid_auth"
    assert slack_api.messages() == []


@pytest.mark.parametrize("method", ["chat.postMesage", "chat.scheduleMessage", "no.such.method"])
def test_a_method_slack_does_not_have_here_is_refused_as_unknown_method(slack_api, web, method):
    with pytest.raises(SlackApiError) as raised:
        web.api_call(method, json={"channel": "C1", "text": "hi"})

    assert raised.value.response["error"] == "unknown_method"
    assert [call.ok for call in slack_api.calls(method)] == [False]
    assert slack_api.messages() == []


def test_every_method_the_stand_in_answers_is_a_known_one(slack_api):
    assert set(slack_api._answers) <= KNOWN_METHODS


def test_thread_messages_come_back_in_order_with_updates_applied(slack_api, web):
    root = new_ts()
    first = web.chat_postMessage(
        channel="C1",
        thread_ts=root,
        text="working",
        metadata={"event_type": "rubric_evaluation", "event_payload": {"iteration": 0}},
    )
    web.chat_postMessage(channel="C1", text="elsewhere")
    web.chat_postMessage(channel="C2", thread_ts=root, text="other channel")
    second = web.chat_postMessage(
        channel="C1",
        thread_ts=root,
        text="final",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "*the answer*"}}],
    )
    web.chat_update(channel="C1", ts=first["ts"], text="iteration 1/3")

    thread = slack_api.messages_in_thread("C1", root)

    assert [m.ts for m in thread] == [first["ts"], second["ts"]]
    assert float(first["ts"]) < float(second["ts"])
    assert (thread[0].text, thread[0].edits, thread[0].event_type) == (
        "iteration 1/3",
        1,
        "rubric_evaluation",
    )
    assert "*the answer*" in thread[1].all_text


def test_replies_keep_to_their_window_and_put_the_parent_first_on_the_first_page(slack_api, web):
    stamps = [f"1700000{n:03d}.000100" for n in range(10)]
    slack_api.add_thread_messages(
        "C1", stamps[0], *[{"user": "U1", "text": f"m{n}", "ts": ts} for n, ts in enumerate(stamps)]
    )

    def texts(**args):
        answer = web.conversations_replies(channel="C1", ts=stamps[0], **args)
        return [m["text"] for m in answer["messages"]], answer["has_more"]

    assert texts(oldest=stamps[5], latest=stamps[8]) == (["m0", "m6", "m7"], False)
    assert texts(oldest=stamps[5], latest=stamps[8], inclusive=True) == (
        ["m0", "m5", "m6", "m7", "m8"],
        False,
    )
    assert texts(oldest=stamps[2], limit=3) == (["m0", "m3", "m4", "m5"], True)  # the parent beside the page
    assert texts(latest=stamps[3], limit=2) == (["m0", "m1"], True)  # the parent in its window counts
    assert texts(oldest=stamps[2], limit=3, cursor="3") == (["m6", "m7", "m8"], True)  # not again


def test_updating_a_message_that_was_never_posted_fails(web):
    with pytest.raises(SlackApiError) as raised:
        web.chat_update(channel="C1", ts="1.000000", text="x")

    assert raised.value.response["error"] == "message_not_found"


async def test_concurrent_async_posts_each_get_their_own_ts(slack_api):
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.api_url)

    answers = await asyncio.gather(
        *(client.chat_postMessage(channel=f"C{i}", text=f"message {i}") for i in range(50))
    )

    assert len({a["ts"] for a in answers}) == 50
    assert len(slack_api.messages()) == 50


def test_files_upload_v2_uploads_the_bytes_into_the_thread(slack_api, web):
    root = new_ts()

    answer = web.files_upload_v2(
        channel="C1", thread_ts=root, content="a long answer", filename="answer.md", title="Answer"
    )

    [upload] = slack_api.uploads()
    assert answer["file"]["id"] == upload.file_id
    assert (upload.data, upload.title, upload.channel, upload.thread_ts, upload.completed) == (
        b"a long answer",
        "Answer",
        "C1",
        root,
        True,
    )


async def test_async_files_upload_v2_works_too(slack_api):
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.api_url)

    await client.files_upload_v2(channel="C1", content=b"\x00\x01bytes", filename="data.bin")

    assert [u.data for u in slack_api.uploads()] == [b"\x00\x01bytes"]


def test_a_rate_limited_call_is_retried_by_slack_sdks_handler(slack_api):
    slack_api.fail_next("chat.postMessage", status=429, retry_after=0)
    client = WebClient(
        token=slack_api.token,
        base_url=slack_api.api_url,
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)],
    )

    client.chat_postMessage(channel="C1", text="hello")

    assert [c.status for c in slack_api.calls("chat.postMessage")] == [429, 200]
    assert [m.text for m in slack_api.messages()] == ["hello"]


def test_without_a_retry_handler_the_429_and_retry_after_reach_the_caller(slack_api, web):
    slack_api.fail_next("reactions.add", status=429, retry_after=7)

    with pytest.raises(SlackApiError) as raised:
        web.reactions_add(channel="C1", timestamp="1.0", name="eyes")

    assert raised.value.response.status_code == 429
    assert raised.value.response.headers["Retry-After"] in ("7", ["7"])


def test_error_next_fails_only_the_next_call(slack_api, web):
    slack_api.error_next("chat.postMessage", "channel_not_found")

    with pytest.raises(SlackApiError) as raised:
        web.chat_postMessage(channel="C1", text="lost")
    web.chat_postMessage(channel="C1", text="delivered")

    assert raised.value.response["error"] == "channel_not_found"
    assert [m.text for m in slack_api.messages()] == ["delivered"]


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "divider"}] * (MAX_BLOCKS + 1),
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}],
        [{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}],
        [{"type": "actions", "elements": [{"type": "button", "value": "v" * 2001}]}],
        [{"type": "markdown", "text": "m" * 12_001}],
        [{"type": "markdown", "text": ""}],
    ],
    ids=["51 blocks", "section text", "header text", "button value", "markdown text", "empty markdown"],
)
def test_blocks_slack_would_reject_are_rejected(slack_api, web, blocks):
    with pytest.raises(SlackApiError) as raised:
        web.chat_postMessage(channel="C1", text="fallback", blocks=blocks)

    assert raised.value.response["error"] == "invalid_blocks"
    assert slack_api.messages() == []


def test_blocks_at_the_limits_are_accepted(slack_api, web):
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 200}}
    long_section = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}
    markdown = {"type": "markdown", "text": "m" * 12_000}

    web.chat_postMessage(channel="C1", text="fallback", blocks=[section] * MAX_BLOCKS)
    web.chat_postMessage(channel="C1", text="fallback", blocks=[long_section])
    web.chat_postMessage(channel="C1", text="fallback", blocks=[markdown])

    assert [len(m.blocks) for m in slack_api.messages()] == [MAX_BLOCKS, 1, 1]


def test_a_message_whose_blocks_hold_too_much_text_is_refused(slack_api, web):
    half = {"type": "markdown", "text": "m" * 7000}

    with pytest.raises(SlackApiError) as raised:
        web.chat_postMessage(channel="C1", text="fallback", blocks=[half, half])

    assert raised.value.response["error"] == "msg_blocks_too_long"
    assert slack_api.messages() == []


def feedback_block(**changes: Any) -> dict[str, Any]:
    """A ``context_actions`` block with Slack's feedback buttons, changed by `changes`."""
    element = {
        "type": "feedback_buttons",
        "action_id": "answer_feedback",
        "positive_button": {"text": {"type": "plain_text", "text": "Good answer"}, "value": "good"},
        "negative_button": {"text": {"type": "plain_text", "text": "Bad answer"}, "value": "bad"},
    } | changes
    return {"type": "context_actions", "elements": [element]}


def test_feedback_buttons_are_taken_and_read_back(slack_api, web):
    web.chat_postMessage(channel="C1", text="answer", blocks=[feedback_block()])

    (posted,) = slack_api.messages()
    assert posted.feedback_buttons() == feedback_block()["elements"][0]


@pytest.mark.parametrize(
    "block",
    [
        feedback_block(action_id=None),
        feedback_block(negative_button={"text": {"type": "plain_text", "text": "x" * 76}, "value": "bad"}),
        feedback_block(positive_button={"text": {"type": "plain_text", "text": "Good"}}),
        {"type": "context_actions", "elements": [{"type": "button", "text": "no", "value": "v"}]},
        {"type": "context_actions", "elements": feedback_block()["elements"] * 6},
    ],
    ids=["no action_id", "long text", "no value", "a plain button", "six elements"],
)
def test_feedback_buttons_slack_would_reject_are_rejected(slack_api, web, block):
    with pytest.raises(SlackApiError) as raised:
        web.chat_postMessage(channel="C1", text="answer", blocks=[block])

    assert raised.value.response["error"] == "invalid_blocks"
    assert slack_api.messages() == []


def test_an_agent_session_is_made_moved_and_renamed(slack_api, web):
    root = web.chat_postMessage(channel="C1", text="root")["ts"]

    web.agents_sessions_setStatus(channel_id="C1", thread_ts=root, status="processing", title="First")
    web.agents_sessions_setStatus(channel_id="C1", thread_ts=root, status="active", title="Ignored")
    web.agents_sessions_rename(channel_id="C1", thread_ts=root, title="Renamed")

    session = slack_api.session("C1", root)
    assert session is not None
    assert (session.status, session.title, session.statuses) == (
        "active",
        "Renamed",
        ["processing", "active"],
    )


@pytest.mark.parametrize(
    ("status", "title", "error"),
    [
        ("thinking", None, "invalid_status"),
        ("processing", "t" * 201, "title_too_long"),
    ],
)
def test_an_agent_session_slack_would_refuse_is_refused(slack_api, web, status, title, error):
    with pytest.raises(SlackApiError) as raised:
        web.agents_sessions_setStatus(channel_id="C1", thread_ts="5.000001", status=status, title=title)

    assert raised.value.response["error"] == error
    assert slack_api.session("C1", "5.000001") is None


def test_an_agent_session_needs_a_thread_that_is_one(slack_api, web):
    root = web.chat_postMessage(channel="C1", text="root")["ts"]
    reply = web.chat_postMessage(channel="C1", text="reply", thread_ts=root)["ts"]

    for thread_ts in (reply, "not-a-ts"):
        with pytest.raises(SlackApiError) as raised:
            web.agents_sessions_setStatus(channel_id="C1", thread_ts=thread_ts, status="processing")
        assert raised.value.response["error"] == "invalid_thread_ts"
    with pytest.raises(SlackApiError) as renamed:
        web.agents_sessions_rename(channel_id="C1", thread_ts=root, title="No session yet")
    assert renamed.value.response["error"] == "session_not_found"


def test_posts_that_would_unfurl_are_listed(slack_api, web):
    web.chat_postMessage(channel="C1", text="https://example.com", unfurl_links=False, unfurl_media=False)
    web.chat_postMessage(channel="C1", text="https://example.com", unfurl_links=False)

    (unfurling,) = slack_api.unfurling_posts()
    assert "unfurl_media" not in unfurling.args


def test_reactions_are_tracked_like_slack_does(slack_api, web):
    web.reactions_add(channel="C1", timestamp="5.0", name="hourglass_flowing_sand")
    with pytest.raises(SlackApiError) as twice:
        web.reactions_add(channel="C1", timestamp="5.0", name="hourglass_flowing_sand")
    assert slack_api.reactions("C1", "5.0") == {"hourglass_flowing_sand"}

    web.reactions_remove(channel="C1", timestamp="5.0", name="hourglass_flowing_sand")

    assert twice.value.response["error"] == "already_reacted"
    assert slack_api.reactions("C1", "5.0") == set()


def test_views_get_an_id_that_updates_keep(web):
    view = {"type": "modal", "callback_id": "rubric_edit", "title": {"type": "plain_text", "text": "Rubric"}}

    opened = web.views_open(trigger_id=new_trigger_id(), view=view)
    updated = web.views_update(view_id=opened["view"]["id"], view=view)

    assert opened["view"]["callback_id"] == "rubric_edit"
    assert updated["view"]["id"] == opened["view"]["id"]


def plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


def input_block(block_id: str, action_id: str = "value") -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "label": plain("A"),
        "element": {"type": "plain_text_input", "action_id": action_id},
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"title": plain("A title of twenty-five ch")}, "/view/title/text"),
        ({"submit": plain("A submit button's long label")}, "/view/submit/text"),
        ({"blocks": [input_block(f"b{n}") for n in range(101)]}, "no more than 100 items"),
        ({"blocks": [input_block("same"), input_block("same")]}, "duplicate block_id 'same'"),
        ({"blocks": [{"type": "input", "block_id": "b1", "label": plain("A")}]}, "/view/blocks/0/element"),
        (
            {
                "blocks": [
                    {
                        "type": "actions",
                        "elements": [
                            {"type": "button", "text": plain("A"), "action_id": "go"},
                            {"type": "button", "text": plain("B"), "action_id": "go"},
                        ],
                    }
                ]
            },
            "duplicate action_id 'go'",
        ),
        ({"type": "home"}, "/view/type"),
    ],
)
@pytest.mark.parametrize("method", ["views.open", "views.push", "views.update"])
def test_a_modal_slack_would_refuse_is_invalid_arguments(slack_api, web, method, change, problem):
    view = {"type": "modal", "title": plain("Rubric"), "blocks": [input_block("b1")]} | change
    ids = {"view_id": "V1"} if method == "views.update" else {"trigger_id": new_trigger_id()}

    with pytest.raises(SlackApiError) as raised:
        web.api_call(method, json={**ids, "view": view})

    assert raised.value.response["error"] == "invalid_arguments"
    assert any(problem in error for error in raised.value.response["errors"])
    web.api_call(method, json={**ids, "view": {**view, **VALID_MODAL}})  # the same, fixed, is taken


VALID_MODAL = {"type": "modal", "title": plain("Rubric"), "submit": plain("Save"), "blocks": []}
"""What the refused modals become once fixed."""


@pytest.fixture
def clocked() -> Iterator[tuple[ManualClock, TriggerIds, WebClient]]:
    """A Slack stand-in whose trigger ids age only as the test moves its clock; a client of it."""
    clock = ManualClock()
    triggers = TriggerIds(clock)
    with SlackApiStandin(token="xoxb-clocked", triggers=triggers) as api:
        yield clock, triggers, WebClient(token=api.token, base_url=api.api_url)


def refusal(call: Callable[[], object]) -> str:
    """The error Slack answered `call` with."""
    with pytest.raises(SlackApiError) as raised:
        call()
    return str(raised.value.response["error"])


@pytest.mark.parametrize("method", ["views.open", "views.push"])
def test_a_trigger_id_opens_one_view_and_is_refused_after(clocked, method):
    _, triggers, web = clocked
    trigger = triggers.hand_out()

    opened = web.api_call(method, json={"trigger_id": trigger, "view": VALID_MODAL})
    again = refusal(lambda: web.api_call(method, json={"trigger_id": trigger, "view": VALID_MODAL}))

    assert opened["ok"] and again == "exchanged_trigger_id"


@pytest.mark.parametrize("method", ["views.open", "views.push"])
def test_a_trigger_id_older_than_slacks_three_seconds_is_expired(clocked, method):
    clock, triggers, web = clocked
    in_time, too_late = triggers.hand_out(), triggers.hand_out()

    clock.advance(TRIGGER_EXPIRY_SECONDS)
    web.api_call(method, json={"trigger_id": in_time, "view": VALID_MODAL})  # at the bound: taken
    clock.advance(0.001)

    expired = refusal(lambda: web.api_call(method, json={"trigger_id": too_late, "view": VALID_MODAL}))
    assert expired == "expired_trigger_id"


def test_a_trigger_id_slack_never_handed_out_is_invalid(clocked):
    _, _, web = clocked
    other_ledgers = new_trigger_id()  # handed out by the payload builders, not by this stand-in's ledger

    assert refusal(lambda: web.views_open(trigger_id="1.2.3", view=VALID_MODAL)) == "invalid_trigger_id"
    assert refusal(lambda: web.views_open(trigger_id=other_ledgers, view=VALID_MODAL)) == "invalid_trigger_id"


async def test_get_methods_and_unknown_methods_are_answered_and_recorded(slack_api):
    client = AsyncWebClient(token=slack_api.token, base_url=slack_api.api_url)

    with pytest.raises(SlackApiError) as unknown_thread:
        await client.conversations_replies(channel="C1", ts="5.0")
    await client.assistant_threads_setStatus(channel_id="C1", thread_ts="5.0", status="is grading…")

    assert unknown_thread.value.response["error"] == "thread_not_found"
    [get] = slack_api.calls("conversations.replies")
    [status] = slack_api.calls("assistant.threads.setStatus")
    assert (get.http_method, get.args["channel"], get.args["ts"]) == ("GET", "C1", "5.0")
    assert status.ok and status.args["status"] == "is grading…"


def test_response_url_posts_are_recorded(slack_api):
    body = json.dumps({"text": "ephemeral answer"}).encode()
    request = urllib.request.Request(
        slack_api.response_url("cmd"), body, {"Content-Type": "application/json"}
    )
    DIRECT.open(request, timeout=5).close()

    [call] = slack_api.calls("response_url")
    assert (call.args["name"], call.args["text"]) == ("cmd", "ephemeral answer")


# ----- model stand-in -----


def test_worker_answers_with_usage_through_init_chat_model(model_api, chat):
    model_api.worker = lambda request: f"echo: {request.last_user_text}"

    answer = chat.invoke([SystemMessage("be brief"), HumanMessage("hello there")])

    assert answer.content == "echo: hello there"
    assert answer.usage_metadata["input_tokens"] > 0
    assert answer.usage_metadata["output_tokens"] == 3
    [request] = model_api.requests()
    assert (request.role, request.system, request.body["model"]) == ("worker", "be brief", "gpt-4o-mini")


def test_streaming_delivers_the_whole_answer_and_usage_only_when_asked(model_api):
    model_api.worker = lambda request: "one two three four"
    with_usage = ChatOpenAI(
        model="gpt-4o-mini", base_url=model_api.base_url, api_key="test", stream_usage=True
    )
    without = ChatOpenAI(model="gpt-4o-mini", base_url=model_api.base_url, api_key="test", stream_usage=False)

    chunks = list(with_usage.stream("go"))
    plain = list(without.stream("go"))

    whole = sum(chunks[1:], chunks[0])
    assert len(chunks) > 2
    assert whole.content == "one two three four"
    assert whole.usage_metadata["output_tokens"] == 4
    assert "".join(c.content for c in plain) == "one two three four"
    assert all(c.usage_metadata is None for c in plain)
    assert [r.include_usage for r in model_api.requests()] == [True, False]


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_worker_tool_calls_reach_the_client(model_api, chat, streamed):
    model_api.worker = lambda request: call_tool("count_lines", text="a\nb")
    with_tools = chat.bind_tools([count_lines])

    if streamed:
        chunks = list(with_tools.stream("how many lines?"))
        answer = sum(chunks[1:], chunks[0])
    else:
        answer = with_tools.invoke("how many lines?")

    assert [(c["name"], c["args"]) for c in answer.tool_calls] == [("count_lines", {"text": "a\nb"})]
    assert model_api.requests()[0].tool_names == ["count_lines"]


# langchain-openai's streamed structured output trips a pydantic serializer warning inside the openai SDK.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize(
    ("method", "streamed"),
    [("json_schema", False), ("json_schema", True), ("function_calling", False)],
    ids=["response_format", "response_format streamed", "forced tool"],
)
def test_grader_requests_get_the_grade_in_the_shape_they_ask_for(model_api, chat, method, streamed):
    model_api.grader = fixed_grader([CRITERION, OTHER], failing=[CRITERION])
    grader = chat.with_structured_output(RubricGrade, method=method)

    grade = list(grader.stream("grade it"))[-1] if streamed else grader.invoke("grade it")

    assert grade.result == "needs_revision"
    assert [(c.name, c.passed, c.gap) for c in grade.criteria] == [
        (CRITERION, False, DEFAULT_GAP),
        (OTHER, True, ""),
    ]
    [request] = model_api.requests()
    assert (request.role, request.grader_schema) == ("grader", "RubricGrade")


@pytest.mark.parametrize("strategy", [RubricGrade, ToolStrategy(RubricGrade)], ids=["auto", "tool strategy"])
def test_a_grader_agent_with_evidence_tools_gets_its_structured_grade(model_api, chat, strategy):
    model_api.grader = fixed_grader([CRITERION, OTHER], failing=[OTHER])
    agent = create_agent(chat, tools=[count_lines], response_format=strategy)

    grade = agent.invoke({"messages": [HumanMessage("grade it")]})["structured_response"]

    assert [(c.name, c.passed) for c in grade.criteria] == [(CRITERION, True), (OTHER, False)]
    [request] = model_api.requests()
    assert request.role == "grader"
    assert "count_lines" in request.tool_names


def test_grader_offered_evidence_tools_still_answers_with_its_verdict(model_api, chat):
    model_api.grader = fixed_grader([CRITERION])

    answer = chat.bind_tools([count_lines, RubricGrade], tool_choice="any").invoke("grade it")

    [call] = answer.tool_calls
    assert call["name"] == "RubricGrade"
    assert call["args"]["result"] == "satisfied"


def test_scored_grader_requests_get_scores(model_api, chat):
    model_api.grader = fixed_grader(["Correctness", "Tone"], failing=["Tone"])

    grade = chat.with_structured_output(ScoredRubricGrade).invoke("grade it")

    assert [(c.name, c.score) for c in grade.criteria] == [
        ("Correctness", PASSING_SCORE),
        ("Tone", FAILING_SCORE),
    ]


def test_scripted_revision_needs_exactly_one_revision_per_run(model_api, chat):
    model_api.worker, model_api.grader = scripted_revision([CRITERION, OTHER])
    grader = chat.with_structured_output(RubricGrade)

    def grade(conversation):
        transcript = "\n".join(f"{m.type}: {m.content}" for m in conversation)
        return grader.invoke([SystemMessage("Grade the transcript."), HumanMessage(transcript)])

    conversation, verdicts, answers = [], [], []
    for request in ("What is the boiling point of water?", "And at altitude?"):
        conversation.append(HumanMessage(request))
        while True:
            answer = chat.invoke(conversation)
            conversation.append(answer)
            answers.append(answer.content)
            verdict = grade(conversation)
            verdicts.append(verdict.result)
            if verdict.result == "satisfied":
                break
            gaps = "; ".join(c.gap for c in verdict.criteria if not c.passed)
            conversation.append(HumanMessage(f"Revise your answer. Gaps: {gaps}"))

    assert answers == [DRAFT_ANSWER, REVISED_ANSWER, DRAFT_ANSWER, REVISED_ANSWER]
    assert verdicts == ["needs_revision", "satisfied", "needs_revision", "satisfied"]
    assert len(model_api.requests("worker")) == len(model_api.requests("grader")) == 4


def test_injected_failures_hit_only_the_chosen_role(model_api, chat):
    model_api.grader = fixed_grader([CRITERION])
    model_api.fail_next(500, role="grader")
    grader = chat.with_structured_output(RubricGrade)

    assert chat.invoke("hi").content
    with pytest.raises(openai.InternalServerError):
        grader.invoke("grade it")
    assert grader.invoke("grade it").result == "satisfied"


def test_a_missing_grader_script_is_a_clear_client_error(model_api, chat):
    with pytest.raises(openai.BadRequestError, match="no grader handler"):
        chat.with_structured_output(RubricGrade).invoke("grade it")

    assert model_api.handler_errors == ["model stand-in: no grader handler is set"]


def test_a_broken_script_is_reported_not_hung(model_api, chat):
    model_api.worker = lambda request: 1 / 0

    with pytest.raises(openai.BadRequestError, match="ZeroDivisionError"):
        chat.invoke("hi")


def test_a_handler_can_answer_with_an_http_error(model_api, chat):
    model_api.worker = lambda request: ErrorReply(503)

    with pytest.raises(openai.InternalServerError, match="503"):
        chat.invoke("hi")


def test_a_request_given_no_answer_is_held_until_the_client_gives_up(model_api, chat):
    model_api.worker = lambda request: NO_ANSWER if "hang" in request.last_user_text else "fine"

    impatient = ChatOpenAI(
        model="gpt-4o-mini", base_url=model_api.base_url, api_key="test", max_retries=0, timeout=0.5
    )
    with pytest.raises(openai.APITimeoutError):
        impatient.invoke("hang please")
    assert chat.invoke("and now?").content == "fine"  # other requests are still answered
    assert [r.last_user_text for r in model_api.requests()] == ["hang please", "and now?"]


def test_stopping_the_stand_in_releases_requests_given_no_answer(model_api):
    model_api.worker = lambda request: NO_ANSWER
    client = ChatOpenAI(model="gpt-4o-mini", base_url=model_api.base_url, api_key="test", max_retries=0)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.invoke, "hang")
        wait_for(lambda: model_api.requests(), message="the request to arrive")
        model_api.stop()  # must not wait out aiohttp's shutdown timeout
        with pytest.raises(openai.InternalServerError, match="stopped without answering"):
            pending.result(timeout=STOP_TIMEOUT)


def test_held_requests_are_recorded_then_answered_once_released(model_api, chat):
    model_api.hold()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(chat.invoke, "wait for it")
        wait_for(lambda: model_api.requests(), message="the request to arrive")
        assert not pending.done()  # recorded, and held

        model_api.release()
        assert pending.result(timeout=STOP_TIMEOUT).content == "Stand-in answer."
    assert chat.invoke("and now?").content == "Stand-in answer."


async def test_slow_answers_are_served_concurrently(model_api, chat):
    model_api.latency = 0.3

    answers = await asyncio.gather(*(chat.ainvoke(f"question {i}") for i in range(10)))

    assert {a.content for a in answers} == {"Stand-in answer."}
    assert model_api.peak_concurrency > 1


def test_the_responses_api_is_not_served(model_api):
    client = ChatOpenAI(
        model="gpt-4o-mini", base_url=model_api.base_url, api_key="test", use_responses_api=True
    )

    with pytest.raises(openai.NotFoundError, match="/v1/responses"):
        client.invoke("hi")


# ----- signed requests, received by a real Bolt app -----

SECRET = "standin-test-secret"


class BoltReceiver(BackgroundServer):
    """A Bolt AsyncApp over HTTP, authorised against the Slack stand-in, recording what reaches it."""

    def __init__(self, slack_api: SlackApiStandin) -> None:
        super().__init__()
        self.slack_api = slack_api
        self.seen: list[tuple[str, dict]] = []

    def build_app(self):
        app = AsyncApp(
            signing_secret=SECRET,
            client=AsyncWebClient(token=self.slack_api.token, base_url=self.slack_api.api_url),
            process_before_response=True,  # listeners finish before the HTTP answer: no waiting in tests
        )

        @app.event("app_mention")
        async def mention(event, req):
            self.seen.append(
                ("app_mention", {**event, "retry_num": req.headers.get("x-slack-retry-num", [None])[0]})
            )

        @app.event({"type": "message", "subtype": "message_changed"})
        async def edited(event):
            self.seen.append(("message_changed", event))

        @app.event("message")
        async def posted(event):
            self.seen.append(("message", event))

        @app.command("/rubric")
        async def command(ack, command):
            await ack(f"got {command['text']}")
            self.seen.append(("command", command))

        @app.action("review_agree")
        async def action(ack, body, action):
            await ack()
            self.seen.append(("action", {**action, "thread_ts": body["container"]["thread_ts"]}))

        @app.view("rubric_edit")
        async def view(ack, view):
            text = view["state"]["values"]["rubric"]["rubric_text"]["value"]
            await ack(response_action="errors", errors={"rubric": f"cannot parse {text!r}"})

        return app.web_app()


@pytest.fixture
def receiver(slack_api):
    with BoltReceiver(slack_api) as server:
        yield server


@pytest.fixture
def sender(receiver):
    sender = SlackSender(f"{receiver.url}/slack/events", SECRET)
    yield sender
    sender.close()


def test_sign_matches_slacks_verifier():
    body = b'{"type":"event_callback"}'
    verifier = SignatureVerifier(SECRET)

    assert verifier.is_valid_request(body, sign(body, SECRET))
    assert not verifier.is_valid_request(body, sign(body, "another secret"))


def test_a_signed_mention_reaches_the_listener(receiver, sender):
    ts = new_ts()

    answer = sender.send(event_callback(app_mention("summarise this", "C1", ts)))

    assert answer.status == 200
    assert receiver.seen == [
        (
            "app_mention",
            {**receiver.seen[0][1], "text": "<@UBOT> summarise this", "ts": ts, "retry_num": None},
        )
    ]


def test_retry_headers_are_delivered(receiver, sender):
    sender.send(
        event_callback(app_mention("again", "C1", new_ts())), retry_num=1, retry_reason="http_timeout"
    )

    assert receiver.seen[0][1]["retry_num"] == "1"


@pytest.mark.parametrize(
    "tamper", [{"bad_signature": True}, {"timestamp": 1_600_000_000}], ids=["secret", "stale"]
)
def test_a_badly_signed_request_is_refused_and_not_dispatched(receiver, sender, tamper):
    answer = sender.send(event_callback(app_mention("hi", "C1", new_ts())), **tamper)

    assert answer.status == 401
    assert receiver.seen == []


def test_url_verification_is_answered_with_the_challenge(sender):
    assert sender.send(url_verification("abc123")).json() == {"challenge": "abc123"}


def test_the_bots_own_messages_are_recognised_as_its_own(receiver, sender):
    sender.send(event_callback(bot_message("my answer", "C1", new_ts())))
    sender.send(event_callback(message("a person", "C1", new_ts(), thread_ts="1.0")))

    assert [(kind, event["text"]) for kind, event in receiver.seen] == [("message", "a person")]


def test_edits_arrive_as_message_changed(receiver, sender):
    ts = new_ts()

    sender.send(event_callback(message_changed("new words", "C1", ts, previous_text="old words")))

    [(kind, event)] = receiver.seen
    assert (kind, event["message"]["text"], event["message"]["ts"]) == ("message_changed", "new words", ts)


def test_a_slash_command_is_acked_with_the_listeners_answer(receiver, sender, slack_api):
    answer = sender.send(slash_command("show", "C9", response_url=slack_api.response_url()))

    assert (answer.status, answer.body) == (200, "got show")
    assert receiver.seen[0][1]["channel_id"] == "C9"


def test_a_button_click_carries_its_value_and_thread(receiver, sender):
    value = json.dumps({"r": "run-1", "i": 0})

    answer = sender.send(block_actions("review_agree", value, "C1", message_ts="7.0", thread_ts="6.0"))

    assert answer.status == 200
    assert [(kind, a["value"], a["thread_ts"]) for kind, a in receiver.seen] == [("action", value, "6.0")]


def test_a_view_submission_gets_the_listeners_inline_errors(sender):
    payload = view_submission("rubric_edit", text_input("rubric", "rubric_text", "dimensions: ["), "{}")

    answer = sender.send(payload)

    assert answer.json() == {
        "response_action": "errors",
        "errors": {"rubric": "cannot parse 'dimensions: ['"},
    }


async def test_async_sends_are_signed_too(receiver, sender):
    mentions = [event_callback(app_mention(f"m{i}", f"C{i}", new_ts())) for i in range(5)]

    async with aiohttp.ClientSession() as session:
        answers = await asyncio.gather(*(sender.send_async(m, session) for m in mentions[1:]))
    answers.append(await sender.send_async(mentions[0]))

    assert [a.status for a in answers] == [200] * 5
    assert sorted(event["text"] for _, event in receiver.seen) == [f"<@UBOT> m{i}" for i in range(5)]


# ----- the bot harness (with stand-in commands: the bot itself is tested elsewhere) -----

SERVE = (sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}")


def serves(port: int) -> bool:
    with DIRECT.open(f"http://127.0.0.1:{port}/", timeout=5) as response:
        return response.status == 200


def test_start_bot_waits_for_the_port_and_restarts_on_the_same_one(start_bot, tmp_path):
    # http.server serves the bot's working directory: a file named `readyz` answers the readiness probe.
    (tmp_path / "readyz").write_text("ready\n")
    process = start_bot(command=SERVE)
    port = process.port

    assert serves(port)
    process.restart()
    assert process.port == port
    assert serves(port)
    assert process.stop() is not None
    assert process.stderr_text().count("bot start #") == 2


def test_the_bot_gets_the_stand_ins_and_a_fresh_database(
    start_bot, slack_api, model_api, tmp_path, monkeypatch
):
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-from-the-developers-shell")
    names = ("SLACK_API_URL", "OPENAI_BASE_URL", "RUBRIC_BOT_DB", "RUBRIC_BOT_MODEL", "SLACK_APP_TOKEN")
    show = f"import os, sys; print([os.environ.get(n) for n in {names!r}], file=sys.stderr); sys.exit(3)"

    with pytest.raises(RuntimeError, match="exited with code 3") as raised:
        start_bot(command=(sys.executable, "-c", show))

    seen = str(
        [slack_api.api_url, model_api.base_url, str(tmp_path / "bot.sqlite"), "openai:gpt-4o-mini", None]
    )
    assert seen in str(raised.value)


def test_env_overrides_set_and_unset_variables(start_bot):
    show = (
        "import os, sys; env = os.environ.get; "
        "print(env('RUBRIC_BOT_MAX_ITERATIONS'), env('OPENAI_API_KEY'), file=sys.stderr); sys.exit(1)"
    )
    overrides = {"RUBRIC_BOT_MAX_ITERATIONS": "5", "OPENAI_API_KEY": None}

    with pytest.raises(RuntimeError, match="\n5 None"):
        start_bot(command=(sys.executable, "-c", show), env=overrides)


def test_wait_for_returns_the_value_or_names_what_it_waited_for():
    assert wait_for(lambda: [1], timeout=1) == [1]
    with pytest.raises(AssertionError, match="the final message"):
        wait_for(lambda: [], timeout=0.1, message="the final message")
