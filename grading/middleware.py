"""`RubricMiddleware`: make a langchain agent grade its own work and revise until done.

When the worker finishes (no more tool calls), a grader sub-agent checks the
transcript against the thread's rubric and answers with structured output.
The verdict is computed here from the criteria, never taken on the model's
word; failing criteria are injected back as feedback and the worker runs
again, until the rubric is satisfied or the iteration cap is reached.

The grading step is written once, as a generator that yields each grader
request; the sync and async hooks only differ in how they answer it. Each
iteration's grader model calls are bounded (`max_grader_calls`); a grader that
contradicts itself is overruled by its own criteria, never re-asked.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import secrets
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, NotRequired, TypedDict, TypeVar

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
    hook_config,
)
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, UsageMetadata
from langchain_core.messages.ai import add_usage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from pydantic import BaseModel

from grading.aggregation import aggregate, weakest_first
from grading.grader import (
    GRADER_SOURCE,
    GRADER_SYSTEM_PROMPT,
    STRUCTURED_REMINDER,
    CalibrationExample,
    GraderPayload,
    build_payload,
    grade_schema,
    request_index,
)
from grading.grader_agent import GraderAgent, GraderError, GraderMeter, NoStructuredAnswer
from grading.matching import match_names
from grading.provenance import (
    Provenance,
    answered_model,
    asked_model,
    example_ids,
    instructions_hash,
    text_hash,
)
from grading.rubric import Rubric, RubricError, parse_rubric, quoted
from grading.sampling import Graded, Together, together, vote

logger = logging.getLogger(__name__)

CallT = TypeVar("CallT")

FAILURE_REFERENCE_BYTES = 3
"""Random bytes in the reference a grader failure's explanation gives for its log line (six hex
digits: unique enough to find one line in a day's log)."""

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

DEFAULT_MAX_GRADER_CALLS = 6
"""Grader model calls one iteration may take by default (evidence-tool rounds and re-asks of an
unusable answer included): room for a few tool rounds and a re-ask, while a grader that keeps
answering unusably ends as `grader_error` after a bounded cost."""

MAX_CACHED_GRADERS = 64
"""Grader sub-agents kept built, one per rubric (their schemas list the rubric's names)."""

EVALUATION_START_EVENT = "rubric_evaluation_start"
"""`type` of the custom stream event sent as each grader iteration starts, with its
`grading_run_id`, `iteration` and `max_iterations`."""

EVALUATION_END_EVENT = "rubric_evaluation_end"
"""`type` of the custom stream event sent after each grader iteration; the rest of the event is
its `RubricEvaluation`."""


class CriterionResult(TypedDict):
    """One criterion's outcome: `score` is set (1–5) for scored dimensions only."""

    name: str
    passed: bool
    gap: str
    score: int | None
    cannot_tell: NotRequired[bool]
    """True when the grader abstained: what it was given cannot settle the criterion. `passed` is
    then false and `gap` says what is missing to decide; the criterion is left to a person, not sent
    back to the worker, and does not keep the run going (see `abstained`)."""
    confidence: NotRequired[float]
    """Share of the grader's samples that gave this verdict (1 with one sample; see
    `grading.sampling`); absent on evaluations from before samples were counted."""
    escalated: NotRequired[bool]
    """True when the verdict is the escalation model's, asked because the samples' confidence was
    under the criterion's trust threshold (or, without one, the middleware's `escalate_below`); its
    `confidence` is then 1: one answer."""
    trust_threshold: NotRequired[float]
    """Set when the grader judged the criterion but its `confidence` was under this threshold (from
    the middleware's `trust` source): the verdict is withheld, `cannot_tell` is true and `gap` says
    what the grader said and why it is left to a person. Absent when the thresholds could not be
    read (every verdict is then withheld, and the gap says so): the evaluation stays strict JSON,
    which a JSON column (PostgreSQL's ``jsonb``) takes, where an infinite threshold is not."""
    withheld_passed: NotRequired[bool]
    """Set when a verdict is withheld (with `trust_threshold`, or with the thresholds unread): the
    verdict the grader gave (`confidence` is its confidence). A person's review of the criterion is
    then evidence on that verdict, which keeps the thresholds calibrated on low-confidence verdicts
    too (else they could only rise)."""


