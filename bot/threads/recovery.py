"""Recovery: runs and jobs cut short (a restart, a crash, the database down, a thread deleted meanwhile)
told in their threads or tried again, and jobs given up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.database import describe_database_error, unavailable_error
from bot.db.runs import RunRecord
from bot.lifecycle.erase import describe, erase_leftovers
from bot.queue.jobs import (
    MAX_ATTEMPTS,
    Abandoned,
    ForgetJob,
    LimitJob,
    NoticeJob,
    P,
    PromptJob,
    ReplyJob,
    RequestJob,
    ReviseJob,
    RubricJob,
)
from bot.rendering.errors import error_message
from bot.slack.client import attempt
from bot.slack.conversation import UserMessage
from bot.slack.messages import SlackMessage
from bot.streaming.progress import RunProgress
from bot.threads.delivery import Delivery, RetryWindow, post_in_time
from bot.threads.progress import clear_status, react
from bot.threads.runner_base import RunnerBase, logger, reply_to, retry_delay
from bot.vocabulary.thread import ThreadKey

JOB_DATABASE_TRIES = 6
"""Tries of a job the database fails outside a run's own retries (its thread looked up, a rubric
stored, …), `DATABASE_RETRY_SECONDS` apart and doubling (about a minute in all): a job that failed
while the database was down could not even record so, and would hold its thread's queue."""


class Recovery(RunnerBase):
    """Tells threads about interrupted runs, and gives up jobs."""

    async def report_abandoned_runs(self, started_before: datetime) -> int:
        """Tell each thread whose run an earlier process left unfinished, once; how many there were.

        The runs are claimed at once (another process starting now gets none of them); each notice
        is queued in its thread, so it comes before any new request's answer there.
        """
        runs = await self._ports.store.claim_abandoned_runs(started_before)
        for run in runs:
            notice = NoticeJob(message=reply_to(run.thread, run.request_ts), run_id=run.run_id)
            await self._submit(run.thread, notice)
        return len(runs)

    def _while_kept(self, run: Callable[[P, int], Awaitable[None]]) -> Callable[[P, int], Awaitable[None]]:
        """`run`, for a thread whose data is still kept: a job whose thread was deleted (uninstall,
        `db purge`, retention) before it started is skipped, so no model sees its text; what one
        running meanwhile (or an earlier attempt of it) wrote there is deleted once it ends."""

        async def kept(job: P, attempt: int) -> None:
            thread = job.thread
            if thread is None:
                await run(job, attempt)
                return
            if await self._ports.store.has_thread(thread):
                try:
                    await run(job, attempt)
                except Exception:
                    await self._erase_if_deleted(thread, job.kind, ran=True)
                    raise
                await self._erase_if_deleted(thread, job.kind, ran=True)
                return
            logger.info("skipped a %s job in thread %s: its data was deleted", job.kind, thread.thread_id)
            await self._erase_if_deleted(thread, job.kind, ran=attempt > 0)

        return kept

    async def _erase_if_deleted(self, thread: ThreadKey, kind: str, *, ran: bool) -> None:
        """Delete what is left of `thread` if its data was deleted while a `kind` job was on it
        (which `ran`, now or in an earlier attempt, or not at all)."""
        if await self._ports.store.has_thread(thread):
            return
        # A run that ended after the purge set the session the purge had closed back to active; a
        # request never run had no session to reopen, so costs no call.
        clients = self._ports.clients.client_for if ran and kind == RequestJob.kind else None
        erased = await erase_leftovers(self._ports.store, self._needs_checkpointer(), thread, clients)
        logger.info(
            "thread %s was deleted while a %s job was on it; deleted what it left: %s",
            thread.thread_id,
            kind,
            describe(erased),
        )

    async def _abandon_message(
        self, client: AsyncWebClient, job: PromptJob | RubricJob | ReplyJob | LimitJob, why: Abandoned
    ) -> None:
        message = job.message
        if why is Abandoned.STOPPING:
            await self._tell_interrupted(client, message, None, started=False)
        else:
            await self.reply(client, message, gave_up_notice())

    async def _abandon_notice(self, client: AsyncWebClient, job: NoticeJob, why: Abandoned) -> None:
        await self._ports.store.release_interrupted(job.run_id)

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
        notice = error_message(
            f"The bot is restarting and {what} this request",
            "Send it again in this thread once the bot is back.",
        )
        if delivery is None:
            told = await self._reply_once(client, message, notice)
        else:
            told = await attempt(delivery.closing_poster()(notice), f"post in thread {message.thread_id}")
        if run_id is not None:
            await self._ports.store.mark_interrupted(run_id)
            if told is not None:  # otherwise the next start-up tells the thread
                await self._ports.store.acknowledge_interrupted(run_id)

    async def _tell_abandoned(self, client: AsyncWebClient, request: UserMessage, run_id: int) -> None:
        """Tell the thread a run was lost with the process that ran it (in the streamed message the
        run left open, if any), and take its ⏳ off."""
        delivery = await self._delivery(client, request, run_id, resumed=True, lease=None)
        notice = error_message(
            "Your request was interrupted by a restart",
            "The bot stopped before it finished, so it has no answer. Reply in this thread to try again.",
        )
        window = RetryWindow(request.thread_id, self._policy.delivery_retry)
        told = await post_in_time(delivery.closing_poster(), notice, window)
        if delivery.stream_ts is not None:  # no post took the run's status off
            await clear_status(client, request)
        await react(client, "reactions_remove", request)
        if told is None:
            await self._ports.store.release_interrupted(run_id)

    async def _report_interrupted(self, client: AsyncWebClient, message: UserMessage) -> None:
        """Tell the thread about interrupted runs whose notice could not be posted before."""
        for run in await self._ports.store.claim_interrupted_runs(message.thread):
            await self._tell_abandoned(client, reply_to(run.thread, run.request_ts), run.run_id)

    async def _tell_interrupted_runs(
        self, client: AsyncWebClient, runs: list[RunRecord], progress: RunProgress
    ) -> None:
        """Tell the thread about the interrupted runs a run's start claimed; the notices took the
        thread status off, so it is shown again."""
        for run in runs:
            await self._tell_abandoned(client, reply_to(run.thread, run.request_ts), run.run_id)
        if runs:
            await progress.drafting()


def riding_out_outages(run: Callable[[P, int], Awaitable[None]]) -> Callable[[P, int], Awaitable[None]]:
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
                delay = retry_delay(number)
                logger.warning(
                    "a %s job: the database failed (%s); trying it again in %gs",
                    job.kind,
                    describe_database_error(failure),
                    delay,
                )
                await asyncio.sleep(delay)

    return ridden_out


async def abandon_change(job: ForgetJob | ReviseJob, why: Abandoned) -> None:
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


def gave_up_notice() -> SlackMessage:
    return error_message(
        "The bot could not finish this request",
        f"It was cut short {MAX_ATTEMPTS} times (the bot process running it stopped each time). "
        "Send it again in this thread to start over.",
    )
