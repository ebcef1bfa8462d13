"""The posted-message ledger: which part of which step of a run is in the thread as which message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from bot.db.base import StoreBase
from bot.db.schema import FINAL_STEP, STREAM_STEP, posted, runs
from bot.db.scope import bound, utc_now

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


class PostStanding(NamedTuple):
    """Where an attempt stands before posting a part of its run (see `LedgerStore.post_standing`)."""

    holds_run: bool
    """Whether the attempt's lease is still the run's (no other attempt has taken it over)."""
    recorded_ts: str | None
    """The part's Slack ts if an attempt has recorded it (None: not in the thread yet, as far as
    the ledger knows)."""


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

    async def post_standing(self, run_id: int, lease: str, step: Step, part: int) -> PostStanding:
        """In one query: whether `lease` (from `take_run`) is still the run's, and the Slack ts of
        part `part` of its `step` if an attempt has recorded it."""
        async with self._turns, self._reader.connect() as connection:
            found = await connection.execute(
                _POST_STANDING, {"run_id": run_id, "lease": lease, "iteration": str(step), "part": part}
            )
            holds, recorded_ts = found.one()
        return PostStanding(bool(holds), recorded_ts)


_POST_STANDING = select(
    runs.c.lease == bindparam("lease"),
    select(posted.c.message_ts).where(*bound(posted, "run_id", "iteration", "part")).scalar_subquery(),
).where(runs.c.run_id == bindparam("run_id"))


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
