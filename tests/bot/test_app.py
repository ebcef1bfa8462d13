"""What a bot process does as it starts, before it takes any work (bot.app)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta

from bot.app import open_runner
from bot.config import Settings
from bot.db.admin import upgrade
from bot.db.database import Database
from bot.db.store import Store


async def test_a_starting_process_forgets_dedupe_claims_slack_can_no_longer_retry(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")  # the models are built, never called
    path = tmp_path / "bot.sqlite"
    await upgrade(Database.parse(str(path)))
    store = await Store.open(str(path))
    try:
        assert await store.claim("event:last-month") and await store.claim("event:just-now")
    finally:
        await store.close()
    month_ago = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE claims SET claimed_at = ? WHERE key = 'event:last-month'", (month_ago,))

    settings = Settings(slack_bot_token="xoxb-start", worker_model="openai:gpt-4o-mini", database=str(path))
    async with open_runner(settings, concurrency=1) as process:
        assert await process.store.claim("event:last-month")  # forgotten at start: a new delivery may run
        assert not await process.store.claim("event:just-now")  # Slack may still retry it: still claimed
