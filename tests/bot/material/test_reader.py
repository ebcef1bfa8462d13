"""Reading a request's material against the Slack stand-in: budgets, refusals, the conversation messages."""

from __future__ import annotations

import aiohttp
import pytest

from bot.config import Settings
from bot.material.files import shared_files
from bot.material.reader import (
    FILES_HEADING,
    THREAD,
    Material,
    MaterialReader,
    conversation_messages,
)
from bot.material.sources import Sources
from bot.material.thread import EarlierThread
from bot.slack.client import build_client
from bot.slack.conversation import UserMessage
from grading import MATERIAL_SOURCE
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-reader"


@pytest.fixture
async def setup():
    with SlackApiStandin(token=TOKEN) as slack:
        async with aiohttp.ClientSession() as session:
            client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
            yield slack, client, session


def request(thread_ts: str = "1700000000.000100", ts: str = "1700000050.000100") -> UserMessage:
    return UserMessage(team="T1", channel="C1", ts=ts, thread_ts=thread_ts, user="U1", text="do it")


def reader(session, slack, **limits) -> MaterialReader:
    settings = {"thread_chars": 20_000, "max_file_bytes": 1_000_000} | limits
    return MaterialReader(session, api_url=slack.api_url, **settings)


async def test_files_past_the_requests_budget_are_named_and_the_rest_read_in_order(setup):
    slack, client, session = setup
    files = [
        slack.add_file("a.txt", b"A" * 40, "text/plain"),
        slack.add_file("b.txt", b"B" * 40, "text/plain"),
        slack.add_file("c.txt", b"C" * 10, "text/plain"),
    ]
    sources = Sources(files=shared_files({"files": files}))

    material = await reader(session, slack, files_chars=60).read(client, request(), sources, thread=False)

    assert material.files_read == ("a.txt", "c.txt")
    (unread,) = material.unread
    assert unread.name == "b.txt" and "past the 60 the worker can be given" in unread.reason
    assert slack.calls("conversations.replies") == []


async def test_a_thread_slack_refuses_to_list_is_named_and_the_files_are_still_read(setup):
    slack, client, session = setup
    slack.error_next("conversations.replies", "missing_scope")
    sources = Sources(files=shared_files({"files": [slack.add_file("a.md", b"# A", "text/markdown")]}))

    material = await reader(session, slack).read(client, request(), sources, thread=True)

    assert material.thread is None and material.files_read == ("a.md",)
    assert [(u.name, u.reason) for u in material.unread] == [
        (THREAD, "Slack refused to list them (missing_scope)")
    ]


async def test_a_thread_is_not_fetched_for_a_top_level_message(setup):
    slack, client, session = setup
    top = request(thread_ts="1700000000.000100", ts="1700000000.000100")
    material = await reader(session, slack).read(client, top, Sources(), thread=True)
    assert material.thread is None and slack.calls("conversations.replies") == []


async def test_a_link_off_slacks_file_host_gets_no_token(setup):
    slack, client, session = setup
    file = slack.add_file("a.txt", b"hello", "text/plain") | {
        "url_private_download": "https://evil.example/a.txt"
    }
    material = await reader(session, slack).read(
        client, request(), Sources(files=shared_files({"files": [file]})), thread=False
    )
    assert [u.reason for u in material.unread] == ["its link is not on Slack's file server"]


def test_the_thread_is_a_material_message_before_the_request_with_its_files_and_what_was_not_read():
    material = Material(
        thread=EarlierThread("[2025-01-01 00:00 UTC] Ana: ship it", read=1, left_out=0),
        files=(),
        unread=(),
    )
    thread, ask = conversation_messages("summarize", material, "slack:C1:1")
    assert thread.additional_kwargs["lc_source"] == MATERIAL_SOURCE and "Ana: ship it" in thread.text
    assert ask.id == "slack:C1:1" and ask.text == "summarize" and FILES_HEADING not in ask.text
    tag = thread.text.splitlines()[1]
    assert tag.startswith("<thread-") and thread.text.endswith("</" + tag[1:])
