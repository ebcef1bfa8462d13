"""`RubricMiddleware`: make a langchain agent grade its own work and revise until done.

When the worker finishes (no more tool calls), a grader sub-agent checks the
transcript against the thread's rubric and answers with structured output.
The verdict is computed here from the criteria, never taken on the model's
word; failing criteria are injected back as feedback and the worker runs
again, until the rubric is satisfied or the iteration cap is reached.

The grading step is written once, as a generator that yields each grader
request; the sync and async hooks only differ in how they answer it.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
    hook_config,
)
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.messages.ai import add_usage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from pydantic import BaseModel

from grading.aggregation import aggregate, weakest_first
from grading.grader import (
    GRADE_SCHEMAS,
    GRADER_SOURCE,
    GRADER_SYSTEM_PROMPT,
    CalibrationExample,
    build_payload,
    missing_names_correction,
    request_index,
)
from grading.rubric import Rubric, RubricError, parse_rubric

logger = logging.getLogger(__name__)

Status = Literal["satisfied", "needs_revision", "max_iterations_reached", "failed", "grader_error"]
"""Where a grading run stands. Only `needs_revision` loops back to the worker;
`max_iterations_reached` is never a grader verdict, only a final state."""

TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"satisfied", "max_iterations_reached", "failed", "grader_error"}
)
"""Statuses that end a grading run; the next invocation starts a new run
(new `grading_run_id`, iteration 0) even with the same rubric and no new request."""

RUBRIC_KEY = "rubric"
"""The public state key that carries the rubric text."""

GRADER_RECURSION_LIMIT = 16
"""Step budget for one grader call: room for a few evidence-tool calls and a
re-ask of an invalid structured answer, but a grader that keeps answering
invalidly ends as `grader_error` instead of looping."""

START_EVENT = "rubric_evaluation_start"
"""Custom stream event sent before each grader call."""

END_EVENT = "rubric_evaluation_end"
"""Custom stream event sent after each grader iteration, with its evaluation."""


class CriterionResult(TypedDict):
    """One criterion's outcome: `score` is set (1–5) for scored dimensions only."""

    name: str
    passed: bool
    gap: str
    score: int | None


class Usage(TypedDict):
    """Grader tokens for one evaluation, summed over its model calls."""

    input_tokens: int
    output_tokens: int


class RubricEvaluation(TypedDict):
    """One grader iteration, as recorded in state, passed to `on_evaluation` and streamed."""

    grading_run_id: str
    iteration: int
    max_iterations: int
    kind: Literal["list", "scored"] | None
    result: Literal["satisfied", "needs_revision", "failed", "grader_error"]
    explanation: str
    criteria: list[CriterionResult]
    score: float | None
    verdict: Literal["PASS", "REVIEW", "FAIL"] | None
    usage: Usage | None
    answer_message_id: str | None
    best_iteration: int | None
    calibration: list[CalibrationExample]


class RubricState(AgentState):
    """Agent state with the rubric; everything but `rubric` is private bookkeeping."""

    rubric: NotRequired[str]
    """The rubric text; sticky on a checkpointed thread until a different one is passed."""

    _rubric_status: NotRequired[Annotated[Status | None, PrivateStateAttr]]
    """The current run's latest status; `None` right after a run starts."""

    _rubric_iterations: NotRequired[Annotated[int, PrivateStateAttr]]
    """Grader iterations done in the current run."""

    _rubric_evaluations: NotRequired[Annotated[list[RubricEvaluation], PrivateStateAttr]]
    """Every evaluation on this thread, across runs, oldest first."""

    _rubric_best_iteration: NotRequired[Annotated[int | None, PrivateStateAttr]]
    """When the cap was hit: the iteration whose answer did best (ties go to the later)."""

    _rubric_run_id: NotRequired[Annotated[str, PrivateStateAttr]]
    """`grading_run_id` of the current run."""

    _rubric_active: NotRequired[Annotated[str, PrivateStateAttr]]
    """The rubric text the current run grades against; a different `rubric` starts a new run."""

    _rubric_request: NotRequired[Annotated[str | None, PrivateStateAttr]]
    """Message id of the user request the current run grades answers to; a newer request starts
    a new run however the current one ended (an error, a cancellation, an interrupt)."""


