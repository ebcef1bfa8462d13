"""Requests that are not from Slack, and malformed ones, against the real bot process over HTTP.

A request without Slack's valid signature is refused with 401 before its body is read; a signed
body that is not what Slack sends is refused with 400. Either costs one log line, never a
traceback, and the log never repeats the body (anyone who can reach the port chooses it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.e2e.conftest import BOT_COMMAND, BOT_TOKEN, SIGNING_SECRET, BotProcess, bot_environment
from tests.standins import slack_requests as sr
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin
from tests.standins.slack_requests import SlackResponse

MARKER = "BODY-MARKER-7f3a"
"""Put in every refused body: the log must never show it."""
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
STALE_SECONDS = 10 * 60
"""Older than the five minutes Slack's verification allows."""
TOO_LARGE = 2 * 1024 * 1024
"""Bytes in a body over aiohttp's default client_max_size (1 MiB)."""


@pytest.fixture(scope="module")
def bot(tmp_path_factory) -> Iterator[BotProcess]:
    with SlackApiStandin(token=BOT_TOKEN) as slack, ModelApiStandin() as model:
        tmp = tmp_path_factory.mktemp("requests-bot")
        process = BotProcess(
            BOT_COMMAND, bot_environment(slack, model, tmp / "bot.sqlite"), tmp / "bot.log", tmp
        )
        process.start()
        try:
            yield process
        finally:
            process.stop()
            process.sender.close()


def post_and_read_log(
    bot: BotProcess, body: bytes, content_type: str, **options: Any
) -> tuple[SlackResponse, str]:
    """Post ``body`` and return the answer with what the bot logged meanwhile."""
    before = len(bot.stderr_text())
    response = bot.sender.post(body, content_type, **options)
    return response, bot.stderr_text()[before:]


def assert_one_quiet_line(log: str) -> None:
    assert "Traceback" not in log and MARKER not in log, log
    assert len(log.splitlines()) <= 1, log


NOT_JSON = f"not json {MARKER}".encode()
MENTION = json.dumps(sr.event_callback(sr.app_mention(MARKER, "C1", sr.new_ts()))).encode()


@pytest.mark.parametrize(
    ("body", "content_type", "options"),
    [
        pytest.param(NOT_JSON, JSON, {"headers": {"X-Slack-Signature": None}}, id="unsigned-garbage-json"),
        pytest.param(NOT_JSON, FORM, {"headers": {"X-Slack-Request-Timestamp": None}}, id="no-timestamp"),
        pytest.param(NOT_JSON, JSON, {"headers": {"X-Slack-Request-Timestamp": "abc"}}, id="timestamp-abc"),
        pytest.param(NOT_JSON, FORM, {"bad_signature": True}, id="bad-signature-garbage-form"),
        pytest.param(MENTION, JSON, {"timestamp": int(time.time()) - STALE_SECONDS}, id="stale"),
        pytest.param(MENTION, JSON, {"headers": {"X-Slack-Signature": "v0=00"}}, id="wrong-signature"),
    ],
)
def test_a_request_without_slacks_valid_signature_is_401_with_one_quiet_log_line(
    bot, body, content_type, options
):
    response, log = post_and_read_log(bot, body, content_type, **options)

    assert response.status == 401, response.body
    assert_one_quiet_line(log)


def test_a_body_that_is_not_utf8_is_401_even_when_signed_with_the_secret(bot):
    body = MARKER.encode() + b"=\xff\xfe"
    stamp = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    headers = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}
    request = urllib.request.Request(bot.url, data=body, headers={"Content-Type": FORM, **headers})
    before = len(bot.stderr_text())

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10)

    assert refused.value.code == 401
    assert_one_quiet_line(bot.stderr_text()[before:])


def form(**fields: str) -> bytes:
    return urlencode(fields).encode()


@pytest.mark.parametrize(
    ("body", "content_type", "problem"),
    [
        pytest.param(NOT_JSON, JSON, "not JSON", id="json-not-json"),
        pytest.param(b"{" + MARKER.encode(), FORM, "not JSON", id="brace-not-json"),
        pytest.param(json.dumps([MARKER]).encode(), JSON, "not an object", id="json-array"),
        pytest.param(b"", JSON, "not JSON", id="empty-json"),
        pytest.param(NOT_JSON, FORM, "neither JSON nor a form", id="not-a-form"),
        pytest.param(form(team_id="T1", user=MARKER), FORM, "no payload", id="form-without-payload"),
        pytest.param(b"", FORM, "no payload", id="empty-form"),
        pytest.param(form(payload=MARKER), FORM, "payload field is not JSON", id="payload-not-json"),
        pytest.param(form(payload=json.dumps([MARKER])), FORM, "not an object", id="payload-array"),
        pytest.param(
            json.dumps({"team": 5, "m": MARKER}).encode(), JSON, "not shaped", id="json-team-number"
        ),
        pytest.param(
            form(payload=json.dumps({"type": "block_actions", "user": 5, "m": MARKER})),
            FORM,
            "not shaped",
            id="payload-user-number",
        ),
    ],
)
def test_a_signed_body_slack_would_not_send_is_400_with_one_quiet_log_line(bot, body, content_type, problem):
    response, log = post_and_read_log(bot, body, content_type)

    assert response.status == 400, response.body
    assert problem in response.json()["error"]
    assert_one_quiet_line(log)
    assert problem in log


def test_a_body_too_large_is_refused_with_413_before_its_signature_is_checked(bot):
    response, log = post_and_read_log(bot, MARKER.encode() * (TOO_LARGE // len(MARKER)), JSON)

    assert response.status == 413
    assert "Traceback" not in log and MARKER not in log


def test_signed_requests_slack_sends_still_reach_bolt(bot):
    challenge = bot.sender.send(sr.url_verification("challenge-1"))
    assert (challenge.status, challenge.json()) == (200, {"challenge": "challenge-1"})

    help_text = bot.sender.send(sr.slash_command("help", "C1")).json()["text"]
    assert "/rubric set" in help_text

    # Slack checks a command's URL with a form of its own.
    assert bot.sender.post(form(ssl_check="1", token=sr.VERIFICATION_TOKEN), FORM).status == 200