class RubricEvaluation(TypedDict):
    """One grader iteration, as recorded in state, passed to `on_evaluation` and streamed."""

    grading_run_id: str
    iteration: int
    max_iterations: int
    kind: Literal["list", "scored"] | None
    result: Literal["satisfied", "needs_revision", "failed", "grader_error"]
    explanation: str
    criteria: list[CriterionResult]
    unmatched: list[CriterionResult]
    """Items the grader returned that grade no rubric criterion, named as it wrote them; they
    do not change the verdict but are always shown."""
    score: float | None
    verdict: Literal["PASS", "REVIEW", "FAIL"] | None
    usage: UsageMetadata | None
    """Grader tokens over all of the iteration's model calls, when the provider reported them."""
    grader_calls: int
    """Grader model calls the iteration took (evidence-tool rounds and re-asks included)."""
    answer_message_id: str | None
    best_iteration: int | None
    calibration: list[CalibrationExample]
    provenance: NotRequired[Provenance]
    """What produced the verdict: rubric, grader model and instructions, examples, worker model."""


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


TrustSource = Callable[[Rubric, str, Runtime[Any]], Mapping[str, float] | Awaitable[Mapping[str, float]]]
"""Returns, per criterion name of a pass/fail rubric, the confidence under which the grader's
verdict is not acted on (a criterion it leaves out is acted on at any confidence). It gets the
rubric, the grader model as it answered (thresholds are calibrated per model) and the langgraph
runtime. Plain or async, as a `CalibrationSource`. When it fails, the failure is logged and every
verdict of the iteration is withheld: a promise that cannot be checked is not kept by acting."""

TRUST_GAP = (
    "Left to a person: the grader said {said} with confidence {confidence:.2f}, under {threshold:.2f}, "
    "the confidence from which its verdicts on this criterion are trusted."
)
"""The gap of a verdict withheld for its confidence (see `CriterionResult.trust_threshold`)."""

UNREAD_TRUST_GAP = (
    "Left to a person: the grader said {said} with confidence {confidence:.2f}, but the confidence "
    "from which its verdicts are trusted could not be read."
)
"""The gap of a verdict withheld because the `trust` source failed."""

CalibrationSource = Callable[
    [Rubric, Runtime[Any]], Sequence[CalibrationExample] | Awaitable[Sequence[CalibrationExample]]
]
"""Returns team-reviewed examples to show the grader for this rubric (`[]` for none). It gets the
langgraph runtime, so it can read the invocation's `runtime.context` (who asks, and where). It may
be a plain or an async function; an async one needs the agent's async API (`ainvoke`, `astream`).
When it fails, the failure is logged and the iteration is graded without examples."""


class CriteriaMissing(GraderError):
    """The grader left rubric criteria ungraded, even when asked again for just those."""

    def __init__(self, missing: Sequence[str], unmatched: list[CriterionResult]) -> None:
        names = "; ".join(quoted(name) for name in missing)
        super().__init__(f"it did not grade {len(missing)} item(s) of the rubric: {names}")
        self.unmatched = unmatched


@dataclass(frozen=True)
class _GraderCall:
    """One request to the grader sub-agent: answer `payload`, naming items among `names`; the
    escalation model's sub-agent when `escalation`."""

    kind: Literal["list", "scored"]
    names: tuple[str, ...]
    payload: GraderPayload
    meter: GraderMeter
    escalation: bool = False


@dataclass(frozen=True)
class _SourceCall:
    """A request to one of the caller's sources (`what` names it): `source(*arguments)`, plain or
    async."""

    what: str
    source: Callable[..., Any]
    arguments: tuple[Any, ...]


_Call = Together[_GraderCall] | _SourceCall
"""What the grading step asks of the hook that drives it: grader calls to make at once (one per
sample), or a source (the team's examples, the trust thresholds)."""

_Steps = Generator[_Call, Any, dict[str, Any] | None]
"""The grading step: yields calls, receives their answers, returns the state update."""


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> Rubric:
    # Rubrics are immutable and the same text is graded every iteration.
    return parse_rubric(text)


def _request_id(messages: Sequence[AnyMessage]) -> str | None:
    index = request_index(messages)
    return messages[index].id if index is not None else None


