"""OAuth tokens encrypted at rest (`RUBRIC_BOT_ENCRYPTION_KEY`): the real bot in OAuth mode, installed
through the OAuth flow, keeps no token readable in its database, serves with the key, refuses to
start without it, and keeps serving after `rubric-bot db rotate-key`. On SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from tests.e2e.conftest import BOT_COMMAND, BOT_START_TIMEOUT, BotProcess
from tests.e2e.stored_rows import files_containing, tables_containing
from tests.e2e.test_workspaces_e2e import CHANNEL, install, oauth_environment, start
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin

ANSWER_TIMEOUT = 30.0
"""Bound for one run's final message; the stand-ins answer in milliseconds."""
KEY = "RUBRIC_BOT_ENCRYPTION_KEY"
TOKEN_TABLES = ["slack_bots", "slack_installations"]
"""Where Bolt's stores keep tokens."""


def issued_tokens(slack: SlackApiStandin) -> list[str]:
    """Every bot and refresh token the stand-in gave workspace T1."""
    workspace = slack.workspace("T1")
    return [token for token in (*workspace.tokens, workspace.refresh_token) if token]


def readable_anywhere(database_url: str, tokens: list[str]) -> list[str]:
    """The tables, and for SQLite the files (old page images included), holding one of `tokens`."""
    return [
        where
        for token in tokens
        for where in (*tables_containing(database_url, token), *files_containing(database_url, token))
    ]


def exits_at_start(env: dict[str, str], workdir: Path) -> BotProcess:
    """A serve process that is expected to stop before it is ready, stopped."""
    bot = BotProcess(BOT_COMMAND, env, workdir / "refused.log", workdir).launch()
    wait_for(lambda: bot.returncode is not None, BOT_START_TIMEOUT, message=bot.stderr_text)
    bot.sender.close()
    return bot


def answered(slack: SlackApiStandin, bot: BotProcess) -> None:
    """A mention in T1 gets its final answer."""
    root, bot_user = sr.new_ts(), slack.workspace("T1").bot_user_id
    mention = sr.app_mention("Write the release note", CHANNEL, root, team="T1", bot_user=bot_user)
    assert bot.sender.send(sr.event_callback(mention, team="T1", bot_user=bot_user)).status == 200
    wait_for(
        lambda: any(m.event_type == "rubric_final" for m in slack.messages_in_thread(CHANNEL, root)),
        ANSWER_TIMEOUT,
        message=lambda: bot.stderr_text()[-3000:],
    )


def rotate_key(env: dict[str, str], keys: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "db", "rotate-key"],
        env=env | {KEY: keys},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tokens_are_unreadable_without_the_key_and_rotation_keeps_the_bot_serving(database_url, tmp_path):
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        slack.add_workspace("T1", rotating=True)  # a refresh token stored too
        env = oauth_environment(slack, model, database_url) | {KEY: old_key}
        bot = start(env, tmp_path, "first")
        try:
            assert install(bot, "T1").status == 200
            answered(slack, bot)
        finally:
            bot.stop()
            bot.sender.close()
        assert readable_anywhere(database_url, issued_tokens(slack)) == []
        assert tables_containing(database_url, "fernet:") == TOKEN_TABLES

        keyless = exits_at_start({k: v for k, v in env.items() if k != KEY}, tmp_path)
        assert keyless.returncode == 2
        assert f"{KEY} is not set, but the stored OAuth tokens are encrypted" in keyless.stderr_text()

        rotated = rotate_key(env, f"{new_key},{old_key}")
        assert rotated.returncode == 0, rotated.stderr
        assert "with the first key of RUBRIC_BOT_ENCRYPTION_KEY" in rotated.stdout
        bot = start(env | {KEY: new_key}, tmp_path, "rotated")
        try:
            answered(slack, bot)
        finally:
            bot.stop()
            bot.sender.close()
        wrong = rotate_key(env, old_key)  # the old key alone no longer opens them
        assert wrong.returncode == 2
        assert "RUBRIC_BOT_ENCRYPTION_KEY cannot decrypt the stored OAuth tokens" in wrong.stderr


def test_tokens_stored_before_the_key_are_encrypted_at_the_first_start_with_it(database_url, tmp_path):
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        slack.add_workspace("T1")
        env = oauth_environment(slack, model, database_url)
        bot = start(env, tmp_path, "plain")
        try:
            assert install(bot, "T1").status == 200
        finally:
            bot.stop()
            bot.sender.close()
        assert tables_containing(database_url, slack.workspace("T1").token) == TOKEN_TABLES  # as before

        bot = start(env | {KEY: Fernet.generate_key().decode()}, tmp_path, "keyed")
        try:
            assert "encrypted 2 stored token(s) of 2 installation record(s)" in bot.stderr_text()
            assert [t for token in issued_tokens(slack) for t in tables_containing(database_url, token)] == []
            answered(slack, bot)
        finally:
            bot.stop()
            bot.sender.close()
