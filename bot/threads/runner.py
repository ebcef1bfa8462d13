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

from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.worker import agent_config
from bot.assistant.pane import pane_channel
from bot.lifecycle.files import empty_write_ahead_log
from bot.lifecycle.forget import forget_message, revise_request
from bot.limits.quota import refusal_message
from bot.queue.jobs import (
    Abandoned,
    ForgetJob,
    JobKind,
    LimitJob,
    NoticeJob,
    PromptJob,
    ReplyJob,
    RequestJob,
    ReviseJob,
    RubricJob,
)
from bot.rendering.errors import error_message
from bot.rendering.rubrics import request_prompt, rubric_confirmation, rubric_error, rubric_forgotten
from bot.slack.conversation import UserMessage
from bot.threads.admission import Admission
from bot.threads.answering import Answering
from bot.threads.recovery import abandon_change, riding_out_outages
from bot.threads.runner_base import DEFAULT_POLICY, RunnerPolicy, RunnerPorts, logger, reply_to
from grading import RubricError, parse_rubric

Job = TypeVar("Job", RequestJob, RubricJob, PromptJob, ReplyJob, LimitJob, NoticeJob, ForgetJob)
"""A job the runner answers in Slack, as its payload model."""

Detail = TypeVar("Detail", int, Abandoned)
"""What a job's handler is told besides the job: its attempt number (doing it) or why it is
abandoned."""


class ThreadRunner(Admission, Answering):
    """Does the bot's work in Slack threads: rubric changes and graded runs, posted as they happen."""

    def __init__(self, ports: RunnerPorts, policy: RunnerPolicy = DEFAULT_POLICY) -> None:
        """The runner calls out through `ports` (see `RunnerPorts`) within `policy` (see
        `RunnerPolicy`)."""
        self._ports = ports
        self._policy = policy
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
            self._ports.queue.register(kind)

    @property
    def busy_threads(self) -> int:
        """Jobs queued or running in this process."""
        return self._ports.queue.busy

    async def drain(self, grace: float) -> None:
        """Stop for a restart: finish what can finish within `grace`, mark the rest interrupted."""
        await self._ports.queue.drain(grace)

    async def job_counts(self) -> dict[str, int]:
        """How many jobs the queue holds per state (for the metrics)."""
        return await self._ports.queue.job_counts()

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
            client = await self._ports.clients.client_for(message.workspace)
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
        await self._ports.store.acknowledge_interrupted(job.run_id)

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
        if await forget_message(self._ports.agent, self._needs_checkpointer(), self._ports.store, deleted):
            default = await self._ports.store.get_channel_rubric(deleted.thread.workspace, deleted.channel)
            notice = rubric_forgotten(channel_default=default is not None)
            await self.reply(client, reply_to(deleted.thread, deleted.ts), notice)
        await self._applied(job)

    async def _revise_job(self, job: ReviseJob, attempt: int) -> None:
        await revise_request(self._ports.agent, self._needs_checkpointer(), self._ports.store, job.message)
        await self._applied(job)

    async def _applied(self, job: ForgetJob | ReviseJob) -> None:
        """Forget the kept copy of a deletion or edit once it is applied (it quotes the message), and
        empty SQLite's write-ahead log after it, as after the change itself."""
        if job.kept is not None:
            await self._ports.store.change_applied(job.kept)
            await empty_write_ahead_log(self._needs_checkpointer())

    async def _replace_rubric(self, client: AsyncWebClient, message: UserMessage, rubric_text: str) -> None:
        await self._report_interrupted(client, message)
        try:
            rubric = parse_rubric(rubric_text)
        except RubricError as exc:
            await self.reply(client, message, rubric_error(str(exc)))
            return
        await self._ports.agent.aupdate_state(agent_config(message.thread_id), {"rubric": rubric_text})
        await self.reply(client, message, rubric_confirmation(rubric))

    async def _prompt(self, client: AsyncWebClient, message: UserMessage) -> None:
        state = await self._ports.agent.aget_state(agent_config(message.thread_id))
        scope, text = "thread", state.values.get("rubric")
        if not text:
            channel = await pane_channel(client, message) or message.channel
            scope, text = "channel", await self._ports.store.get_channel_rubric(message.workspace, channel)
        try:
            rubric = parse_rubric(text) if text else None
        except RubricError as exc:  # stored before a change to the rubric format
            notice = error_message(f"This {scope}'s rubric no longer parses", str(exc))
            await self.reply(client, message, notice)
            return
        await self.reply(client, message, request_prompt(rubric, scope=scope))
