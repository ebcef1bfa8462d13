"""`/rubric replay`'s background runner below the listener: one per channel, and a clean stop.

The seeded database (tests/bot/agreement/replay_seed.py), the real SQLite store and checkpointer, a scripted
grader and the local Slack stand-in; the full command is driven end to end in
tests/e2e/test_replay_e2e.py.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.channel_replay import ChannelReplays, ReplayRequest, WorkspaceGrader
from bot.db.replays import ReplayRefused
from bot.db.spend import Spender
from bot.db.store import Store
from bot.db.usage import REPLAYS
from bot.limits.prices import dollars
from bot.limits.quota import DailyLimits, day_start
from bot.limits.usage import spend_words
from bot.vocabulary.workspace import Workspace
from grading import TranscriptGrader
from tests.bot.agreement.replay_seed import CASES, CHANNEL, TEAM, replayed_grader, seed
from tests.grading.scripted import ScriptedChatModel
from tests.standins import wait_for
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-channel-replay"
WAIT = 30.0  # bound for the replay to reach its first grader call
GRADER = "openai:gpt-4o"
"""The workspace's grader model: its list prices are $2.50 per million input tokens, $1.25 cached,
$10 output."""


async def test_stopping_the_bot_stops_a_replay_and_says_so_in_the_channel(tmp_path):
    path = tmp_path / "bot.sqlite"
    await seed(path)
    started, release = threading.Event(), threading.Event()

    def hanging_grader(messages):
        started.set()
        release.wait(WAIT)  # the provider never answers while the bot stops
        return replayed_grader(messages)

    told: list[dict] = []

    async def tell(**message):
        told.append(message)

    with SlackApiStandin(token=TOKEN) as slack:
        store = await Store.open(str(path))
        try:
            async with AsyncSqliteSaver.from_conn_string(str(path)) as checkpointer:
                asked: list[Workspace] = []

                async def graders(workspace: Workspace) -> WorkspaceGrader:
                    asked.append(workspace)
                    return WorkspaceGrader(GRADER, TranscriptGrader(ScriptedChatModel(script=hanging_grader)))

                replays = ChannelReplays(store=store, checkpointer=checkpointer, graders=graders)
                client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
                request = ReplayRequest(Workspace(TEAM), CHANNEL, "U7", days=None)
                assert await replays.start(request, tell, client) is None
                second = ReplayRequest(Workspace(TEAM), CHANNEL, "U8", days=7)
                refused = await replays.start(second, tell, client)
                assert refused == ReplayRefused(running=True, started_by="U7")
                assert await asyncio.to_thread(started.wait, WAIT)
                assert asked == [Workspace(TEAM)]  # the replay measures its workspace's grader

                await replays.drain()
                release.set()
                # The stopped replay let go of the channel; the cooldown since its start still holds.
                after = await replays.start(second, tell, client)
                assert isinstance(after, ReplayRefused) and not after.running and after.next_start
        finally:
            await store.close()

    (notice,) = slack.messages(CHANNEL)
    assert "The replay <@U7> asked for was stopped because the bot is restarting" in notice.text
    assert told == []


async def test_a_replays_grader_tokens_and_their_cost_at_the_graders_rate_count_toward_the_budgets(tmp_path):
    path = tmp_path / "bot.sqlite"
    await seed(path)
    model = ScriptedChatModel(script=replayed_grader, usage=(1_000, 100), cached_input=600)

    async def graders(workspace: Workspace) -> WorkspaceGrader:
        return WorkspaceGrader(GRADER, TranscriptGrader(model))

    async def tell(**message):
        raise AssertionError(f"nothing should go wrong: {message}")

    with SlackApiStandin(token=TOKEN) as slack:
        store = await Store.open(str(path))
        try:
            async with AsyncSqliteSaver.from_conn_string(str(path)) as checkpointer:
                replays = ChannelReplays(store=store, checkpointer=checkpointer, graders=graders)
                client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
                request = ReplayRequest(Workspace(TEAM), CHANNEL, "U7", days=None)
                assert await replays.start(request, tell, client) is None
                # The comparison is posted once both passes are graded and charged.
                await asyncio.to_thread(
                    wait_for,
                    lambda: [m for m in slack.messages(CHANNEL) if "Does calibration help?" in m.text],
                    WAIT,
                    message="the replay's comparison",
                )
                spender = Spender(datetime.now(UTC).date(), Workspace(TEAM), CHANNEL)
                spent = await store.spent_today(spender)
                await replays.drain()
                history = await store.usage(Workspace(TEAM), CHANNEL, day_start(datetime.now(UTC)))
                tally = await store.cost_tally(Workspace(TEAM), CHANNEL)
        finally:
            await store.close()

    calls = len(model.calls)
    assert calls >= 2  # off and loo
    # Per call: 400 input tokens at $2.50/M, 600 cached at $1.25/M, 100 output at $10/M.
    per_call = (400 * 2.50 + 600 * 1.25 + 100 * 10.0) / 1e6
    for level in ("channel", "workspace", "deployment"):
        assert spent[level].tokens == calls * 1_100
        assert spent[level].usd == pytest.approx(calls * per_call)
    # The cost history shows the replay's calls as what they used, apart from runs.
    (replayed,) = [row for row in history if row.requester == REPLAYS]
    assert (replayed.requests, replayed.tokens) == (0, calls * 1_100)
    assert replayed.usd == pytest.approx(calls * per_call)
    assert tally.replay_calls == calls
    assert f"replays {dollars(calls * per_call)} over {calls} grader calls" in spend_words(tally)


async def test_a_replay_stops_at_the_budget_with_what_it_has(tmp_path):
    """A channel budget that holds a few grader calls: the replay reserves each call's estimate
    before making it and stops at the first the budget refuses; it posts what it graded, saying it
    stopped at the budget, and its spend is what its calls used (nothing reserved is left over)."""
    path = tmp_path / "bot.sqlite"
    await seed(path)
    model = ScriptedChatModel(script=replayed_grader, usage=(1_000, 100))

    async def graders(workspace: Workspace) -> WorkspaceGrader:
        return WorkspaceGrader(GRADER, TranscriptGrader(model))

    async def limits(workspace: Workspace) -> DailyLimits:
        return DailyLimits(tokens_per_channel=5 * 1_100)

    async def tell(**message):
        raise AssertionError(f"nothing should go wrong: {message}")

    with SlackApiStandin(token=TOKEN) as slack:
        store = await Store.open(str(path))
        try:
            async with AsyncSqliteSaver.from_conn_string(str(path)) as checkpointer:
                replays = ChannelReplays(
                    store=store, checkpointer=checkpointer, graders=graders, limits=limits
                )
                client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
                request = ReplayRequest(Workspace(TEAM), CHANNEL, "U7", days=None)
                assert await replays.start(request, tell, client) is None
                (posted,) = await asyncio.to_thread(
                    wait_for,
                    lambda: [m for m in slack.messages(CHANNEL) if "Does calibration help?" in m.text],
                    WAIT,
                    message="the replay's comparison",
                )
                spent = await store.spent_today(Spender(datetime.now(UTC).date(), Workspace(TEAM), CHANNEL))
                await replays.drain()
        finally:
            await store.close()

    calls = len(model.calls)
    assert 0 < calls < 2 * CASES  # stopped before grading every case twice
    assert "stopped at the budget after" in posted.all_text and f"of {CASES} cases" in posted.all_text
    assert spent["channel"].tokens == calls * 1_100  # what the calls used; no reservation left over
    assert spent["channel"].requests == 0


async def test_a_replay_grades_at_most_its_cap_of_the_latest_reviewed_cases(tmp_path):
    path = tmp_path / "bot.sqlite"
    await seed(path)
    model = ScriptedChatModel(script=replayed_grader, usage=(1_000, 100))

    async def graders(workspace: Workspace) -> WorkspaceGrader:
        return WorkspaceGrader(GRADER, TranscriptGrader(model))

    async def tell(**message):
        raise AssertionError(f"nothing should go wrong: {message}")

    with SlackApiStandin(token=TOKEN) as slack:
        store = await Store.open(str(path))
        try:
            async with AsyncSqliteSaver.from_conn_string(str(path)) as checkpointer:
                replays = ChannelReplays(store=store, checkpointer=checkpointer, graders=graders, max_cases=4)
                client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
                request = ReplayRequest(Workspace(TEAM), CHANNEL, "U7", days=None)
                assert await replays.start(request, tell, client) is None
                (posted,) = await asyncio.to_thread(
                    wait_for,
                    lambda: [m for m in slack.messages(CHANNEL) if "Does calibration help?" in m.text],
                    WAIT,
                    message="the replay's comparison",
                )
                await replays.drain()
        finally:
            await store.close()

    assert len(model.calls) == 2 * 4  # four cases, each with calibration off and leave-one-out
    assert f"the latest 4 of {CASES} reviewed" in posted.all_text