def _last_answer_id(messages: Sequence[AnyMessage]) -> str | None:
    return next((m.id for m in reversed(messages) if isinstance(m, AIMessage)), None)


class RubricMiddleware(AgentMiddleware[RubricState, Any]):
    """Grade the agent's answer against the state's `rubric` and loop until it passes.

    Args:
        model: The grader: a `"provider:model"` string (resolved lazily with
            `init_chat_model`) or a chat model instance.
        system_prompt: Replaces the built-in grader instructions.
        tools: Evidence tools the grader may call before answering
            (see `grading.EVIDENCE_TOOLS`).
        max_iterations: Grader iterations per run; a positive int.
        max_grader_calls: Grader model calls per iteration, evidence-tool rounds
            and re-asks of an unusable answer included; a positive int (default
            `DEFAULT_MAX_GRADER_CALLS`, 6). An iteration that spends them all
            without a usable answer ends as `grader_error`.
        on_evaluation: Called with each `RubricEvaluation`; its exceptions are
            logged and swallowed.
        calibration: A `CalibrationSource` (plain or async) supplying
            team-reviewed examples shown to the grader; it receives the rubric
            and the langgraph runtime. The examples used are recorded on the
            evaluation.
        samples: Times the grader is asked per iteration, at once (a positive
            int, default 1). Each criterion's verdict is the samples' majority
            and its `confidence` the share that gave it; an even split is
            "can't tell" (see `grading.sampling`). Each sample has its own
            `max_grader_calls`.
        escalation_model: A stronger grader (string or chat model) that grades
            once more, together, the criteria whose confidence is under their
            `trust` threshold (or, without one, under `escalate_below`), before
            they are acted on or left to a person; its verdict is acted on.
        escalate_below: The confidence under which a criterion with no trust
            threshold is escalated (default 1: whenever the samples disagree).
        trust: A `TrustSource` (plain or async): per criterion of a pass/fail
            rubric, the confidence under which its verdict is withheld — made
            "can't tell", left to a person and not sent back to the worker, as
            an abstention is (see `CriterionResult.trust_threshold`).
    """

    state_schema = RubricState

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] | None = None,
        max_iterations: int = 3,
        max_grader_calls: int = DEFAULT_MAX_GRADER_CALLS,
        on_evaluation: Callable[[RubricEvaluation], None] | None = None,
        calibration: CalibrationSource | None = None,
        samples: int = 1,
        escalation_model: str | BaseChatModel | None = None,
        escalate_below: float = 1.0,
        trust: TrustSource | None = None,
    ) -> None:
        super().__init__()
        if not model:
            raise ValueError(
                "RubricMiddleware: `model` is required (a 'provider:model' string or a chat model)."
            )
        _check_positive_int("max_iterations", max_iterations)
        _check_positive_int("max_grader_calls", max_grader_calls)
        _check_positive_int("samples", samples)
        if not 0 < escalate_below <= 1:
            raise ValueError(f"RubricMiddleware: `escalate_below` must be in (0, 1], got {escalate_below}.")
        for name, callback in (
            ("on_evaluation", on_evaluation),
            ("calibration", calibration),
            ("trust", trust),
        ):
            if callback is not None and not callable(callback):
                raise TypeError(f"RubricMiddleware: `{name}` must be callable.")
        self.max_iterations = max_iterations
        self.max_grader_calls = max_grader_calls
        self._model = model
        self._asked_model = asked_model(model)
        self._system_prompt = system_prompt or GRADER_SYSTEM_PROMPT
        self._tools = list(tools or ())
        self._on_evaluation = on_evaluation
        self._calibration = calibration
        self._trust = trust
        self.samples = samples
        self._escalation_model = escalation_model
        self._asked_escalation_model = asked_model(escalation_model) if escalation_model else None
        self.escalate_below = escalate_below
        self._graders: OrderedDict[tuple[type[BaseModel], bool], GraderAgent] = OrderedDict()

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
        while isinstance(step, (Together, _SourceCall)):
            step = _advance(steps, _attempt(self._answer, step))
        return step

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(self, state: RubricState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async twin of `after_agent`: only the grader and calibration calls are awaited."""
        steps = self._grading_steps(state, runtime)
        step = _advance(steps, None)
        while isinstance(step, (Together, _SourceCall)):
            step = _advance(steps, await _aattempt(self._aanswer, step))
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
        text = state.get("rubric")  # RUBRIC_KEY, by its literal name so its type is known
        if not text:
            return None
        iteration = state.get("_rubric_iterations") or 0
        run_id = state.get("_rubric_run_id") or str(uuid.uuid4())
        base = self._blank_evaluation(run_id, iteration, state)
        self._emit(
            runtime,
            {
                "type": EVALUATION_START_EVENT,
                "grading_run_id": run_id,
                "iteration": iteration,
                "max_iterations": self.max_iterations,
            },
        )
        try:
            rubric = _parse_cached(text)
        except RubricError as exc:
            unparsed: RubricEvaluation = {
                **base,
                "result": "failed",
                "explanation": f"The rubric could not be parsed: {exc}",
                "provenance": self._provenance(text, None, [], GraderMeter(0), state),
            }
            return self._conclude(state, runtime, unparsed, None)
        examples = yield from self._team_examples(rubric, runtime)
        meters = [GraderMeter(self.max_grader_calls) for _ in range(self.samples)]
        escalation_meter = GraderMeter(self.max_grader_calls)
        try:
            graded = yield from self._grade_samples(rubric, state["messages"], iteration, examples, meters)
            thresholds = yield from self._thresholds(rubric, meters[0].model or self._asked_model, runtime)
            graded = yield from self._escalate(
                rubric, state["messages"], iteration, examples, (graded, thresholds), escalation_meter
            )
        except Exception as exc:
            verdict: _Judgement = {
                "kind": rubric.kind,
                "result": "grader_error",
                "explanation": _grader_failure(exc),
                "unmatched": getattr(exc, "unmatched", []),
            }
        else:
            verdict = _judge(rubric, graded)
            _log_contradiction(rubric, graded, verdict, base)
            verdict = _withhold(verdict, thresholds)
        meter = _merged([*meters, escalation_meter])
        evaluation: RubricEvaluation = {
            **base,
            **verdict,
            "usage": meter.usage,
            "grader_calls": meter.calls,
            "calibration": examples,
            "provenance": self._provenance(text, rubric.kind, examples, meters[0], state),
        }
        return self._conclude(state, runtime, evaluation, rubric)

    def _provenance(
        self,
        rubric_text: str,
        kind: Literal["list", "scored"] | None,
        examples: Sequence[CalibrationExample],
        meter: GraderMeter,
        state: RubricState,
    ) -> Provenance:
        answer = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        return Provenance(
            rubric_hash=text_hash(rubric_text),
            grader_model=meter.model or self._asked_model,
            grader_prompt_hash=instructions_hash(self._system_prompt, kind),
            calibration_examples=example_ids(examples),
            worker_model=answered_model(answer),
            samples=self.samples,
            escalation_model=self._asked_escalation_model,
        )

    def _blank_evaluation(self, run_id: str, iteration: int, state: RubricState) -> RubricEvaluation:
        return {
            "grading_run_id": run_id,
            "iteration": iteration,
            "max_iterations": self.max_iterations,
            "kind": None,
            "result": "failed",
            "explanation": "",
            "criteria": [],
            "unmatched": [],
            "score": None,
            "verdict": None,
            "usage": None,
            "grader_calls": 0,
            "answer_message_id": _last_answer_id(state["messages"]),
            "best_iteration": None,
            "calibration": [],
        }

    # -- asking the calibration source and the grader ----------------------------

    def _team_examples(
        self, rubric: Rubric, runtime: Runtime[Any]
    ) -> Generator[_SourceCall, Any, list[CalibrationExample]]:
        if self._calibration is None:
            return []
        try:
            return list((yield _SourceCall("calibration source", self._calibration, (rubric, runtime))))
        except Exception as exc:
            # Team examples improve a grade; a store that cannot supply them must not stop one.
            logger.warning(
                "RubricMiddleware calibration source failed, grading without examples: %s", _describe(exc)
            )
            return []

    def _thresholds(
        self, rubric: Rubric, model: str, runtime: Runtime[Any]
    ) -> Generator[_SourceCall, Any, Mapping[str, float]]:
        """The trust source's thresholds for this rubric and grader model ({} without a source or for
        a scored rubric); every criterion's is infinite when the source fails."""
        if self._trust is None or rubric.is_scored:
            return {}
        try:
            found = yield _SourceCall("trust source", self._trust, (rubric, model, runtime))
            return {name: float(threshold) for name, threshold in found.items()}
        except Exception as exc:
            logger.warning(
                "RubricMiddleware trust source failed, withholding every verdict: %s", _describe(exc)
            )
            return dict.fromkeys(rubric.names, math.inf)

    def _grade_samples(
        self,
        rubric: Rubric,
        messages: Sequence[AnyMessage],
        iteration: int,
        examples: Sequence[CalibrationExample],
        meters: Sequence[GraderMeter],
    ) -> Generator[Together[_GraderCall], Any, Graded]:
        """Every sample graded at once (one meter each); their majority, with its confidences."""
        samples = [self._grade(rubric, messages, iteration, examples, meter) for meter in meters]
        outcomes = yield from together(samples)
        return vote(outcomes, rubric.is_scored)

    def _escalate(
        self,
        rubric: Rubric,
        messages: Sequence[AnyMessage],
        iteration: int,
        examples: Sequence[CalibrationExample],
        sampled: tuple[Graded, Mapping[str, float]],
        meter: GraderMeter,
    ) -> Generator[Together[_GraderCall], Any, Graded]:
        """The criteria too unsure to act on, graded once more by the escalation model; its
        verdicts replace theirs (a failed escalation leaves the samples' verdicts, logged).

        `sampled` is the samples' majority with the criteria's trust thresholds: a criterion with a
        threshold is escalated when its confidence is under it (the verdict would otherwise be left
        to people: the cascade spends the stronger model only there); one without, when under
        `escalate_below`. When the thresholds could not be read (infinite) nothing is escalated:
        every verdict is withheld whatever the stronger model says."""
        graded, thresholds = sampled
        bars = {p: thresholds.get(rubric.names[p], self.escalate_below) for p in graded.confidence}
        unsure = [p for p, share in graded.confidence.items() if share < bars[p] < math.inf]
        if self._escalation_model is None or not unsure or graded.claimed == "failed":
            return graded
        names = tuple(rubric.names[p] for p in sorted(unsure))
        payload = build_payload(rubric, messages, iteration=iteration, calibration=examples, only=list(names))
        call = _GraderCall(rubric.kind, names, payload, meter, escalation=True)
        (outcome,) = yield from together([_structured(call)])
        if isinstance(outcome, Exception) or outcome.result == "failed":
            logger.warning(
                "RubricMiddleware escalation grader gave no usable answer: %s", _describe_outcome(outcome)
            )
            return graded
        match = match_names(rubric.names, [item.name for item in outcome.criteria], open_=unsure)
        items = {criterion: outcome.criteria[item] for criterion, item in match.graded.items()}
        return replace(
            graded,
            items=graded.items | items,
            confidence=graded.confidence | dict.fromkeys(items, 1.0),
            escalated=frozenset(items),
        )

    @staticmethod
    def _grade(
        rubric: Rubric,
        messages: Sequence[AnyMessage],
        iteration: int,
        examples: Sequence[CalibrationExample],
        meter: GraderMeter,
    ) -> Generator[_GraderCall, Any, Graded]:
        """Ask the grader; match its items to the criteria; re-ask once for the ones still missing."""
        payload = build_payload(rubric, messages, iteration=iteration, calibration=examples)
        grade = yield from _structured(_GraderCall(rubric.kind, tuple(rubric.names), payload, meter))
        if grade.result == "failed":
            return Graded(
                grade.result, grade.explanation, {}, []
            )  # an unevaluable rubric has nothing to cover
        match = match_names(rubric.names, [item.name for item in grade.criteria])
        items = {criterion: grade.criteria[item] for criterion, item in match.graded.items()}
        unmatched = [grade.criteria[item] for item in match.unmatched]
        missing = match.missing
        if missing and meter.left:
            names = [rubric.names[i] for i in missing]
            payload = build_payload(rubric, messages, iteration=iteration, calibration=examples, only=names)
            retry = yield from _structured(_GraderCall(rubric.kind, tuple(names), payload, meter))
            if retry.result != "failed":
                again = match_names(rubric.names, [item.name for item in retry.criteria], open_=missing)
                items |= {criterion: retry.criteria[item] for criterion, item in again.graded.items()}
                unmatched += [retry.criteria[item] for item in again.unmatched]
                missing = again.missing
        if missing:
            raise CriteriaMissing([rubric.names[i] for i in missing], _item_results(rubric, unmatched))
        return Graded(grade.result, grade.explanation, items, unmatched)

    def _grader(self, call: _GraderCall) -> GraderAgent:
        """The grader sub-agent for this call's schema and model, built on first use and kept (LRU)."""
        key = (grade_schema(call.kind, call.names), call.escalation)
        if key in self._graders:
            self._graders.move_to_end(key)
            return self._graders[key]
        grader = GraderAgent.build(
            self._chat_model(call.escalation), self._tools, self._system_prompt, key[0]
        )
        self._graders[key] = grader
        if len(self._graders) > MAX_CACHED_GRADERS:
            self._graders.popitem(last=False)
        return grader

    def _chat_model(self, escalation: bool) -> BaseChatModel:
        """The grader's chat model, or the escalation model's; a string is resolved on first use (it
        can need provider credentials)."""
        if escalation:
            assert self._escalation_model is not None  # only escalated to when there is one
            if isinstance(self._escalation_model, str):
                self._escalation_model = init_chat_model(self._escalation_model)
            return self._escalation_model
        if isinstance(self._model, str):
            self._model = init_chat_model(self._model)
        return self._model

    def _answer(self, call: _Call) -> Any:
        if isinstance(call, Together):
            # The sync API asks one sample after the other; the async one asks them at once.
            return [_attempt(self._ask, grader_call) for grader_call in call.calls]
        found = call.source(*call.arguments)
        if inspect.isawaitable(found):
            if inspect.iscoroutine(found):
                found.close()  # never awaited: close it so Python does not warn
            raise TypeError(f"the {call.what} is async: run the agent with ainvoke or astream")
        return found

    async def _aanswer(self, call: _Call) -> Any:
        if isinstance(call, Together):
            return await asyncio.gather(*(_aattempt(self._aask, grader_call) for grader_call in call.calls))
        found = call.source(*call.arguments)
        return await found if inspect.isawaitable(found) else found

    def _ask(self, call: _GraderCall) -> Any:
        return self._grader(call).ask(call.payload, call.meter)

    async def _aask(self, call: _GraderCall) -> Any:
        return await self._grader(call).aask(call.payload, call.meter)

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
        self._emit(runtime, {"type": EVALUATION_END_EVENT, **evaluation})
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


