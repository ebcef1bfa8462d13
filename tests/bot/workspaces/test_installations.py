"""OAuth mode's install link: the scopes and the redirect URL it asks Slack for, from the manifest by
default and from `RUBRIC_BOT_SCOPES` / `SLACK_OAUTH_REDIRECT_URL` when an operator's app needs others."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import ConfigError, load_settings
from bot.db.store import Store
from bot.workspaces.installations import open_installations
from bot.workspaces.manifest import bot_scopes

OAUTH_SETTINGS = {
    "SLACK_CLIENT_ID": "1234.5678",
    "SLACK_CLIENT_SECRET": "client-secret",
    "SLACK_SIGNING_SECRET": "s3cret",
    "RUBRIC_BOT_MODEL": "openai:gpt-4o-mini",
    "OPENAI_API_KEY": "sk-test",
}


@pytest.fixture
def oauth_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env, and the default database lands here
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "RUBRIC_BOT_SCOPES", "SLACK_OAUTH_REDIRECT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in OAUTH_SETTINGS.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


async def install_link_query() -> dict[str, list[str]]:
    settings = load_settings()
    await (await Store.open(settings.database)).close()  # the bot's tables, Bolt's among them
    async with open_installations(settings, AsyncWebClient(base_url=settings.slack_api_url)) as installations:
        generator = installations.oauth_flow.settings.authorize_url_generator
        return parse_qs(urlsplit(generator.generate(state="a-state")).query)


async def test_the_install_link_asks_for_the_manifests_scopes_by_default(oauth_env):
    query = await install_link_query()

    assert query["scope"] == [",".join(bot_scopes())]
    assert query["client_id"] == ["1234.5678"]
    assert "redirect_uri" not in query  # Slack then uses the app's only redirect URL


async def test_scopes_and_redirect_url_set_by_the_operator_are_the_ones_asked_for(oauth_env):
    oauth_env.setenv("RUBRIC_BOT_SCOPES", " chat:write, app_mentions:read ,")
    oauth_env.setenv("SLACK_OAUTH_REDIRECT_URL", "https://bot.example.com/slack/oauth_redirect")

    query = await install_link_query()

    assert query["scope"] == ["chat:write,app_mentions:read"]
    assert query["redirect_uri"] == ["https://bot.example.com/slack/oauth_redirect"]


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("RUBRIC_BOT_SCOPES", " , ", "names no scope"),
        ("SLACK_OAUTH_REDIRECT_URL", "bot.example.com", "not an http"),
    ],
)
def test_unusable_oauth_settings_are_named_with_what_to_do(oauth_env, name, value, said):
    oauth_env.setenv(name, value)

    with pytest.raises(ConfigError) as caught:
        load_settings()

    (line,) = caught.value.problems
    assert name in line and said in line
