"""The posted-message ledger: which part of which step of a run is in the thread as which message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple

from sqlalchemy import Connection, bindparam, delete, select
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


POSTING = ""
"""The ``message_ts`` of a ledger entry recorded before its message is posted (see
`LedgerStore.intend_post`): Slack may have it, its ts not recorded yet."""


class LedgerStore(StoreBase):
    """What the runs have posted."""

    async def intend_post(self, run_id: int, step: Step, part: int) -> str | None:
        """Record that an attempt is about to post part `part` of the run's `step`, before it does:
        None if no attempt recorded it before (post it, then `record_posted`); else the ts recorded
        (`POSTING` if an attempt was posting it and never recorded its ts: a database that failed
        after Slack took the message, say). A part recorded either way is not posted again: a
        failed ledger write never shows a message twice."""
        row = ledger_row(run_id, step, part, POSTING)
        intent = _intent_insert(self._postgres)

        def intend(connection: Connection) -> str | None:
            if connection.execute(intent, row).first() is not None:
                return None
            return str(connection.scalar(_RECORDED_TS, row))

        return await self.in_thread(intend)

    async def withdraw_post(self, run_id: int, step: Step, part: int) -> None:
        """Forget an intent (`intend_post`) whose message Slack did not take: a later attempt posts it."""
        async with self._write() as connection:
            await connection.execute(_WITHDRAW, {"run_id": run_id, "iteration": str(step), "part": part})

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
        parameters = {"run_id": run_id, "lease": lease, "iteration": str(step), "part": part}
        holds, recorded_ts = await self.in_thread(
            lambda connection: connection.execute(_POST_STANDING, parameters).one(), writes=False
        )
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
    """Insert a ledger entry (`ledger_row`) unless that part was recorded before, or complete the
    intent recorded for it (`POSTING`) with its ts; returns the run id if either. Built once per
    dialect."""
    upsert = (postgresql.insert if postgres else sqlite.insert)(posted)
    return upsert.on_conflict_do_update(
        index_elements=[posted.c.run_id, posted.c.iteration, posted.c.part],
        set_={"message_ts": upsert.excluded.message_ts, "posted_at": upsert.excluded.posted_at},
        where=posted.c.message_ts == POSTING,
    ).returning(posted.c.run_id)


@cache
def _intent_insert(postgres: bool) -> Any:
    """Insert a ledger entry (`ledger_row`) unless that part was recorded before; returns the run
    id if inserted. Built once per dialect."""
    upsert = postgresql.insert if postgres else sqlite.insert
    return upsert(posted).on_conflict_do_nothing().returning(posted.c.run_id)


_WITHDRAW = delete(posted).where(
    *bound(posted, "run_id", "iteration", "part"), posted.c.message_ts == POSTING
)
"""Delete one part's intent, unless its ts was recorded since."""

_RECORDED_TS = select(posted.c.message_ts).where(*bound(posted, "run_id", "iteration", "part"))
"""The ts recorded for one part of a run's step (parameters as `ledger_row`'s)."""
