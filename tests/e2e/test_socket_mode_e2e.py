"""The real bot process in Socket Mode, driven as Slack drives it.

With ``SLACK_APP_TOKEN`` set (and no signing secret: Socket Mode needs none) ``rubric-bot serve``
opens no port. It asks the Slack stand-in's ``apps.connections.open`` for a websocket URL, connects,
and gets every event and command as an envelope on that socket, which it must ack there; slash
command answers travel in the ack. The tests push envelopes and read the acks through the stand-in.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from tests.e2e.conftest import (
    BOT_TOKEN,
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    BotProcess,
    answers_ready,
    bot_environment,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import DEFAULT_GAP, REVISED_ANSWER, ModelApiStandin, scripted_revision
from tests.standins.slack_api import EnvelopeType, SlackApiStandin, SlackMessage, SocketAck

APP_TOKEN = "xapp-1-A1-socket-mode-test"
"""The app-level token the bot is given; the Slack stand-in opens connections for no other."""
SOCKET_MODE_COMMAND = (sys.executable, "-m", "bot", "serve")
"""`serve` without ``--http``: the app token alone selects Socket Mode."""


@pytest.fixture
def slack_api() -> Iterator[SlackApiStandin]:
    """The Slack stand-in, knowing both tokens (overrides conftest's, which knows the bot token only)."""
    with SlackApiStandin(token=BOT_TOKEN, app_token=APP_TOKEN) as api:
        yield api


@pytest.fixture
def socket_bot(
    start_bot: Callable[..., BotProcess], slack_api: SlackApiStandin, model_api: ModelApiStandin
) -> BotProcess:
    """The bot in Socket Mode, started once its websocket is open; every run needs one revision."""
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    return start_bot(
        env={"SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": None},
        command=SOCKET_MODE_COMMAND,
        ready=slack_api.socket_connected,
    )


def deliver(slack: SlackApiStandin, kind: EnvelopeType, payload: dict[str, Any]) -> SocketAck:
    return slack.wait_for_ack(slack.send_envelope(kind, payload))


def wait_thread(
    slack: SlackApiStandin, channel: str, root: str, done: Callable[[list[SlackMessage]], bool], what: str
) -> list[SlackMessage]:
    """The bot's messages in the thread, once `done` holds for them."""

    def thread() -> list[SlackMessage] | None:
        messages = slack.messages_in_thread(channel, root)
        return messages if done(messages) else None

    return wait_for(thread, RUN_TIMEOUT, message=f"{what} in {channel}/{root}")


def of_type(messages: list[SlackMessage], event_type: str) -> list[SlackMessage]:
    return [m for m in messages if m.event_type == event_type]


def test_the_bot_connects_with_the_app_token_and_keeps_the_tokens_out_of_its_log(socket_bot, slack_api):
    # Both tokens are checked before connecting; then one URL is fetched for the connection itself.
    assert [call.ok for call in slack_api.calls("auth.test")][:1] == [True]
    checked, opened = slack_api.calls("apps.connections.open")
    assert checked.ok and opened.ok  # the stand-in opens connections only for APP_TOKEN
    (connection,) = slack_api.socket_connections()
    assert connection.open and connection.ticket in opened.response["url"]

    log = socket_bot.stderr_text()
    assert APP_TOKEN not in log and BOT_TOKEN not in log
    assert "WARNING" not in log and "ERROR" not in log  # a healthy start alarms nobody


def test_a_mention_over_the_socket_is_acked_and_graded_in_its_thread(socket_bot, slack_api):
    root = sr.new_ts()
    rubric = sr.app_mention(f"rubric:\n{RUBRIC}", "C1", root)
    rubric_ack = deliver(slack_api, "events_api", sr.event_callback(rubric))
    wait_thread(
        slack_api,
        "C1",
        root,
        lambda ms: any("Rubric set" in m.all_text for m in ms),
        "the rubric confirmation",
    )

    question = sr.app_mention("Is coffee healthy?", "C1", sr.new_ts(), thread_ts=root)
    question_ack = deliver(slack_api, "events_api", sr.event_callback(question))
    messages = wait_thread(
        slack_api, "C1", root, lambda ms: bool(of_type(ms, "rubric_final")), "the final answer"
    )

    assert rubric_ack.payload is None and question_ack.payload is None  # events are acked empty
    first, second = of_type(messages, "rubric_evaluation")
    (final,) = of_type(messages, "rubric_final")
    assert "1/3" in first.all_text and DEFAULT_GAP in first.all_text
    assert "2/3" in second.all_text
    assert "Rubric satisfied" in final.all_text and REVISED_ANSWER in final.all_text
    # Slack redelivers an envelope it has no ack for within 3 s, so the ack must not wait for the run.
    first_post = next(
        c
        for c in slack_api.calls("chat.postMessage")
        if (c.args.get("metadata") or {}).get("event_type") == "rubric_evaluation"
    )
    assert question_ack.received_at < first_post.received_at


def test_rubric_commands_over_the_socket_are_answered_in_their_acks(socket_bot, slack_api):
    set_answer = deliver(slack_api, "slash_commands", sr.slash_command(f"set {RUBRIC}", "C2")).payload
    show_answer = deliver(slack_api, "slash_commands", sr.slash_command("show", "C2")).payload

    assert set_answer is not None and "Channel default rubric set" in set_answer["text"]
    assert show_answer is not None and show_answer["response_type"] == "ephemeral"
    assert "- Cites a source" in show_answer["text"] and "- Is polite" in show_answer["text"]
    # Only the caller sees the answers; the channel sees the change announced, once.
    (announced,) = slack_api.messages("C2")
    assert "changed this channel's default rubric" in announced.text


# -- start-up and stopping, as an operator meets them -----------------------------------------------

GRACE_SECONDS = 10
"""RUBRIC_BOT_SHUTDOWN_GRACE for the stopping tests: the bot must be gone within it."""
EXIT_WAIT = 120.0
"""Seconds the stopping tests wait for the bot's own exit before killing it: a bound on an event,
well past the grace, not a clock window (a busy machine can be slow to run the bot's last steps;
the grace itself is the bot's to keep, and its exit code says whether it exited by itself)."""


def connection_attempts(slack: SlackApiStandin) -> int:
    """Websocket URLs the bot asked for: one for the token check, then one as each connection
    attempt begins (an attempt's failure is logged before the next one begins)."""
    return len(slack.calls("apps.connections.open"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_bot_within_the_grace_period_while_slack_refuses_it(start_bot, slack_api, sig):
    slack_api.refuse_sockets()
    bot = start_bot(
        env={
            "SLACK_APP_TOKEN": APP_TOKEN,
            "SLACK_SIGNING_SECRET": None,
            "RUBRIC_BOT_SHUTDOWN_GRACE": str(GRACE_SECONDS),
        },
        command=SOCKET_MODE_COMMAND,
        # A third attempt has begun, so the first two were refused and reported.
        ready=lambda: connection_attempts(slack_api) >= 4,
    )

    assert bot.stop(sig, timeout=EXIT_WAIT) == 0  # exited by itself, not killed
    log = bot.stderr_text()
    assert "WARNING bot.slack.socket_mode: could not connect to Slack (attempt 1)" in log
    assert "503" in log and "retrying in 1s" in log and "retrying in 2s" in log  # the reason; backing off
    assert "Traceback" not in log


def test_a_dropped_connection_is_retried_with_one_warning_per_attempt_then_works_again(socket_bot, slack_api):
    ready = partial(answers_ready, socket_bot.metrics_port)
    wait_for(ready, RUN_TIMEOUT, message="/readyz to answer 200 once connected")
    slack_api.refuse_sockets()
    slack_api.drop_sockets()
    wait_for(lambda: "(attempt 2)" in socket_bot.stderr_text(), RUN_TIMEOUT, message="a second attempt")
    readiness = urllib.request.Request(f"http://127.0.0.1:{socket_bot.metrics_port}/readyz")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(readiness, timeout=10)
    assert refused.value.code == 503
    assert refused.value.read().decode() == "not ready: not connected to Slack (Socket Mode)\n"
    slack_api.refuse_sockets(False)
    wait_for(slack_api.socket_connected, RUN_TIMEOUT, message="the bot to reconnect")
    wait_for(ready, RUN_TIMEOUT, message="/readyz to answer 200 again")

    answer = deliver(slack_api, "slash_commands", sr.slash_command(f"set {RUBRIC}", "C3")).payload
    assert answer is not None and "Channel default rubric set" in answer["text"]
    log = socket_bot.stderr_text()
    assert "WARNING bot.slack.socket_mode: the Socket Mode connection to Slack was lost; reconnecting" in log
    warnings = [line for line in log.splitlines() if "could not connect to Slack" in line]
    assert len(warnings) >= 2 and all("WARNING" in line and "503" in line for line in warnings)
    assert "Traceback" not in log and " ERROR " not in log


@pytest.mark.parametrize(
    ("setting", "value"),
    [("SLACK_BOT_TOKEN", "xoxb-revoked-or-mistyped"), ("SLACK_APP_TOKEN", "xapp-1-from-another-app")],
)
def test_a_token_slack_refuses_ends_start_up_with_one_line_and_exit_2(
    slack_api, model_api, tmp_path, setting, value
):
    env = bot_environment(slack_api, model_api, tmp_path / "bot.sqlite")
    env.pop("SLACK_SIGNING_SECRET")
    env["SLACK_APP_TOKEN"] = APP_TOKEN
    env[setting] = value

    result = subprocess.run(
        SOCKET_MODE_COMMAND, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("rubric-bot:")]
    assert errors == [result.stderr.splitlines()[-1]]  # one line, the last word
    assert errors[0].startswith(f"rubric-bot: {setting} was refused by Slack (invalid_auth)")
    assert "api.slack.com/apps" in errors[0] or "App-Level Tokens" in errors[0]  # how to get a good one
    assert value not in result.stderr and "Traceback" not in result.stderr
    assert slack_api.socket_connections() == []