def _advance(steps: _Steps, outcome: Any) -> _Call | dict[str, Any] | None:
    """Feed the grading step an answer (or failure; None to start); return its next call or its update."""
    try:
        if isinstance(outcome, Exception):
            return steps.throw(outcome)
        return steps.send(outcome)  # sending None is what starts a fresh generator
    except StopIteration as done:
        return done.value


def _attempt(ask: Callable[[CallT], Any], call: CallT) -> Any:
    """`ask(call)`'s answer, or the exception it raised (to be thrown into the grading step)."""
    try:
        return ask(call)
    except GraphBubbleUp:
        raise  # interrupts from grader tools are control flow, not failures
    except Exception as exc:
        return exc


async def _aattempt(ask: Callable[[CallT], Awaitable[Any]], call: CallT) -> Any:
    """Async twin of `_attempt`."""
    try:
        return await ask(call)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return exc


def _structured(call: _GraderCall) -> Generator[_GraderCall, Any, Any]:
    """Ask, and ask again while the grader answers outside the schema and calls are left."""
    while True:
        try:
            return (yield call)
        except NoStructuredAnswer as exc:
            if not call.meter.left:
                raise call.meter.spent() from exc
            call = replace(call, payload=call.payload.with_reminder(STRUCTURED_REMINDER))


