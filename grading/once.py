"""Grade one transcript against a rubric once, outside an agent run: the grader step on its own.

`RubricMiddleware` grades a live agent's answer and loops; this grades a transcript you already
have — a stored conversation, an eval set, a replay of past iterations — with exactly the payload,
evidence tools, re-ask and verdict rules the middleware uses, by running the middleware's own
grading hook once with that transcript as the state. Nothing loops, is checkpointed or streamed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from grading.grader import CalibrationExample
from grading.middleware import END_EVENT, RubricEvaluation, RubricMiddleware

_EXAMPLES: ContextVar[Sequence[CalibrationExample]] = ContextVar("grading_once_examples", default=())
"""The worked examples of the grade in progress. A context variable, so that concurrent grades by
one `TranscriptGrader` (each in its own asyncio task or thread) each show their own examples."""


def _current_examples(*_: Any) -> Sequence[CalibrationExample]:
    """The middleware's calibration source: the examples the grade in progress was given."""
    return _EXAMPLES.get()


@contextmanager
def _showing(examples: Sequence[CalibrationExample]) -> Iterator[None]:
    token = _EXAMPLES.set(list(examples))
    try:
        yield
    finally:
        _EXAMPLES.reset(token)


@dataclass
class _Call:
    """One grade: the hook to run, the state and runtime to run it with, and what it streamed."""

    hook: RubricMiddleware
    state: dict[str, Any]
    evaluations: list[RubricEvaluation] = field(default_factory=list)

    @property
    def runtime(self) -> Runtime[Any]:
        return Runtime(stream_writer=self._keep)

    def _keep(self, event: dict[str, Any]) -> None:
        if event.get("type") == END_EVENT:
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
        call = self._call(rubric, messages, iteration, max_iterations)
        with _showing(calibration):
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
        call = self._call(rubric, messages, iteration, max_iterations)
        with _showing(calibration):
            call.hook.after_agent(call.state, call.runtime)
        return call.evaluations[0]

    def _call(
        self, rubric: str, messages: Sequence[AnyMessage], iteration: int, max_iterations: int
    ) -> _Call:
        if max_iterations not in self._hooks:
            # One middleware per cap, since the cap is the middleware's; each builds its grader once.
            self._hooks[max_iterations] = RubricMiddleware(
                self._model,
                system_prompt=self._system_prompt,
                tools=self._tools,
                max_iterations=max_iterations,
                calibration=_current_examples,
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
        return _Call(self._hooks[max_iterations], state)
