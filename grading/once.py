"""Grade one transcript against a rubric once, outside an agent run: the grader step on its own.

`RubricMiddleware` grades a live agent's answer and loops; this grades a transcript you already
have — a stored conversation, an eval set, a replay of past iterations — with exactly the payload,
evidence tools, re-ask and verdict rules the middleware uses, by running the middleware's own
grading hook once with that transcript as the state. Nothing loops, is checkpointed or streamed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from grading.grader import CalibrationExample
from grading.middleware import EVALUATION_END_EVENT, RubricEvaluation, RubricMiddleware
from grading.rubric import Rubric


@dataclass(frozen=True)
class _Given:
    """The runtime context of one grade: the worked examples it was given."""

    examples: Sequence[CalibrationExample]


def _given_examples(rubric: Rubric, runtime: Runtime[_Given]) -> Sequence[CalibrationExample]:
    """The middleware's calibration source: the examples this grade's runtime carries."""
    return runtime.context.examples


@dataclass
class _Call:
    """One grade: the hook to run, the state and runtime to run it with, and what it streamed."""

    hook: RubricMiddleware
    state: dict[str, Any]
    examples: Sequence[CalibrationExample]
    evaluations: list[RubricEvaluation] = field(default_factory=list)

    @property
    def runtime(self) -> Runtime[_Given]:
        # Each grade's examples travel in its own runtime, so concurrent grades never mix them.
        return Runtime(context=_Given(list(self.examples)), stream_writer=self._keep)

    def _keep(self, event: dict[str, Any]) -> None:
        if event.get("type") == EVALUATION_END_EVENT:
            self.evaluations.append({k: v for k, v in event.items() if k != "type"})  # type: ignore[arg-type]


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
        call = self._call(rubric, messages, iteration, max_iterations, calibration)
        await call.hook.aafter_agent(call.state, call.runtime)
        return call.evaluations[0]

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
        call = self._call(rubric, messages, iteration, max_iterations, calibration)
        call.hook.after_agent(call.state, call.runtime)
        return call.evaluations[0]

    def _call(
        self,
        rubric: str,
        messages: Sequence[AnyMessage],
        iteration: int,
        max_iterations: int,
        calibration: Sequence[CalibrationExample],
    ) -> _Call:
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
        state = {
            "rubric": rubric,
            "messages": list(messages),
            "_rubric_active": rubric,
            "_rubric_run_id": str(uuid.uuid4()),
            "_rubric_iterations": iteration,
            "_rubric_status": None,
            "_rubric_evaluations": [],
        }
        return _Call(self._hooks[max_iterations], state, calibration)
