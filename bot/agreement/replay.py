"""Replay the team's reviewed grader iterations against a candidate grader.

Each reviewed iteration — a *case* — is rebuilt as its grader saw it: the rubric it was graded
against (stored with its evaluation), the transcript as it stood at that iteration and the
evidence tools. The transcript comes from the thread's checkpoint history: the grader graded the
state of the checkpoint just before the first one that records its evaluation. The case is then
graded again by a candidate configuration (grader model, instructions, calibration), and
:mod:`bot.agreement.comparison` compares the candidate's verdicts with the team's next to the original
grader's.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, get_args

from langchain_core.messages import AnyMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.agent.turn import sum_usage
from bot.agreement.report import period_start
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.material.fence import holds_material
from bot.review.calibration import CANDIDATE_ROWS, Trust, team_examples
from bot.review.verdicts import grader_verdicts
from bot.vocabulary.verdicts import Verdict
from bot.vocabulary.workspace import Workspace
from grading import EVIDENCE_TOOLS, CalibrationExample, RubricEvaluation
from grading.grader import GRADER_SYSTEM_PROMPT, build_payload
from grading.once import TranscriptGrader
from grading.rubric import RubricError, parse_rubric

__all__ = [
    "CALIBRATION_MODES",
    "Calibration",
    "Case",
    "Regrade",
    "Skipped",
    "attach_transcripts",
    "describe",
    "estimate_tokens",
    "examples_for",
    "load_cases",
    "regrade",
    "total_usage",
]

Calibration = Literal["on", "off", "loo"]
"""Which team examples a replayed grader is shown. ``on``: those the grader was shown at the time
(recorded on the evaluation), so the input is exactly the original's; ``off``: none; ``loo``
(leave-one-out): the team's latest disagreements with the rubric in the channel, as the bot picks
them, except the case's own — showing a case its own review would measure memory, not calibration."""

CALIBRATION_MODES: tuple[Calibration, ...] = get_args(Calibration)
"""The calibration choices, as the CLI offers them."""

CHARS_PER_TOKEN = 4
"""Rough characters per token of English text, for the dry run's estimate (no tokenizer is
loaded: a provider's tokenizer may need a download)."""

OUTPUT_TOKENS_PER_CRITERION = 60
"""Rough tokens of the grader's answer per criterion (name, verdict, a one-line gap)."""


@dataclass(frozen=True)
class Case:
    """One reviewed grader iteration: what was graded, the team's reviews of it, and its transcript."""

    record: EvaluationRecord
    reviews: tuple[ReviewRow, ...]
    messages: tuple[AnyMessage, ...] = ()
    """The transcript as the grader saw it; empty until :func:`attach_transcripts`."""

    @property
    def key(self) -> tuple[str, int]:
        """The grading run id and iteration."""
        return self.record.grading_run_id, self.record.iteration

    @property
    def thread_id(self) -> str:
        """The checkpoint key of the case's Slack thread."""
        return self.record.thread.thread_id

    @property
    def max_iterations(self) -> int:
        """The iteration cap the grader was told about."""
        return self.record.evaluation["max_iterations"]

    @property
    def shares_material(self) -> bool:
        """Whether its transcript holds material people shared (a thread's earlier messages, files)."""
        return any(holds_material(message.text) for message in self.messages)

    @property
    def original_verdicts(self) -> dict[str, Verdict]:
        """The original grader's verdict per reviewed criterion, as its reviewers saw it."""
        return {row.criterion: row.grader_verdict for row in self.reviews}


@dataclass(frozen=True)
class Skipped:
    """A reviewed iteration that could not be replayed, and why."""

    record: EvaluationRecord
    reason: str


@dataclass(frozen=True)
class Regrade:
    """A case graded again by a candidate."""

    case: Case
    evaluation: RubricEvaluation

    @property
    def verdicts(self) -> dict[str, Verdict]:
        """The candidate's verdict per criterion, as verdict strings ("pass", "3", ...)."""
        return grader_verdicts(self.evaluation)

    @property
    def error(self) -> str | None:
        """Why the candidate gave no verdicts (a grader error or an unevaluable rubric), else None."""
        if self.evaluation["result"] in ("grader_error", "failed"):
            return self.evaluation["explanation"] or self.evaluation["result"]
        return None


async def load_cases(
    store: Store,
    *,
    workspace: Workspace | None = None,
    channel: str | None = None,
    days: int | None = None,
    rubric_match: str | None = None,
    limit: int | None = None,
) -> list[Case]:
    """The reviewed iterations to replay, oldest first, each with every review it has.

    An iteration counts when it was reviewed in ``channel`` of ``workspace`` (any when None) within
    the last ``days`` (ever when None) and its rubric contains ``rubric_match`` (ignoring case).
    With ``limit``, only the latest that many.
    """
    rows = await store.reviews_in_channel(workspace, channel, period_start(days))
    keys = list(dict.fromkeys((row.thread.workspace, row.grading_run_id, row.iteration) for row in rows))
    cases = []
    for where, run_id, iteration in keys:
        record = await store.get_evaluation(where, run_id, iteration)
        if record is None or not _matches(record.rubric_text, rubric_match):
            continue
        reviews = await store.reviews_for_iteration(where, run_id, iteration)
        cases.append(Case(record, tuple(reviews)))
    return cases[-limit:] if limit else cases


def _matches(rubric_text: str, needle: str | None) -> bool:
    return needle is None or needle.casefold() in rubric_text.casefold()


