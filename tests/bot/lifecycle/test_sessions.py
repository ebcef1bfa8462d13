"""Agent sessions closed with their threads: a purge or retention sets the session of each deleted
thread the bot ran a request in ``closed`` through a real Slack client talking to the Slack stand-in,
and of no other thread; uninstall tries none; Slack refusing or unreachable is logged and the data
goes all the same. On a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.db.admin import upgrade
from bot.db.database import Database, open_checkpointer
from bot.db.store import Store
from bot.lifecycle.erase import SESSIONS_CLOSED, Scope, erase_leftovers, prune, purge, purge_tenant
from bot.lifecycle.uploads import one_client
from bot.slack.client import build_client
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-sessions-test"
T1 = Workspace("T1")

ASKED = ThreadKey("T1", "C1", "1700000000.000100")
"""A thread the bot ran a request in: it has an agent session."""
ASKED_TOO = ThreadKey("T1", "C1", "1700000000.000200")
"""Another of the same channel."""
RUBRIC_ONLY = ThreadKey("T1", "C1", "1700000000.000300")
"""A thread the bot took part in without a run (a `rubric:` message): no session."""
ELSEWHERE = ThreadKey("T1", "C2", "1700000000.000400")
"""A thread with a run in another channel."""


@dataclass
class Purging:
    store: Store
    checkpointer: BaseCheckpointSaver
    slack: SlackApiStandin
    client: AsyncWebClient

    def closed(self) -> list[tuple[str, str]]:
        """The (channel, thread ts) of each ``closed`` the bot asked Slack for, in order."""
        calls = self.slack.calls("agents.sessions.setStatus")
        return [(c.args["channel_id"], c.args["thread_ts"]) for c in calls if c.args["status"] == "closed"]


@pytest.fixture
async def purging(database_url) -> AsyncIterator[Purging]:
    """A store with the four threads (each thread with a run has a finished one and an ``active``
    session in the Slack stand-in), and a real client of the stand-in."""
    database = Database.parse(database_url)
    await upgrade(database)
    store = await Store.open(database)
    with SlackApiStandin(token=TOKEN) as slack:
        client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
        for thread in (ASKED, ASKED_TOO, RUBRIC_ONLY, ELSEWHERE):
            await store.add_thread(thread)
            if thread != RUBRIC_ONLY:
                await store.finish_run(await store.start_run(thread, thread.thread_ts), "satisfied")
                await client.agents_sessions_setStatus(
                    channel_id=thread.channel, thread_ts=thread.thread_ts, status="active", title="A request"
                )
        async with open_checkpointer(database) as checkpointer:
            yield Purging(store, checkpointer, slack, client)
    await store.close()


def at(*threads: ThreadKey) -> list[tuple[str, str]]:
    return [(thread.channel, thread.thread_ts) for thread in threads]


async def test_purging_a_channel_closes_the_sessions_of_its_threads_with_a_run_and_no_other(purging):
    p = purging

    erased = await purge(p.store, p.checkpointer, Scope(channel="C1"), one_client(p.client))

    assert sorted(p.closed()) == at(ASKED, ASKED_TOO)
    assert erased[SESSIONS_CLOSED] == 2 and erased["threads"] == 3
    assert p.slack.session("C1", ASKED.thread_ts).status == "closed"
    assert p.slack.session("C2", ELSEWHERE.thread_ts).status == "active"


async def test_purging_one_thread_closes_its_session_only(purging):
    p = purging

    await purge(
        p.store, p.checkpointer, Scope(channel="C1", thread_ts=ASKED_TOO.thread_ts), one_client(p.client)
    )

    assert p.closed() == at(ASKED_TOO)
    assert p.slack.session("C1", ASKED.thread_ts).status == "active"


async def test_retention_closes_the_sessions_of_the_idle_threads_it_deletes(purging):
    p = purging

    erased = await prune(p.store, p.checkpointer, 0, one_client(p.client))

    assert sorted(p.closed()) == at(ASKED, ASKED_TOO, ELSEWHERE)
    assert erased[SESSIONS_CLOSED] == 3 and await p.store.threads_in(T1) == []


async def test_retention_closes_nothing_of_the_threads_it_keeps(purging):
    p = purging

    erased = await prune(p.store, p.checkpointer, 30, one_client(p.client))

    assert p.closed() == [] and erased[SESSIONS_CLOSED] == 0


async def test_uninstalling_tries_no_session_since_slack_revoked_the_token(purging):
    p = purging

    erased = await purge_tenant(p.store, p.checkpointer, T1, one_client(p.client))

    assert p.closed() == [] and erased["threads"] == 4


async def test_sessions_slack_refuses_are_counted_in_one_warning_and_the_threads_go_all_the_same(
    purging, caplog
):
    p = purging
    p.slack.error_next("agents.sessions.setStatus", "not_allowed_token_type", times=1)

    with caplog.at_level(logging.WARNING, logger="bot.lifecycle.sessions"):
        erased = await purge(p.store, p.checkpointer, Scope(tenant=T1), one_client(p.client))

    assert len(p.closed()) == 3 and erased[SESSIONS_CLOSED] == 2
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bot.lifecycle.sessions"]
    assert line.startswith("could not close 1 agent session(s) of team T1 in Slack (not_allowed_token_type)")
    assert await p.store.threads_in(T1) == []


async def test_slack_unreachable_is_logged_and_never_holds_the_purge_back(purging, caplog):
    p = purging
    down = build_client(
        Settings(slack_bot_token=TOKEN, slack_api_url="http://127.0.0.1:9/api/", slack_retry_backoff=0.01)
    )

    with caplog.at_level(logging.WARNING, logger="bot.lifecycle.sessions"):
        erased = await purge(p.store, p.checkpointer, Scope(tenant=T1), one_client(down))

    assert erased[SESSIONS_CLOSED] == 0 and erased["threads"] == 4
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bot.lifecycle.sessions"]
    assert line.startswith("could not close 3 agent session(s) of team T1 in Slack (ClientConnectorError")
    assert p.slack.session("C1", ASKED.thread_ts).status == "active"


async def test_without_a_slack_token_the_sessions_left_open_are_logged(purging, caplog):
    p = purging

    with caplog.at_level(logging.WARNING, logger="bot.lifecycle.sessions"):
        erased = await purge(p.store, p.checkpointer, Scope(channel="C2"), None)

    assert erased["threads"] == 1 and p.closed() == []
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bot.lifecycle.sessions"]
    assert "could not close 1 agent session(s) of team T1 in Slack (no Slack token at hand)" in line


async def test_a_run_that_ended_after_its_purge_has_its_session_closed_again_with_its_leftovers(purging):
    p = purging
    await purge(p.store, p.checkpointer, Scope(channel="C2"), one_client(p.client))
    await p.client.agents_sessions_setStatus(channel_id="C2", thread_ts=ELSEWHERE.thread_ts, status="active")

    erased = await erase_leftovers(p.store, p.checkpointer, ELSEWHERE, one_client(p.client))

    assert erased[SESSIONS_CLOSED] == 1 and p.closed() == at(ELSEWHERE, ELSEWHERE)
    assert p.slack.session("C2", ELSEWHERE.thread_ts).statuses[-1] == "closed"
