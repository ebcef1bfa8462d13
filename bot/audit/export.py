"""The audits as `rubric-bot export` writes them: each exported row's ``audit`` key.

The export (one object per iteration and criterion) looks its run's audit up here by the engine's
run id (``grading_run_id``); a run without a finished audit exports ``null``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from bot.db.audits import AuditVerdict
from bot.db.store import Store
from bot.workspaces.workspace import Tenant


class ExportedAudit(TypedDict):
    """The ``audit`` key of an exported row: the audit model as it answered, its verdict and reason."""

    model: str
    verdict: AuditVerdict
    reason: str


async def audits_by_run(
    store: Store, workspace: Tenant | None, channel: str | None, since: datetime | None = None
) -> dict[str, ExportedAudit]:
    """The finished audits of a workspace (None: every one) and channel (None: every one) made from
    ``since`` on, by ``grading_run_id``."""
    return {
        row.grading_run_id: ExportedAudit(model=row.model, verdict=row.verdict, reason=row.reason)
        for row in await store.audits_in_channel(workspace, channel, since)
    }
