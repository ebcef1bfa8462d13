"""A ThreadRunner with the real agent, for tests of what runs post: scripted models, a temp SQLite
database and the Slack stand-in. `open_harness` opens one; `Harness.use` builds the runner."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent.worker import build_agent
from bot.config import Settings
from bot.db.store import Store
from bot.slack.client import build_client
from bot.slack.conversation import UserMessage
from bot.threads.runner import ThreadRunner
from bot.threads.runner_base import RunnerPolicy, RunnerPorts
from bot.workspaces.clients import WorkspaceClients
from grading import CalibrationSource, TrustSource
from tests.grading.scripted import ScriptedChatModel
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-runner-test"
"""The bot token the harness's Slack client uses (the stand-in accepts only it)."""


class Harness:
    """A ThreadRunner wired to scripted models, a temp database and the Slack stand-in."""

    def __init__(
        self, slack: SlackApiStandin, store: Store, checkpointer: AsyncSqliteSaver, db_path: str
    ) -> None:
        self.slack = slack
        self.store = store
        self.db_path = db_path
        self.checkpointer = checkpointer
        # Slack's refusals are retried at once: what the runner does once they are used up is tested.
        settings = Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url, slack_retry_backoff=0.01)
        self.client = build_client(settings)
        self.runner: ThreadRunner | None = None
        self.grader: ScriptedChatModel | None = None
        self.count = 0

    def use(
        self,
        worker: Any,
        grader: Any,
        max_iterations: int = 3,
        *,
        calibration: CalibrationSource | None = None,
        trust: TrustSource | None = None,
        context_tokens: int = 0,
        summarizer: Any = None,
        **timeouts: float,
    ) -> ThreadRunner:
        """A runner whose worker and grader (and `summarizer`, past `context_tokens` of history)
        follow these scripts (see tests.grading.scripted)."""
        self.grader = ScriptedChatModel(script=grader)
        self.worker = ScriptedChatModel(script=worker)
        agent = build_agent(
            self.worker,
            self.grader,
            max_iterations=max_iterations,
            checkpointer=self.checkpointer,
            calibration=calibration,
            trust=trust,
            context_tokens=context_tokens,
            summarizer=summarizer and ScriptedChatModel(script=summarizer),
        )
        self.agent = agent
        ports = RunnerPorts(
            agent=agent,
            store=self.store,
            clients=WorkspaceClients(self.client),
            checkpointer=self.checkpointer,
        )
        self.runner = ThreadRunner(ports, RunnerPolicy(**timeouts))
        return self.runner

    def message(self, text: str, thread_ts: str | None = None) -> UserMessage:
        self.count += 1
        ts = f"1600000000.{self.count:06d}"
        return UserMessage(team="T1", channel="C1", ts=ts, thread_ts=thread_ts or ts, user="U1", text=text)

    async def settle(self) -> None:
        assert self.runner is not None
        while self.runner.busy_threads:
            await asyncio.sleep(0.01)

    def thread(self, thread_ts: str) -> list[Any]:
        return self.slack.messages_in_thread("C1", thread_ts)

    def runs(self) -> list[tuple[str, str | None, int]]:
        """(request ts, status, undelivered) of every recorded run, as an operator would query them."""
        with closing(sqlite3.connect(self.db_path)) as db:
            return db.execute("SELECT request_ts, status, undelivered FROM runs ORDER BY run_id").fetchall()


@asynccontextmanager
async def open_harness(directory: Path) -> AsyncIterator[Harness]:
    """A harness on a fresh database in `directory`, closed (with its Slack stand-in) on exit."""
    with SlackApiStandin(token=TOKEN) as slack:
        path = str(directory / "bot.sqlite")
        store = await Store.open(path)
        try:
            async with AsyncSqliteSaver.from_conn_string(path) as checkpointer:
                yield Harness(slack, store, checkpointer, path)
        finally:
            await store.close()
