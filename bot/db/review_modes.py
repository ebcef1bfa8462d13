"""How each channel's iterations are reviewed (`/rubric review`, every change kept): blind or not, and
the share of reviewed iterations a second person is asked to review."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, insert, select

from bot.db.base import StoreBase
from bot.db.schema import review_modes
from bot.db.scope import channel_columns, in_scope, utc_now
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class ReviewModes:
    """A channel's review modes: ``blind`` (the form opens with nothing pre-set and the grader's
    verdicts hidden, and *Agree* is *Review…*) and ``double_share``, the share of reviewed
    iterations a second person is asked to review (0: none)."""

    blind: bool = False
    double_share: float = 0.0


@dataclass(frozen=True)
class ReviewModesChange:
    """A change of a channel's review modes: the modes set, who set them and when."""

    modes: ReviewModes
    set_by: str
    created_at: datetime


class ReviewModeStore(StoreBase):
    """Review modes per channel."""

    async def set_review_modes(self, workspace: Workspace, channel: str, modes: ReviewModes, by: str) -> None:
        """Record ``by``'s change of the channel's review modes to ``modes``."""
        async with self._write() as connection:
            await connection.execute(
                insert(review_modes).values(
                    **channel_columns(workspace, channel),
                    blind=modes.blind,
                    double_share=modes.double_share,
                    set_by=by,
                    created_at=utc_now(),
                )
            )

    async def review_mode_changes(
        self, workspace: Workspace | None, channel: str, limit: int
    ) -> list[ReviewModesChange]:
        """The channel's latest ``limit`` changes of its review modes, newest first (the first is in
        force); None for ``workspace``: the channel's in whichever workspace (the terminal's report)."""
        return [
            ReviewModesChange(
                ReviewModes(bool(row["blind"]), row["double_share"]), row["set_by"], row["created_at"]
            )
            for row in await self._rows(mode_changes(workspace, channel, limit))
        ]

    async def review_modes(self, workspace: Workspace, channel: str) -> ReviewModes:
        """The channel's review modes in force (the defaults until changed)."""
        changes = await self.review_mode_changes(workspace, channel, 1)
        return changes[0].modes if changes else ReviewModes()


def mode_changes(workspace: Workspace | None, channel: str, limit: int) -> Select[Any]:
    """The query of `ReviewModeStore.review_mode_changes`."""
    table = review_modes
    return (
        select(table.c.blind, table.c.double_share, table.c.set_by, table.c.created_at)
        .where(*in_scope(table, workspace, channel, None))
        .order_by(table.c.created_at.desc(), table.c.change_id.desc())
        .limit(limit)
    )


def modes_in_force(connection: Connection, workspace: Workspace, channel: str) -> ReviewModes:
    """The channel's review modes in force, read in the caller's transaction (a run's start)."""
    latest = connection.execute(mode_changes(workspace, channel, 1)).first()
    return ReviewModes(bool(latest.blind), latest.double_share) if latest else ReviewModes()
