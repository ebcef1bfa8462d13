"""Which reviews may calibrate the grader, as SQL: those whose case no editor dropped; and the record
of the drops (`calibration_drops`). Which of them are trusted is `bot.review.calibration`'s to decide.

`bot.db.store` builds its calibration queries from these conditions and runs the statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, exists, select

from bot.db.schema import calibration_drops, reviews

_SAME_CASE = ("enterprise", "team", "grading_run_id", "iteration", "criterion")
"""The columns naming a reviewed case: one criterion of one iteration."""


def not_dropped() -> Any:
    """No editor took the review's case out of calibration."""
    return ~exists().where(*(calibration_drops.c[name] == reviews.c[name] for name in _SAME_CASE))


@dataclass(frozen=True)
class CalibrationDrop:
    """A case an editor took out of calibration: which example (review) it was shown as, its
    criterion, who dropped it and when."""

    review_id: int
    criterion: str
    dropped_by: str
    created_at: datetime
    replay_summary: str | None = None
    """The replay the drop was applied after, in one line; None where none was possible."""


DROP_COLUMNS = [calibration_drops.c[name] for name in CalibrationDrop.__dataclass_fields__]
"""The calibration_drops columns read into a CalibrationDrop."""


def drops_query(conditions: list[Any], limit: int) -> Select[Any]:
    """The latest drops matching ``conditions`` (a channel's), newest first."""
    return (
        select(*DROP_COLUMNS)
        .where(and_(*conditions))
        .order_by(calibration_drops.c.created_at.desc())
        .limit(limit)
    )


def case_of(review: Any) -> dict[str, Any]:
    """The columns of a drop that name the case of ``review`` (a row of ``reviews``) and its channel."""
    return {name: review[name] for name in (*_SAME_CASE, "channel")} | {"review_id": review["review_id"]}
