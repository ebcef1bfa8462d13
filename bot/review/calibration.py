"""The team's disagreements as the grader's worked examples (calibration)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from langgraph.runtime import Runtime

from bot.agent import ThreadContext
from bot.db.store import ReviewRow, Store
from bot.review.verdicts import verdict_words
from grading import CalibrationExample, Rubric

CALIBRATION_EXAMPLES = 5
"""Most team disagreements shown to the grader as worked examples, newest first. A few recent
cases steer the grader; many would crowd its prompt and weigh old judgements as much as new."""


def calibration_examples(rows: Sequence[ReviewRow]) -> list[CalibrationExample]:
    """The team's disagreements as the grader's worked examples; scores read as ``2/5``."""
    return [
        CalibrationExample(
            criterion=row.criterion,
            grader_verdict=verdict_words(row.grader_verdict),
            team_verdict=verdict_words(row.reviewer_verdict),
            comment=row.comment,
        )
        for row in rows
    ]


def calibration_source(
    store: Store,
) -> Callable[[Rubric, Runtime[ThreadContext | None]], Awaitable[list[CalibrationExample]]]:
    """The grader's calibration source: the run's channel's latest disagreements with this rubric.

    No examples when calibration is switched off in the channel, or when a run has no `ThreadContext`
    (the terminal's `grade`, say).
    """

    async def examples(rubric: Rubric, runtime: Runtime[ThreadContext | None]) -> list[CalibrationExample]:
        where = runtime.context
        if where is None:
            return []
        rows = await store.recent_disagreements(
            where.workspace, where.channel, rubric.text, limit=CALIBRATION_EXAMPLES, calibrating_only=True
        )
        return calibration_examples(rows)

    return examples
