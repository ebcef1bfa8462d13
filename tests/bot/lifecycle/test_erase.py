"""Deleting whole threads, on a real SQLite file and a real PostgreSQL: what retention keeps, what a
purge of one channel leaves alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from sqlalchemy import update

from bot.agent.worker import agent_config
from bot.db.admin import upgrade
from bot.db.database import Database, open_checkpointer
from bot.db.review_modes import ReviewModes
from bot.db.reviews import ReviewVerdict
from bot.db.schema import replay_spend
from bot.db.store import Store
from bot.db.usage import Spent
from bot.lifecycle.erase import Scope, prune, purge
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from tests.e2e.stored_rows import tables_containing

T1 = Workspace("T1")
"""The workspace the tests' rows are filed under."""

OLD = ThreadKey("T1", "C1", "1700000000.000100")
OTHER = ThreadKey("T1", "C2", "1700000000.000200")


def remembering(checkpointer):
    """The smallest checkpointed conversation: it keeps the messages it is given."""
    graph = StateGraph(MessagesState)
    graph.add_node("keep", lambda state: {})
    graph.add_edge(START, "keep")
    return graph.compile(checkpointer=checkpointer)


@pytest.fixture
async def data(database_url):
    """The store and checkpointer of a fresh database, each of the two threads with a conversation,
    a finished run, an evaluation and a review with a comment."""
    database = Database.parse(database_url)
    await upgrade(database)
    store = await Store.open(database)
    async with open_checkpointer(database) as checkpointer:
        for thread in (OLD, OTHER):
            await store.add_thread(thread)
            run = await store.start_run(thread, thread.thread_ts)
            await store.finish_run(run, "satisfied")
            evaluation = {"grading_run_id": f"run-{thread.channel}", "iteration": 0, "criteria": []}
            await store.save_evaluation(
                thread, "1700000001.000001", evaluation, f"- rubric of {thread.channel}"
            )
            verdict = ReviewVerdict("Cites", "pass", "fail", f"comment in {thread.channel}")
            await store.save_review(thread, f"run-{thread.channel}", 0, "U1", [verdict])
            conversation = remembering(checkpointer)
            inputs = {"messages": [HumanMessage(f"request in {thread.channel}")]}
            await conversation.ainvoke(inputs, agent_config(thread.thread_id))
        yield store, checkpointer
    await store.close()


async def test_prune_deletes_idle_threads_and_keeps_review_verdicts_without_comments(data, database_url):
    store, checkpointer = data

    erased = await prune(store, checkpointer, days=0)

    assert erased["conversations"] == 2 and erased["runs"] == 2 and erased["evaluations"] == 2
    assert erased["review comments"] == 2 and erased["threads"] == 2
    reviews = await store.reviews_in_channel(T1, None)
    assert [(r.reviewer_verdict, r.comment) for r in reviews] == [("fail", ""), ("fail", "")]
    for text in ("request in C1", "comment in C1", "rubric of C1"):
        assert not tables_containing(database_url, text)


async def test_prune_keeps_threads_active_more_recently_than_its_days(data):
    store, checkpointer = data

    assert sum((await prune(store, checkpointer, days=30)).values()) == 0
    assert len(await store.threads_in(T1)) == 2


async def test_purging_a_channel_deletes_its_reviews_rubric_and_settings_and_leaves_other_channels(
    data, database_url
):
    store, checkpointer = data
    await store.set_channel_rubric(T1, "C1", "- channel rubric of C1", "U1")
    await store.set_calibration(T1, "C1", False)
    await store.set_review_modes(T1, "C1", ReviewModes(blind=True), "UMODESOFC1")

    erased = await purge(store, checkpointer, Scope(channel="C1"))

    assert erased["reviews"] == 1 and erased["channel rubrics"] == 1 and erased["channel settings"] == 1
    assert erased["review modes"] == 1
    for text in ("request in C1", "comment in C1", "rubric of C1", "UMODESOFC1"):
        assert not tables_containing(database_url, text)
    for text in ("request in C2", "comment in C2", "rubric of C2"):
        assert tables_containing(database_url, text)


async def test_prune_deletes_the_spend_history_older_than_its_days_and_the_30_days_usage_shows(data):
    store, checkpointer = data
    now = datetime.now(UTC)
    for channel, days_ago in {"C1": 0, "C2": 20, "C3": 40}.items():
        moment = now - timedelta(days=days_ago)
        # A replay call settled that day: its day's counters, and its line in the cost history.
        used = Spent(500, 0.01)
        await store.settle_replay_call(T1, channel, moment.date(), reserved=Spent(0, 0.0), used=used)
        async with store._engine.begin() as connection:
            await connection.execute(
                update(replay_spend).where(replay_spend.c.channel == channel).values(created_at=moment)
            )
    since = now - timedelta(days=60)

    kept_longer = await prune(store, checkpointer, days=60)  # a retention longer than their age
    assert (kept_longer["replay spend"], kept_longer["spend counters"]) == (0, 0)
    assert {row.channel for row in await store.usage(T1, None, since)} == {"C1", "C2", "C3"}

    erased = await prune(store, checkpointer, days=7)  # shorter: usage's 30 days are kept all the same

    assert erased["replay spend"] == 1
    assert erased["spend counters"] == 3  # C3's, its workspace's and the deployment's, of that day
    assert {row.channel for row in await store.usage(T1, None, since)} == {"C1", "C2"}
    twenty_days_ago = await store.counters_of((now - timedelta(days=20)).date())
    assert {(counter.level, counter.subject, counter.tokens) for counter in twenty_days_ago} == {
        ("channel", "C2", 500),
        ("workspace", "", 500),
        ("deployment", "", 500),
    }
    assert await store.counters_of((now - timedelta(days=40)).date()) == []
