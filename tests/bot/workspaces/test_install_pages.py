"""OAuth mode's install pages as anyone on the internet may open them, in process over real HTTP with
Bolt's real OAuth flow and the bot's stores on SQLite and PostgreSQL: the install page writes
nothing however often it is opened, a state is good once and only as issued, and one address that
asks too often is told to wait."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine

from bot.config import load_settings
from bot.db.database import Database
from bot.db.schema import oauth_states
from bot.db.store import Store
from bot.slack.http import PageVisits, slack_web_app
from bot.workspaces.install_flow import SignedStateStore
from bot.workspaces.installations import STATE_EXPIRATION_SECONDS, open_installations
from tests.bot.workspaces.test_installations import OAUTH_SETTINGS

VISITS = 1_000
"""Visits of the install page in the test that they write nothing."""
WRITES = ("INSERT", "UPDATE", "DELETE")


@pytest.fixture
async def install_pages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, database_url: str
) -> AsyncIterator[TestClient]:
    """The bot's HTTP app in OAuth mode on `database_url` (its tables made), with no rate limit in
    the way of the visits the test makes; a client for it."""
    monkeypatch.chdir(tmp_path)
    for name, value in (OAUTH_SETTINGS | {"RUBRIC_BOT_DB": database_url}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    settings = load_settings()
    await (await Store.open(settings.database)).close()
    async with open_installations(settings, AsyncWebClient(base_url=settings.slack_api_url)) as installations:
        app = AsyncApp(
            signing_secret="s3cret", oauth_flow=installations.oauth_flow, authorize=installations.authorize
        )
        web_app = slack_web_app(app, "s3cret", PageVisits(per_window=VISITS * 2))
        async with TestClient(TestServer(web_app)) as client:
            yield client


class Statements:
    """The SQL statements every engine of this process sends while the context is open."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __enter__(self) -> Statements:
        event.listen(Engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "before_cursor_execute", self._record)

    def _record(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.sent.append(statement)

    def writes(self) -> list[str]:
        return [s for s in self.sent if s.lstrip().upper().startswith(WRITES)]


async def stored_states(database_url: str) -> int:
    engine = Database.parse(database_url).create_engine()
    try:
        async with engine.connect() as connection:
            return int(
                (await connection.execute(select(func.count()).select_from(oauth_states))).scalar_one()
            )
    finally:
        await engine.dispose()


async def test_a_thousand_visits_of_the_install_page_write_nothing(install_pages, database_url):
    states = set()
    with Statements() as statements:
        for _ in range(VISITS):
            page = await install_pages.get("/slack/install")
            assert page.status == 200
            states.add(page.cookies["slack-app-oauth-state"].value)

    assert len(states) == VISITS  # each visit got a state of its own
    assert statements.writes() == []
    assert await stored_states(database_url) == 0


async def test_a_state_is_accepted_once_and_an_altered_or_expired_one_never(database_url):
    await (await Store.open(database_url)).close()
    engine = Database.parse(database_url).create_engine()
    try:
        store = SignedStateStore("client-secret", engine, STATE_EXPIRATION_SECONDS)
        state = await store.async_issue()
        altered = state[:-6] + ("A" if state[-6] != "A" else "B") + state[-5:]
        expired = SignedStateStore("client-secret", engine, -1)  # every state is past its time
        other_app = SignedStateStore("another-secret", engine, STATE_EXPIRATION_SECONDS)

        assert not await store.async_consume(altered)
        assert not await expired.async_consume(state)
        assert not await other_app.async_consume(state)
        assert await store.async_consume(state)
        assert not await store.async_consume(state)  # a second use
    finally:
        await engine.dispose()
    assert await stored_states(database_url) == 1


async def test_an_address_asking_too_often_is_told_to_wait_and_nothing_is_written(
    monkeypatch, tmp_path, database_url
):
    monkeypatch.chdir(tmp_path)
    for name, value in (OAUTH_SETTINGS | {"RUBRIC_BOT_DB": database_url}).items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    await (await Store.open(settings.database)).close()
    async with open_installations(settings, AsyncWebClient(base_url=settings.slack_api_url)) as installations:
        app = AsyncApp(
            signing_secret="s3cret", oauth_flow=installations.oauth_flow, authorize=installations.authorize
        )
        web_app = slack_web_app(app, "s3cret", PageVisits(per_window=3))
        async with TestClient(TestServer(web_app)) as client:
            answers = [await client.get("/slack/install") for _ in range(3)]
            answers += [await client.get("/slack/oauth_redirect?code=x&state=y") for _ in range(2)]
            refusal = await answers[-1].text()

    assert [a.status for a in answers] == [200, 200, 200, 429, 429]
    assert answers[-1].headers["Retry-After"] == "60"
    assert "try again in a minute" in refusal
    assert await stored_states(database_url) == 0
