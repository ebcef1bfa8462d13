"""The shadow grader's grades (`shadow_grades`) and verdicts per criterion (`shadow_verdicts`).

`bot.shadow` decides which live iterations are graded in the shadow and reports them; this part
keeps what it graded, once per iteration, and reads it back for the report and the usage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_

from bot.db.base import StoreBase
from bot.db.schema import shadow_grades, shadow_verdicts
from bot.db.scope import in_scope, thread_columns, utc_now
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import NO_ENTERPRISE, Tenant


@dataclass(frozen=True)
class ShadowGrade:
    """One live iteration as the shadow grader graded it: its provenance, verdicts and cost."""

    thread: ThreadKey
    grading_run_id: str
    iteration: int
    model: str
    """The shadow model as it answered (as asked when it did not say)."""
    prompt_hash: str | None
    result: str
    """The evaluation's result (``grader_error``: it failed, and has no verdicts)."""
    evaluation: dict[str, Any]
    tokens: int
    usd: float | None
    """What its tokens cost; None when the price table does not know the model."""
    verdicts: dict[str, str]
    """The shadow grader's verdict per criterion name."""
    live_verdicts: dict[str, str]
    """The live grader's verdict per criterion name, on the same iteration."""


@dataclass(frozen=True)
class ShadowVerdictRow:
    """One criterion of one shadow-graded iteration, as the report reads it."""

    grading_run_id: str
    iteration: int
    criterion: str
    verdict: str
    live_verdict: str | None
    model: str
    created_at: datetime
    team: str
    channel: str
    enterprise: str = NO_ENTERPRISE


@dataclass(frozen=True)
class ShadowTally:
    """The shadow grades of a channel (or more) over a period, and what they cost."""

    grades: int
    errors: int
    """Of them, those without verdicts (`NO_VERDICTS`: the shadow grader failed)."""
    tokens: int
    usd: float
    """US dollars of the priced ones."""
    unpriced: int
    """Grades by a model the price table does not know (left out of `usd`)."""


NO_VERDICTS = ("grader_error", "failed")
"""The results of a grade without verdicts: its grader failed, or the rubric could not be graded."""

_VERDICT_COLUMNS = [
    *(shadow_verdicts.c[name] for name in ("grading_run_id", "iteration", "criterion", "verdict")),
    shadow_verdicts.c.live_verdict,
    shadow_grades.c.model,
    shadow_grades.c.created_at,
    *(shadow_verdicts.c[name] for name in ("team", "channel", "enterprise")),
]
"""The columns read into a ShadowVerdictRow."""


_ITERATION_KEY = (shadow_verdicts.c.grading_run_id, shadow_verdicts.c.iteration)
"""A shadow verdict's iteration."""


class ShadowStore(StoreBase):
    """The shadow grader's grades and verdicts."""

    async def shadowed_iterations(self, grading_run_id: str) -> set[int]:
        """The iterations of a grading run the shadow grader has graded already."""
        query = select(shadow_grades.c.iteration).where(shadow_grades.c.grading_run_id == grading_run_id)
        return {row["iteration"] for row in await self._rows(query)}

    async def record_shadow_grade(self, grade: ShadowGrade) -> bool:
        """Keep a shadow grade and its verdicts, once per iteration; False if it was kept before."""
        where = thread_columns(grade.thread)
        row = {
            **where,
            "grading_run_id": grade.grading_run_id,
            "iteration": grade.iteration,
            "model": grade.model,
            "prompt_hash": grade.prompt_hash,
            "result": grade.result,
            "evaluation": grade.evaluation,
            "tokens": grade.tokens,
            "usd": grade.usd,
            "created_at": utc_now(),
        }
        verdicts = [
            {
                **where,
                "grading_run_id": grade.grading_run_id,
                "iteration": grade.iteration,
                "criterion": criterion,
                "verdict": verdict,
                "live_verdict": grade.live_verdicts.get(criterion),
            }
            for criterion, verdict in grade.verdicts.items()
        ]
        async with self._write() as connection:
            inserted = await connection.execute(
                self._upsert(shadow_grades)
                .values(row)
                .on_conflict_do_nothing()
                .returning(shadow_grades.c.iteration)
            )
            if inserted.first() is None:
                return False
            if verdicts:
                await connection.execute(shadow_verdicts.insert(), verdicts)
        return True

    async def shadow_verdicts_in_channel(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> list[ShadowVerdictRow]:
        """The shadow verdicts of a channel (None: of every one), oldest grade first; from ``since`` on."""
        query = (
            select(*_VERDICT_COLUMNS)
            .join_from(
                shadow_verdicts,
                shadow_grades,
                tuple_(shadow_grades.c.grading_run_id, shadow_grades.c.iteration) == tuple_(*_ITERATION_KEY),
            )
            .where(*in_scope(shadow_grades, workspace, channel, since))
            .order_by(shadow_grades.c.created_at, *_ITERATION_KEY)
        )
        return [ShadowVerdictRow(**row) for row in await self._rows(query)]

    async def shadow_tally(
        self, workspace: Tenant | None, channel: str | None, since: datetime | None = None
    ) -> ShadowTally:
        """How many shadow grades a channel (None: every one) had from ``since`` on, and their cost."""
        query = select(
            func.count().label("grades"),
            func.count().filter(shadow_grades.c.result.in_(NO_VERDICTS)).label("errors"),
            func.coalesce(func.sum(shadow_grades.c.tokens), 0).label("tokens"),
            func.coalesce(func.sum(shadow_grades.c.usd), 0).label("usd"),
            func.count().filter(shadow_grades.c.usd.is_(None), shadow_grades.c.tokens > 0).label("unpriced"),
        ).where(*in_scope(shadow_grades, workspace, channel, since))
        (row,) = await self._rows(query)
        return ShadowTally(
            grades=int(row["grades"]),
            errors=int(row["errors"]),
            tokens=int(row["tokens"]),
            usd=float(row["usd"]),
            unpriced=int(row["unpriced"]),
        )
