"""Audits in the database: started once per run, finished with their tokens and money counted with
the run's (reserved from the day's budgets first), read for the report and the export, and erased
with their thread; on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import UsageMetadata
from prometheus_client import REGISTRY

from bot.audit.auditor import Auditor, FinishedRun
from bot.audit.export import audits_by_run, exported_audit
from bot.audit.report import load_audit
from bot.db.audits import AuditResult, AuditStart
from bot.db.spend import Cap, RunQuota, Spender
from bot.limits.prices import RoleUsage, role_usage, run_cost
from bot.limits.quota import NO_LIMIT, DailyLimits
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
THREAD = ThreadKey("T1", "C1", "1.0")


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


def priced(model: str, tokens: int) -> RoleUsage:
    """`tokens` (a tenth of them output) priced at `model`'s list price."""
    output = tokens // 10
    return role_usage(
        model, UsageMetadata(input_tokens=tokens - output, output_tokens=output, total_tokens=tokens)
    )


async def test_an_audit_reserves_from_the_days_budgets_and_its_cost_counts_with_its_runs_everywhere(store):
    today = datetime.now(UTC).date()
    spender = Spender(today, T1, "C1", "U1")
    await store.add_thread(THREAD)
    run_id = await store.start_run(THREAD, "1.1", requester="U1")
    run = run_cost(
        {"worker": ("openai:gpt-4o-mini", {"input_tokens": 900, "output_tokens": 100, "total_tokens": 1000})}
    )
    await store.finish_run(run_id, "satisfied", 1000, cost=run)
    audit = priced("openai:gpt-4o", 2_000)
    assert audit.usd and run.usd

    reserved = RunQuota(today, estimate=5_000, estimate_usd=0.5)
    assert await store.reserve_audit(run_id, reserved) is None
    spent = await store.spent_today(spender)
    assert (spent["channel"].tokens, spent["channel"].usd) == (6_000, pytest.approx(run.usd + 0.5))
    await store.start_audit(AuditStart(run_id, "T1", "C1", "1.0", "grading-1", 1, True, "openai:gpt-4o"))
    result = AuditResult("pass", "Fine.", "gpt-4o-2024", None, {"result": "satisfied"}, 2_000, cost=audit)
    await store.finish_audit(run_id, result, reserved)

    # The reservation gave way to what the audit used, at the audit model's rate, on every level.
    spent = await store.spent_today(spender)
    for level in ("person", "channel", "workspace", "deployment"):
        assert (spent[level].tokens, spent[level].usd) == (3_000, pytest.approx(run.usd + audit.usd))
    (usage,) = await store.usage(T1, "C1", datetime.combine(today, datetime.min.time(), UTC))
    assert (usage.tokens, usage.usd, usage.unpriced) == (3_000, pytest.approx(run.usd + audit.usd), 0)
    tally = await store.cost_tally(T1, "C1")
    assert (tally.usd, tally.audit_usd, tally.audits) == (
        pytest.approx(run.usd + audit.usd),
        pytest.approx(audit.usd),
        1,
    )
    assert tally.grader_usd == 0  # the loop grader's share stays the loop grader's


async def test_an_audit_a_spent_budget_refuses_reserves_nothing_and_a_released_one_is_given_back(store):
    today = datetime.now(UTC).date()
    spender = Spender(today, T1, "C1")
    await store.add_thread(THREAD)
    run_id = await store.start_run(THREAD, "1.1")
    await store.finish_run(run_id, "satisfied", 100)
    capped = RunQuota(today, estimate=50, estimate_usd=0.01, caps={"channel": Cap(tokens=120)})

    assert await store.reserve_audit(run_id, capped) is None  # 100 spent: under the cap, reserved
    assert (await store.spent_today(spender))["channel"].tokens == 150
    refused = await store.reserve_audit(run_id, capped)
    assert refused is not None and refused.quota == "tokens"
    assert (await store.spent_today(spender))["channel"].tokens == 150  # nothing more reserved

    await store.release_audit(run_id, capped)
    spent = (await store.spent_today(spender))["channel"]
    assert (spent.tokens, spent.usd) == (100, pytest.approx(0.0))


