"""The team's trusted disagreements as the grader's worked examples (calibration).

Only trusted reviews calibrate: a rubric editor's, or one a second reviewer of the same criterion
agrees with (see `bot.db.calibration`); other reviews still count in agreement figures. Two agreeing
reviews of one case are one example, made by both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from langgraph.runtime import Runtime

from bot.agent.worker import ThreadContext
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.review.verdicts import verdict_words
from bot.vocabulary.workspace import Workspace
from grading import CalibrationExample, Rubric

CALIBRATION_EXAMPLES = 5
"""Most team disagreements shown to the grader as worked examples, newest first. A few recent
cases steer the grader; many would crowd its prompt and weigh old judgements as much as new."""

ROWS_PER_EXAMPLE = 2
"""Reviews read per example wanted: a case seconded by another reviewer is two rows."""


@dataclass(frozen=True)
class TeamExample:
    """One calibration example: the newest review of its case, and everyone whose review made it."""

    review: ReviewRow
    reviewers: tuple[str, ...]

    @property
    def made_by(self) -> str:
        """Who made it, for the grader: the reviewers' Slack ids and why their verdict is trusted."""
        if len(self.reviewers) > 1:
            return f"{' and '.join(self.reviewers)}, agreeing"
        return f"{self.reviewers[0]}, a rubric editor"

    def for_grader(self) -> CalibrationExample:
        """The example as the grader sees it; scores read as ``2/5``."""
        row = self.review
        return CalibrationExample(
            criterion=row.criterion,
            grader_verdict=verdict_words(row.grader_verdict),
            team_verdict=verdict_words(row.reviewer_verdict),
            comment=row.comment,
            made_by=self.made_by,
            id=str(row.review_id),
        )


def team_examples(rows: Sequence[ReviewRow], limit: int = CALIBRATION_EXAMPLES) -> list[TeamExample]:
    """The newest ``limit`` cases of trusted disagreeing reviews (newest first), one per case and verdict."""
    cases: dict[tuple[str, int, str, str], list[ReviewRow]] = {}
    for row in rows:
        cases.setdefault((row.grading_run_id, row.iteration, row.criterion, row.reviewer_verdict), []).append(
            row
        )
    examples = [
        TeamExample(same[0], tuple(dict.fromkeys(r.reviewer for r in same))) for same in cases.values()
    ]
    return examples[:limit]


async def examples_in_force(
    store: Store, workspace: Workspace, channel: str, rubric_text: str | None
) -> list[TeamExample]:
    """What the grader is shown in the channel for ``rubric_text`` (None: any rubric): nothing when
    calibration is switched off there."""
    rows = await store.recent_disagreements(
        workspace, channel, rubric_text, limit=CALIBRATION_EXAMPLES * ROWS_PER_EXAMPLE, calibrating_only=True
    )
    return team_examples(rows)


def calibration_source(
    store: Store,
) -> Callable[[Rubric, Runtime[ThreadContext | None]], Awaitable[list[CalibrationExample]]]:
    """The grader's calibration source: the run's channel's latest trusted disagreements with this rubric.

    No examples when calibration is switched off in the channel, or when a run has no `ThreadContext`
    (the terminal's `grade`, say).
    """

    async def examples(rubric: Rubric, runtime: Runtime[ThreadContext | None]) -> list[CalibrationExample]:
        where = runtime.context
        if where is None:
            return []
        found = await examples_in_force(store, where.workspace, where.channel, rubric.text)
        return [example.for_grader() for example in found]

    return examples
