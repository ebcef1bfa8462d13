"""What each workspace's admins set over the deployment's defaults (`/rubric admin`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime
from functools import partial

from sqlalchemy import Connection, RowMapping, select

from bot.db.base import StoreBase
from bot.db.schema import workspace_settings
from bot.db.scope import WORKSPACE_KEYS, bound, workspace_columns
from bot.vocabulary.workspace import Workspace


@dataclass(frozen=True)
class WorkspaceSettingsRow:
    """What a workspace's admins set over the deployment's defaults (None: the deployment's), and
    who last changed it when."""

    worker_model: str | None
    grader_model: str | None
    daily_requests_per_user: int | None
    daily_tokens_per_channel: int | None
    rubric_editors: tuple[str, ...] | None
    updated_by: str
    updated_at: datetime
    daily_tokens_per_workspace: int | None = None
    grader_samples: int | None = None


class WorkspaceSettingsStore(StoreBase):
    """Each workspace's admin settings."""

    async def workspace_settings(self, workspace: Workspace) -> WorkspaceSettingsRow | None:
        """What the workspace's admins set (`/rubric admin`); None if they never did."""
        return await self.in_thread(partial(read_workspace_settings, workspace=workspace), writes=False)

    async def save_workspace_settings(self, workspace: Workspace, settings: WorkspaceSettingsRow) -> None:
        """Replace what the workspace's admins set, in one atomic upsert."""
        values = asdict(settings)
        if settings.rubric_editors is not None:
            values["rubric_editors"] = list(settings.rubric_editors)
        statement = self._upsert(workspace_settings).values(**workspace_columns(workspace), **values)
        statement = statement.on_conflict_do_update(
            index_elements=["enterprise", "team"], set_={name: statement.excluded[name] for name in values}
        )
        async with self._write() as connection:
            await connection.execute(statement)


def read_workspace_settings(connection: Connection, workspace: Workspace) -> WorkspaceSettingsRow | None:
    """What the workspace's admins set (`/rubric admin`); None if they never did (synchronous, like
    every statement of a claim)."""
    found = (connection.execute(_WORKSPACE_SETTINGS, workspace_columns(workspace))).mappings().first()
    return None if found is None else settings_of(found)


def settings_of(row: RowMapping) -> WorkspaceSettingsRow | None:
    """The settings in a row of the `workspace_settings` table (its columns may come with others,
    and all NULL where an outer join found no row: None)."""
    if row["updated_at"] is None:  # never NULL in a row that exists
        return None
    values = {field.name: row[field.name] for field in fields(WorkspaceSettingsRow)}
    editors = values.pop("rubric_editors")
    return WorkspaceSettingsRow(**values, rubric_editors=None if editors is None else tuple(editors))


_WORKSPACE_SETTINGS = select(workspace_settings).where(*bound(workspace_settings, *WORKSPACE_KEYS))
"""A workspace's settings row, the workspace bound by name (see `bot.db.scope.workspace_columns`)."""
