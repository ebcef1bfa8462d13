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
    replay_summary: str | None = None
    """The replay the change was applied after, in one line, or that it was skipped; None where no
    replay was possible (no trusted reviews) or before replays were kept (`bot.proposals`)."""


class StaleVersion(Exception):
    """A change made against a version of the channel's rubric that is no longer the latest."""

    def __init__(self, latest: int) -> None:
        super().__init__(f"the channel's rubric is at version {latest} now")
        self.latest = latest


_VERSION_COLUMNS = [channel_rubric_versions.c[name] for name in RubricVersion.__dataclass_fields__]
"""The channel_rubric_versions columns read into a RubricVersion."""


class RubricStore(StoreBase):
    """Each channel's default rubric and its versions."""

    async def set_channel_rubric(
        self,
        workspace: Workspace,
        channel: str,
        text: str,
        user: str,
        *,
        replay_summary: str | None = None,
        after_version: int | None = None,
    ) -> RubricVersion:
        """Set (or replace) the channel's default rubric for new conversations; the version recorded,
        with `replay_summary`. With `after_version`, only if that is still the latest version (0: none
        yet): else `StaleVersion`, nothing changed."""
        async with self._write() as connection:
            if after_version is not None:
                latest = await self._latest_version(connection, workspace, channel)
                if latest != after_version:
                    raise StaleVersion(latest)
            await self._put_channel_row(
                channel_rubrics,
                workspace,
                channel,
                {"rubric_text": text, "set_by": user, "updated_at": utc_now()},
                connection,
            )
            return await self._add_rubric_version(connection, workspace, channel, text, user, replay_summary)

    async def latest_rubric_version(self, workspace: Workspace, channel: str) -> int:
        """The number of the channel's latest rubric version; 0 when its rubric was never set."""
        table = channel_rubric_versions
        query = select(func.max(table.c.version)).where(*in_channel(table, workspace, channel))
        return await self._scalar(query) or 0

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

    async def _latest_version(self, connection: AsyncConnection, workspace: Workspace, channel: str) -> int:
        """The channel's latest rubric version (0: none), under the lock of its versions, held until
        the caller's transaction ends."""
        await transaction_lock(connection, f"rubric-version:{lock_scope(workspace)}:{channel}")
        table = channel_rubric_versions
        latest = await connection.scalar(
            select(func.max(table.c.version)).where(*in_channel(table, workspace, channel))
        )
        return latest or 0

    async def _add_rubric_version(
        self,
        connection: AsyncConnection,
        workspace: Workspace,
        channel: str,
        text: str | None,
        user: str,
        replay_summary: str | None = None,
    ) -> RubricVersion:
        """Record the channel's next rubric version inside the caller's transaction."""
        latest = await self._latest_version(connection, workspace, channel)
        version = RubricVersion(
            version=latest + 1,
            rubric_text=text,
            set_by=user,
            created_at=utc_now(),
            replay_summary=replay_summary,
        )
        await connection.execute(
            insert(channel_rubric_versions).values(
                **workspace_columns(workspace), channel=channel, **asdict(version)
            )
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
