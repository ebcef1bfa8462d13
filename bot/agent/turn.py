"""One turn of a conversation with the agent: run, each grader iteration reported as it starts and
ends, and the finished (or cut-short) turn turned into what the thread should show.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain_core.messages import AIMessage, AnyMessage, UsageMetadata
from langchain_core.messages.ai import add_usage
from langchain_core.runnables import RunnableConfig

from bot.agent.models import ModelPair
from bot.agent.summary import summary_usage
from bot.agent.worker import ConversationAgent, ThreadContext
from bot.limits.prices import Role, RunCost, run_cost
from grading import (
    EVALUATION_END_EVENT,
    EVALUATION_START_EVENT,
    RubricEvaluation,
    Status,
    abstained,
)

EvaluationHandler = Callable[[RubricEvaluation], Awaitable[None]]
"""Called with each grader iteration's evaluation as it happens."""

GradingHandler = Callable[[int, int], Awaitable[None]]
"""Called as each grader iteration starts, with its 0-based iteration and the run's iteration cap."""


@dataclass(frozen=True)
class TurnOutcome:
    """What a finished turn shows in the thread."""

    status: Status | None
    """The grading status, or None when the conversation has no rubric (a plain answer)."""
    answer: str
    iterations: int | None
    max_iterations: int | None
    best_iteration: int | None
    """Set when the cap was hit: the iteration whose answer is shown."""
    worker_usage: UsageMetadata | None
    """The worker's tokens of this turn, when the model reported them."""
    grader_usage: UsageMetadata | None
    """The grader's tokens of this turn's evaluations, when the model reported them."""
    grader_calls: int
    """Grader model calls of this turn's evaluations."""
    summary_usage: UsageMetadata | None = None
    """The tokens of the thread summaries written in this turn, when the model reported them."""
    evaluations: tuple[RubricEvaluation, ...] = ()
    """This turn's evaluations, oldest first (those graded before a cut-short attempt's end too)."""
    cost: RunCost | None = None
    """What the turn's tokens cost, once priced (see `priced`)."""

    def priced(self, models: ModelPair, summary_model: str) -> TurnOutcome:
        """The outcome with its cost: the worker's tokens at `models.worker`'s rate, the grader's at
        `models.grader`'s, the summaries' at `summary_model`'s (the model that wrote them)."""
        usage: dict[Role, tuple[str, UsageMetadata | None]] = {
            "worker": (models.worker, self.worker_usage),
            "grader": (models.grader, self.grader_usage),
            "summary": (summary_model, self.summary_usage),
        }
        return replace(self, cost=run_cost(usage))

    @property
    def usage(self) -> UsageMetadata | None:
        """Worker, grader and summary tokens of this turn, when the models reported them."""
        return sum_usage([self.worker_usage, self.grader_usage, self.summary_usage])

    @property
    def open_criteria(self) -> list[str]:
        """The criteria the grader could not tell in the turn's last iteration: a person's to judge."""
        return abstained(self.evaluations[-1]) if self.evaluations else []


async def run_turn(
    agent: ConversationAgent,
    inputs: dict[str, Any] | None,
    config: RunnableConfig,
    on_evaluation: EvaluationHandler,
    *,
    on_grading: GradingHandler | None = None,
    context: ThreadContext | None = None,
    before: dict[str, Any] | None = None,
) -> TurnOutcome:
    """Invoke the agent once, calling `on_grading` as each grader iteration starts and
    `on_evaluation` after it.

    `inputs` None continues the turn the checkpoint holds (an attempt cut short); `context` says
    where the request was made (the calibration source needs it); `before` is the thread's state
    values just before the turn, when the caller has already read them.
    """
    if before is None:
        before = (await agent.aget_state(config)).values
    seen = {message.id for message in before.get("messages", [])}
    async for chunk in agent.astream(inputs, config, stream_mode="custom", context=context):
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == EVALUATION_START_EVENT and on_grading is not None:
            await on_grading(chunk["iteration"], chunk["max_iterations"])
        elif chunk.get("type") == EVALUATION_END_EVENT:
            await on_evaluation(
                cast(RubricEvaluation, {key: value for key, value in chunk.items() if key != "type"})
            )
    state = (await agent.aget_state(config)).values
    new_messages = [m for m in state.get("messages", []) if m.id not in seen]
    return summarize_turn(state, new_messages, turn_evaluations(state, new_messages))


async def turn_so_far(
    agent: ConversationAgent, config: RunnableConfig, request_id: str
) -> TurnOutcome | None:
    """The turn answering the message `request_id` as far as its checkpoint holds it: what a turn
    that failed (or timed out) had done, and spent, before it did; None without the request."""
    state = (await agent.aget_state(config)).values
    messages = state.get("messages", [])
    earlier = messages_through(messages, request_id)
    if earlier is None:
        return None
    new_messages = messages[len(earlier) :]
    return summarize_turn(state, new_messages, turn_evaluations(state, new_messages))


def messages_through(messages: list[AnyMessage], message_id: str) -> list[AnyMessage] | None:
    """The conversation up to and including the message with `message_id`; None if it is not there."""
    ids = [message.id for message in messages]
    return messages[: ids.index(message_id) + 1] if message_id in ids else None


def turn_evaluations(state: dict[str, Any], new_messages: Sequence[AnyMessage]) -> list[RubricEvaluation]:
    """The evaluations the state holds of the turn whose messages are `new_messages`, oldest first.

    Read from the state rather than the stream, so a turn continued from its checkpoint counts the
    iterations graded before it was cut short too.
    """
    answers = {message.id for message in new_messages}
    return [e for e in state.get("_rubric_evaluations") or [] if e.get("answer_message_id") in answers]


def summarize_turn(
    state: dict[str, Any], new_messages: Sequence[AnyMessage], evaluations: Sequence[RubricEvaluation]
) -> TurnOutcome:
    """The outcome of a turn from the final state, the turn's messages and its evaluations."""
    graded = bool(state.get("rubric")) and bool(evaluations)
    status = state.get("_rubric_status") if graded else None
    best = state.get("_rubric_best_iteration") if status == "max_iterations_reached" else None
    last = evaluations[-1] if evaluations else None
    return TurnOutcome(
        status=status,
        answer=_answer_text(new_messages, evaluations, best),
        iterations=len(evaluations) if graded else None,
        max_iterations=last["max_iterations"] if last else None,
        best_iteration=best,
        worker_usage=sum_usage(m.usage_metadata for m in new_messages if isinstance(m, AIMessage)),
        grader_usage=sum_usage(e["usage"] for e in evaluations),
        grader_calls=sum(e["grader_calls"] for e in evaluations),
        summary_usage=sum_usage(summary_usage(new_messages)),
        evaluations=tuple(evaluations),
    )


def _answer_text(
    messages: Sequence[AnyMessage], evaluations: Sequence[RubricEvaluation], best: int | None
) -> str:
    answers = [m for m in messages if isinstance(m, AIMessage)]
    if best is not None:
        wanted = next((e["answer_message_id"] for e in evaluations if e["iteration"] == best), None)
        answers = [m for m in answers if m.id == wanted] or answers
    return answers[-1].text if answers else ""


def sum_usage(parts: Iterable[UsageMetadata | None]) -> UsageMetadata | None:
    """Token counts added up with langchain-core's `add_usage`; None when no model reported any."""
    reported = [part for part in parts if part]
    return functools.reduce(add_usage, reported) if reported else None
