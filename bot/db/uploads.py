"""Files the bot uploaded to Slack (`uploaded_files`): its agreement charts, recorded as they are
uploaded so that they can be deleted with the data they show (`bot.lifecycle.uploads` deletes them
from Slack), and the Home tab's found again while the report they were drawn from has not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import delete, select

from bot.db.base import StoreBase
from bot.db.schema import uploaded_files
from bot.db.scope import channel_columns, in_channel, in_scope, utc_now
from bot.vocabulary.workspace import Tenant, Workspace

UploadPurpose = Literal["home", "report", "replay"]
"""Which surface uploaded a chart: the Home tab, `/rubric report`, `/rubric replay`."""


@dataclass(frozen=True)
class UploadedFile:
    """A file the bot uploaded, and whose data it shows."""

    file_id: str
    workspace: Workspace
    channel: str
    purpose: UploadPurpose
    created_at: datetime


class UploadStore(StoreBase):
    """The `uploaded_files` part of `bot.db.store.Store`."""

    async def record_upload(
        self,
        workspace: Workspace,
        channel: str,
        file_id: str,
        purpose: UploadPurpose,
        digest: str | None = None,
    ) -> None:
        """Record the file `file_id` just uploaded about `channel`; `digest` names the report state a
        Home chart shows (see `home_chart`)."""
        row = {
            **channel_columns(workspace, channel),
            "file_id": file_id,
            "purpose": purpose,
            "digest": digest,
            "created_at": utc_now(),
        }
        async with self._write() as connection:
            await connection.execute(self._upsert(uploaded_files).values(row).on_conflict_do_nothing())

    async def home_chart(self, workspace: Workspace, channel: str, digest: str) -> str | None:
        """The id of the Home chart already uploaded for `channel`'s report in the state `digest`."""
        table = uploaded_files
        query = (
            select(table.c.file_id)
            .where(
                *in_channel(table, workspace, channel), table.c.purpose == "home", table.c.digest == digest
            )
            .limit(1)
        )
        return await self._scalar(query)

    async def uploads_in(
        self, workspace: Tenant | None, channel: str | None, *, before: datetime | None = None
    ) -> list[UploadedFile]:
        """The recorded uploads of a workspace (or org; None: every one) and channel (None: every
        one), only those uploaded before `before` when it is given, oldest first."""
        table = uploaded_files
        conditions = in_scope(table, workspace, channel, None)
        if before is not None:
            conditions.append(table.c.created_at < before)
        rows = await self._rows(
            select(table).where(*conditions).order_by(table.c.created_at, table.c.file_id)
        )
        return [
            UploadedFile(
                file_id=row.file_id,
                workspace=Workspace(row.team, row.enterprise),
                channel=row.channel,
                purpose=row.purpose,
                created_at=row.created_at,
            )
            for row in rows
        ]

    async def forget_uploads(self, file_ids: Sequence[str]) -> int:
        """Drop the records of `file_ids` (deleted from Slack, or given up on); how many there were."""
        if not file_ids:
            return 0
        async with self._write() as connection:
            result = await connection.execute(
                delete(uploaded_files).where(uploaded_files.c.file_id.in_(file_ids))
            )
        return int(result.rowcount)
