"""Requests that are not from Slack, and malformed ones, against the real bot process over HTTP.

A request without Slack's valid signature is refused with 401 before its body is read; a signed
body that is not what Slack sends is refused with 400. Either costs one log line, never a
traceback, and the log never repeats the body (anyone who can reach the port chooses it).

Button clicks and form submissions whose parts the bot cannot read are acked and answered: an
error shown on the form's input, or a notice only the clicker sees.
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

from tests.e2e.conftest import (
    CRITERIA,
    RUN_TIMEOUT,
    SIGNING_SECRET,
    BotProcess,
    Service,
    button_value,
    ephemerals,
    form_values,
    shared_service,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import scripted_revision
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
def service(tmp_path_factory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("requests-bot")) as service:
        yield service


@pytest.fixture
def bot(service: Service) -> BotProcess:
    return service.bot


def post_and_read_log(
    bot: BotProcess, body: bytes, content_type: str, **options: Any
) -> tuple[SlackResponse, str]:
    """Post ``body`` and return the answer with what the bot logged meanwhile."""
    before = len(bot.stderr_text())
    response = bot.sender.post(body, content_type, **options)
    return response, bot.stderr_text()[before:]


UNSIGNED = "no valid Slack signature"
"""What the bot's log line about a request without Slack's valid signature says."""


def assert_one_quiet_line(log: str, says: str) -> None:
    """The log holds exactly one line, saying `says`, and nothing of the request's body."""
    assert "Traceback" not in log and MARKER not in log, log
    assert len(log.splitlines()) == 1 and says in log, log


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
    assert_one_quiet_line(log, UNSIGNED)


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
    assert_one_quiet_line(bot.stderr_text()[before:], UNSIGNED)


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
    assert_one_quiet_line(log, problem)


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


def test_a_slash_command_with_the_word_payload_in_it_is_not_lost(bot):
    # Bolt alone takes any form containing "payload" for interactivity and reads it as empty.
    answer = bot.sender.send(sr.slash_command("set - Describes the payload", "C-payload-team"))

    assert answer.status == 200, answer.body
    assert "Channel default rubric set" in answer.json()["text"]
    shown = bot.sender.send(sr.slash_command("show", "C-payload-team")).json()["text"]
    assert "- Describes the payload" in shown


# -- clicks and form submissions the bot cannot read ---------------------------------------------------


@pytest.fixture
def s(service: Service) -> Service:
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


def send_and_read_log(s: Service, payload: dict[str, Any]) -> tuple[Any, str]:
    """Send a signed payload (it must be acked with 200) and return its answer and the new log."""
    before = len(s.bot.stderr_text())
    response = s.send(payload)
    return response, s.bot.stderr_text()[before:]


def editor_submission(channel: str, **view: Any) -> dict[str, Any]:
    """The channel-rubric editor's submission, its view's fields replaced by ``view`` (None drops one)."""
    payload = sr.view_submission(
        "rubric_edit", sr.text_input("rubric", "rubric_text", "- Is short"), json.dumps({"channel": channel})
    )
    for key, value in view.items():
        payload["view"].pop(key)
        if value is not None:
            payload["view"][key] = value
    return payload


@pytest.mark.parametrize(
    ("view", "problem"),
    [
        pytest.param({"state": None}, "without the rubric", id="no-state"),
        pytest.param({"state": {"values": {}}}, "without the rubric", id="no-input"),
        pytest.param({"state": {"values": {"rubric": []}}}, "can't read", id="input-not-an-object"),
        pytest.param({"private_metadata": None}, "/rubric edit", id="no-metadata"),
        pytest.param({"private_metadata": ""}, "/rubric edit", id="empty-metadata"),
        pytest.param({"private_metadata": "C-not-json"}, "/rubric edit", id="metadata-not-json"),
        pytest.param({"private_metadata": json.dumps({"channel": 5})}, "/rubric edit", id="channel-number"),
        pytest.param({"private_metadata": "[]"}, "/rubric edit", id="metadata-array"),
    ],
)
def test_an_editor_form_the_bot_cannot_read_gets_an_error_on_its_input(s, view, problem):
    channel = "M1"
    answer, log = send_and_read_log(s, editor_submission(channel, **view))

    assert answer.json()["response_action"] == "errors"
    assert problem in answer.json()["errors"]["rubric"]
    assert "Traceback" not in log
    assert "no default rubric" in s.send(sr.slash_command("show", channel)).json()["text"]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param('{"r":"run-1","i":1e999}', id="i-1e999"),
        pytest.param(json.dumps({"r": "run-1", "i": 2**70}), id="i-huge"),
        pytest.param(json.dumps({"r": "run-1", "i": -1}), id="i-negative"),
        pytest.param(json.dumps({"r": "run-1", "i": "0"}), id="i-string"),
        pytest.param(json.dumps({"r": 5, "i": 0}), id="r-number"),
        pytest.param(json.dumps(["run-1", 0]), id="array"),
        pytest.param("run-1:0", id="not-json"),
        pytest.param("", id="empty"),
    ],
)
@pytest.mark.parametrize("action_id", ["review_agree", "review_disagree"])
def test_a_review_button_with_an_unreadable_value_is_explained_to_the_clicker(s, action_id, value):
    channel = f"B-{action_id}"
    told_before = len(ephemerals(s.slack, channel))
    before = len(s.bot.stderr_text())

    s.send(sr.block_actions(action_id, value, channel, sr.new_ts(), user="U7"))

    told = wait_for(
        lambda: ephemerals(s.slack, channel)[told_before:], RUN_TIMEOUT, message="an answer to the clicker"
    )
    assert [c.args["user"] for c in told] == ["U7"]
    assert "can't be reviewed" in told[0].args["text"]
    assert "Traceback" not in s.bot.stderr_text()[before:]


