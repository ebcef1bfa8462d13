"""What every part of the thread runner shares (`bot.threads.runner`): its collaborators, replying in a
thread, queueing a job, and the pause before the database is tried again.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.worker import AgentPool, ConversationAgent
from bot.audit.auditor import Auditor
from bot.db.store import Store
from bot.limits.quota import DailyLimits
from bot.material.reader import MaterialReader
from bot.queue.jobs import Abandoned, JobKind, JobPayload, JobQueue
from bot.slack.client import attempt
from bot.slack.conversation import UserMessage
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.streaming.stream import finish_stream
from bot.threads.delivery import Delivery, RetryWindow, open_delivery, post_in_time
from bot.vocabulary.thread import ThreadKey
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.settings import WorkspaceOverrides

logger = logging.getLogger("bot.threads.runner")
"""The runner's parts log as the runner: the name operators filter by and the README quotes."""


DATABASE_RETRY_SECONDS = 2.0
"""Pause before a run the database failed resumes from its checkpoint; doubled for each further
attempt, so a database restart (seconds) is ridden out within `MAX_ATTEMPTS`."""


def retry_delay(number: int) -> float:
    """The pause before try `number + 1` of something the database failed: `DATABASE_RETRY_SECONDS`,
    doubled for each further try."""
    return DATABASE_RETRY_SECONDS * 2**number


class RunnerBase:
    """What every part of the runner shares: its collaborators (set by `ThreadRunner`) and how it
    replies in a thread and queues a job."""

    _agent: ConversationAgent
    _limits: DailyLimits
    _workspaces: WorkspaceOverrides | None
    _agents: AgentPool | None
    _checkpointer: BaseCheckpointSaver | None
    _store: Store
    _clients: WorkspaceClients
    _reader: MaterialReader | None
    _queue: JobQueue
    _model_timeout: float
    _run_timeout: float
    _delivery_retry: float
    _streaming: bool
    _auditor: Auditor | None
    _kinds: dict[str, JobKind[Any]]

    async def reply(self, client: AsyncWebClient, message: UserMessage, payload: SlackMessage) -> str | None:
        """Post a message in `message`'s thread with `client` (its workspace's), retried while Slack
        refuses it for now (for up to `delivery_retry` seconds, as a run's messages are); its ts, or
        None if Slack failed (logged)."""
        window = RetryWindow(message.thread_id, self._delivery_retry)
        return await post_in_time(partial(self._post, client, message), payload, window)

    async def _reply_once(
        self, client: AsyncWebClient, message: UserMessage, payload: SlackMessage
    ) -> str | None:
        """`reply` with one try, for a stopping process that cannot wait for Slack."""
        return await attempt(self._post(client, message, payload), f"post in thread {message.thread_id}")

    @staticmethod
    async def _post(client: AsyncWebClient, message: UserMessage, payload: SlackMessage) -> str:
        """Post a message in `message`'s thread; its ts (what the Slack client raises if it failed)."""
        response = await client.chat_postMessage(
            channel=message.channel, thread_ts=message.thread_ts, **payload, **NO_UNFURLS
        )
        return str(response["ts"])

    async def _delivery(
        self, client: AsyncWebClient, message: UserMessage, run_id: int, *, resumed: bool, lease: str | None
    ) -> Delivery:
        post = partial(self._post, client, message)
        return await open_delivery(
            post,
            self._store,
            run_id,
            message.thread_id,
            retry_for=self._delivery_retry,
            resumed=resumed,
            lease=lease,
            finish_stream=partial(finish_stream, client, message.channel, post),
        )

    async def _submit(self, thread: ThreadKey, payload: JobPayload) -> None:
        if not await self._queue.submit(thread, payload):
            await self._kinds[payload.kind].abandon(payload, Abandoned.STOPPING)

    def _needs_checkpointer(self) -> BaseCheckpointSaver:
        if self._checkpointer is None:
            raise RuntimeError("deleted and edited messages need the runner's checkpointer")
        return self._checkpointer


def reply_to(thread: ThreadKey, ts: str) -> UserMessage:
    """Enough of message `ts` in `thread` to reply to it: a deleted or edited message, or the
    request of a recorded run (their text is not kept)."""
    return UserMessage(
        team=thread.team,
        enterprise=thread.enterprise,
        channel=thread.channel,
        ts=ts,
        thread_ts=thread.thread_ts,
        user="",
        text="",
    )