CalibrationSource = Callable[[Rubric, RunnableConfig], Sequence[CalibrationExample]]
"""Returns team-reviewed examples to show the grader for this rubric and
invocation (the config carries e.g. the thread id); `[]` for none."""


class GraderError(RuntimeError):
    """The grader's answer was unusable (no structured answer, criteria missing)."""


@dataclass(frozen=True)
class _GraderCall:
    """One request to the grader sub-agent."""

    kind: Literal["list", "scored"]
    payload: str


@dataclass(frozen=True)
class _GraderReply:
    """The grader's validated answer and the messages it took to get it."""

    grade: BaseModel
    messages: Sequence[AnyMessage]

    @property
    def usage(self) -> Usage | None:
        """Tokens over all of the grader's model calls, when the provider reported them."""
        reported = [m.usage_metadata for m in self.messages if getattr(m, "usage_metadata", None)]
        if not reported:
            return None
        total = functools.reduce(add_usage, reported)
        return {"input_tokens": total["input_tokens"], "output_tokens": total["output_tokens"]}


_Steps = Generator[_GraderCall, _GraderReply, dict[str, Any] | None]
"""The grading step: yields grader calls, receives replies, returns the state update."""


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> Rubric:
    # Rubrics are immutable and the same text is graded every iteration.
    return parse_rubric(text)


def _request_id(messages: Sequence[AnyMessage]) -> str | None:
    index = request_index(messages)
    return messages[index].id if index is not None else None


def _last_answer_id(messages: Sequence[AnyMessage]) -> str | None:
    return next((m.id for m in reversed(messages) if isinstance(m, AIMessage)), None)


def _current_config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a runnable context (e.g. a unit test of a hook)
        return {}


