"""compose.quickstart.yaml's bot as its container runs it: the compose file's command with its
environment and the quickstart's `.env` (.env.example filled in), against the Slack and model
stand-ins: it connects in Socket Mode, is ready on the healthcheck's port, answers a mention and
keeps its SQLite database where the volume is mounted."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BOT_TOKEN, RUN_TIMEOUT, BotProcess, answers_ready
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin
from tests.test_compose import QUICKSTART, quickstart_env

APP_TOKEN = "xapp-1-A1-quickstart-test"
"""The app-level token the quickstart's .env is filled in with; the stand-in opens connections for it."""
(SERVICE,) = QUICKSTART["services"].values()


@pytest.fixture
def slack_api() -> Iterator[SlackApiStandin]:
    with SlackApiStandin(token=BOT_TOKEN, app_token=APP_TOKEN) as api:
        yield api


def test_the_quickstart_containers_command_serves_in_socket_mode_on_sqlite_in_the_volume(
    start_bot: Callable[..., BotProcess],
    slack_api: SlackApiStandin,
    model_api: ModelApiStandin,
    tmp_path: Path,
):
    dot_env = quickstart_env() | {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "OPENAI_API_KEY": "test",
    }
    volume = tmp_path / "data"  # where the container mounts rubric-bot-data
    volume.mkdir()
    _, mount = SERVICE["volumes"][0].split(":")
    compose_env = {name: value.replace(mount, str(volume)) for name, value in SERVICE["environment"].items()}
    env: dict[str, str | None] = {**dot_env, **compose_env, "SLACK_SIGNING_SECRET": None}

    bot = start_bot(
        env=env, command=(sys.executable, "-m", "bot", *SERVICE["command"]), ready=slack_api.socket_connected
    )

    assert answers_ready(int(bot.env["RUBRIC_BOT_METRICS_PORT"]))  # what the healthcheck asks
    root = sr.new_ts()
    mention = sr.app_mention("Is coffee good for you?", "C1", root)
    assert slack_api.wait_for_ack(slack_api.send_envelope("events_api", sr.event_callback(mention)))
    wait_for(
        lambda: slack_api.messages_in_thread("C1", root) or None, RUN_TIMEOUT, message="the bot's answer"
    )
    assert (volume / "rubric-bot.sqlite").is_file()
