"""The real bot process in Socket Mode, driven as Slack drives it.

With ``SLACK_APP_TOKEN`` set (and no signing secret: Socket Mode needs none) ``rubric-bot serve``
opens no port. It asks the Slack stand-in's ``apps.connections.open`` for a websocket URL, connects,
and gets every event and command as an envelope on that socket, which it must ack there; slash
command answers travel in the ack. The tests push envelopes and read the acks through the stand-in.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import BOT_TOKEN, BotProcess
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import DEFAULT_GAP, REVISED_ANSWER, ModelApiStandin, scripted_revision
from tests.standins.slack_api import EnvelopeType, SlackApiStandin, SlackMessage, SocketAck

APP_TOKEN = "xapp-1-A1-socket-mode-test"
"""The app-level token the bot is given; the Slack stand-in opens connections for no other."""
SOCKET_MODE_COMMAND = (sys.executable, "-m", "bot", "serve")
"""`serve` without ``--http``: the app token alone selects Socket Mode."""
CRITERIA = ["Cites a source", "Is polite"]
RUBRIC = "- Cites a source\n- Is polite"
RUN_TIMEOUT = 20.0  # bound for one run to show up; the stand-ins answer in milliseconds


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
    (opened,) = slack_api.calls("apps.connections.open")
    assert opened.ok  # the stand-in opens connections only for APP_TOKEN
    (connection,) = slack_api.socket_connections()
    assert connection.open and connection.ticket in opened.response["url"]

    log = socket_bot.stderr_text()
    assert APP_TOKEN not in log and BOT_TOKEN not in log


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
    assert slack_api.messages("C2") == []  # only the caller sees the answers
