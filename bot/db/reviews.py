"""Team reviews of the grader's verdicts, and calibration (the grader reading the channel's
disagreements) switched on or off per channel.

A review save locks the reviewed iteration (``SELECT … FOR UPDATE`` of its evaluation row on
PostgreSQL, the write lock on SQLite), and so does a tally read for refreshing its message (see
`ReviewStore.locked_reviews`), so they take turns across processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal
from weakref import WeakValueDictionary

from sqlalchemy import Select, bindparam, delete, exists, false, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.db import calibration
from bot.db.base import StoreBase
from bot.db.database import Database
from bot.db.schema import calibration_drops, channel_settings, evaluations, reviews
from bot.db.scope import (
    CHANNEL_KEYS,
    bound,
    channel_columns,
    in_channel,
    in_scope,
    in_workspace,
    of_iteration,
    thread_columns,
    utc_now,
)
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.verdicts import Verdict
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace

ReviewVia = Literal["agree", "form", "blind"]
"""How a review was given: one click on *Agree* (every verdict of the grader accepted), the form
pre-set to the grader's verdicts, or the blind form (nothing pre-set, the grader's verdicts hidden)."""


@dataclass(frozen=True)
class ReviewVerdict:
    """A reviewer's verdict on one criterion, beside the grader's."""

    criterion: str
    grader_verdict: Verdict
    reviewer_verdict: Verdict
    comment: str = ""


@dataclass(frozen=True)
class ReviewRow:
    """One stored review of one criterion of one iteration by one reviewer."""

    team: str
    channel: str
    thread_ts: str
    grading_run_id: str
    iteration: int
    criterion: str
    grader_verdict: Verdict
    reviewer_verdict: Verdict
    comment: str
    reviewer: str
    created_at: datetime
    enterprise: str = NO_ENTERPRISE
    review_id: int = 0
    """The review's number (0 before it is stored); a calibration example's id."""
    editor: bool = False
    """Whether the reviewer could change the channel's grading when they reviewed."""
    via: ReviewVia = "form"
    """How the review was given."""

    @property
    def thread(self) -> ThreadKey:
        """The thread the reviewed evaluation message is in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)

    @property
    def disagrees(self) -> bool:
        """Whether the reviewer's verdict differs from the grader's."""
        return self.reviewer_verdict != self.grader_verdict


_REVIEW_COLUMNS = [reviews.c[name] for name in ReviewRow.__dataclass_fields__]
"""The reviews columns read into a ReviewRow."""


class ReviewStore(StoreBase):
    """Reviews of iterations, and each channel's calibration switch."""

    def __init__(self, engine: AsyncEngine, database: Database | None = None) -> None:
        super().__init__(engine, database)
        self._refreshes: WeakValueDictionary[tuple[str, int], asyncio.Lock] = WeakValueDictionary()

    async def save_review(
        self,
        thread: ThreadKey,
        grading_run_id: str,
        iteration: int,
        reviewer: str,
        verdicts: Sequence[ReviewVerdict],
        *,
        editor: bool = False,
        via: ReviewVia = "form",
    ) -> None:
        """Store a reviewer's verdicts on an iteration, replacing their earlier review of it;
        ``editor``: whether they may change the channel's grading (see `ReviewRow.editor`); ``via``:
        how they gave it.

        It waits for a message refresh of the same iteration (see :meth:`locked_reviews`) to end.
        """
        now = utc_now()
        rows = [
            {
                **thread_columns(thread),
                "grading_run_id": grading_run_id,
                "iteration": iteration,
                "criterion": verdict.criterion,
                "grader_verdict": verdict.grader_verdict,
                "reviewer_verdict": verdict.reviewer_verdict,
                "comment": verdict.comment,
                "reviewer": reviewer,
                "created_at": now,
                "editor": editor,
                "via": via,
            }
            for verdict in verdicts
        ]
        async with self._write() as connection:
            await _lock_iteration(connection, grading_run_id, iteration)
            await connection.execute(
                delete(reviews).where(
                    *in_workspace(reviews, thread.workspace),
                    of_iteration(reviews, grading_run_id, iteration),
                    reviews.c.reviewer == reviewer,
                )
            )
            if rows:
                await connection.execute(insert(reviews), rows)

    @asynccontextmanager
    async def locked_reviews(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> AsyncIterator[list[ReviewRow]]:
        """Every review of the workspace's iteration, with the iteration locked until the block ends.

        Other refreshes of the same iteration wait meanwhile, so a refresh that updates the
        iteration's message inside the block is never overtaken by one that read fewer reviews.
        On PostgreSQL the lock is the evaluation row's (``FOR UPDATE``): refreshes and saves in
        every process wait for it. SQLite serves one process, whose refreshes take turns on a lock
        of this Store; holding the file's write lock instead would stall every other write
        (checkpoints included) for as long as the block talks to Slack.
        """
        if not self._postgres:
            async with self._refreshes.setdefault((grading_run_id, iteration), asyncio.Lock()):
                yield await self.reviews_for_iteration(workspace, grading_run_id, iteration)
            return
        async with self._write() as connection:
            await _lock_iteration(connection, grading_run_id, iteration)
            yield await self._reviews_of_iteration(connection, workspace, grading_run_id, iteration)

    async def reviews_for_iteration(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> list[ReviewRow]:
        """Every reviewer's verdicts on one iteration in the workspace, oldest review first."""
        async with self._turns, self._engine.connect() as connection:
            return await self._reviews_of_iteration(connection, workspace, grading_run_id, iteration)

    async def reviews_in_channel(
        self,
        workspace: Workspace | None,
        channel: str | None,
        since: datetime | None = None,
        *,
        undropped_only: bool = False,
    ) -> list[ReviewRow]:
        """The channel's reviews, oldest first; only those made at or after ``since`` if given, and
        with ``undropped_only`` only those whose case no editor dropped from calibration.

        ``None`` for ``workspace`` or ``channel`` matches every one (the terminal report may span them).
        """
        query = select(*_REVIEW_COLUMNS).where(*in_scope(reviews, workspace, channel, since))
        if undropped_only:
            query = query.where(calibration.not_dropped())
        query = query.order_by(reviews.c.created_at, reviews.c.reviewer, reviews.c.criterion)
        return [ReviewRow(**row) for row in await self._rows(query)]

    async def recent_disagreements(
        self,
        workspace: Workspace,
        channel: str,
        rubric_text: str | None = None,
        limit: int = 5,
        *,
        calibrating_only: bool = False,
        undropped_only: bool = False,
    ) -> list[ReviewRow]:
        """The channel's latest reviews that differ from the grader, newest first.

        With ``rubric_text`` only those of evaluations graded against that exact rubric. With
        ``undropped_only`` only those of cases no editor dropped (`bot.db.calibration`); which of
        them are trusted enough to calibrate is `bot.review.calibration`'s to decide. ``calibrating_only``
        is ``undropped_only`` and none at all if calibration is switched off in the channel: the
        grader reads its candidates in one query.
        """
        query = _disagreements_query(
            rubric_text is not None, calibrating_only, undropped_only or calibrating_only
        )
        parameters = {**channel_columns(workspace, channel), "rubric_text": rubric_text, "limit": limit}
        return [ReviewRow(**row) for row in await self._rows(query, parameters)]

    @staticmethod
    async def _reviews_of_iteration(
        connection: AsyncConnection, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> list[ReviewRow]:
        query = (
            select(*_REVIEW_COLUMNS)
            .where(*in_workspace(reviews, workspace), of_iteration(reviews, grading_run_id, iteration))
            .order_by(reviews.c.created_at, reviews.c.reviewer, reviews.c.criterion)
        )
        result = await connection.execute(query)
        return [ReviewRow(**row) for row in result.mappings()]

    async def set_calibration(self, workspace: Workspace, channel: str, on: bool) -> None:
        """Switch grader calibration from the team's reviews on or off for the channel."""
        await self._put_channel_row(
            channel_settings, workspace, channel, {"calibration": on, "updated_at": utc_now()}
        )

    async def calibration_enabled(self, workspace: Workspace, channel: str) -> bool:
        """Whether calibration is on for the channel (on unless switched off)."""
        table = channel_settings
        value = await self._scalar(select(table.c.calibration).where(*in_channel(table, workspace, channel)))
        return value is None or bool(value)

    async def drop_calibration(
        self, workspace: Workspace, channel: str, review_id: int, by: str, replay_summary: str | None = None
    ) -> ReviewRow | None:
        """Take the case of the channel's review ``review_id`` out of calibration, recorded as ``by``'s
        with the one line of the replay it was applied after (`bot.proposals`); the review, or None if
        the channel has no such review or its case was dropped already."""
        async with self._write() as connection:
            found = await connection.execute(
                select(*_REVIEW_COLUMNS).where(
                    *in_channel(reviews, workspace, channel), reviews.c.review_id == review_id
                )
            )
            row = found.mappings().first()
            if row is None:
                return None
            dropped = await connection.execute(
                self._upsert(calibration_drops)
                .values(
                    calibration.case_of(row)
                    | {"dropped_by": by, "created_at": utc_now(), "replay_summary": replay_summary}
                )
                .on_conflict_do_nothing()
                .returning(calibration_drops.c.review_id)
            )
            return ReviewRow(**row) if dropped.first() is not None else None

    async def calibration_drops(
        self, workspace: Workspace, channel: str, limit: int
    ) -> list[calibration.CalibrationDrop]:
        """The channel's latest drops from calibration, newest first."""
        query = calibration.drops_query(in_channel(calibration_drops, workspace, channel), limit)
        return [calibration.CalibrationDrop(**row) for row in await self._rows(query)]


@cache
def _disagreements_query(of_rubric: bool, calibrating_only: bool, undropped_only: bool) -> Select[Any]:
    """A channel's latest reviews that differ from the grader (see `Store.recent_disagreements`),
    built once for each choice; parameters: the channel's columns, ``rubric_text``, ``limit``."""
    disagreeing = reviews.c.reviewer_verdict != reviews.c.grader_verdict
    query = select(*_REVIEW_COLUMNS).where(*bound(reviews, *CHANNEL_KEYS), disagreeing)
    if undropped_only:
        query = query.where(calibration.not_dropped())
    if calibrating_only:
        settings = channel_settings
        query = query.where(
            ~exists().where(*bound(settings, *CHANNEL_KEYS), settings.c.calibration.is_(false()))
        )
    if of_rubric:
        query = query.where(
            exists().where(
                evaluations.c.enterprise == reviews.c.enterprise,
                evaluations.c.team == reviews.c.team,
                evaluations.c.grading_run_id == reviews.c.grading_run_id,
                evaluations.c.iteration == reviews.c.iteration,
                evaluations.c.rubric_text == bindparam("rubric_text"),
            )
        )
    return query.order_by(reviews.c.created_at.desc()).limit(bindparam("limit"))


async def _lock_iteration(connection: AsyncConnection, grading_run_id: str, iteration: int) -> None:
    """Lock the iteration's evaluation row until the transaction ends (SQLite: already locked)."""
    query = select(evaluations.c.iteration).where(of_iteration(evaluations, grading_run_id, iteration))
    await connection.execute(query.with_for_update())