def _merged(meters: Sequence[GraderMeter]) -> GraderMeter:
    """One iteration's meters (its samples' and the escalation's) as one: calls and tokens summed."""
    usage: UsageMetadata | None = None
    for meter in meters:
        if meter.usage:
            usage = add_usage(usage, meter.usage)
    return GraderMeter(
        limit=sum(meter.limit for meter in meters),
        calls=sum(meter.calls for meter in meters),
        usage=usage,
        model=next((meter.model for meter in meters if meter.model), None),
    )


def _describe_outcome(outcome: Any) -> str:
    """An escalation's unusable outcome in words: the exception, or the grader's own "failed"."""
    if isinstance(outcome, Exception):
        return _describe(outcome)
    return "it answered that the rubric cannot be evaluated"


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"RubricMiddleware: `{name}` must be an int, got {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"RubricMiddleware: `{name}` must be at least 1, got {value}.")


def _grader_failure(exc: Exception) -> str:
    """The explanation of an evaluation whose grader raised `exc`, which is logged.

    Our own errors say what happened. Any other exception's text stays in the log: an evaluation
    is shown to whoever reads the thread, and a provider's error may carry an API key's tail. The
    explanation names its type and a reference to find the log line by.
    """
    if isinstance(exc, GraderError):
        logger.warning("RubricMiddleware grader failed: %s", exc)
        return f"The grader failed: {exc}"
    reference = secrets.token_hex(FAILURE_REFERENCE_BYTES)
    logger.warning("RubricMiddleware grader failed (ref %s): %s", reference, _describe(exc))
    what = "timed out" if _is_timeout(exc) else "failed"
    return f"The grader {what} ({type(exc).__name__}). The full error is in the bot's log as ref {reference}."


