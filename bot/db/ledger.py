"""The posted-message ledger: which part of which step of a run is in the thread as which message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from bot.db.base import StoreBase
from bot.db.schema import FINAL_STEP, STREAM_STEP, posted
from bot.db.scope import utc_now

Step = int | Literal["final", "stream"]
"""What a posted message belongs to: a grader iteration's number, the run's final messages, or
its streamed plan."""


@dataclass(frozen=True)
class PostedPart:
    """A part of a run's step that Slack took, as the ledger records it."""

    step: Step
    part: int
    message_ts: str


@dataclass(frozen=True)
class PostedMessage:
    """A thread message a run posted: which step and part of it, and its Slack ts."""

    run_id: int
    step: Step
    part: int
    message_ts: str
    posted_at: datetime


class LedgerStore(StoreBase):
    """What the runs have posted."""

    async def posted_messages(self, run_id: int) -> list[PostedMessage]:
        """What the run has posted so far, in the order it was posted."""
        query = select(posted).where(posted.c.run_id == run_id).order_by(posted.c.posted_at, posted.c.part)
        return [
            PostedMessage(
                run_id=row["run_id"],
                step=_step(row["iteration"]),
                part=row["part"],
                message_ts=row["message_ts"],
                posted_at=row["posted_at"],
            )
            for row in await self._rows(query)
        ]

    async def recorded_part(self, run_id: int, step: Step, part: int) -> str | None:
        """The Slack ts of part `part` of the run's `step`, if an attempt has recorded it."""
        query = select(posted.c.message_ts).where(
            posted.c.run_id == run_id, posted.c.iteration == str(step), posted.c.part == part
        )
        return await self._scalar(query)


def _step(iteration: str) -> Step:
    """A ledger row's step from its `posted.iteration`."""
    if iteration in (FINAL_STEP, STREAM_STEP):
        return FINAL_STEP if iteration == FINAL_STEP else STREAM_STEP
    return int(iteration)


def ledger_row(run_id: int, step: Step, part: int, message_ts: str) -> dict[str, Any]:
    """A ledger entry: part `part` of the run's `step` is in the thread as `message_ts`, from now."""
    return {
        "run_id": run_id,
        "iteration": str(step),
        "part": part,
        "message_ts": message_ts,
        "posted_at": utc_now(),
    }


@cache
def ledger_insert(postgres: bool) -> Any:
    """Insert a ledger entry (`ledger_row`) unless that part was recorded before; returns the run id
    if inserted. Built once per dialect."""
    upsert = postgresql.insert if postgres else sqlite.insert
    return upsert(posted).on_conflict_do_nothing().returning(posted.c.run_id)
