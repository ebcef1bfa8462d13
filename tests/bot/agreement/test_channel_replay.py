"""`/rubric replay`'s background runner below the listener: one per channel, and a clean stop.

The seeded database (tests/bot/agreement/replay_seed.py), the real SQLite store and checkpointer, a scripted
grader and the local Slack stand-in; the full command is driven end to end in
tests/e2e/test_replay_e2e.py.
"""

from __future__ import annotations

import asyncio
import threading

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.channel_replay import ChannelReplays, ReplayRequest
from bot.db.replays import ReplayRefused
from bot.db.store import Store
from bot.vocabulary.workspace import Workspace
from grading import TranscriptGrader
from tests.bot.agreement.replay_seed import CHANNEL, TEAM, replayed_grader, seed
from tests.grading.scripted import ScriptedChatModel
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-channel-replay"
WAIT = 30.0  # bound for the replay to reach its first grader call


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

                async def graders(workspace: Workspace) -> TranscriptGrader:
                    asked.append(workspace)
                    return TranscriptGrader(ScriptedChatModel(script=hanging_grader))

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
