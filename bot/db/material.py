"""What each run's request shared (earlier thread messages, files), what of it was read and what not."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select

from bot.db.base import StoreBase
from bot.db.runs import RUN_UPDATE
from bot.db.schema import runs
from bot.db.scope import in_scope
from bot.vocabulary.unread import Unread
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class RunMaterial:
    """What a run's request shared, as the run read it: recorded when the run starts."""

    thread_messages: int
    """Earlier thread messages the worker got."""
    files_read: Sequence[str]
    files_unread: Sequence[Unread]
    """Files (and threads Slack refused to list) that were not read, with why."""


@dataclass(frozen=True)
class MaterialTally:
    """How much of what people shared with their requests the runs read."""

    runs: int
    """Runs whose request shared anything (earlier thread messages or files)."""
    thread_messages: int
    """Earlier thread messages the worker got, over those runs."""
    files_read: int
    files_unread: int
    """Files (and threads Slack refused to list) that were not read."""


class MaterialStore(StoreBase):
    """What the runs' requests shared and read."""

    async def record_material(
        self, run_id: int, thread_messages: int, files_read: Sequence[str], files_unread: Sequence[Unread]
    ) -> None:
        """Record what the run's request shared that was read (and what was not, with why)."""
        material = RunMaterial(thread_messages, files_read, files_unread)
        async with self._write() as connection:
            await connection.execute(RUN_UPDATE, material_values(run_id, material))

    async def unread_material(self, run_id: int) -> tuple[Unread, ...]:
        """What the run's request shared that was not read (none before the run read it)."""
        return unread_of(await self._scalar(unread_query(run_id)))

    async def material_tally(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> MaterialTally:
        """How much shared material the runs read (from ``since`` on; None filters match all)."""
        query = select(runs.c.thread_messages, runs.c.files_read, runs.c.files_unread).where(
            runs.c.thread_messages.is_not(None), *in_scope(runs, workspace, channel, since, runs.c.started_at)
        )
        rows = await self._rows(query)
        with_material = [row for row in rows if row.thread_messages or row.files_read or row.files_unread]
        return MaterialTally(
            runs=len(with_material),
            thread_messages=sum(row.thread_messages for row in with_material),
            files_read=sum(len(row.files_read or []) for row in with_material),
            files_unread=sum(len(row.files_unread or []) for row in with_material),
        )


def material_values(run_id: int, material: RunMaterial) -> dict[str, Any]:
    """The parameters of `RUN_UPDATE` recording what the run's request shared, read and not."""
    return {
        "of_run": run_id,
        "thread_messages": material.thread_messages,
        "files_read": list(material.files_read),
        "files_unread": [asdict(item) for item in material.files_unread],
    }


def unread_query(run_id: int) -> Select[Any]:
    """What the run recorded as shared but not read (a JSON list; null before the run read it)."""
    return select(runs.c.files_unread).where(runs.c.run_id == run_id)


def unread_of(stored: list[dict[str, str]] | None) -> tuple[Unread, ...]:
    return tuple(Unread(**item) for item in stored or [])
