"""The audits as `rubric-bot export` writes them: each exported row's ``audit`` key.

The export (one object per iteration and criterion) looks its run's audit up here by the engine's
run id (``grading_run_id``); the rows of the run's last iteration (the final answer the audit graded)
carry it, every other row and a run without a finished audit export ``null``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from bot.db.audits import AuditRow, AuditVerdict
from bot.db.store import Store
from bot.vocabulary.workspace import Tenant


class ExportedAudit(TypedDict):
    """The ``audit`` key of an exported row: the audit model as it answered, its verdict and reason."""

    model: str
    verdict: AuditVerdict
    reason: str


async def audits_by_run(
    store: Store, workspace: Tenant | None, channel: str | None, since: datetime | None = None
) -> dict[str, AuditRow]:
    """The finished audits of a workspace (None: every one) and channel (None: every one) made from
    ``since`` on, by ``grading_run_id``: one per audited run, so few beside the rows exported."""
    return {row.grading_run_id: row for row in await store.audits_in_channel(workspace, channel, since)}


def exported_audit(audits: dict[str, AuditRow], grading_run_id: str, iteration: int) -> ExportedAudit | None:
    """The ``audit`` key of a row of this run and iteration: the audit graded the run's final answer,
    so only the rows of the run's last iteration carry it (None elsewhere and for unaudited runs).
    `iteration` is 0-based; the audit records how many iterations the run took."""
    audit = audits.get(grading_run_id)
    if audit is None or iteration != audit.iterations - 1:
        return None
    return ExportedAudit(model=audit.model, verdict=audit.verdict, reason=audit.reason)