class RubricMiddleware(AgentMiddleware[RubricState, Any]):
    """Grade the agent's answer against the state's `rubric` and loop until it passes.

    Args:
        model: The grader: a `"provider:model"` string (resolved lazily with
            `init_chat_model`) or a chat model instance.
        system_prompt: Replaces the built-in grader instructions.
        tools: Evidence tools the grader may call before answering
            (see `grading.EVIDENCE_TOOLS`).
        max_iterations: Grader iterations per run; a positive int.
        on_evaluation: Called with each `RubricEvaluation`; its exceptions are
            logged and swallowed.
        calibration: Supplies team-reviewed examples shown to the grader; the
            examples used are recorded on the evaluation.
    """

    state_schema = RubricState

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
        max_iterations: int = 3,
        on_evaluation: Callable[[RubricEvaluation], None] | None = None,
        calibration: CalibrationSource | None = None,
    ) -> None:
        super().__init__()
        if not model:
            raise ValueError(
                "RubricMiddleware: `model` is required (a 'provider:model' string or a chat model)."
            )
        if not isinstance(max_iterations, int) or isinstance(max_iterations, bool):
            raise TypeError(
                f"RubricMiddleware: `max_iterations` must be an int, got {type(max_iterations).__name__}."
            )
        if max_iterations < 1:
            raise ValueError(f"RubricMiddleware: `max_iterations` must be at least 1, got {max_iterations}.")
        for name, callback in (("on_evaluation", on_evaluation), ("calibration", calibration)):
            if callback is not None and not callable(callback):
                raise TypeError(f"RubricMiddleware: `{name}` must be callable.")
        self.max_iterations = max_iterations
        self._model = model
        self._system_prompt = system_prompt or GRADER_SYSTEM_PROMPT
        self._tools = list(tools or ())
        self._on_evaluation = on_evaluation
        self._calibration = calibration
        self._graders: dict[str, Any] = {}

    # -- hooks ---------------------------------------------------------------

    def before_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start a new grading run for a new rubric or after a finished run."""
        return self._start_run_if_needed(state)

    async def abefore_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `before_agent`."""
        return self._start_run_if_needed(state)

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Grade the finished answer; loop back to the model when it needs revision."""
        steps = self._grading_steps(state, runtime)
        step = _advance(steps, None)
        while isinstance(step, _GraderCall):
            step = _advance(steps, _attempt(self._ask_grader, step))
        return step

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `after_agent`: only the grader call is awaited."""
        steps = self._grading_steps(state, runtime)
        step = _advance(steps, None)
        while isinstance(step, _GraderCall):
            step = _advance(steps, await _aattempt(self._aask_grader, step))
        return step

    # -- run bookkeeping -----------------------------------------------------

    @staticmethod
    def _start_run_if_needed(state: RubricState) -> dict[str, Any] | None:
        """A fresh run for each new user request; the current run otherwise.

        Resuming from a checkpoint (`astream(None, config)`) adds no request, so it continues
        the run it resumes. A new request starts over whatever state the last run was left in.
        """
        rubric = state.get(RUBRIC_KEY)
        if not rubric:
            return None
        request = _request_id(state["messages"])
        if (
            state.get("_rubric_active") == rubric
            and state.get("_rubric_request") == request
            and state.get("_rubric_status") not in TERMINAL_STATUSES
        ):
            return None
        return {
            "_rubric_run_id": str(uuid.uuid4()),
            "_rubric_active": rubric,
            "_rubric_request": request,
            "_rubric_iterations": 0,
            "_rubric_status": None,
            "_rubric_best_iteration": None,
        }

    def _grading_steps(self, state: RubricState, runtime: Runtime[Any]) -> _Steps:
        text = state.get(RUBRIC_KEY)
        if not text:
            return None
        iteration = state.get("_rubric_iterations") or 0
        run_id = state.get("_rubric_run_id") or str(uuid.uuid4())
        base = self._blank_evaluation(run_id, iteration, state)
        self._emit(
            runtime,
            {
                "type": START_EVENT,
                "grading_run_id": run_id,
                "iteration": iteration,
                "max_iterations": self.max_iterations,
            },
        )
        try:
            rubric = _parse_cached(text)
        except RubricError as exc:
            evaluation = {**base, "result": "failed", "explanation": f"The rubric could not be parsed: {exc}"}
            return self._conclude(state, runtime, evaluation, None)
        examples = list(self._calibration(rubric, _current_config())) if self._calibration else []
        try:
            reply = yield from self._grade(rubric, state["messages"], iteration, examples)
        except Exception as exc:
            logger.warning("RubricMiddleware grader failed: %s: %s", type(exc).__name__, exc)
            evaluation = {
                **base,
                "kind": rubric.kind,
                "result": "grader_error",
                "explanation": f"The grader failed: {type(exc).__name__}: {exc}",
                "calibration": examples,
            }
            return self._conclude(state, runtime, evaluation, rubric)
        evaluation = {
            **base,
            **self._judge(rubric, reply.grade),
            "usage": reply.usage,
            "calibration": examples,
        }
        return self._conclude(state, runtime, evaluation, rubric)

    def _blank_evaluation(self, run_id: str, iteration: int, state: RubricState) -> RubricEvaluation:
        return {
            "grading_run_id": run_id,
            "iteration": iteration,
            "max_iterations": self.max_iterations,
            "kind": None,
            "result": "failed",
            "explanation": "",
            "criteria": [],
            "score": None,
            "verdict": None,
            "usage": None,
            "answer_message_id": _last_answer_id(state["messages"]),
            "best_iteration": None,
            "calibration": [],
        }

    # -- asking the grader -----------------------------------------------------

    def _grade(
        self,
        rubric: Rubric,
        messages: Sequence[AnyMessage],
        iteration: int,
        examples: Sequence[CalibrationExample],
    ) -> Generator[_GraderCall, _GraderReply, _GraderReply]:
        """Ask the grader; re-ask once naming any criteria it skipped."""
        payload = build_payload(rubric, messages, iteration=iteration, calibration=examples)
        reply = yield _GraderCall(rubric.kind, payload)
        missing = self._missing(rubric, reply.grade)
        if not missing:
            return reply
        correction = missing_names_correction(missing)
        payload = build_payload(
            rubric, messages, iteration=iteration, calibration=examples, correction=correction
        )
        retry = yield _GraderCall(rubric.kind, payload)
        still_missing = self._missing(rubric, retry.grade)
        if still_missing:
            raise GraderError(f"the grader did not grade {len(still_missing)} item(s): {still_missing}")
        return _GraderReply(retry.grade, [*reply.messages, *retry.messages])

    @staticmethod
    def _missing(rubric: Rubric, grade: Any) -> list[str]:
        if grade.result == "failed":
            return []  # an unevaluable rubric has nothing to cover
        graded = {rubric.match_name(c.name) for c in grade.criteria}
        return [name for name in rubric.names if name not in graded]

    def _grader(self, kind: str) -> Any:
        # Built lazily: resolving a model string can need provider credentials.
        if kind not in self._graders:
            model = init_chat_model(self._model) if isinstance(self._model, str) else self._model
            self._graders[kind] = create_agent(
                model=model,
                tools=self._tools,
                system_prompt=self._system_prompt,
                response_format=GRADE_SCHEMAS[kind],
                name=GRADER_SOURCE,
                # The grader's scratch work is not part of the thread's history.
                checkpointer=False,
            )
        return self._graders[kind]

    def _ask_grader(self, call: _GraderCall) -> _GraderReply:
        result = self._grader(call.kind).invoke(
            {"messages": [HumanMessage(call.payload)]}, {"recursion_limit": GRADER_RECURSION_LIMIT}
        )
        return self._reply(result)

    async def _aask_grader(self, call: _GraderCall) -> _GraderReply:
        result = await self._grader(call.kind).ainvoke(
            {"messages": [HumanMessage(call.payload)]}, {"recursion_limit": GRADER_RECURSION_LIMIT}
        )
        return self._reply(result)

    @staticmethod
    def _reply(result: dict[str, Any]) -> _GraderReply:
        grade = result.get("structured_response")
        if grade is None:
            raise GraderError("the grader finished without a structured answer")
        return _GraderReply(grade, result.get("messages", []))

    # -- verdicts, computed in code ----------------------------------------------

    @staticmethod
    def _judge(rubric: Rubric, grade: Any) -> dict[str, Any]:
        """Turn the grader's answer into criteria and a verdict from the rubric's rules."""
        if grade.result == "failed":
            return {"kind": rubric.kind, "result": "failed", "explanation": grade.explanation}
        by_name = {rubric.match_name(c.name): c for c in grade.criteria}
        if not rubric.is_scored:
            criteria = [
                CriterionResult(
                    name=name,
                    passed=by_name[name].passed,
                    gap="" if by_name[name].passed else by_name[name].gap.strip(),
                    score=None,
                )
                for name in rubric.names
            ]
            result = "satisfied" if all(c["passed"] for c in criteria) else "needs_revision"
            return {"kind": "list", "result": result, "explanation": grade.explanation, "criteria": criteria}
        scores = {name: by_name[name].score for name in rubric.names}
        outcome = aggregate(rubric, scores)
        floors = {d.name: d.fail_below for d in rubric.dimensions}
        criteria = [
            CriterionResult(
                name=name,
                passed=scores[name] >= (floors[name] or 1) and scores[name] >= rubric.pass_score,
                gap=by_name[name].gap.strip() if scores[name] < 5 else "",
                score=scores[name],
            )
            for name in rubric.names
        ]
        result = "satisfied" if outcome.verdict == "PASS" else "needs_revision"
        return {
            "kind": "scored",
            "result": result,
            "explanation": grade.explanation,
            "criteria": criteria,
            "score": outcome.score,
            "verdict": outcome.verdict,
        }

    # -- concluding an iteration -------------------------------------------------

    def _conclude(
        self,
        state: RubricState,
        runtime: Runtime[Any],
        evaluation: RubricEvaluation,
        rubric: Rubric | None,
    ) -> dict[str, Any]:
        iteration = evaluation["iteration"]
        status: Status = evaluation["result"]
        at_cap = status == "needs_revision" and iteration + 1 >= self.max_iterations
        run = [
            e
            for e in state.get("_rubric_evaluations") or []
            if e["grading_run_id"] == evaluation["grading_run_id"]
        ]
        if at_cap:
            status = "max_iterations_reached"
            evaluation["best_iteration"] = _best_iteration([*run, evaluation])
            logger.info("RubricMiddleware hit max_iterations=%d", self.max_iterations)
        self._notify(evaluation)
        self._emit(runtime, {"type": END_EVENT, **evaluation})
        update: dict[str, Any] = {
            "_rubric_evaluations": [*(state.get("_rubric_evaluations") or []), evaluation],
            "_rubric_iterations": iteration + 1,
            "_rubric_status": status,
            "_rubric_best_iteration": evaluation["best_iteration"],
        }
        if status == "needs_revision":
            assert rubric is not None  # an unparsed rubric ends as `failed`, never needing revision
            update["messages"] = [_feedback_message(evaluation, rubric)]
            update["jump_to"] = "model"
        return update

    def _notify(self, evaluation: RubricEvaluation) -> None:
        if self._on_evaluation is None:
            return
        try:
            self._on_evaluation(evaluation)
        except GraphBubbleUp:
            raise
        except Exception:
            logger.exception("RubricMiddleware on_evaluation callback raised; ignored")

    @staticmethod
    def _emit(runtime: Runtime[Any], payload: dict[str, Any]) -> None:
        writer = getattr(runtime, "stream_writer", None)
        if writer is None:
            return
        try:
            writer(payload)
        except Exception:
            logger.debug("RubricMiddleware stream writer raised; ignored", exc_info=True)