def _is_timeout(exc: Exception) -> bool:
    """Whether the grader gave up waiting: safe to say in the thread, and what its reader needs to know.

    Providers' clients raise timeouts of their own (``openai.APITimeoutError`` is no TimeoutError), so
    the type's name is what they share.
    """
    return isinstance(exc, TimeoutError) or any("Timeout" in cls.__name__ for cls in type(exc).__mro__)


def _describe(exc: Exception) -> str:
    """A grader failure in words: our own errors say what happened, others also name their type."""
    return str(exc) if isinstance(exc, GraderError) else f"{type(exc).__name__}: {exc}"


class _Judgement(TypedDict, total=False):
    """The part of an evaluation that grading decides (the rest is the run's bookkeeping)."""

    kind: Literal["list", "scored"]
    result: Literal["satisfied", "needs_revision", "failed", "grader_error"]
    explanation: str
    criteria: list[CriterionResult]
    unmatched: list[CriterionResult]
    score: float | None
    verdict: Literal["PASS", "REVIEW", "FAIL"] | None


def _judge(rubric: Rubric, graded: Graded) -> _Judgement:
    """Turn the grader's answer into criteria and a verdict from the rubric's rules."""
    if graded.claimed == "failed":
        return {"kind": rubric.kind, "result": "failed", "explanation": graded.explanation}
    verdict: _Judgement = {
        "kind": rubric.kind,
        "explanation": graded.explanation,
        "unmatched": _item_results(rubric, graded.unmatched),
    }
    if not rubric.is_scored:
        criteria = _with_confidence(
            [
                _criterion_result(name, item)
                for name, item in zip(rubric.names, _in_order(graded), strict=True)
            ],
            graded,
        )
        # A criterion the grader could not tell is a person's to judge: it neither passes nor fails the run.
        passed = all(c["passed"] for c in criteria if not c.get("cannot_tell"))
        return {**verdict, "result": "satisfied" if passed else "needs_revision", "criteria": criteria}
    scores = {name: item.score for name, item in zip(rubric.names, _in_order(graded), strict=True)}
    outcome = aggregate(rubric, scores)
    criteria = [
        CriterionResult(
            name=name,
            passed=name not in outcome.below_floor and scores[name] >= rubric.pass_score,
            gap=item.gap.strip() if scores[name] < 5 else "",
            score=scores[name],
        )
        for name, item in zip(rubric.names, _in_order(graded), strict=True)
    ]
    criteria = _with_confidence(criteria, graded)
    return {
        **verdict,
        "result": "satisfied" if outcome.verdict == "PASS" else "needs_revision",
        "criteria": criteria,
        "score": outcome.score,
        "verdict": outcome.verdict,
    }


