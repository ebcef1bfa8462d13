"""The thread runner: background work per Slack thread, one job at a time per thread.

Listeners ack at once and hand requests here. A job queue (`bot.threads.jobs`) keeps each thread's jobs in
arrival order while different threads run concurrently; `ThreadRunner` does the work of a job — runs the
agent, posts each evaluation and the final answer into the thread — and records runs so that a
restart or crash in the middle is reported in the thread instead of passing silently, a run that
takes too long ends with a notice, and an answer Slack never took is recorded as undelivered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import (
    AgentPool,
    ConversationAgent,
    ThreadContext,
    TurnOutcome,
    agent_config,
    messages_through,
    run_turn,
    turn_evaluations,
    turn_so_far,
)
from bot.assistant.pane import in_pane, pane_channel, set_title
from bot.audit.auditor import Auditor, FinishedRun
from bot.config import DEFAULT_DELIVERY_RETRY, DEFAULT_MODEL_TIMEOUT, DEFAULT_RUN_TIMEOUT
from bot.db.database import UNAVAILABLE_ERRORS, describe_database_error, unavailable_error
from bot.db.spend import QuotaExceeded
from bot.db.store import (
    ANSWERED,
    FAILED,
    FINAL_STEP,
    TIMED_OUT,
    ChangeKind,
    Claim,
    PostedEvaluation,
    PostedPart,
    RunLease,
    RunMaterial,
    RunRecord,
    RunStatus,
    Store,
    WorkspaceSettingsRow,
    new_lease,
)
from bot.lifecycle.erase import describe, erase_leftovers
from bot.lifecycle.files import empty_write_ahead_log
from bot.lifecycle.forget import forget_message, revise_request
from bot.limits.prices import RunCost
from bot.limits.quota import DailyLimits, refusal_message
from bot.material.files import Unread
from bot.material.reader import NOTHING, Material, MaterialReader, conversation_messages
from bot.material.sources import Sources
from bot.ops import metrics
from bot.provenance.record import stored_provenance
from bot.review.controls import review_controls
from bot.slack.blocks import MAX_BLOCKS, context_block
from bot.slack.client import attempt, describe_error
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.notices import log_failure, reference_words
from bot.streaming.progress import StreamedProgress
from bot.streaming.stream import finish_stream
from bot.threads import render
from bot.threads.conversation import (
    MessageChange,
    ThreadKey,
    UserMessage,
    stored_message_id,
)
from bot.threads.delivery import (
    Delivery,
    RetryWindow,
    RunTakenOver,
    open_delivery,
    post_in_time,
    record_retrying,
)
from bot.threads.jobs import (
    MAX_ATTEMPTS,
    Abandoned,
    ForgetJob,
    JobKind,
    JobPayload,
    JobQueue,
    LimitJob,
    NoticeJob,
    P,
    PromptJob,
    ReplyJob,
    RequestJob,
    ReviseJob,
    RubricJob,
    ThreadScheduler,
)
from bot.threads.progress import WorkingIndicator, clear_status, react
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.settings import WorkspaceOverrides
from grading import RubricError, RubricEvaluation, parse_rubric

logger = logging.getLogger(__name__)


DATABASE_RETRY_SECONDS = 2.0
"""Pause before a run the database failed resumes from its checkpoint; doubled for each further
attempt, so a database restart (seconds) is ridden out within `MAX_ATTEMPTS`."""

JOB_DATABASE_TRIES = 6
"""Tries of a job the database fails outside a run's own retries (its thread looked up, a rubric
stored, …), `DATABASE_RETRY_SECONDS` apart and doubling (about a minute in all): a job that failed
while the database was down could not even record so, and would hold its thread's queue."""


NO_LIMITS = DailyLimits()
"""A runner without daily limits (tests, and the terminal's `grade`)."""

Job = TypeVar("Job", RequestJob, RubricJob, PromptJob, ReplyJob, LimitJob, NoticeJob, ForgetJob)
"""A job the runner answers in Slack, as its payload model."""

Detail = TypeVar("Detail", int, Abandoned)
"""What a job's handler is told besides the job: its attempt number (doing it) or why it is
abandoned."""


@dataclass(frozen=True)
class _Attempt:
    """How one attempt at a run ended."""

    status: RunStatus
    outcome: TurnOutcome | None
    """Its turn as far as the models got (a failed one's too: the tokens it spent count)."""
    delivered: bool
    """Whether its closing messages reached the thread."""
    posted: list[PostedPart]
    """Closing messages Slack took that the run's end records (see `Delivery.unrecorded`)."""


