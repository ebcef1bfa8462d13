"""Audits in the database: started once per run, finished with their tokens counted with the run's,
read for the report and the export, and erased with their thread; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.audit.export import audits_by_run, exported_audit
from bot.audit.report import load_audit
from bot.db.audits import AuditResult, AuditStart
from bot.db.spend import Spender
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
THREAD = ThreadKey("T1", "C1", "1.0")


@pytest.fixture
async def store(database_url):
    opened = await Store.open(database_url)
    yield opened
    await opened.close()


async def test_a_run_is_audited_once_its_tokens_count_with_the_runs_and_it_goes_with_its_thread(store):
    await store.add_thread(THREAD)
    run_id = await store.start_run(THREAD, "1.1")
    await store.finish_run(run_id, "satisfied", 100)
    start = AuditStart(run_id, "T1", "C1", "1.0", "grading-1", 2, True, "openai:audit")

    assert await store.start_audit(start)
    assert not await store.start_audit(start)  # once
    assert await store.audits_in_channel(T1, "C1") == []  # not finished yet: not reported
    result = AuditResult(
        "fail", "Not polite.", "audit-2026-01-01", "abc123", {"result": "needs_revision"}, 40
    )
    await store.finish_audit(run_id, result)

    (row,) = await store.audits_in_channel(T1, "C1")
    assert (row.verdict, row.reason, row.model, row.iterations, row.loop_passed) == (
        "fail",
        "Not polite.",
        "audit-2026-01-01",
        2,
        True,
    )
    (usage,) = await store.usage(T1, "C1", row.created_at.replace(hour=0, minute=0, second=0, microsecond=0))
    assert usage.tokens == 140  # the audit's tokens count with the run's
    spent = await store.spent_today(Spender(row.created_at.date(), T1, "C1"))
    assert spent["channel"].tokens == 140  # and towards the channel's daily budget
    figures = await load_audit(store, workspace=T1, channel="C1", days=None)
    assert (figures.overall.passed, figures.overall.failed_by_audit) == (1, 1)
    audits = await audits_by_run(store, T1, "C1")
    assert list(audits) == ["grading-1"]
    # The run took 2 iterations: its last (0-based 1) graded the final answer the audit graded.
    assert exported_audit(audits, "grading-1", 1) == {
        "model": "audit-2026-01-01",
        "verdict": "fail",
        "reason": "Not polite.",
    }
    assert exported_audit(audits, "grading-1", 0) is None
    assert await store.audits_in_channel(Workspace("T2"), "C1") == []

    erased = await store.erase_threads([THREAD], keep_verdicts=False)
    assert erased["audits"] == 1 and await store.audits_in_channel(T1, "C1") == []