def _criterion_result(name: str, item: Any) -> CriterionResult:
    """One list criterion's result from the grader's item; an abstention keeps its reason as the gap."""
    if item.cannot_tell:
        return CriterionResult(name=name, passed=False, gap=item.gap.strip(), score=None, cannot_tell=True)
    return CriterionResult(
        name=name, passed=item.passed, gap="" if item.passed else item.gap.strip(), score=None
    )


def _with_confidence(results: list[CriterionResult], graded: Graded) -> list[CriterionResult]:
    """`results` (one per criterion, in rubric order) with each one's confidence and escalation."""
    for position, result in zip(sorted(graded.items), results, strict=True):
        result["confidence"] = graded.confidence.get(position, 1.0)
        if position in graded.escalated:
            result["escalated"] = True
    return results


def _withhold(verdict: _Judgement, thresholds: Mapping[str, float]) -> _Judgement:
    """`verdict` with each judged criterion whose confidence is under its threshold made "can't
    tell" (its gap says what the grader said), and the result worked out again without them."""
    criteria = verdict.get("criteria")
    if not thresholds or not criteria or verdict.get("result") not in ("satisfied", "needs_revision"):
        return verdict
    for criterion in criteria:
        threshold = thresholds.get(criterion["name"])
        confidence = criterion.get("confidence", 1.0)
        if threshold is None or criterion.get("cannot_tell") or confidence >= threshold:
            continue
        said = "it passes" if criterion["passed"] else "it fails"
        criterion["withheld_passed"] = criterion["passed"]
        criterion["passed"], criterion["cannot_tell"] = False, True
        if math.isinf(threshold):  # unread: no threshold to record
            gap = UNREAD_TRUST_GAP
        else:
            gap, criterion["trust_threshold"] = TRUST_GAP, threshold
        criterion["gap"] = gap.format(said=said, confidence=confidence, threshold=threshold)
    passed = all(c["passed"] for c in criteria if not c.get("cannot_tell"))
    return {**verdict, "result": "satisfied" if passed else "needs_revision"}


