"""The team's trusted disagreements as the grader's worked examples (calibration).

Calibration steers the grader, so no pair of accounts may steer it. A case (one criterion of one
iteration, one verdict) calibrates when it is trusted, checked each time the examples are used (so a
person who is no longer an editor no longer counts as one):

- with editors named (`bot.governance.editors`), an editor's disagreement on its own, or anyone's
  seconded by an editor, or the agreement of three distinct people;
- with none named (anyone may change grading), the agreement of two distinct people.

The example shows an editor's review when one made it (their comment kept however many second it),
else the newest; and each person makes at most one example per criterion in force (the newest), so
re-saving reviews cannot fill every slot. Other reviews still count in agreement figures.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from langgraph.runtime import Runtime

from bot.agent.worker import ThreadContext
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.review.verdicts import verdict_words
from bot.vocabulary.workspace import Workspace
from grading import CalibrationExample, Rubric
from grading.rubric import normalize_name

CALIBRATION_EXAMPLES = 5
"""Most team disagreements shown to the grader as worked examples, newest first. A few recent
cases steer the grader; many would crowd its prompt and weigh old judgements as much as new."""

CANDIDATE_ROWS = 200
"""Disagreeing reviews read to find the examples in force: cases need two or three agreeing rows,
and a person's older cases of a criterion are passed over, so more than the examples are read."""

AGREEING_PEOPLE = 3
"""Distinct people whose agreement makes an example without an editor among them (editors named)."""

AGREEING_WITHOUT_EDITORS = 2
"""Distinct people whose agreement makes an example where no editors are named."""


class EditorsNow(Protocol):
    """Who may change grading in a workspace, asked when the examples are used."""

    async def restricted(self, workspace: Workspace) -> bool:
        """Whether editors are named at all (otherwise anyone may change grading)."""
        ...

    async def is_editor(self, workspace: Workspace, user: str) -> bool:
        """Whether `user` is one of them now (False when none are named)."""
        ...


@dataclass(frozen=True)
class Trust:
    """Who counts as an editor for the examples being chosen, and whether editors are named."""

    restricted: bool
    editors: Collection[str] = ()

    @classmethod
    def recorded(cls, rows: Sequence[ReviewRow]) -> Trust:
        """From what each review recorded as it was saved (a replay, with no Slack to ask): editors
        count as named when some review was saved as an editor's."""
        editors = {row.reviewer for row in rows if row.editor}
        return cls(restricted=bool(editors), editors=editors)

    def trusts(self, reviewers: Collection[str]) -> bool:
        """Whether the agreement of these distinct people makes an example."""
        if not self.restricted:
            return len(reviewers) >= AGREEING_WITHOUT_EDITORS
        return len(reviewers) >= AGREEING_PEOPLE or any(r in self.editors for r in reviewers)


@dataclass(frozen=True)
class TeamExample:
    """One calibration example: the review it shows (an editor's if any, else the newest) and
    everyone whose review made it, the shown review's author first."""

    review: ReviewRow
    reviewers: tuple[str, ...]
    editor: bool = False
    """Whether the shown review is an editor's."""

    @property
    def made_by(self) -> str:
        """Who made it, for the grader: the reviewers' Slack ids and why their verdict is trusted."""
        names = " and ".join(self.reviewers)
        if len(self.reviewers) == 1:
            return f"{names}, a rubric editor"
        return f"{names}, agreeing" + (f" ({self.reviewers[0]} a rubric editor)" if self.editor else "")

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


def team_examples(
    rows: Sequence[ReviewRow], trust: Trust, limit: int = CALIBRATION_EXAMPLES
) -> list[TeamExample]:
    """The newest ``limit`` trusted cases of disagreeing reviews (``rows``, newest first), one per
    case and verdict, each person in at most one example per criterion."""
    cases: dict[tuple[str, int, str, str], list[ReviewRow]] = {}
    for row in rows:
        key = (row.grading_run_id, row.iteration, normalize_name(row.criterion), row.reviewer_verdict)
        cases.setdefault(key, []).append(row)
    examples: list[TeamExample] = []
    used: set[tuple[str, str]] = set()
    for (_, _, criterion, _), same in cases.items():
        reviewers = list(dict.fromkeys(r.reviewer for r in same))
        if not trust.trusts(reviewers) or any((r, criterion) in used for r in reviewers):
            continue
        shown = next((r for r in same if r.reviewer in trust.editors), same[0])
        makers = (shown.reviewer, *(r for r in reviewers if r != shown.reviewer))
        examples.append(TeamExample(shown, makers, editor=shown.reviewer in trust.editors))
        used.update((r, criterion) for r in reviewers)
        if len(examples) == limit:
            break
    return examples


async def trust_now(editors: EditorsNow, workspace: Workspace, rows: Sequence[ReviewRow]) -> Trust:
    """Who of the reviewers of ``rows`` is an editor now, asked once each."""
    if not await editors.restricted(workspace):
        return Trust(restricted=False)
    reviewers = dict.fromkeys(row.reviewer for row in rows)
    return Trust(True, {r for r in reviewers if await editors.is_editor(workspace, r)})


async def examples_in_force(
    store: Store, editors: EditorsNow, workspace: Workspace, channel: str, rubric_text: str | None
) -> list[TeamExample]:
    """What the grader is shown in the channel for ``rubric_text`` (None: any rubric): nothing when
    calibration is switched off there."""
    rows = await store.recent_disagreements(
        workspace, channel, rubric_text, limit=CANDIDATE_ROWS, calibrating_only=True
    )
    if not rows:  # no example to trust: who is an editor is not asked
        return []
    return team_examples(rows, await trust_now(editors, workspace, rows))


def calibration_source(
    store: Store, editors: EditorsNow
) -> Callable[[Rubric, Runtime[ThreadContext | None]], Awaitable[list[CalibrationExample]]]:
    """The grader's calibration source: the run's channel's latest trusted disagreements with this rubric,
    trusted as `editors` say as the run's first grading reads them (once a run: its iterations are
    graded against the same examples).

    No examples when calibration is switched off in the channel, or when a run has no `ThreadContext`
    (the terminal's `grade`, say).
    """

    async def examples(rubric: Rubric, runtime: Runtime[ThreadContext | None]) -> list[CalibrationExample]:
        where = runtime.context
        if where is None:
            return []
        found = await where.once(
            ("calibration", rubric.text),
            partial(examples_in_force, store, editors, where.workspace, where.channel, rubric.text),
        )
        return [example.for_grader() for example in found]

    return examples