class RunTimeout(Exception):
    """A whole run took longer than the runner allows (`RUBRIC_BOT_RUN_TIMEOUT`)."""


class ThreadRunner:
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
            JobKind(ForgetJob, self._in_workspace(self._forget_job, self._close_change), _abandon_change),
            JobKind(ReviseJob, self._revise_job, _abandon_change),
        )
        self._kinds = {
            kind.name: replace(kind, run=_riding_out_outages(self._while_kept(kind.run))) for kind in kinds
        }
        for kind in self._kinds.values():
            self._queue.register(kind)

    @property
    def busy_threads(self) -> int:
        """Jobs queued or running in this process."""
        return self._queue.busy

    async def submit_request(self, message: UserMessage, sources: Sources | None = None) -> None:
        """Queue a request for the agent in its thread (its run recorded first, so a crash is noticed);
        `sources` says what it shares besides its text. Past a daily limit its thread is told so
        instead, and no model is called."""

        async def request(claim: Claim) -> JobPayload:
            now = datetime.now(UTC)
            limits = self._limits
            if self._workspaces is not None:
                limits = self._workspaces.in_force(await claim.workspace_settings(message.workspace)).limits
            try:
                run_id = await claim.start_run(
                    message.thread, message.ts, requester=message.user, quota=limits.quota(now)
                )
            except QuotaExceeded as refused:
                logger.info("refused a request in thread %s: %s", message.thread_id, refused)
                return LimitJob(message=message, quota=refused.quota, limit=refused.limit, refused_at=now)
            return RequestJob(message=message, run_id=run_id, sources=sources or Sources())

        await self._accept(message, request)

    async def submit_rubric(self, message: UserMessage, rubric_text: str) -> None:
        """Queue a `rubric:` message: it replaces the thread's rubric after any earlier runs."""
        await self._accept(message, RubricJob(message=message, rubric=rubric_text))

    async def ask_for_request(self, message: UserMessage) -> None:
        """Queue the answer to a mention with nothing to do: the rubric in force, and "what should I do?"."""
        await self._accept(message, PromptJob(message=message))

    async def submit_notice(self, message: UserMessage, title: str, detail: str) -> None:
        """Queue an error notice to a message the bot will not act on otherwise (e.g. one too long)."""
        await self._accept(message, ReplyJob(message=replace(message, text=""), title=title, detail=detail))

    async def _accept(
        self, message: UserMessage, job: JobPayload | Callable[[Claim], Awaitable[JobPayload]]
    ) -> None:
        """Claim `message`, remember its thread and queue its job (built in the claim's transaction,
        if `job` is a function), all in one transaction.

        A retried delivery of the message, or the other twin of a mention, finds it claimed and
        does nothing. If the database fails, nothing is recorded and the caller raises, so Slack
        delivers the message again. The in-process queue, whose jobs live in memory, takes the job
        once the claim has committed.
        """
        async with self._store.claiming(*message.dedupe_keys) as claim:
            if claim is None:
                return
            await claim.add_thread(message.thread)
            payload = job if isinstance(job, JobPayload) else await job(claim)
            if self._queue.durable:
                connection = await claim.driver_connection()
                await self._queue.submit(message.thread, payload, connection=connection)
                return
        await self._submit(message.thread, payload)

    async def forget(self, deleted: MessageChange) -> None:
        """A person deleted a message: if it is in a thread the bot takes part in, take back its queued
        jobs (with their runs) and queue its removal from the thread's conversation."""
        if not await self._store.has_thread(deleted.thread):
            return
        for job in await self._queue.withdraw(deleted.thread, deleted.ts):
            if isinstance(job, RequestJob):
                await self._store.delete_run(job.run_id)
            elif isinstance(job, ForgetJob | ReviseJob) and job.kept is not None:
                await self._store.change_applied(job.kept)  # superseded by this deletion
        await self._submit_change("forget", deleted)

    async def revise(self, edited: MessageChange) -> None:
        """A person edited a message: if it is in a thread the bot takes part in, a queued request
        takes the new text (its run answers that) and the change of its stored copy is queued."""
        if not await self._store.has_thread(edited.thread):
            return
        await self._queue.revise_queued(edited.thread, edited.ts, partial(_with_new_text, edited))
        await self._submit_change("revise", edited)

    async def resume_changes(self) -> int:
        """Queue the deletions and edits an earlier process kept but did not apply; how many."""
        pending = await self._store.pending_changes()
        for kept in pending:
            job = CHANGE_JOBS[kept.kind](message=kept.change, kept=kept.change_id)
            await self._submit(kept.change.thread, job)
        return len(pending)

    async def _submit_change(self, kind: ChangeKind, change: MessageChange) -> None:
        """Queue a deletion or edit; where jobs live in memory, kept in the database first, so that it
        is applied even if this process stops before it gets there."""
        kept = None if self._queue.durable else await self._store.record_change(kind, change)
        await self._submit(change.thread, CHANGE_JOBS[kind](message=change, kept=kept))

    async def report_abandoned_runs(self, started_before: datetime) -> int:
        """Tell each thread whose run an earlier process left unfinished, once; how many there were.

        The runs are claimed at once (another process starting now gets none of them); each notice
        is queued in its thread, so it comes before any new request's answer there.
        """
        runs = await self._store.claim_abandoned_runs(started_before)
        for run in runs:
            notice = NoticeJob(message=_reply_to(run.thread, run.request_ts), run_id=run.run_id)
            await self._submit(run.thread, notice)
        return len(runs)

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

    async def drain(self, grace: float) -> None:
        """Stop for a restart: finish what can finish within `grace`, mark the rest interrupted."""
        await self._queue.drain(grace)

    async def job_counts(self) -> dict[str, int]:
        """How many jobs the queue holds per state (for the metrics)."""
        return await self._queue.job_counts()

    # -- jobs ------------------------------------------------------------------

    async def _submit(self, thread: ThreadKey, payload: JobPayload) -> None:
        if not await self._queue.submit(thread, payload):
            await self._kinds[payload.kind].abandon(payload, Abandoned.STOPPING)

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
        await self.reply(client, job.message, render.error_message(job.title, job.detail))

    async def _notice_job(self, client: AsyncWebClient, job: NoticeJob, attempt: int) -> None:
        await self._tell_abandoned(client, job.message, job.run_id)

    async def _close_change(self, job: ForgetJob) -> None:
        """Forget a kept deletion dropped with its workspace (whose data goes with it anyway)."""
        await self._applied(job)

    async def _forget_job(self, client: AsyncWebClient, job: ForgetJob, attempt: int) -> None:
        deleted = job.message
        if await forget_message(self._agent, self._needs_checkpointer(), self._store, deleted):
            default = await self._store.get_channel_rubric(deleted.thread.workspace, deleted.channel)
            notice = render.rubric_forgotten(channel_default=default is not None)
            await self.reply(client, _reply_to(deleted.thread, deleted.ts), notice)
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

    def _while_kept(self, run: Callable[[P, int], Awaitable[None]]) -> Callable[[P, int], Awaitable[None]]:
        """`run`, for a thread whose data is still kept: a job whose thread was deleted (uninstall,
        `db purge`, retention) before it started is skipped, so no model sees its text; what one
        running meanwhile (or an earlier attempt of it) wrote there is deleted once it ends."""

        async def kept(job: P, attempt: int) -> None:
            thread = job.thread
            if thread is None:
                await run(job, attempt)
                return
            if await self._store.has_thread(thread):
                try:
                    await run(job, attempt)
                except Exception:
                    await self._erase_if_deleted(thread, job.kind)
                    raise
            else:
                logger.info("skipped a %s job in thread %s: its data was deleted", job.kind, thread.thread_id)
            await self._erase_if_deleted(thread, job.kind)

        return kept

    async def _erase_if_deleted(self, thread: ThreadKey, kind: str) -> None:
        """Delete what is left of `thread` if its data was deleted while a `kind` job was on it."""
        if await self._store.has_thread(thread):
            return
        erased = await erase_leftovers(self._store, self._needs_checkpointer(), thread)
        logger.info(
            "thread %s was deleted while a %s job was on it; deleted what it left: %s",
            thread.thread_id,
            kind,
            describe(erased),
        )

    def _needs_checkpointer(self) -> BaseCheckpointSaver:
        if self._checkpointer is None:
            raise RuntimeError("deleted and edited messages need the runner's checkpointer")
        return self._checkpointer

    async def _abandon_request(self, client: AsyncWebClient, job: RequestJob, why: Abandoned) -> None:
        message, run_id = job.message, job.run_id
        if why is Abandoned.STOPPING:
            await self._tell_interrupted(client, message, run_id, started=False)
            return
        lease = await self._store.take_run(run_id) if self._queue.durable else None
        delivery = await self._delivery(client, message, run_id, resumed=True, lease=lease)
        await react(client, "reactions_remove", message)
        await delivery.post(FINAL_STEP, 0, _gave_up_notice())
        delivered = await delivery.settle()
        await self._finish(message, run_id, FAILED, delivered=delivered, posted=delivery.unrecorded())

    async def _abandon_message(
        self, client: AsyncWebClient, job: PromptJob | RubricJob | ReplyJob | LimitJob, why: Abandoned
    ) -> None:
        message = job.message
        if why is Abandoned.STOPPING:
            await self._tell_interrupted(client, message, None, started=False)
        else:
            await self.reply(client, message, _gave_up_notice())

    async def _abandon_notice(self, client: AsyncWebClient, job: NoticeJob, why: Abandoned) -> None:
        await self._store.release_interrupted(job.run_id)

    async def _replace_rubric(self, client: AsyncWebClient, message: UserMessage, rubric_text: str) -> None:
        await self._report_interrupted(client, message)
        try:
            rubric = parse_rubric(rubric_text)
        except RubricError as exc:
            await self.reply(client, message, render.rubric_error(str(exc)))
            return
        await self._agent.aupdate_state(agent_config(message.thread_id), {"rubric": rubric_text})
        await self.reply(client, message, render.rubric_confirmation(rubric))

    async def _prompt(self, client: AsyncWebClient, message: UserMessage) -> None:
        state = await self._agent.aget_state(agent_config(message.thread_id))
        scope, text = "thread", state.values.get("rubric")
        if not text:
            channel = await pane_channel(client, message) or message.channel
            scope, text = "channel", await self._store.get_channel_rubric(message.workspace, channel)
        try:
            rubric = parse_rubric(text) if text else None
        except RubricError as exc:  # stored before a change to the rubric format
            notice = render.error_message(f"This {scope}'s rubric no longer parses", str(exc))
            await self.reply(client, message, notice)
            return
        await self.reply(client, message, render.request_prompt(rubric, scope=scope))

    async def _run_request(
        self, client: AsyncWebClient, message: UserMessage, run_id: int, sources: Sources, *, attempt: int = 0
    ) -> None:
        """Answer the request; `attempt` counts earlier attempts cut short (a later one continues
        from the conversation's checkpoint and posts only what they did not).

        A database that fails mid-run cuts the attempt short like a crash: the run resumes from
        its checkpoint after a pause, up to `MAX_ATTEMPTS` attempts in all; then the thread is told
        that the database failed. Anything else that fails is the model's (or the agent's) failure,
        reported in the thread. If meanwhile another process took the run over (its job re-queued
        while this one could not reach the database), this one leaves the thread to it.
        """
        started = time.monotonic()
        # Taken as the first try starts, checked as each later one does; none with the embedded
        # queue, whose runs no other process can take.
        lease = RunLease(new_lease()) if self._queue.durable else None
        for number in range(attempt, MAX_ATTEMPTS):
            try:
                ended = await self._answer_and_post(
                    client, message, run_id, sources, resumed=number > 0, lease=lease
                )
                outcome = ended.outcome
                metrics.run_finished(ended.status, time.monotonic() - started, outcome)
                tokens = outcome.usage["total_tokens"] if outcome and outcome.usage else None
                await self._finish(
                    message,
                    run_id,
                    ended.status,
                    delivered=ended.delivered,
                    tokens=tokens,
                    posted=ended.posted,
                    cost=outcome.cost if outcome else None,
                )
                if outcome is not None:
                    await self._audit(message, run_id, outcome)
                return
            except RunTakenOver:
                logger.warning(
                    "run %d in thread %s was taken over by another process while this one could not "
                    "reach the database; leaving the thread to it",
                    run_id,
                    message.thread_id,
                )
                return
            except Exception as exc:
                failure = unavailable_error(exc)
                if failure is None:
                    raise
                if number + 1 == MAX_ATTEMPTS:
                    metrics.run_finished(FAILED, time.monotonic() - started)
                    await self._tell_database_failed(client, message, run_id, failure)
                    return
                delay = DATABASE_RETRY_SECONDS * 2**number
                logger.warning(
                    "run %d in thread %s: the database failed (%s); resuming it from its checkpoint in %gs",
                    run_id,
                    message.thread_id,
                    describe_database_error(failure),
                    delay,
                )
                await asyncio.sleep(delay)

    async def _answer_and_post(
        self,
        client: AsyncWebClient,
        message: UserMessage,
        run_id: int,
        sources: Sources,
        *,
        resumed: bool,
        lease: RunLease | None,
    ) -> _Attempt:
        """One attempt at the run, and how it ended.

        A failure of the models ends it with a notice; one of the database, or the run's take-over
        by another process, is raised.
        """
        key = lease.key if lease else None
        delivery = await self._delivery(client, message, run_id, resumed=resumed, lease=key)
        progress = (
            StreamedProgress(client, message, delivery)
            if self._streaming
            else WorkingIndicator(client, message)
        )
        outcome: TurnOutcome | None = None
        status: RunStatus
        delivered = False
        try:
            await progress.start()
            try:
                outcome, unread = await self._answer(client, message, sources, progress, delivery, lease)
            except Exception as exc:
                if isinstance(exc, RunTakenOver) or unavailable_error(exc) is not None:
                    raise
                status, notice = self._failure(message, exc)
                # What it spent before it failed counts towards the channel's budget all the same.
                outcome = await turn_so_far(
                    self._agent, agent_config(message.thread_id), request_message_id(message)
                )
                if outcome is not None and self._workspaces is not None:
                    outcome = outcome.priced(await self._workspaces.models(message.workspace))
                await delivery.post(FINAL_STEP, 0, notice)
            else:
                status = outcome.status or ANSWERED
                await self._post_final(delivery, outcome, unread)
            delivered = await delivery.settle()
            return _Attempt(status, outcome, delivered, delivery.unrecorded())
        except asyncio.CancelledError:
            # A durable job cut short runs again elsewhere and resumes; an embedded one is lost.
            if not self._queue.durable:
                await self._tell_interrupted(client, message, run_id, started=True, delivery=delivery)
            raise
        finally:
            await progress.stop(posted_last=delivered)

    async def _finish(
        self,
        message: UserMessage,
        run_id: int,
        status: RunStatus,
        *,
        delivered: bool,
        tokens: int | None = None,
        posted: Sequence[PostedPart] = (),
        cost: RunCost | None = None,
    ) -> None:
        """Record how the run ended, with the closing messages Slack took that are not in the
        ledger yet (`posted`): retried a moment if the database fails, like any ledger entry."""
        finish = partial(self._store.finish_run, run_id, status, tokens, posted, cost)
        if posted:
            await record_retrying(finish, message.thread_id)
        else:
            await finish()
        if not delivered:
            await self._record_undelivered(message, run_id, status)

    async def _audit(self, message: UserMessage, run_id: int, outcome: TurnOutcome) -> None:
        """Audit the finished run if the auditor chooses it; a failure is logged, never the run's."""
        if self._auditor is None or not self._auditor.wants(run_id, outcome.status):
            return
        try:
            state = (await self._agent.aget_state(agent_config(message.thread_id))).values
            finished = FinishedRun(
                run_id=run_id,
                thread=message.thread,
                status=outcome.status or ANSWERED,
                evaluations=outcome.evaluations,
                rubric=state.get("rubric") or "",
                messages=state.get("messages") or [],
                answer=outcome.answer,
            )
            await self._auditor.audit(finished)
        except Exception as exc:
            log_failure(logger, f"auditing run {run_id} in thread {message.thread_id}", exc)

    async def _tell_database_failed(
        self, client: AsyncWebClient, message: UserMessage, run_id: int, failure: BaseException
    ) -> None:
        """Tell the thread its run was given up because the database kept failing (and record that,
        if the database lets us)."""
        logger.error(
            "run %d in thread %s: given up after %d attempts, the database failing each time (%s)",
            run_id,
            message.thread_id,
            MAX_ATTEMPTS,
            describe_database_error(failure),
        )
        told = await self.reply(
            client,
            message,
            render.error_message(
                "The bot's database failed, so this request could not be finished",
                f"It was tried {MAX_ATTEMPTS} times. Send it again in this thread in a little while.",
            ),
        )
        try:
            await self._finish(message, run_id, FAILED, delivered=told is not None)
        except UNAVAILABLE_ERRORS as exc:
            logger.error("could not record how run %d ended: %s", run_id, describe_database_error(exc))

    async def _answer(
        self,
        client: AsyncWebClient,
        message: UserMessage,
        sources: Sources,
        progress: WorkingIndicator,
        delivery: Delivery,
        lease: RunLease | None,
    ) -> tuple[TurnOutcome, tuple[Unread, ...]]:
        """Run the agent on the request, posting each evaluation; `RunTimeout` past the run's limit.
        Also what the request shared that was not read, for the final message. The attempt takes
        (or checks) its `lease` on the run as it starts, before it posts anything.

        If the checkpoint already holds the request, an earlier attempt was cut short after it got
        there: the turn continues from the checkpoint instead of starting over (what it read is
        in the checkpoint, and what it did not read in the run's record).
        """
        config = agent_config(message.thread_id)
        state = (await self._agent.aget_state(config)).values
        request_id = request_message_id(message)
        earlier = messages_through(state.get("messages", []), request_id)
        rubric_text = state.get("rubric")
        inputs: dict[str, Any] | None = None
        before = state
        read: RunMaterial | None = None
        if earlier is None:
            # A conversation with no messages yet: the bot was just called in, and has not seen the thread.
            material = await self._read(client, message, sources, thread=not state.get("messages"))
            read = RunMaterial(material.thread_messages, material.files_read, material.unread)
            inputs = {"messages": conversation_messages(message.text, material, request_id)}
        else:
            before = {**state, "messages": earlier}
        # A conversation without its own rubric picks up the channel default.
        start = await self._store.start_attempt(
            delivery.run_id,
            message.thread,
            read,
            channel_rubric=inputs is not None and not rubric_text,
            lease=lease,
            settings=self._agents is not None and self._workspaces is not None,
        )
        if not start.holds_run:
            raise RunTakenOver(f"run {delivery.run_id} in thread {message.thread_id} was taken over")
        await progress.run_started()
        channel_rubric = start.channel_rubric
        if inputs is not None and in_pane(message):
            await set_title(client, message)
            if not rubric_text and not channel_rubric:
                channel_rubric = await self._pane_rubric(client, message)
        if inputs is not None and channel_rubric:
            rubric_text = inputs["rubric"] = channel_rubric
        unread = start.unread
        await self._tell_interrupted_runs(client, start.interrupted, progress)
        post_evaluation = partial(self._post_evaluation, message, rubric_text or "", progress, delivery)
        if earlier is not None:
            # Iterations the cut-short attempt checkpointed but may not have posted, in order.
            for evaluation in turn_evaluations(state, state["messages"][len(earlier) :]):
                await post_evaluation(evaluation)
        guard = asyncio.timeout(self._run_timeout)
        try:
            async with guard:
                outcome = await run_turn(
                    self._agent_for(start.settings),
                    inputs,
                    config,
                    post_evaluation,
                    on_grading=progress.grading,
                    context=ThreadContext(workspace=message.workspace, channel=message.channel),
                    before=before,
                )
        except TimeoutError as exc:
            if guard.expired():
                raise RunTimeout from exc
            raise
        if earlier is not None:
            # Iterations the checkpoint gained while this attempt ran, from another attempt at the
            # run that it took over (the ledger skips those posted already), before the answer.
            for evaluation in outcome.evaluations:
                await post_evaluation(evaluation)
        if self._workspaces is not None:
            outcome = outcome.priced(self._workspaces.in_force(start.settings).models)
        return outcome, unread

    async def _pane_rubric(self, client: AsyncWebClient, message: UserMessage) -> str | None:
        """The default rubric of the channel beside the assistant pane `message` is in, if any."""
        beside = await pane_channel(client, message)
        return await self._store.get_channel_rubric(message.workspace, beside) if beside else None

    def _agent_for(self, stored: WorkspaceSettingsRow | None) -> ConversationAgent:
        """The agent with the models of a workspace whose admins set `stored` (the deployment's
        without `agents`)."""
        if self._workspaces is None or self._agents is None:
            return self._agent
        return self._agents.agent(self._workspaces.in_force(stored).models)

    async def _read(
        self, client: AsyncWebClient, message: UserMessage, sources: Sources, *, thread: bool
    ) -> Material:
        """What the request shares, read with `client` (nothing without a reader)."""
        if self._reader is None:
            return NOTHING
        return await self._reader.read(client, message, sources, thread=thread)

    def _failure(self, message: UserMessage, exc: Exception) -> tuple[RunStatus, SlackMessage]:
        """The run status and the thread's notice for a run that failed with `exc` (logged here)."""
        if isinstance(exc, RunTimeout):
            logger.warning("run in thread %s took longer than %gs", message.thread_id, self._run_timeout)
            return TIMED_OUT, render.error_message(
                f"The model did not finish this request within {self._run_timeout:g} s",
                "Each request may take that long at most, so one slow provider cannot hold the thread.",
            )
        if _is_timeout(exc):
            logger.warning("model call in thread %s timed out: %s", message.thread_id, describe_error(exc))
            return TIMED_OUT, render.error_message(
                f"The model did not answer within {self._model_timeout:g} s",
                "The model provider accepted the request but sent no answer in time.",
            )
        reference = log_failure(logger, f"run in thread {message.thread_id} failed", exc)
        return FAILED, render.error_message(
            "The model failed", f"The model provider returned an error. {reference_words(reference)}"
        )

    async def _post_evaluation(
        self,
        message: UserMessage,
        rubric_text: str,
        progress: WorkingIndicator,
        delivery: Delivery,
        evaluation: RubricEvaluation,
    ) -> None:
        payload = render.evaluation_message(evaluation, review=review_controls(evaluation))
        shown = PostedEvaluation(message.thread, evaluation, rubric_text, stored_provenance(evaluation))
        await progress.graded(evaluation)
        await delivery.post(evaluation["iteration"], 0, payload, shown)
        if (
            evaluation["result"] == "needs_revision"
            and evaluation["iteration"] + 1 < evaluation["max_iterations"]
        ):
            await progress.revising(evaluation)

    async def _post_final(self, delivery: Delivery, outcome: TurnOutcome, unread: Sequence[Unread]) -> None:
        """Post (or owe) the run's status and answer, with what was not read."""
        messages = render.final_messages(
            outcome.status,
            outcome.answer,
            iterations=outcome.iterations,
            max_iterations=outcome.max_iterations,
            best_iteration=outcome.best_iteration,
            usage=outcome.usage,
            cost=outcome.cost,
            open_criteria=outcome.open_criteria,
        )
        notes = [render.no_rubric_hint()] if outcome.status is None else []
        if unread:
            notes.append(render.unread_note(unread))
        if notes:
            messages = _with_note(messages, "\n".join(notes))
        for part, payload in enumerate(messages):
            await delivery.post(FINAL_STEP, part, payload)

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

    async def _record_undelivered(self, message: UserMessage, run_id: int, status: RunStatus) -> None:
        # The grading status says how the answer did; this says nobody saw it, for the operator.
        logger.error(
            "run %d in thread %s ended %s, but its answer never reached the thread",
            run_id,
            message.thread_id,
            status,
        )
        await self._store.mark_undelivered(run_id)

    # -- interruptions ---------------------------------------------------------

    async def _tell_interrupted(
        self,
        client: AsyncWebClient,
        message: UserMessage,
        run_id: int | None,
        *,
        started: bool,
        delivery: Delivery | None = None,
    ) -> None:
        """Tell the thread the stopping process will not finish its request (in the run's streamed
        message, if its `delivery` has one); one try."""
        what = "stopped before finishing" if started else "didn't get to"
        notice = render.error_message(
            f"The bot is restarting and {what} this request",
            "Send it again in this thread once the bot is back.",
        )
        if delivery is None:
            told = await self._reply_once(client, message, notice)
        else:
            told = await attempt(delivery.closing_poster()(notice), f"post in thread {message.thread_id}")
        if run_id is not None:
            await self._store.mark_interrupted(run_id)
            if told is not None:  # otherwise the next start-up tells the thread
                await self._store.acknowledge_interrupted(run_id)

    async def _tell_abandoned(self, client: AsyncWebClient, request: UserMessage, run_id: int) -> None:
        """Tell the thread a run was lost with the process that ran it (in the streamed message the
        run left open, if any), and take its ⏳ off."""
        delivery = await self._delivery(client, request, run_id, resumed=True, lease=None)
        notice = render.error_message(
            "Your request was interrupted by a restart",
            "The bot stopped before it finished, so it has no answer. Reply in this thread to try again.",
        )
        window = RetryWindow(request.thread_id, self._delivery_retry)
        told = await post_in_time(delivery.closing_poster(), notice, window)
        if delivery.stream_ts is not None:  # no post took the run's status off
            await clear_status(client, request)
        await react(client, "reactions_remove", request)
        if told is None:
            await self._store.release_interrupted(run_id)

    async def _report_interrupted(self, client: AsyncWebClient, message: UserMessage) -> None:
        """Tell the thread about interrupted runs whose notice could not be posted before."""
        for run in await self._store.claim_interrupted_runs(message.thread):
            await self._tell_abandoned(client, _reply_to(run.thread, run.request_ts), run.run_id)

    async def _tell_interrupted_runs(
        self, client: AsyncWebClient, runs: list[RunRecord], progress: WorkingIndicator
    ) -> None:
        """Tell the thread about the interrupted runs a run's start claimed; the notices took the
        thread status off, so it is shown again."""
        for run in runs:
            await self._tell_abandoned(client, _reply_to(run.thread, run.request_ts), run.run_id)
        if runs:
            await progress.drafting()


