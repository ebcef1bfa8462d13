"""Each channel's trust level (`/rubric trust`, every change kept) and the confidence thresholds
recalibrated from its trusted reviews, one row per pass/fail criterion and grader model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select

from bot.db.base import StoreBase
from bot.db.schema import trust_levels, trust_thresholds
from bot.db.scope import channel_columns, in_channel, in_scope, utc_now
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class TrustLevel:
    """A change of a channel's trust level: the agreement its acted-on verdicts must reach (None:
    trust off), who set it and when."""

    target: float | None
    set_by: str
    created_at: datetime


@dataclass(frozen=True)
class TrustThreshold:
    """One criterion's threshold in a channel, as last recalibrated: None when no confidence can
    promise ``target`` at ``risk`` from its ``reviews`` trusted reviews."""

    grader_model: str
    criterion_text: str
    name: str
    target: float
    risk: float
    threshold: float | None
    reviews: int


_LEVEL_COLUMNS = [trust_levels.c[name] for name in TrustLevel.__dataclass_fields__]
_THRESHOLD_COLUMNS = [trust_thresholds.c[name] for name in TrustThreshold.__dataclass_fields__]


class TrustStore(StoreBase):
    """Trust levels and thresholds per channel."""

    async def set_trust_level(
        self, workspace: Workspace, channel: str, target: float | None, by: str
    ) -> None:
        """Record ``by``'s change of the channel's trust level (None: off); the thresholds of an
        earlier level go with it, to be recalibrated at the new one."""
        async with self._write() as connection:
            await connection.execute(
                insert(trust_levels).values(
                    **channel_columns(workspace, channel), target=target, set_by=by, created_at=utc_now()
                )
            )
            await connection.execute(
                delete(trust_thresholds).where(*in_channel(trust_thresholds, workspace, channel))
            )

    async def trust_levels(self, workspace: Workspace | None, channel: str, limit: int) -> list[TrustLevel]:
        """The channel's latest ``limit`` trust level changes, newest first (the first is in force);
        None for ``workspace``: the channel's in whichever workspace (the terminal's report)."""
        query = (
            select(*_LEVEL_COLUMNS)
            .where(*in_scope(trust_levels, workspace, channel, None))
            .order_by(trust_levels.c.created_at.desc(), trust_levels.c.change_id.desc())
            .limit(limit)
        )
        return [TrustLevel(**row) for row in await self._rows(query)]

    async def save_trust_thresholds(
        self, workspace: Workspace, channel: str, thresholds: Sequence[TrustThreshold]
    ) -> None:
        """Replace the channel's thresholds with ``thresholds`` in one transaction."""
        now = utc_now()
        rows = [{**channel_columns(workspace, channel), **asdict(t), "updated_at": now} for t in thresholds]
        async with self._write() as connection:
            await connection.execute(
                delete(trust_thresholds).where(*in_channel(trust_thresholds, workspace, channel))
            )
            if rows:
                await connection.execute(insert(trust_thresholds), rows)

    async def trust_thresholds(self, workspace: Workspace | None, channel: str) -> list[TrustThreshold]:
        """The channel's thresholds as last recalibrated (None for ``workspace``: as `trust_levels`)."""
        query = select(*_THRESHOLD_COLUMNS).where(*in_scope(trust_thresholds, workspace, channel, None))
        return [TrustThreshold(**row) for row in await self._rows(query)]