def review_form(s: Service, channel: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An opened review form of a freshly graded thread, and its answers as Slack would send them."""
    root, first = s.graded_thread(channel)
    view = s.open_form(first, root, "U1")
    return view, form_values(view, {})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param({"iteration": 2**70}, "iteration", id="iteration-huge"),
        pytest.param({"iteration": 1e300}, "iteration", id="iteration-float"),
        pytest.param({"grading_run_id": ""}, "grading_run_id", id="run-id-empty"),
    ],
)
def test_a_review_form_with_unreadable_metadata_is_replaced_by_a_notice(s, change, problem):
    view, values = review_form(s, f"F-{problem}-{len(s.slack.calls('views.open'))}")
    metadata = json.dumps(json.loads(view["private_metadata"]) | change)

    answer, log = send_and_read_log(s, sr.view_submission(view["callback_id"], values, metadata, "U1"))

    assert answer.json()["response_action"] == "update"
    notice = json.dumps(answer.json()["view"])
    assert "can't be saved" in notice and problem in notice
    assert "Traceback" not in log


def test_a_review_form_whose_answers_are_unreadable_is_answered_not_failed(s):
    view, values = review_form(s, "F-state")
    first_block = next(iter(values))
    values[first_block] = ["not", "an", "input"]

    answer, log = send_and_read_log(
        s, sr.view_submission(view["callback_id"], values, view["private_metadata"])
    )

    assert answer.json()["response_action"] == "update"
    assert "can't be saved" in json.dumps(answer.json()["view"])
    assert "Traceback" not in log


def test_payloads_without_a_user_are_acked_and_logged_in_one_line(s):
    root, first = s.graded_thread("U-less")
    click = sr.block_actions("review_agree", button_value(first), "U-less", first.ts, root)
    del click["user"]
    view = s.open_form(first, root, "U1")
    submission = sr.view_submission(view["callback_id"], form_values(view, {}), view["private_metadata"])
    del submission["user"]

    before = len(s.bot.stderr_text())
    s.send(click)
    answer = s.send(submission).json()

    assert answer["response_action"] == "update" and "can't be saved" in json.dumps(answer["view"])
    log = wait_for(
        lambda: (log := s.bot.stderr_text()[before:]).count("unreadable") == 2 and log,
        RUN_TIMEOUT,
        message="a log line for each",
    )
    assert "Traceback" not in log


def test_a_disagree_click_without_a_trigger_id_asks_the_clicker_to_click_again(s):
    root, first = s.graded_thread("T-less")
    click = sr.block_actions("review_disagree", button_value(first), "T-less", first.ts, root, "U8")
    del click["trigger_id"]

    s.send(click)

    (told,) = wait_for(lambda: ephemerals(s.slack, "T-less"), RUN_TIMEOUT, message="an answer to the clicker")
    assert told.args["user"] == "U8" and "click the button again" in told.args["text"]
    assert told.args["thread_ts"] == root


@pytest.mark.parametrize(
    ("level", "shown", "hidden"),
    [("WARNING", (), (" INFO ", " DEBUG ")), ("DEBUG", (" INFO ", " DEBUG "), ())],
)
def test_the_log_level_setting_decides_which_lines_the_bot_logs(start_bot, level, shown, hidden):
    bot = start_bot(env={"RUBRIC_BOT_LOG_LEVEL": level})
    # An unsigned request is refused at INFO (see above): logged at DEBUG, left out at WARNING.
    response, _ = post_and_read_log(bot, NOT_JSON, JSON, headers={"X-Slack-Signature": None})
    assert response.status == 401

    log = bot.stderr_text()
    assert [words for words in shown if words not in log] == [], log
    assert [words for words in hidden if words in log] == [], log
    assert (UNSIGNED in log) == (level == "DEBUG")
