"""OAuth mode's authorization kept in the process: the real bot, installed by a workspace through the
OAuth flow, asks Slack about that workspace's token once rather than once per request, and stops
using a token as soon as Slack refuses it. On SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BotProcess
from tests.e2e.test_workspaces_e2e import CHANNEL, install, oauth_environment, start
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin

EVENTS = 300
"""Events sent in one workspace."""
AUTH_TESTS_ALLOWED = 3
"""``auth.test`` calls those events may cost: one per process and token, with room for a race of
the first few requests."""
NOT_AUTHORIZED = "your installation with this app is no longer available"
"""Part of Bolt's answer to a request it could not authorize (nothing of the bot runs)."""
THREAD_ARGS = ("thread_ts", "ts", "timestamp")
"""The arguments by which a Web API call names the thread (or its first message) it acts on."""


@pytest.fixture
def installed(database_url: str, tmp_path: Path) -> Iterator[tuple[SlackApiStandin, BotProcess]]:
    """A serve process in OAuth mode on `database_url`, installed by workspace T1."""
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        slack.add_workspace("T1")
        bot = start(oauth_environment(slack, model, database_url), tmp_path, "bot")
        try:
            assert install(bot, "T1").status == 200
            yield slack, bot
        finally:
            bot.stop()
            bot.sender.close()


def chatter(bot: BotProcess, slack: SlackApiStandin, text: str) -> str:
    """A channel message in T1 (a conversation the bot is not part of); Bolt's answer's body."""
    bot_user = slack.workspace("T1").bot_user_id
    event = sr.message(text, CHANNEL, sr.new_ts(), team="T1")
    response = bot.sender.send(sr.event_callback(event, team="T1", bot_user=bot_user))
    assert response.status == 200, response.body
    return str(response.body)


def test_300_events_of_one_workspace_ask_slack_about_its_token_a_handful_of_times(installed):
    slack, bot = installed
    before = len(slack.calls("auth.test"))

    answers = [chatter(bot, slack, f"Chatter {n}") for n in range(EVENTS)]

    assert not [answer for answer in answers if NOT_AUTHORIZED in answer]
    assert len(slack.calls("auth.test")) - before <= AUTH_TESTS_ALLOWED


def test_a_token_slack_refuses_is_not_used_again(installed):
    slack, bot = installed
    token = slack.workspace("T1").token
    chatter(bot, slack, "Warm the cache")
    slack.uninstall("T1")  # Slack refuses the token from now on; no event tells the bot

    root, bot_user = sr.new_ts(), slack.workspace("T1").bot_user_id
    mention = sr.app_mention("Anyone there?", CHANNEL, root, team="T1", bot_user=bot_user)
    bot.sender.send(sr.event_callback(mention, team="T1", bot_user=bot_user))
    refused = wait_for(
        lambda: [call for call in slack.calls() if call.token == token and not call.ok],
        30,
        message=lambda: bot.stderr_text()[-3000:],
    )
    used_until = slack.calls().index(refused[0])

    answers = [chatter(bot, slack, f"After the refusal {n}") for n in range(5)]

    assert all(NOT_AUTHORIZED in answer for answer in answers)
    later = [call for call in slack.calls()[used_until + 1 :] if call.token == token]
    assert not [call for call in later if call.method == "auth.test"]
    # Only the run the mention started, under way with the token, may still have tried it.
    assert not [call for call in later if root not in (call.args.get(key) for key in THREAD_ARGS)]