async def test_an_audit_a_spent_budget_refuses_is_skipped_without_a_model_call_and_counted(store, caplog):
    await store.add_thread(THREAD)
    run_id = await store.start_run(THREAD, "1.1")
    await store.finish_run(run_id, "satisfied", 150)
    spent_channel = DailyLimits.of(NO_LIMIT, 120)  # the channel's 120 tokens a day: the run took 150

    async def limits(workspace: Workspace) -> DailyLimits:
        return spent_channel

    caplog.set_level(logging.INFO, "bot.audit.auditor")
    never = GenericFakeChatModel(messages=iter(()))  # fails if the audit grader were called
    auditor = Auditor(store, never, "openai:gpt-4o", 1.0, limits)
    evaluation = {"grading_run_id": "grading-1", "usage": None, "criteria": [], "result": "satisfied"}
    run = FinishedRun(run_id, THREAD, "satisfied", [evaluation], "- Is polite", [], "An answer.")  # type: ignore[list-item]
    skipped = REGISTRY.get_sample_value("rubric_bot_audits_skipped_total") or 0.0

    assert await auditor.audit(run) is None

    assert REGISTRY.get_sample_value("rubric_bot_audits_skipped_total") == skipped + 1
    assert f"audit of run {run_id} skipped: the daily tokens limit is reached" in caplog.text
    spent = (await store.spent_today(Spender(datetime.now(UTC).date(), T1, "C1")))["channel"]
    assert spent.tokens == 150  # nothing reserved
    # Never started: the run has no audit, and one could still be started for it.
    assert await store.audits_in_channel(T1, "C1") == []
    assert await store.start_audit(AuditStart(run_id, "T1", "C1", "1.0", "grading-1", 1, True, "m"))


async def test_the_report_reads_each_audited_runs_first_grade_and_the_graded_runs_by_iterations(store):
    results = {"g1": ["satisfied"], "g2": ["needs_revision", "satisfied"], "g3": ["needs_revision"] * 3}
    results["g4"] = ["needs_revision"] * 3 + ["satisfied"]
    for n, (grading_run, iterations) in enumerate(results.items()):
        for iteration, result in enumerate(iterations):
            shown = {"grading_run_id": grading_run, "iteration": iteration, "result": result, "criteria": []}
            await store.save_evaluation(THREAD, f"{n}.{iteration}", shown, "- Is polite")  # type: ignore[arg-type]
    other = {"grading_run_id": "elsewhere", "iteration": 0, "result": "satisfied", "criteria": []}
    await store.save_evaluation(ThreadKey("T1", "C2", "1.0"), "9.0", other, "- Is polite")  # type: ignore[arg-type]
    for run_id, grading_run in enumerate(("g1", "g2"), start=1):
        iterations = len(results[grading_run])
        await store.start_audit(AuditStart(run_id, "T1", "C1", "1.0", grading_run, iterations, True, "m"))
        await store.finish_audit(run_id, AuditResult("pass", "Fine.", "m", None, {}, None))

    assert await store.graded_runs_by_iterations(T1, "C1") == {1: 1, 2: 1, 3: 1, 4: 1}
    assert await store.graded_runs_by_iterations(T1, None) == {1: 2, 2: 1, 3: 1, 4: 1}
    assert [row.first_result for row in await store.audits_in_channel(T1, "C1")] == [
        "satisfied",
        "needs_revision",
    ]
    figures = await load_audit(store, workspace=T1, channel="C1", days=None)
    assert [(b.runs, b.audited) for b in figures.by_iterations.values()] == [(1, 1), (1, 1), (2, 0)]
    first = figures.first_grade
    assert (first.runs, first.agreed, first.first_failed, first.fixed) == (2, 1, 1, 1)
