"""What every part of the thread runner shares (`bot.threads.runner`): its ports and policy, replying in
a thread, queueing a job, and the pause before the database is tried again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.worker import AgentPool, ConversationAgent
from bot.audit.auditor import Auditor
from bot.config import DEFAULT_DELIVERY_RETRY, DEFAULT_MODEL_TIMEOUT, DEFAULT_RUN_TIMEOUT, Settings
from bot.db.store import Store
from bot.limits.quota import DailyLimits
from bot.material.reader import MaterialReader
from bot.queue.jobs import Abandoned, JobKind, JobPayload, JobQueue
from bot.queue.scheduler import ThreadScheduler
from bot.shadow.grader import ShadowGrader
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


NO_LIMITS = DailyLimits()
"""No daily limits (tests, and the terminal's `grade`)."""


@dataclass(frozen=True)
class RunnerPorts:
    """What the runner calls out to: the store, Slack (each workspace's client), the models, the job
    queue and the material reader."""

    agent: ConversationAgent
    """The deployment's agent (with `agents`, the one of the deployment's models)."""
    store: Store
    clients: WorkspaceClients
    """Each job talks to Slack with its own workspace's client."""
    queue: JobQueue = field(default_factory=ThreadScheduler)
    reader: MaterialReader | None = None
    """Reads what requests share (the thread the bot is called into, attached files); without one,
    requests are their text alone."""
    checkpointer: BaseCheckpointSaver | None = None
    """The agent's: deleted and edited messages need it to drop older checkpoints."""
    workspaces: WorkspaceOverrides | None = None
    """Each workspace's own limits, applied instead of the policy's `limits`."""
    agents: AgentPool | None = None
    """With `workspaces`, each workspace's runs answer and grade with its own models."""
    auditor: Auditor | None = None
    """Audits the runs it chooses once they are finished (see `bot.audit`)."""
    shadow: ShadowGrader | None = None
    """Grades the live iterations it chooses again once their run is finished, never acting (see
    `bot.shadow`)."""


@dataclass(frozen=True)
class RunnerPolicy:
    """How long and how much the runner allows, and how a run shows its progress."""

    model_timeout: float = DEFAULT_MODEL_TIMEOUT
    """What the models were built with (named in the notice of a model that timed out)."""
    run_timeout: float = DEFAULT_RUN_TIMEOUT
    """A run that takes longer ends with a notice."""
    delivery_retry: float = DEFAULT_DELIVERY_RETRY
    """How long a run retries messages Slack refuses for now."""
    limits: DailyLimits = NO_LIMITS
    """The daily limits enforced (where the ports have no `workspaces`)."""
    streaming: bool = False
    """A run streams its progress as a plan where Slack takes it (`bot.streaming`)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> RunnerPolicy:
        """The policy the settings describe (each workspace's own limits come from the ports)."""
        return cls(
            model_timeout=settings.model_timeout,
            run_timeout=settings.run_timeout,
            delivery_retry=settings.delivery_retry,
            streaming=settings.streaming,
        )


DEFAULT_POLICY = RunnerPolicy()
"""The defaults of every setting, no daily limits, no streaming (tests, and the terminal's `grade`)."""


class RunnerBase:
    """What every part of the runner shares: its ports and policy (set by `ThreadRunner`) and how it
    replies in a thread and queues a job."""

    _ports: RunnerPorts
    _policy: RunnerPolicy
    _kinds: dict[str, JobKind[Any]]

    async def reply(self, client: AsyncWebClient, message: UserMessage, payload: SlackMessage) -> str | None:
        """Post a message in `message`'s thread with `client` (its workspace's), retried while Slack
        refuses it for now (for up to `delivery_retry` seconds, as a run's messages are); its ts, or
        None if Slack failed (logged)."""
        window = RetryWindow(message.thread_id, self._policy.delivery_retry)
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
            self._ports.store,
            run_id,
            message.thread_id,
            retry_for=self._policy.delivery_retry,
            resumed=resumed,
            lease=lease,
            finish_stream=partial(finish_stream, client, message.channel, post),
        )

    async def _submit(self, thread: ThreadKey, payload: JobPayload) -> None:
        if not await self._ports.queue.submit(thread, payload):
            await self._kinds[payload.kind].abandon(payload, Abandoned.STOPPING)

    def _needs_checkpointer(self) -> BaseCheckpointSaver:
        if self._ports.checkpointer is None:
            raise RuntimeError("deleted and edited messages need the runner's checkpointer")
        return self._ports.checkpointer


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
