"""Grade one transcript against a rubric once, outside an agent run: the grader step on its own.

`RubricMiddleware` grades a live agent's answer and loops; this grades a transcript you already
have — a stored conversation, an eval set, a replay of past iterations — with exactly the payload,
evidence tools, re-ask and verdict rules the middleware uses, by running the middleware's own
grading hook once with that transcript as the state. Nothing loops, is checkpointed or streamed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from grading.grader import CalibrationExample
from grading.middleware import RubricEvaluation, RubricMiddleware, RubricState
from grading.rubric import Rubric


@dataclass(frozen=True)
class _Given:
    """The runtime context of one grade: the worked examples it was given."""

    examples: Sequence[CalibrationExample]


def _given_examples(rubric: Rubric, runtime: Runtime[_Given]) -> Sequence[CalibrationExample]:
    """The middleware's calibration source: the examples this grade's runtime carries."""
    return runtime.context.examples


class TranscriptGrader:
    """Grades transcripts one at a time, as `RubricMiddleware(model, ...)` grades them in a run.

    Args:
        model: The grader: a `"provider:model"` string (resolved on first use) or a chat model.
        system_prompt: Replaces the built-in grader instructions.
        tools: Evidence tools the grader may call (see `grading.EVIDENCE_TOOLS`).

    One instance may grade many transcripts, concurrently too; its grader agents are built once.
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
    ) -> None:
        self._model = model
        self._system_prompt = system_prompt
        self._tools = tools
        self._hooks: dict[int, RubricMiddleware] = {}

    async def agrade(
        self,
        rubric: str,
        messages: Sequence[AnyMessage],
        *,
        iteration: int = 0,
        max_iterations: int = 3,
        calibration: Sequence[CalibrationExample] = (),
    ) -> RubricEvaluation:
        """The evaluation of `messages` against `rubric` as iteration `iteration` of a run.

        `iteration` and `max_iterations` are what the grader is told and the evaluation records,
        so a past iteration is graded with the payload it had. `calibration` is shown to the
        grader as the team's worked examples. A grader failure is an evaluation whose result is
        `grader_error`, never an exception.
        """
        hook, state, runtime = self._call(rubric, messages, iteration, max_iterations, calibration)
        return _evaluation(await hook.aafter_agent(state, runtime))

    def grade(
        self,
        rubric: str,
        messages: Sequence[AnyMessage],
        *,
        iteration: int = 0,
        max_iterations: int = 3,
        calibration: Sequence[CalibrationExample] = (),
    ) -> RubricEvaluation:
        """Sync twin of `agrade`."""
        hook, state, runtime = self._call(rubric, messages, iteration, max_iterations, calibration)
        return _evaluation(hook.after_agent(state, runtime))

    def _call(
        self,
        rubric: str,
        messages: Sequence[AnyMessage],
        iteration: int,
        max_iterations: int,
        calibration: Sequence[CalibrationExample],
    ) -> tuple[RubricMiddleware, RubricState, Runtime[_Given]]:
        if max_iterations not in self._hooks:
            # One middleware per cap, since the cap is the middleware's; each builds its grader once.
            self._hooks[max_iterations] = RubricMiddleware(
                self._model,
                system_prompt=self._system_prompt,
                tools=self._tools,
                max_iterations=max_iterations,
                calibration=_given_examples,
            )
        # The state the grading hook sees at that iteration of a run that started fresh.
        state: RubricState = {
            "rubric": rubric,
            "messages": list(messages),
            "_rubric_active": rubric,
            "_rubric_run_id": str(uuid.uuid4()),
            "_rubric_iterations": iteration,
            "_rubric_status": None,
            "_rubric_evaluations": [],
        }
        # Each grade's examples travel in its own runtime, so concurrent grades never mix them.
        return self._hooks[max_iterations], state, Runtime(context=_Given(calibration))


def _evaluation(update: dict[str, Any] | None) -> RubricEvaluation:
    """The one evaluation a grading hook's state update appends (the state started with none)."""
    assert update is not None  # the hook grades whenever the state has a rubric
    return update["_rubric_evaluations"][-1]