CHANGE_JOBS: dict[ChangeKind, type[ForgetJob] | type[ReviseJob]] = {"forget": ForgetJob, "revise": ReviseJob}
"""The job applying each kind of message change."""


def _riding_out_outages(run: Callable[[P, int], Awaitable[None]]) -> Callable[[P, int], Awaitable[None]]:
    """`run`, tried again while the database cannot answer (see `JOB_DATABASE_TRIES`)."""

    async def ridden_out(job: P, attempt: int) -> None:
        for number in range(JOB_DATABASE_TRIES):
            try:
                await run(job, attempt)
                return
            except Exception as exc:
                failure = unavailable_error(exc)
                if failure is None or number + 1 == JOB_DATABASE_TRIES:
                    raise
                delay = DATABASE_RETRY_SECONDS * 2**number
                logger.warning(
                    "a %s job: the database failed (%s); trying it again in %gs",
                    job.kind,
                    describe_database_error(failure),
                    delay,
                )
                await asyncio.sleep(delay)

    return ridden_out


async def _abandon_change(job: ForgetJob | ReviseJob, why: Abandoned) -> None:
    """A deletion or edit this process will not apply: kept, the next process applies it; otherwise
    (a durable job given up) the operator is told (the person is not around)."""
    if job.kept is not None:
        logger.info(
            "the %s of message %s in thread %s is kept; the bot applies it when it starts again",
            job.kind,
            job.message.ts,
            job.message.thread.thread_id,
        )
        return
    logger.error(
        "a %s of message %s in thread %s was not applied (%s): make it again",
        job.kind,
        job.message.ts,
        job.message.thread.thread_id,
        why.value,
    )