def abstained(evaluation: RubricEvaluation) -> list[str]:
    """The criteria the grader could not tell in `evaluation` (left to a person), in rubric order."""
    return [c["name"] for c in evaluation["criteria"] if c.get("cannot_tell")]


def _in_order(graded: Graded) -> list[Any]:
    """The grader's item for each criterion, in rubric order."""
    return [graded.items[index] for index in sorted(graded.items)]


def _item_results(rubric: Rubric, items: Sequence[Any]) -> list[CriterionResult]:
    """Items that grade no criterion, as the grader wrote them; a score passes at the pass score."""
    return [
        CriterionResult(
            name=item.name,
            passed=item.passed if not rubric.is_scored else item.score >= rubric.pass_score,
            gap=item.gap.strip(),
            score=item.score if rubric.is_scored else None,
        )
        for item in items
    ]


def _log_contradiction(
    rubric: Rubric, graded: Graded, verdict: _Judgement, evaluation: RubricEvaluation
) -> None:
    """Log a list grader whose overall word contradicts its criteria; the criteria have won."""
    if rubric.is_scored or graded.claimed == verdict["result"]:
        return  # a scored rubric's verdict is the aggregation's, which the grader cannot know
    if graded.samples > 1 or graded.escalated:
        return  # the criteria are a vote or another model's: no one answer contradicted itself
    logger.warning(
        "RubricMiddleware: the grader answered %s but its criteria say %s; going by the criteria "
        "(grading run %s, iteration %d)",
        graded.claimed,
        verdict["result"],
        evaluation["grading_run_id"],
        evaluation["iteration"] + 1,
    )


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
    scores = {name: c["score"] for name, c in by_name.items() if c["score"] is not None}
    return [by_name[name] for name in weakest_first(rubric, scores)]


def _feedback_message(evaluation: RubricEvaluation, rubric: Rubric) -> HumanMessage:
    """The grader's feedback, marked as the grader's (not the user's)."""
    failing = [
        c
        for c in _weakest_first(evaluation, rubric)
        if (not c["passed"] or c["gap"]) and not c.get("cannot_tell")
    ]
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
