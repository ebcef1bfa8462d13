"""Workspace settings in the store, on SQLite and PostgreSQL: kept per (enterprise, team), replaced
whole, and deleted with the team's data."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.lifecycle.erase import Scope, purge
from bot.vocabulary.workspace import Workspace

SAVED_AT = datetime(2026, 5, 4, 9, 30, 15, 123456, tzinfo=UTC)
ROW = WorkspaceSettingsRow(
    worker_model="openai:gpt-4.1",
    grader_model=None,
    daily_requests_per_user=20,
    daily_tokens_per_channel=None,
    rubric_editors=("U0ADA", "S0LEADS"),
    updated_by="UADMIN",
    updated_at=SAVED_AT,
    grader_samples=3,
)


async def test_settings_read_back_as_saved_and_only_for_their_workspace(store):
    await store.save_workspace_settings(Workspace("T1"), ROW)

    assert await store.workspace_settings(Workspace("T1")) == ROW
    assert await store.workspace_settings(Workspace("T2")) is None
    assert (
        await store.workspace_settings(Workspace("T1", "E1")) is None
    )  # the same team id in a Grid org is another


async def test_a_save_replaces_every_setting_and_who_saved_it(store):
    await store.save_workspace_settings(Workspace("T1", "E1"), ROW)
    later = WorkspaceSettingsRow(None, "openai:gpt-4o", None, 5000, None, "UOWNER", SAVED_AT)

    await store.save_workspace_settings(Workspace("T1", "E1"), later)

    assert await store.workspace_settings(Workspace("T1", "E1")) == later


async def test_purging_a_team_deletes_its_settings_and_no_others(store):
    await store.save_workspace_settings(Workspace("T1"), ROW)
    await store.save_workspace_settings(Workspace("T2"), ROW)

    erased = await purge(store, None, Scope(tenant=Workspace("T1")))

    assert erased["workspace settings"] == 1
    assert await store.workspace_settings(Workspace("T1")) is None
    assert await store.workspace_settings(Workspace("T2")) == ROW
