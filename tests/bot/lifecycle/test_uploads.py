"""Charts forgotten with their data: the Home tab's charts uploaded through a real Slack client to the
Slack stand-in are recorded, reused while the report is unchanged, and deleted from Slack
(``files.delete``) by a purge of their channel or workspace and by retention once older than its
days; those Slack refuses are named in one warning. On a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from bot.config import Settings
from bot.db.admin import upgrade
from bot.db.database import Database, open_checkpointer
from bot.db.reviews import ReviewVerdict
from bot.db.schema import uploaded_files
from bot.db.store import Store
from bot.home import publish_home
from bot.lifecycle.erase import Scope, prune, purge
from bot.lifecycle.uploads import one_client
from bot.slack.client import build_client
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from tests.standins.slack_api import BOT_USER_ID, SlackApiStandin

TOKEN = "xoxb-uploads-test"
T1 = Workspace("T1")
CHANNELS = ("C1", "C2")


@pytest.fixture
async def charted(database_url) -> AsyncIterator[tuple[Store, object, SlackApiStandin, object]]:
    """A store whose two channels have a reviewed iteration each, and U1's Home tab published through
    the Slack stand-in: one chart uploaded per channel."""
    database = Database.parse(database_url)
    await upgrade(database)
    store = await Store.open(database)
    with SlackApiStandin(token=TOKEN) as slack:
        client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
        async with open_checkpointer(database) as checkpointer:
            for channel in CHANNELS:
                thread = ThreadKey("T1", channel, "1700000000.000100")
                await store.add_thread(thread)
                evaluation = {
                    "grading_run_id": f"run-{channel}",
                    "iteration": 0,
                    "criteria": [],
                    "kind": "checklist",
                }
                await store.save_evaluation(thread, "1700000001.000001", evaluation, "- Cites")
                await store.save_review(
                    thread, f"run-{channel}", 0, "U1", [ReviewVerdict("Cites", "pass", "fail", "")]
                )
                slack.join(channel, BOT_USER_ID, "U1")
            await publish_home(client, store, workspace=T1, user="U1")
            yield store, checkpointer, slack, client
    await store.close()


def charts(slack: SlackApiStandin) -> dict[str, bool]:
    """Each chart the bot uploaded to the stand-in: whether it was deleted since."""
    return {upload.file_id: upload.deleted for upload in slack.uploads() if upload.completed}


async def test_home_charts_are_recorded_per_channel_and_reused_while_the_report_is_unchanged(charted):
    store, _, slack, client = charted
    uploaded = charts(slack)

    await publish_home(client, store, workspace=T1, user="U1")  # again, from what the database recorded

    assert len(uploaded) == 2 and charts(slack) == uploaded
    recorded = await store.uploads_in(T1, None)
    assert {(u.channel, u.purpose) for u in recorded} == {("C1", "home"), ("C2", "home")}
    assert {u.file_id for u in recorded} == set(uploaded)


async def test_purging_a_channel_deletes_its_charts_from_slack_and_leaves_the_other_channels(charted):
    store, checkpointer, slack, client = charted
    (kept,) = [u.file_id for u in await store.uploads_in(T1, "C2")]

    erased = await purge(store, checkpointer, Scope(channel="C1"), one_client(client))

    assert erased["chart files"] == 1
    assert [u.file_id for u in await store.uploads_in(T1, None)] == [kept]
    assert [file_id for file_id, deleted in charts(slack).items() if not deleted] == [kept]
    deletes = [call.args["file"] for call in slack.calls("files.delete")]
    assert len(deletes) == 1 and deletes[0] != kept


async def test_purging_the_workspace_deletes_every_chart_and_a_new_home_tab_uploads_afresh(charted):
    store, checkpointer, slack, client = charted

    erased = await purge(store, checkpointer, Scope(tenant=T1), one_client(client))

    assert erased["chart files"] == 2 and all(charts(slack).values())
    assert await store.uploads_in(T1, None) == []


async def test_retention_deletes_the_charts_uploaded_longer_ago_than_its_days(charted):
    store, checkpointer, slack, client = charted
    old, recent = await store.uploads_in(T1, None)
    async with store._write() as connection:  # uploaded 40 days ago
        moved = update(uploaded_files).where(uploaded_files.c.file_id == old.file_id)
        await connection.execute(moved.values(created_at=datetime.now(UTC) - timedelta(days=40)))

    erased = await prune(store, checkpointer, 30, one_client(client))

    assert erased["chart files"] == 1
    assert charts(slack) == {old.file_id: True, recent.file_id: False}
    assert [u.file_id for u in await store.uploads_in(T1, None)] == [recent.file_id]


async def test_charts_slack_will_not_delete_are_named_in_one_warning_and_forgotten(charted, caplog):
    store, checkpointer, slack, client = charted
    slack.error_next("files.delete", "token_revoked", times=2)  # an uninstalled app's token

    with caplog.at_level(logging.WARNING, logger="bot.lifecycle.uploads"):
        erased = await purge(store, checkpointer, Scope(tenant=T1), one_client(client))

    assert erased["chart files"] == 0 and not any(charts(slack).values())
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bot.lifecycle.uploads"]
    assert line.startswith(
        "could not delete 2 chart file(s) the bot uploaded to team T1 from Slack (token_revoked): "
    )
    assert all(file_id in line for file_id in charts(slack)) and line.endswith(
        "a workspace admin can delete them"
    )
    assert await store.uploads_in(T1, None) == []


async def test_a_chart_someone_already_deleted_counts_as_deleted(charted):
    store, checkpointer, slack, client = charted
    slack.error_next("files.delete", "file_not_found")

    erased = await purge(store, checkpointer, Scope(channel="C1"), one_client(client))

    assert erased["chart files"] == 1 and await store.uploads_in(T1, "C1") == []