def _with_new_text(edited: MessageChange, job: JobPayload) -> JobPayload:
    """A queued request `job` asking what `edited` says now (other kinds of job unchanged)."""
    if not isinstance(job, RequestJob):
        return job
    return job.model_copy(update={"message": replace(job.message, text=edited.text)})


def _with_note(messages: list[SlackMessage], note: str) -> list[SlackMessage]:
    """The messages with `note` on a context line at the end (a message of its own if the last is full)."""
    *earlier, last = messages
    blocks = last.get("blocks", [])
    if len(blocks) >= MAX_BLOCKS:
        return [*messages, {"text": note}]
    return [*earlier, {**last, "blocks": [*blocks, context_block(note).to_dict()]}]


def request_message_id(message: UserMessage) -> str:
    """The id of the request's message in the conversation's checkpoint (see `stored_message_id`)."""
    return stored_message_id(message.channel, message.ts)


def _gave_up_notice() -> SlackMessage:
    return render.error_message(
        "The bot could not finish this request",
        f"It was cut short {MAX_ATTEMPTS} times (the bot process running it stopped each time). "
        "Send it again in this thread to start over.",
    )


def _reply_to(thread: ThreadKey, ts: str) -> UserMessage:
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


def _is_timeout(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it came from, is a call that gave up waiting.

    Provider SDKs raise their own types for a call that timed out (openai's and anthropic's
    `APITimeoutError`, httpx's `TimeoutException`, …) rather than `TimeoutError`, so they are
    recognised by name, along the chain of causes.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or any("Timeout" in t.__name__ for t in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False
