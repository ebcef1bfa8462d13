"""The thread runner: background work per Slack thread, one job at a time per thread.

Listeners ack at once and hand requests here. A job queue (`bot.queue.jobs`) keeps each thread's jobs in
arrival order while different threads run concurrently; `ThreadRunner` does the work of a job — runs the
agent, posts each evaluation and the final answer into the thread — and records runs so that a
restart or crash in the middle is reported in the thread instead of passing silently, a run that
takes too long ends with a notice, and an answer Slack never took is recorded as undelivered.

`ThreadRunner` is its parts put together, each in a module of its own: `bot.threads.admission` (what
comes in, claimed and queued), `bot.threads.answering` (the run itself), `bot.threads.recovery`
(interrupted runs told, jobs given up or tried again), over `bot.threads.runner_base`; the job kinds
and their handlers are wired here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.worker import AgentPool, ConversationAgent, agent_config
from bot.assistant.pane import pane_channel
from bot.audit.auditor import Auditor
from bot.config import DEFAULT_DELIVERY_RETRY, DEFAULT_MODEL_TIMEOUT, DEFAULT_RUN_TIMEOUT
from bot.db.store import Store
from bot.lifecycle.files import empty_write_ahead_log
from bot.lifecycle.forget import forget_message, revise_request
from bot.limits.quota import DailyLimits, refusal_message
from bot.material.reader import MaterialReader
from bot.queue.jobs import (
    Abandoned,
    ForgetJob,
    JobKind,
    JobQueue,
    LimitJob,
    NoticeJob,
    PromptJob,
    ReplyJob,
    RequestJob,
    ReviseJob,
    RubricJob,
)
from bot.queue.scheduler import ThreadScheduler
from bot.rendering.errors import error_message
from bot.rendering.rubrics import request_prompt, rubric_confirmation, rubric_error, rubric_forgotten
from bot.slack.conversation import UserMessage
from bot.threads.admission import Admission
from bot.threads.answering import Answering
from bot.threads.recovery import abandon_change, riding_out_outages
from bot.threads.runner_base import logger, reply_to
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.settings import WorkspaceOverrides
from grading import RubricError, parse_rubric

NO_LIMITS = DailyLimits()
"""A runner without daily limits (tests, and the terminal's `grade`)."""

Job = TypeVar("Job", RequestJob, RubricJob, PromptJob, ReplyJob, LimitJob, NoticeJob, ForgetJob)
"""A job the runner answers in Slack, as its payload model."""

Detail = TypeVar("Detail", int, Abandoned)
"""What a job's handler is told besides the job: its attempt number (doing it) or why it is
abandoned."""


class ThreadRunner(Admission, Answering):
    """Does the bot's work in Slack threads: rubric changes and graded runs, posted as they happen."""

    def __init__(
        self,
        *,
        agent: ConversationAgent,
        store: Store,
        clients: WorkspaceClients,
        queue: JobQueue | None = None,
        reader: MaterialReader | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        model_timeout: float = DEFAULT_MODEL_TIMEOUT,
        run_timeout: float = DEFAULT_RUN_TIMEOUT,
        delivery_retry: float = DEFAULT_DELIVERY_RETRY,
        limits: DailyLimits = NO_LIMITS,
        workspaces: WorkspaceOverrides | None = None,
        agents: AgentPool | None = None,
        streaming: bool = False,
        auditor: Auditor | None = None,
    ) -> None:
        """`model_timeout` is what the models were built with (for the notice); `run_timeout` and
        the daily `limits` are enforced; `delivery_retry` is how long a run retries messages Slack
        refuses for now.

        With `workspaces`, each workspace's own limits apply instead of `limits`, and with `agents`
        too, its runs answer and grade with its own models (`agent` is then the deployment's).

        With `streaming`, a run streams its progress as a plan where Slack takes it (`bot.streaming`).

        `reader` reads what requests share (the thread the bot is called into, attached files);
        without one, requests are their text alone. `checkpointer` is the agent's: deleted and
        edited messages need it to drop older checkpoints. Each job talks to Slack with its own
        workspace's client from `clients`. With an `auditor`, the runs it chooses are audited once
        they are finished (see `bot.audit`).
        """
        self._agent = agent
        self._limits = limits
        self._workspaces = workspaces
        self._agents = agents
        self._checkpointer = checkpointer
        self._store = store
        self._clients = clients
        self._reader = reader
        self._queue = queue or ThreadScheduler()
        self._model_timeout = model_timeout
        self._run_timeout = run_timeout
        self._delivery_retry = delivery_retry
        self._streaming = streaming
        self._auditor = auditor
        kinds: tuple[JobKind[Any], ...] = (
            JobKind(
                RequestJob,
                self._in_workspace(self._request_job, self._close_run),
                self._in_workspace(self._abandon_request, self._close_run),
            ),
            JobKind(
                RubricJob, self._in_workspace(self._rubric_job), self._in_workspace(self._abandon_message)
            ),
            JobKind(
                PromptJob, self._in_workspace(self._prompt_job), self._in_workspace(self._abandon_message)
            ),
            JobKind(ReplyJob, self._in_workspace(self._reply_job), self._in_workspace(self._abandon_message)),
            JobKind(LimitJob, self._in_workspace(self._limit_job), self._in_workspace(self._abandon_message)),
            JobKind(
                NoticeJob,
                self._in_workspace(self._notice_job, self._close_run),
                self._in_workspace(self._abandon_notice, self._close_run),
            ),
            JobKind(ForgetJob, self._in_workspace(self._forget_job, self._close_change), abandon_change),
            JobKind(ReviseJob, self._revise_job, abandon_change),
        )
        self._kinds = {
            kind.name: replace(kind, run=riding_out_outages(self._while_kept(kind.run))) for kind in kinds
        }
        for kind in self._kinds.values():
            self._queue.register(kind)

    @property
    def busy_threads(self) -> int:
        """Jobs queued or running in this process."""
        return self._queue.busy

    async def drain(self, grace: float) -> None:
        """Stop for a restart: finish what can finish within `grace`, mark the rest interrupted."""
        await self._queue.drain(grace)

    async def job_counts(self) -> dict[str, int]:
        """How many jobs the queue holds per state (for the metrics)."""
        return await self._queue.job_counts()

    def _in_workspace(
        self,
        work: Callable[[AsyncWebClient, Job, Detail], Awaitable[None]],
        gone: Callable[[Job], Awaitable[None]] | None = None,
    ) -> Callable[[Job, Detail], Awaitable[None]]:
        """`work` done with the Slack client of the job's own workspace.

        Where the bot is no longer installed (uninstalled, or its token revoked) the job ends at
        once with one log line and `gone` (if any): it is not retried.
        """

        async def in_workspace(job: Job, detail: Detail) -> None:
            message = job.message
            client = await self._clients.client_for(message.workspace)
            if client is not None:
                await work(client, job, detail)
                return
            logger.info(
                "dropped a %s job in thread %s: the bot is no longer installed in its workspace",
                job.kind,
                message.thread.thread_id,
            )
            if gone is not None:
                await gone(job)

        return in_workspace

    async def _close_run(self, job: RequestJob | NoticeJob) -> None:
        """Close the run of a job dropped with its workspace, as reported: nobody is left to tell."""
        await self._store.acknowledge_interrupted(job.run_id)

    async def _request_job(self, client: AsyncWebClient, job: RequestJob, attempt: int) -> None:
        await self._run_request(client, job.message, job.run_id, job.sources, attempt=attempt)

    async def _rubric_job(self, client: AsyncWebClient, job: RubricJob, attempt: int) -> None:
        await self._replace_rubric(client, job.message, job.rubric)

    async def _prompt_job(self, client: AsyncWebClient, job: PromptJob, attempt: int) -> None:
        await self._prompt(client, job.message)

    async def _limit_job(self, client: AsyncWebClient, job: LimitJob, attempt: int) -> None:
        await self.reply(client, job.message, refusal_message(job.quota, job.limit, job.refused_at))

    async def _reply_job(self, client: AsyncWebClient, job: ReplyJob, attempt: int) -> None:
        await self.reply(client, job.message, error_message(job.title, job.detail))

    async def _notice_job(self, client: AsyncWebClient, job: NoticeJob, attempt: int) -> None:
        await self._tell_abandoned(client, job.message, job.run_id)

    async def _close_change(self, job: ForgetJob) -> None:
        """Forget a kept deletion dropped with its workspace (whose data goes with it anyway)."""
        await self._applied(job)

    async def _forget_job(self, client: AsyncWebClient, job: ForgetJob, attempt: int) -> None:
        deleted = job.message
        if await forget_message(self._agent, self._needs_checkpointer(), self._store, deleted):
            default = await self._store.get_channel_rubric(deleted.thread.workspace, deleted.channel)
            notice = rubric_forgotten(channel_default=default is not None)
            await self.reply(client, reply_to(deleted.thread, deleted.ts), notice)
        await self._applied(job)

    async def _revise_job(self, job: ReviseJob, attempt: int) -> None:
        await revise_request(self._agent, self._needs_checkpointer(), self._store, job.message)
        await self._applied(job)

    async def _applied(self, job: ForgetJob | ReviseJob) -> None:
        """Forget the kept copy of a deletion or edit once it is applied (it quotes the message), and
        empty SQLite's write-ahead log after it, as after the change itself."""
        if job.kept is not None:
            await self._store.change_applied(job.kept)
            await empty_write_ahead_log(self._needs_checkpointer())

    async def _replace_rubric(self, client: AsyncWebClient, message: UserMessage, rubric_text: str) -> None:
        await self._report_interrupted(client, message)
        try:
            rubric = parse_rubric(rubric_text)
        except RubricError as exc:
            await self.reply(client, message, rubric_error(str(exc)))
            return
        await self._agent.aupdate_state(agent_config(message.thread_id), {"rubric": rubric_text})
        await self.reply(client, message, rubric_confirmation(rubric))

    async def _prompt(self, client: AsyncWebClient, message: UserMessage) -> None:
        state = await self._agent.aget_state(agent_config(message.thread_id))
        scope, text = "thread", state.values.get("rubric")
        if not text:
            channel = await pane_channel(client, message) or message.channel
            scope, text = "channel", await self._store.get_channel_rubric(message.workspace, channel)
        try:
            rubric = parse_rubric(text) if text else None
        except RubricError as exc:  # stored before a change to the rubric format
            notice = error_message(f"This {scope}'s rubric no longer parses", str(exc))
            await self.reply(client, message, notice)
            return
        await self.reply(client, message, request_prompt(rubric, scope=scope))
