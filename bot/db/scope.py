"""Which workspace, channel and thread a row belongs to: the columns and conditions every part of
the store filters by (so workspaces sharing a database never see each other's rows), and the locks
named by them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Organization, Tenant, Workspace

WORKSPACE_KEYS = ("enterprise", "team")
"""The columns, and parameters, that say which workspace a row belongs to."""

CHANNEL_KEYS = (*WORKSPACE_KEYS, "channel")
"""The columns, and parameters, that say which channel a row belongs to."""


def bound(table: Any, *names: str) -> list[Any]:
    """Conditions that each named column of `table` equals the parameter of its name."""
    return [table.c[name] == bindparam(name) for name in names]


def workspace_columns(workspace: Workspace) -> dict[str, str]:
    """The columns that say which workspace a row belongs to."""
    return {"enterprise": workspace.enterprise, "team": workspace.team}


def channel_columns(workspace: Workspace, channel: str) -> dict[str, str]:
    """The columns that say which channel a row belongs to."""
    return {**workspace_columns(workspace), "channel": channel}


def thread_columns(thread: ThreadKey) -> dict[str, str]:
    """The columns that say which thread a row belongs to."""
    return {**workspace_columns(thread.workspace), "channel": thread.channel, "thread_ts": thread.thread_ts}


def in_scope(
    table: Any, workspace: Tenant | None, channel: str | None, since: datetime | None, time: Any = None
) -> list[Any]:
    """Conditions for rows of a workspace (or org) and channel made from ``since`` on; a None filter
    is left out.

    The time is the table's ``created_at`` unless another column is given (runs: ``started_at``).
    """
    conditions = []
    if workspace is not None:
        conditions += in_workspace(table, workspace)
    if channel is not None:
        conditions.append(table.c.channel == channel)
    if since is not None:
        conditions.append((table.c.created_at if time is None else time) >= since)
    return conditions


def in_workspace(table: Any, workspace: Tenant) -> list[Any]:
    """Conditions for a table's rows of one workspace (or of every workspace of an org)."""
    if isinstance(workspace, Organization):
        return [table.c.enterprise == workspace.enterprise]
    return [table.c.enterprise == workspace.enterprise, table.c.team == workspace.team]


def in_channel(table: Any, workspace: Workspace, channel: str) -> list[Any]:
    """Conditions for a table's rows of one channel of one workspace."""
    return [*in_workspace(table, workspace), table.c.channel == channel]


def in_thread(table: Any, thread: ThreadKey) -> list[Any]:
    """Conditions for a table's rows of one thread."""
    return [*in_channel(table, thread.workspace, thread.channel), table.c.thread_ts == thread.thread_ts]


def of_iteration(table: Any, grading_run_id: str, iteration: int) -> Any:
    return and_(table.c.grading_run_id == grading_run_id, table.c.iteration == iteration)


def lock_scope(workspace: Workspace) -> str:
    """How a lock's name says which workspace it is of."""
    return f"{workspace.enterprise}:{workspace.team}"


async def transaction_lock(connection: AsyncConnection, key: str) -> None:
    """Hold a lock named `key` until `connection`'s transaction ends: a PostgreSQL advisory lock; on
    SQLite the transaction already holds the database's write lock."""
    if connection.dialect.name == "postgresql":
        await connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
        )


def utc_now() -> datetime:
    return datetime.now(UTC)
