"""Admission: what the listeners hand the runner (requests, rubric changes, notices, deletions and
edits), each claimed and queued in its thread in one transaction with what it records.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from bot.db.message_changes import ChangeKind
from bot.db.runs import RunStart
from bot.db.spend import QuotaExceeded
from bot.db.transactions import Claim, ClaimRecord, Starting
from bot.material.sources import Sources
from bot.queue.jobs import (
    ForgetJob,
    JobPayload,
    LimitJob,
    PromptJob,
    ReplyJob,
    RequestJob,
    ReviseJob,
    RubricJob,
)
from bot.slack.conversation import UserMessage
from bot.threads.runner_base import RunnerBase, logger, reply_to
from bot.vocabulary.thread import MessageChange, ThreadKey


class Admission(RunnerBase):
    """Claims and queues the work of messages in their threads."""

    async def submit_request(self, message: UserMessage, sources: Sources | None = None) -> None:
        """Queue a request for the agent in its thread (its run recorded first, so a crash is noticed);
        `sources` says what it shares besides its text. Past a daily limit its thread is told so
        instead, and no model is called."""

        def request(claim: Claim) -> Starting[JobPayload]:
            now = datetime.now(UTC)
            limits = self._policy.limits
            if self._ports.workspaces is not None:
                limits = self._ports.workspaces.in_force(claim.workspace_settings(message.workspace)).limits
            run = RunStart(message.thread, message.ts, message.user, limits.quota(now))
            return Starting(run, partial(_request_job, message, sources or Sources(), now))

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

    async def submit_edit_notice(self, edited: MessageChange, edit_ts: str, title: str, detail: str) -> None:
        """Queue a notice to an edited request (one the bot took) in a thread it takes part in, after
        the edit's own job (e.g. an edit cut to the limit); the edit's `edit_ts` (its event's ts)
        claimed, so that Slack delivering the edit again does not tell the thread twice."""
        thread = edited.thread
        if not await self._ports.store.has_thread(thread):
            return
        if await self._ports.store.request_run(thread.workspace, edited.channel, edited.ts) is None:
            return  # not a request the bot took: the edit changes nothing it keeps
        notice = ReplyJob(message=reply_to(thread, edited.ts), title=title, detail=detail)
        await self._accept(notice.message, notice, keys=(f"edit:{thread.message_key(edit_ts)}",))

    async def _accept(
        self,
        message: UserMessage,
        job: JobPayload | ClaimRecord[JobPayload],
        *,
        keys: tuple[str, ...] | None = None,
    ) -> None:
        """Claim `message` (or `keys`, in place of its own), remember its thread and queue its job
        (built in the claim's transaction, if `job` is a function), all in one transaction.

        A retried delivery of the message, or the other twin of a mention, finds it claimed and
        does nothing. If the database fails, nothing is recorded and the caller raises, so Slack
        delivers the message again. The in-process queue, whose jobs live in memory, takes the job
        once the claim has committed; the claim and the queueing are shielded together, so a
        request cancelled meanwhile (the process stopping) cannot leave a claimed job unqueued.
        """

        built = (lambda _claim: job) if isinstance(job, JobPayload) else job
        await asyncio.shield(self._claim_and_queue(message.thread, keys or message.dedupe_keys, built))

    async def _claim_and_queue(
        self, thread: ThreadKey, keys: tuple[str, ...], admitted: ClaimRecord[JobPayload]
    ) -> None:
        if self._ports.queue.durable:
            await self._ports.store.claiming(
                keys, admitted, thread=thread, enqueue=self._ports.queue.submit_claimed
            )
            return
        payload = await self._ports.store.claiming(keys, admitted, thread=thread)
        if payload is not None:
            await self._submit(thread, payload)

    async def forget(self, deleted: MessageChange) -> None:
        """A person deleted a message: if it is in a thread the bot takes part in, take back its queued
        jobs (with their runs) and queue its removal from the thread's conversation."""
        if not await self._ports.store.has_thread(deleted.thread):
            return
        for job in await self._ports.queue.withdraw(deleted.thread, deleted.ts):
            if isinstance(job, RequestJob):
                await self._ports.store.delete_run(job.run_id)
            elif isinstance(job, ForgetJob | ReviseJob) and job.kept is not None:
                await self._ports.store.change_applied(job.kept)  # superseded by this deletion
        await self._submit_change("forget", deleted)

    async def revise(self, edited: MessageChange) -> None:
        """A person edited a message: if it is in a thread the bot takes part in, a queued request
        takes the new text (its run answers that) and the change of its stored copy is queued."""
        if not await self._ports.store.has_thread(edited.thread):
            return
        await self._ports.queue.revise_queued(edited.thread, edited.ts, partial(_with_new_text, edited))
        await self._submit_change("revise", edited)

    async def resume_changes(self) -> int:
        """Queue the deletions and edits an earlier process kept but did not apply; how many."""
        pending = await self._ports.store.pending_changes()
        for kept in pending:
            job = CHANGE_JOBS[kept.kind](message=kept.change, kept=kept.change_id)
            await self._submit(kept.change.thread, job)
        return len(pending)

    async def _submit_change(self, kind: ChangeKind, change: MessageChange) -> None:
        """Queue a deletion or edit; where jobs live in memory, kept in the database first, so that it
        is applied even if this process stops before it gets there."""
        kept = None if self._ports.queue.durable else await self._ports.store.record_change(kind, change)
        await self._submit(change.thread, CHANGE_JOBS[kind](message=change, kept=kept))


CHANGE_JOBS: dict[ChangeKind, type[ForgetJob] | type[ReviseJob]] = {"forget": ForgetJob, "revise": ReviseJob}
"""The job applying each kind of message change."""


def _request_job(
    message: UserMessage, sources: Sources, now: datetime, started: int | QuotaExceeded
) -> JobPayload:
    """A request's job once its run was started (its id), or refused by a daily limit."""
    if isinstance(started, QuotaExceeded):
        logger.info("refused a request in thread %s: %s", message.thread_id, started)
        return LimitJob(message=message, quota=started.quota, limit=started.limit, refused_at=now)
    return RequestJob(message=message, run_id=started, sources=sources)


def _with_new_text(edited: MessageChange, job: JobPayload) -> JobPayload:
    """A queued request `job` asking what `edited` says now (other kinds of job unchanged)."""
    if not isinstance(job, RequestJob):
        return job
    return job.model_copy(update={"message": replace(job.message, text=edited.text)})