def _advance(steps: _Steps, outcome: _GraderReply | Exception | None) -> _GraderCall | dict[str, Any] | None:
    """Feed the grading step the grader's reply (or failure); return its next call or its update."""
    try:
        if outcome is None:
            return next(steps)
        if isinstance(outcome, Exception):
            return steps.throw(outcome)
        return steps.send(outcome)
    except StopIteration as done:
        return done.value


def _attempt(ask: Callable[[_GraderCall], _GraderReply], call: _GraderCall) -> _GraderReply | Exception:
    try:
        return ask(call)
    except GraphBubbleUp:
        raise  # interrupts from grader tools are control flow, not failures
    except Exception as exc:
        return exc


async def _aattempt(
    ask: Callable[[_GraderCall], Awaitable[_GraderReply]], call: _GraderCall
) -> _GraderReply | Exception:
    try:
        return await ask(call)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return exc


def _merit(evaluation: RubricEvaluation) -> float:
    """How well an iteration did: its aggregate score, or how many criteria passed."""
    if evaluation["score"] is not None:
        return evaluation["score"]
    return sum(c["passed"] for c in evaluation["criteria"])


def _best_iteration(run: Sequence[RubricEvaluation]) -> int:
    graded = [e for e in run if e["result"] in ("needs_revision", "satisfied")] or list(run)
    # max() keeps the first of equals, so iterate latest-first to favour the later tie.
    return max(reversed(graded), key=_merit)["iteration"]