async def attach_transcripts(
    checkpointer: BaseCheckpointSaver, cases: Sequence[Case]
) -> tuple[list[Case], list[Skipped]]:
    """The cases with the transcripts their grader saw, and those whose history is gone.

    Each thread's checkpoint history is read once, newest first: an evaluation first recorded
    in one checkpoint was made by the step right after the checkpoint before it, whose
    messages are therefore exactly what that grader was given.
    """
    by_thread: dict[str, list[Case]] = {}
    for case in cases:
        by_thread.setdefault(case.thread_id, []).append(case)
    transcripts: dict[tuple[str, int], list[AnyMessage]] = {}
    for thread, thread_cases in by_thread.items():
        transcripts |= await _graded_transcripts(checkpointer, thread, {c.key for c in thread_cases})
    ready, skipped = [], []
    for case in cases:
        if case.key in transcripts:
            ready.append(Case(case.record, case.reviews, tuple(transcripts[case.key])))
        else:
            skipped.append(Skipped(case.record, "its thread's checkpoint history no longer has it"))
    return ready, skipped


async def _graded_transcripts(
    checkpointer: BaseCheckpointSaver, thread: str, wanted: set[tuple[str, int]]
) -> dict[tuple[str, int], list[AnyMessage]]:
    found: dict[tuple[str, int], list[AnyMessage]] = {}
    graded_later: set[tuple[str, int]] = set()
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    # aclosing: the loop may stop early, and the saver's cursor must close while its connection is open.
    # The savers' alist is an async generator (it has aclose), though typed as a plain AsyncIterator.
    async with aclosing(checkpointer.alist(config)) as history:  # type: ignore[type-var]
        async for saved in history:
            values = saved.checkpoint["channel_values"]
            evaluations = values.get("_rubric_evaluations") or []
            graded = {(e["grading_run_id"], e["iteration"]) for e in evaluations}
            for key in (graded_later - graded) & wanted:
                found[key] = list(values.get("messages") or [])
            if len(found) == len(wanted):
                break
            graded_later = graded
    return found


async def examples_for(store: Store, case: Case, calibration: Calibration) -> list[CalibrationExample]:
    """The team examples a case is replayed with under ``calibration`` (see :data:`Calibration`)."""
    if calibration == "off":
        return []
    if calibration == "on":
        return list(case.record.evaluation["calibration"])
    own = sum(row.disagrees for row in case.reviews)
    record = case.record
    rows = await store.recent_disagreements(
        record.thread.workspace,
        record.channel,
        record.rubric_text,
        limit=CANDIDATE_ROWS + own,
        undropped_only=True,
    )
    others = [row for row in rows if (row.grading_run_id, row.iteration) != case.key]
    # Trusted as each review recorded it: a replay has no Slack to ask who is an editor now.
    return [example.for_grader() for example in team_examples(others, Trust.recorded(rows))]


async def regrade(
    cases: Iterable[Case],
    grader: TranscriptGrader,
    calibration: Calibration,
    store: Store,
    *,
    concurrency: int,
    on_graded: Callable[[Regrade], None],
    admit: Callable[[Case], Awaitable[bool]] | None = None,
    settle: Callable[[Regrade], Awaitable[None]] | None = None,
) -> None:
    """Grade every case again, ``concurrency`` at a time, handing each result to ``on_graded``;
    with `admit`, only the cases it admits as their turn comes (a budget: see
    `bot.agreement.budget`), each result then handed to `settle` too.

    Results arrive as they finish, so a caller that is cancelled keeps what was graded.
    """
    slots = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> None:
        async with slots:
            if admit is not None and not await admit(case):
                return
            examples = await examples_for(store, case, calibration)
            evaluation = await grader.agrade(
                case.record.rubric_text,
                case.messages,
                iteration=case.record.iteration,
                max_iterations=case.max_iterations,
                calibration=examples,
            )
        graded = Regrade(case, evaluation)
        on_graded(graded)
        if settle is not None:
            await settle(graded)

    async with asyncio.TaskGroup() as group:
        for case in cases:
            group.create_task(one(case))


def total_usage(regrades: Iterable[Regrade]) -> UsageMetadata:
    """The candidate's tokens over the regrades (zero when no model reported any)."""
    total = sum_usage(r.evaluation["usage"] for r in regrades)
    return total or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def estimate_tokens(case: Case, examples: Sequence[CalibrationExample], system_prompt: str | None) -> int:
    """Roughly the tokens one grader call on the case costs: its prompt, tools and answer.

    Evidence-tool calls and re-asks add more; this is a floor for planning, not a bill.
    """
    try:
        rubric = parse_rubric(case.record.rubric_text)
    except RubricError:
        return 0  # graded as `failed` without a model call
    payload = build_payload(rubric, case.messages, iteration=case.record.iteration, calibration=examples)
    prompt = (system_prompt or GRADER_SYSTEM_PROMPT) + payload.text + _tool_schemas()
    return len(prompt) // CHARS_PER_TOKEN + OUTPUT_TOKENS_PER_CRITERION * len(rubric.names)


@functools.cache
def _tool_schemas() -> str:
    return json.dumps([convert_to_openai_tool(tool) for tool in EVIDENCE_TOOLS])


def describe(record: EvaluationRecord) -> str:
    """A case as people find it: channel, thread and iteration."""
    return f"{record.channel} thread {record.thread_ts} iteration {record.iteration + 1}"
