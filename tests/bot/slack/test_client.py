"""Slack plumbing: what a failed Web API call and a failing listener leave in the log."""

from __future__ import annotations

import logging

import psycopg
import sqlalchemy.exc
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from bot.config import Settings
from bot.slack.client import attempt, build_client, describe_error, log_listener_failure
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-client"

CLICK = {"type": "block_actions", "actions": [{"action_id": "review_agree"}]}


def slack_failure(code: str) -> SlackApiError:
    response = SlackResponse(
        client=None, http_verb="POST", api_url="https://slack.test/api/x", req_args={},
        data={"ok": False, "error": code}, headers={}, status_code=200,
    )  # fmt: skip
    return SlackApiError("failed", response)


async def test_a_failed_call_is_logged_with_slacks_error_code_and_the_work_goes_on(caplog):
    async def refused() -> None:
        raise slack_failure("not_in_channel")

    with caplog.at_level(logging.WARNING):
        assert await attempt(refused(), "post in C1") is None

    assert "could not post in C1: not_in_channel" in caplog.text


async def test_a_bug_in_a_listener_is_logged_with_its_traceback_naming_the_request(caplog):
    try:
        raise KeyError("user")
    except KeyError as exc:
        await log_listener_failure(exc, CLICK)

    assert "handling block_actions review_agree failed" in caplog.text
    assert "Traceback" in caplog.text and "KeyError: 'user'" in caplog.text


async def test_a_slack_failure_reaching_the_error_handler_is_one_line(caplog):
    await log_listener_failure(slack_failure("channel_not_found"), {"command": "/rubric"})

    assert caplog.messages == ["Slack call failed while handling /rubric: channel_not_found"]
    assert describe_error(TimeoutError()) == "TimeoutError"


async def test_a_database_that_cannot_take_a_request_is_one_line_and_a_503_so_slack_sends_it_again(caplog):
    refused = sqlalchemy.exc.OperationalError(
        "INSERT INTO claims …", {}, psycopg.OperationalError("connection refused\n\tIs the server running?")
    )
    unanswered = BoltResponse(status=500)

    answer = await log_listener_failure(refused, {"event": {"type": "message"}}, unanswered)

    assert answer is not None and answer.status == 503
    assert caplog.messages == [
        "could not take event message: the database is unavailable "
        "(connection refused Is the server running?)"
    ]
    assert "Traceback" not in caplog.text


async def test_the_bots_client_waits_out_a_429_for_its_retry_after_and_then_posts():
    with SlackApiStandin(token=TOKEN) as slack:
        slack.fail_next("chat.postMessage", status=429, retry_after=1)
        client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))

        posted = await client.chat_postMessage(channel="C1", text="hello")

        refused, taken = slack.calls("chat.postMessage")
        assert (refused.status, taken.status) == (429, 200) and posted["ok"]
        assert taken.received_at - refused.received_at >= 1  # asked again only after Retry-After
        assert [m.text for m in slack.messages("C1")] == ["hello"]


def test_the_clients_retries_of_a_failed_call_wait_the_configured_backoff_doubling_each_time():
    settings = Settings(slack_bot_token=TOKEN, slack_api_url="http://127.0.0.1:9", slack_retry_backoff=3.0)
    client = build_client(settings)
    server_errors = client.retry_handlers[1]

    waits = [server_errors.interval_calculator.calculate_sleep_duration(n) for n in range(3)]

    for retry, wait in enumerate(waits):
        assert 3.0 * 2**retry <= wait < 3.0 * 2**retry + 2 * 3.0