def _weakest_first(evaluation: RubricEvaluation, rubric: Rubric) -> list[CriterionResult]:
    """The evaluation's criteria, weakest dimension first for scored rubrics, else in rubric order."""
    if not rubric.is_scored:
        return evaluation["criteria"]
    by_name = {c["name"]: c for c in evaluation["criteria"]}
    return [by_name[name] for name in weakest_first(rubric, {n: c["score"] for n, c in by_name.items()})]


def _feedback_message(evaluation: RubricEvaluation, rubric: Rubric) -> HumanMessage:
    """The grader's feedback, marked as the grader's (not the user's)."""
    failing = [c for c in _weakest_first(evaluation, rubric) if not c["passed"] or c["gap"]]
    lines = [
        f"Grader feedback (iteration {evaluation['iteration'] + 1} of "
        f"{evaluation['max_iterations']}): your answer does not meet the rubric yet.",
        f"Summary: {evaluation['explanation'].strip()}",
    ]
    if evaluation["score"] is not None:
        lines.append(f"Aggregate score {evaluation['score']}/5 ({evaluation['verdict']}).")
    if failing:
        lines.append("Fix these, weakest first:" if evaluation["score"] is not None else "Fix these:")
        for c in failing:
            score = f" ({c['score']}/5)" if c["score"] is not None else ""
            lines.append(f"- {c['name']}{score}: {c['gap'] or 'not met'}")
    passing = [c["name"] for c in evaluation["criteria"] if c["passed"] and not c["gap"]]
    if passing:
        lines.append("Keep what already passes: " + "; ".join(passing) + ".")
    lines.append("Reply with the complete revised answer.")
    return HumanMessage(
        content="\n".join(lines),
        name=GRADER_SOURCE,
        additional_kwargs={"lc_source": GRADER_SOURCE},
    )
