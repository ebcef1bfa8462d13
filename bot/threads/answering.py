"""The run itself: a request answered by the agent, each evaluation and the answer posted in the thread
as they come, the run's end recorded; an attempt the database cuts short resumes from the checkpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.turn import TurnOutcome, messages_through, run_turn, turn_evaluations, turn_so_far
from bot.agent.worker import ConversationAgent, ThreadContext, agent_config
from bot.assistant.pane import in_pane, pane_channel, set_title
from bot.audit.auditor import FinishedRun
from bot.db.database import describe_database_error, unavailable_error
from bot.db.evaluations import PostedEvaluation
from bot.db.ledger import PostedPart
from bot.db.material import RunMaterial
from bot.db.runs import RunLease, new_lease
from bot.db.schema import FINAL_STEP
from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.feedback.buttons import feedback_block
from bot.limits.prices import RunCost
from bot.material.reader import NOTHING, Material, conversation_messages
from bot.material.sources import Sources
from bot.ops import metrics
from bot.queue.jobs import MAX_ATTEMPTS, Abandoned, RequestJob
from bot.rendering.errors import error_message
from bot.rendering.results import evaluation_message, final_messages, stopped_messages, unread_note
from bot.rendering.rubrics import no_rubric_hint
from bot.review.controls import review_controls
from bot.sessions.status import session_active, session_processing
from bot.sessions.stop import RunStopped, stoppable
from bot.shadow.grader import LiveRun
from bot.slack.blocks import MAX_BLOCKS, context_block
from bot.slack.client import describe_error
from bot.slack.conversation import UserMessage, stored_message_id
from bot.slack.messages import BlockJson, SlackMessage
from bot.slack.notices import log_failure, reference_words
from bot.streaming.progress import RunProgress, StreamedProgress
from bot.threads.delivery import Delivery, RunTakenOver, record_retrying
from bot.threads.progress import WorkingIndicator, react
from bot.threads.recovery import Recovery, gave_up_notice
from bot.threads.runner_base import logger, retry_delay
from bot.vocabulary.provenance import rubric_version, stored_provenance
from bot.vocabulary.statuses import ANSWERED, FAILED, STOPPED, TIMED_OUT, RunStatus
from bot.vocabulary.unread import Unread
from grading import RubricEvaluation


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


class Answering(Recovery):
    """Runs requests and posts what they produce."""

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
        lease = RunLease(new_lease()) if self._ports.queue.durable else None
        for number in range(attempt, MAX_ATTEMPTS):
            try:
                ended = await self._answer_and_post(
                    client, message, run_id, sources, resumed=number > 0, lease=lease
                )
                outcome = ended.outcome
                metrics.run_finished(ended.status, time.monotonic() - started, outcome)
                tokens = outcome.usage["total_tokens"] if outcome and outcome.usage else None
                if ended.status == STOPPED:  # its reservation gives way to what it spent, maybe nothing
                    tokens = tokens or 0
                await self._finish(
                    message,
                    run_id,
                    ended.status,
                    delivered=ended.delivered,
                    tokens=tokens,
                    posted=ended.posted,
                    cost=outcome.cost if outcome else None,
                )
                # Only now: a Stop clicked until the session leaves `processing` finds the run unfinished.
                await session_active(client, message.thread)
                if outcome is not None:  # both after the run's end: neither can change what it did
                    await asyncio.gather(
                        self._audit(message, run_id, outcome), self._shadow(message, run_id, outcome)
                    )
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
                    await self._tell_database_failed(client, message, run_id, failure, lease)
                    await session_active(client, message.thread)
                    return
                delay = retry_delay(number)
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
        progress: RunProgress = (
            StreamedProgress(WorkingIndicator(client, message), client, message, delivery)
            if self._policy.streaming
            else WorkingIndicator(client, message)
        )
        outcome: TurnOutcome | None = None
        status: RunStatus
        delivered = False
        try:
            await progress.start()
            try:
                outcome, unread = await self._answer(client, message, sources, progress, delivery, lease)
            except RunStopped as stop:
                status = STOPPED
                outcome = await self._turn_so_far(message)
                for part, payload in enumerate(self._stopped(stop, outcome)):
                    await delivery.post(FINAL_STEP, part, payload)
            except Exception as exc:
                if isinstance(exc, RunTakenOver) or unavailable_error(exc) is not None:
                    raise
                status, notice = self._failure(message, exc)
                # What it spent before it failed counts towards the channel's budget all the same.
                outcome = await self._turn_so_far(message)
                await delivery.post(FINAL_STEP, 0, notice)
            else:
                status = outcome.status or ANSWERED
                await self._post_final(delivery, outcome, unread)
            delivered = await delivery.settle()
            return _Attempt(status, outcome, delivered, delivery.unrecorded())
        except asyncio.CancelledError:
            # A durable job cut short runs again elsewhere and resumes; an embedded one is lost.
            if not self._ports.queue.durable:
                await self._tell_interrupted(client, message, run_id, started=True, delivery=delivery)
            raise
        finally:
            await progress.stop(posted_last=delivered)

    async def _turn_so_far(self, message: UserMessage) -> TurnOutcome | None:
        """The request's turn as far as its checkpoint holds it, priced (what a run that failed or
        was stopped spent counts towards the budgets all the same)."""
        outcome = await turn_so_far(
            self._ports.agent, agent_config(message.thread_id), request_message_id(message)
        )
        if outcome is not None and self._ports.workspaces is not None:
            effective = await self._ports.workspaces.effective(message.workspace)
            outcome = outcome.priced(effective.models, effective.summary_model)
        return outcome

    @staticmethod
    def _stopped(stop: RunStopped, outcome: TurnOutcome | None) -> list[SlackMessage]:
        """The closing message of a run `stop` ended, with the best draft `outcome` holds."""
        return stopped_messages(
            stop.person,
            outcome.answer if outcome is not None else None,
            iterations=outcome.iterations or 0 if outcome is not None else 0,
            max_iterations=outcome.max_iterations if outcome is not None else None,
        )

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
        finish = partial(self._ports.store.finish_run, run_id, status, tokens, posted, cost)
        if posted:
            await record_retrying(finish, message.thread_id)
        else:
            await finish()
        if not delivered:
            await self._record_undelivered(message, run_id, status)

    async def _audit(self, message: UserMessage, run_id: int, outcome: TurnOutcome) -> None:
        """Audit the finished run if the auditor chooses it; a failure is logged, never the run's."""
        if self._ports.auditor is None or not self._ports.auditor.wants(run_id, outcome.status):
            return
        try:
            state = (await self._ports.agent.aget_state(agent_config(message.thread_id))).values
            finished = FinishedRun(
                run_id=run_id,
                thread=message.thread,
                status=outcome.status or ANSWERED,
                evaluations=outcome.evaluations,
                rubric=state.get("rubric") or "",
                messages=state.get("messages") or [],
                answer=outcome.answer,
            )
            await self._ports.auditor.audit(finished)
        except Exception as exc:
            log_failure(logger, f"auditing run {run_id} in thread {message.thread_id}", exc)

    async def _shadow(self, message: UserMessage, run_id: int, outcome: TurnOutcome) -> None:
        """Grade the run's iterations the shadow grader chooses; a failure is logged, never the run's."""
        if self._ports.shadow is None:
            return
        try:
            await self._ports.shadow.grade(LiveRun(message.thread, outcome.evaluations))
        except Exception as exc:
            log_failure(logger, f"shadow grading run {run_id} in thread {message.thread_id}", exc)

    async def _tell_database_failed(
        self,
        client: AsyncWebClient,
        message: UserMessage,
        run_id: int,
        failure: BaseException,
        lease: RunLease | None,
    ) -> None:
        """Tell the thread its run was given up because the database kept failing, and record that.

        The notice is the run's closing message, posted through the ledger's check like an answer:
        a run another process took over meanwhile (its job re-queued while this one was cut off
        from the database) gets that process's ending, not a second one. Where another process may
        hold the run (`lease`) and the database still cannot say, nothing is posted and the failure
        is raised: the queue runs the job again, and its last attempt gives the run up through the
        ledger. Where none can (the embedded queue), the thread is told all the same."""
        logger.error(
            "run %d in thread %s: given up after %d attempts, the database failing each time (%s)",
            run_id,
            message.thread_id,
            MAX_ATTEMPTS,
            describe_database_error(failure),
        )
        notice = error_message(
            "The bot's database failed, so this request could not be finished",
            f"It was tried {MAX_ATTEMPTS} times. Send it again in this thread in a little while.",
        )
        try:
            if lease is not None and not await self._ports.store.holds_run(run_id, lease.key):
                raise RunTakenOver(f"run {run_id} in thread {message.thread_id} was taken over")
            delivery = await self._delivery(
                client, message, run_id, resumed=True, lease=lease.key if lease else None
            )
            if (FINAL_STEP, 0) in delivery.posted:
                return  # the run has its ending already
            await delivery.post(FINAL_STEP, 0, notice)
            delivered = await delivery.settle()
            await self._finish(message, run_id, FAILED, delivered=delivered, posted=delivery.unrecorded())
        except RunTakenOver:
            logger.warning(
                "run %d in thread %s was taken over by another process; leaving its ending to it",
                run_id,
                message.thread_id,
            )
        except Exception as exc:
            unavailable = unavailable_error(exc)
            if unavailable is None or lease is not None:
                raise
            reason = describe_database_error(unavailable)
            logger.error("could not record how run %d ended: %s", run_id, reason)
            await self.reply(client, message, notice)

    async def _answer(
        self,
        client: AsyncWebClient,
        message: UserMessage,
        sources: Sources,
        progress: RunProgress,
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
        state = (await self._ports.agent.aget_state(config)).values
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
        start = await self._ports.store.start_attempt(
            delivery.run_id,
            message.thread,
            read,
            channel_rubric=inputs is not None and not rubric_text,
            rubric_text=rubric_text,
            lease=lease,
            settings=self._ports.agents is not None and self._ports.workspaces is not None,
        )
        if not start.holds_run:
            raise RunTakenOver(f"run {delivery.run_id} in thread {message.thread_id} was taken over")
        await progress.run_started()
        await session_processing(client, message)
        if read is not None:
            urls = {shared.name: shared.url for shared in sources.files}
            await progress.reading([(name, urls.get(name)) for name in read.files_read], read.thread_messages)
        channel_rubric = start.channel_rubric
        number = start.rubric_version
        if inputs is not None and in_pane(message):
            await set_title(client, message)
            if not rubric_text and not channel_rubric:
                channel_rubric = await self._pane_rubric(client, message)
                number = None  # the channel beside the pane numbers its rubric, not this one
        if inputs is not None and channel_rubric:
            rubric_text = inputs["rubric"] = channel_rubric
        unread = start.unread
        await self._tell_interrupted_runs(client, start.interrupted, progress)
        rubric_text = rubric_text or ""
        version = rubric_version(number, rubric_text)
        post_evaluation = partial(
            self._post_evaluation, message, rubric_text, version, start.review_modes.blind, progress, delivery
        )
        if earlier is not None:
            # Iterations the cut-short attempt checkpointed but may not have posted, in order.
            for evaluation in turn_evaluations(state, state["messages"][len(earlier) :]):
                await post_evaluation(evaluation)
        guard = asyncio.timeout(self._policy.run_timeout)
        try:
            async with guard:
                turn = partial(
                    run_turn,
                    self._agent_for(start.settings),
                    inputs,
                    config,
                    post_evaluation,
                    on_grading=progress.grading,
                    context=ThreadContext(workspace=message.workspace, channel=message.channel),
                    before=before,
                )
                outcome = await stoppable(
                    self._ports.store, delivery.run_id, turn, stopped_by=start.stopped_by
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
        if self._ports.workspaces is not None:
            effective = self._ports.workspaces.in_force(start.settings)
            outcome = outcome.priced(effective.models, effective.summary_model)
        return outcome, unread

    async def _pane_rubric(self, client: AsyncWebClient, message: UserMessage) -> str | None:
        """The default rubric of the channel beside the assistant pane `message` is in, if any."""
        beside = await pane_channel(client, message)
        return await self._ports.store.get_channel_rubric(message.workspace, beside) if beside else None

    def _agent_for(self, stored: WorkspaceSettingsRow | None) -> ConversationAgent:
        """The agent with the models and grader samples of a workspace whose admins set `stored` (the
        deployment's without `agents`)."""
        if self._ports.workspaces is None or self._ports.agents is None:
            return self._ports.agent
        effective = self._ports.workspaces.in_force(stored)
        return self._ports.agents.agent(effective.models, effective.grader_samples.value)

    async def _read(
        self, client: AsyncWebClient, message: UserMessage, sources: Sources, *, thread: bool
    ) -> Material:
        """What the request shares, read with `client` (nothing without a reader)."""
        if self._ports.reader is None:
            return NOTHING
        return await self._ports.reader.read(client, message, sources, thread=thread)

    def _failure(self, message: UserMessage, exc: Exception) -> tuple[RunStatus, SlackMessage]:
        """The run status and the thread's notice for a run that failed with `exc` (logged here)."""
        if isinstance(exc, RunTimeout):
            logger.warning(
                "run in thread %s took longer than %gs", message.thread_id, self._policy.run_timeout
            )
            return TIMED_OUT, error_message(
                f"The model did not finish this request within {self._policy.run_timeout:g} s",
                "Each request may take that long at most, so one slow provider cannot hold the thread.",
            )
        if _is_timeout(exc):
            logger.warning("model call in thread %s timed out: %s", message.thread_id, describe_error(exc))
            return TIMED_OUT, error_message(
                f"The model did not answer within {self._policy.model_timeout:g} s",
                "The model provider accepted the request but sent no answer in time.",
            )
        reference = log_failure(logger, f"run in thread {message.thread_id} failed", exc)
        return FAILED, error_message(
            "The model failed", f"The model provider returned an error. {reference_words(reference)}"
        )

    async def _post_evaluation(
        self,
        message: UserMessage,
        rubric_text: str,
        rubric_version: str,
        blind: bool,
        progress: RunProgress,
        delivery: Delivery,
        evaluation: RubricEvaluation,
    ) -> None:
        payload = evaluation_message(
            evaluation, review=review_controls(evaluation, blind=blind), rubric_version=rubric_version
        )
        provenance = stored_provenance(evaluation, rubric_version)
        shown = PostedEvaluation(message.thread, evaluation, rubric_text, provenance)
        await progress.graded(evaluation)
        await delivery.post(evaluation["iteration"], 0, payload, shown)
        if (
            evaluation["result"] == "needs_revision"
            and evaluation["iteration"] + 1 < evaluation["max_iterations"]
        ):
            await progress.revising(evaluation)

    async def _post_final(self, delivery: Delivery, outcome: TurnOutcome, unread: Sequence[Unread]) -> None:
        """Post (or owe) the run's status and answer, with what was not read."""
        messages = final_messages(
            outcome.status,
            outcome.answer,
            iterations=outcome.iterations,
            max_iterations=outcome.max_iterations,
            best_iteration=outcome.best_iteration,
            usage=outcome.usage,
            cost=outcome.cost,
            open_criteria=outcome.open_criteria,
        )
        notes = [no_rubric_hint()] if outcome.status is None else []
        if unread:
            notes.append(unread_note(unread))
        if notes:
            messages = _with_note(messages, "\n".join(notes))
        messages = _with_block(messages, feedback_block(delivery.run_id))
        for part, payload in enumerate(messages):
            await delivery.post(FINAL_STEP, part, payload)

    async def _record_undelivered(self, message: UserMessage, run_id: int, status: RunStatus) -> None:
        # The grading status says how the answer did; this says nobody saw it, for the operator.
        logger.error(
            "run %d in thread %s ended %s, but its answer never reached the thread",
            run_id,
            message.thread_id,
            status,
        )
        await self._ports.store.mark_undelivered(run_id)

    async def _abandon_request(self, client: AsyncWebClient, job: RequestJob, why: Abandoned) -> None:
        message, run_id = job.message, job.run_id
        if why is Abandoned.STOPPING:
            await self._tell_interrupted(client, message, run_id, started=False)
            return
        lease = await self._ports.store.take_run(run_id) if self._ports.queue.durable else None
        delivery = await self._delivery(client, message, run_id, resumed=True, lease=lease)
        await react(client, "reactions_remove", message)
        await delivery.post(FINAL_STEP, 0, gave_up_notice())
        delivered = await delivery.settle()
        await self._finish(message, run_id, FAILED, delivered=delivered, posted=delivery.unrecorded())


def _with_note(messages: list[SlackMessage], note: str) -> list[SlackMessage]:
    """The messages with `note` on a context line at the end (a message of its own if the last is full)."""
    if len(messages[-1].get("blocks", [])) >= MAX_BLOCKS:
        return [*messages, {"text": note}]
    return _with_block(messages, context_block(note).to_dict())


def _with_block(messages: list[SlackMessage], block: BlockJson) -> list[SlackMessage]:
    """The messages with `block` at the end of the last (of a message of its own if the last is full)."""
    *earlier, last = messages
    blocks = last.get("blocks", [])
    if len(blocks) >= MAX_BLOCKS:
        return [*messages, {"text": "Did this answer help?", "blocks": [block]}]
    return [*earlier, {**last, "blocks": [*blocks, block]}]


def request_message_id(message: UserMessage) -> str:
    """The id of the request's message in the conversation's checkpoint (see `stored_message_id`)."""
    return stored_message_id(message.channel, message.ts)


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
