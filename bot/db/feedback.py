"""People's 👍/👎 on runs' final answers (`asker_feedback`): saved per person (the last click
counts), tallied per channel beside how the grader ended the runs, and read for the export.

`bot.db.store` runs these statements; `bot.feedback` renders the buttons and reports the tallies.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select

from bot.db.base import StoreBase
from bot.db.schema import asker_feedback, evaluations, posted, runs
from bot.db.scope import in_scope, in_workspace, utc_now
from bot.vocabulary.workspace import Tenant, Workspace

SATISFIED = "satisfied"
"""The status of a run whose grader passed its answer (`grading.Status`)."""


@dataclass(frozen=True)
class FeedbackTally:
    """A channel's feedback over a period, beside how the grader ended the runs it is about."""

    graded_runs: int
    """Runs that ended with a grading status (their answer was graded) in the period."""
    satisfied_runs: int
    """Of those, runs the grader passed."""
    votes: int
    """People's 👍/👎 on final answers of the period's runs (one per person and run)."""
    thumbs_up: int
    votes_on_satisfied: int
    """Votes on the answers of runs the grader passed."""
    thumbs_down_on_satisfied: int
    """👎 on answers the grader passed: the grader and the askers disagree."""


@dataclass(frozen=True)
class ExportedFeedback:
    """One person's vote on a run's final answer, as the export carries it."""

    grading_run_id: str
    person: str
    positive: bool
    at: datetime


GRADED_STATUSES = ("satisfied", "max_iterations_reached", "failed", "grader_error")
"""Run statuses that say how a grading ended (the ones a pass rate is over)."""


class FeedbackStore(StoreBase):
    """The feedback on final answers (see the module docstring)."""

    async def record_feedback(
        self, workspace: Workspace, run_id: int, person: str, *, positive: bool
    ) -> bool:
        """Save `person`'s 👍 (`positive`) or 👎 on run `run_id`'s answer, replacing their earlier
        one; False (nothing saved) when the workspace has no such run (a button's value is the
        clicker's to forge)."""
        async with self._write() as connection:
            found = (
                await connection.execute(
                    select(runs.c.channel, runs.c.thread_ts).where(
                        runs.c.run_id == run_id, *in_workspace(runs, workspace)
                    )
                )
            ).first()
            if found is None:
                return False
            row = {
                "run_id": run_id,
                "person": person,
                "enterprise": workspace.enterprise,
                "team": workspace.team,
                "channel": found.channel,
                "thread_ts": found.thread_ts,
                "positive": positive,
                "created_at": utc_now(),
            }
            statement = self._upsert(asker_feedback).values(row)
            changed = {"positive": statement.excluded.positive, "created_at": statement.excluded.created_at}
            await connection.execute(
                statement.on_conflict_do_update(index_elements=["run_id", "person"], set_=changed)
            )
        return True

    async def feedback_tally(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None
    ) -> FeedbackTally:
        """The feedback on the runs a channel (None: every one) started from `since` on (None: ever)."""
        scope = in_scope(runs, workspace, channel, since, time=runs.c.started_at)
        satisfied = runs.c.status == SATISFIED
        run_counts: list[Any] = [
            func.count().filter(runs.c.status.in_(GRADED_STATUSES)).label("graded_runs"),
            func.count().filter(satisfied).label("satisfied_runs"),
        ]
        vote_counts: list[Any] = [
            func.count().label("votes"),
            func.count().filter(asker_feedback.c.positive).label("thumbs_up"),
            func.count().filter(satisfied).label("votes_on_satisfied"),
            func.count().filter(satisfied, ~asker_feedback.c.positive).label("thumbs_down_on_satisfied"),
        ]
        graded = select(*run_counts).where(*scope)
        votes = (
            select(*vote_counts)
            .select_from(asker_feedback.join(runs, asker_feedback.c.run_id == runs.c.run_id))
            .where(*scope)
        )
        (runs_row,) = await self._rows(graded)
        (votes_row,) = await self._rows(votes)
        return FeedbackTally(**runs_row, **votes_row)

    async def exported_feedback(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None
    ) -> list[ExportedFeedback]:
        """The votes on the answers of graded runs whose evaluations were posted in scope, with the
        grading run each belongs to (the export's ``run_id``), oldest first."""
        query = (
            select(
                evaluations.c.grading_run_id,
                asker_feedback.c.person,
                asker_feedback.c.positive,
                asker_feedback.c.created_at.label("at"),
            )
            .distinct()
            .select_from(
                asker_feedback.join(posted, posted.c.run_id == asker_feedback.c.run_id).join(
                    evaluations,
                    and_(
                        evaluations.c.message_ts == posted.c.message_ts,
                        evaluations.c.channel == asker_feedback.c.channel,
                        evaluations.c.team == asker_feedback.c.team,
                    ),
                )
            )
            .where(*in_scope(evaluations, workspace, channel, since))
            .order_by(asker_feedback.c.created_at)
        )
        return [ExportedFeedback(**row) for row in await self._rows(query)]
