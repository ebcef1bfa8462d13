"""Channel rubrics and their history: the default rubric of each channel, and every version of it.
A change numbers its version under a lock of the channel, so concurrent writers cannot take the same
number.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.base import StoreBase
from bot.db.schema import channel_rubric_versions, channel_rubrics
from bot.db.scope import (
    CHANNEL_KEYS,
    bound,
    channel_columns,
    in_channel,
    lock_scope,
    transaction_lock,
    utc_now,
    workspace_columns,
)
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class RubricVersion:
    """One change of a channel's default rubric."""

    version: int
    rubric_text: str | None
    """The rubric set; None where the change cleared it."""
    set_by: str
    created_at: datetime


_VERSION_COLUMNS = [channel_rubric_versions.c[name] for name in RubricVersion.__dataclass_fields__]
"""The channel_rubric_versions columns read into a RubricVersion."""


class RubricStore(StoreBase):
    """Each channel's default rubric and its versions."""

    async def set_channel_rubric(
        self, workspace: Workspace, channel: str, text: str, user: str
    ) -> RubricVersion:
        """Set (or replace) the channel's default rubric for new conversations; the version recorded."""
        async with self._write() as connection:
            await self._put_channel_row(
                channel_rubrics,
                workspace,
                channel,
                {"rubric_text": text, "set_by": user, "updated_at": utc_now()},
                connection,
            )
            return await self._add_rubric_version(connection, workspace, channel, text, user)

    async def get_channel_rubric(self, workspace: Workspace, channel: str) -> str | None:
        """The channel's default rubric text, or None."""
        return await self._scalar(CHANNEL_RUBRIC, channel_columns(workspace, channel))

    async def clear_channel_rubric(
        self, workspace: Workspace, channel: str, user: str
    ) -> RubricVersion | None:
        """Remove the channel's default rubric; the version recorded, None (recording none) if it had none."""
        table = channel_rubrics
        async with self._write() as connection:
            result = await connection.execute(delete(table).where(*in_channel(table, workspace, channel)))
            if result.rowcount == 0:
                return None
            return await self._add_rubric_version(connection, workspace, channel, None, user)

    async def rubric_versions(self, workspace: Workspace, channel: str, limit: int) -> list[RubricVersion]:
        """The channel's latest `limit` default-rubric versions, newest first."""
        table = channel_rubric_versions
        query = (
            select(*_VERSION_COLUMNS)
            .where(*in_channel(table, workspace, channel))
            .order_by(table.c.version.desc())
            .limit(limit)
        )
        return [RubricVersion(**row) for row in await self._rows(query)]

    async def rubric_version(self, workspace: Workspace, channel: str, version: int) -> RubricVersion | None:
        """Version ``version`` of the channel's default rubric, or None if there is no such version."""
        table = channel_rubric_versions
        query = select(*_VERSION_COLUMNS).where(
            *in_channel(table, workspace, channel), table.c.version == version
        )
        rows = await self._rows(query)
        return RubricVersion(**rows[0]) if rows else None

    async def _add_rubric_version(
        self, connection: AsyncConnection, workspace: Workspace, channel: str, text: str | None, user: str
    ) -> RubricVersion:
        """Record the channel's next rubric version inside the caller's transaction."""
        await transaction_lock(connection, f"rubric-version:{lock_scope(workspace)}:{channel}")
        table = channel_rubric_versions
        latest = await connection.scalar(
            select(func.max(table.c.version)).where(*in_channel(table, workspace, channel))
        )
        version = RubricVersion(
            version=(latest or 0) + 1, rubric_text=text, set_by=user, created_at=utc_now()
        )
        await connection.execute(
            insert(table).values(**workspace_columns(workspace), channel=channel, **asdict(version))
        )
        return version


CHANNEL_RUBRIC = select(channel_rubrics.c.rubric_text).where(*bound(channel_rubrics, *CHANNEL_KEYS))

CHANNEL_RUBRIC_VERSIONED = select(
    channel_rubrics.c.rubric_text,
    select(func.max(channel_rubric_versions.c.version))
    .where(
        *(channel_rubric_versions.c[key] == channel_rubrics.c[key] for key in CHANNEL_KEYS),
        channel_rubric_versions.c.rubric_text == channel_rubrics.c.rubric_text,
    )
    .scalar_subquery(),
).where(*bound(channel_rubrics, *CHANNEL_KEYS))
"""The channel's default rubric and the latest number of the versions that set its text (see
`version_numbered`), in one query."""


def version_numbered(workspace: Workspace, channel: str, rubric_text: str) -> Any:
    """The latest number of the channel's rubric versions that set ``rubric_text`` (NULL when none
    did: a thread's own rubric)."""
    table = channel_rubric_versions
    return select(func.max(table.c.version)).where(
        *in_channel(table, workspace, channel), table.c.rubric_text == rubric_text
    )
