"""Auditing a finished run: its final answer graded again, once, by the audit model.

The audit grader sees the request (with the material shared for it) and the final answer only:
none of the loop's drafts, feedback or calibration (`grading.agrade_answer`). Its verdict is stored
with its provenance (the model as it answered, the hash of its instructions), and its tokens and
their cost at the audit model's rate count with the run's: in usage, the run's cost, the daily
budgets (reserved before the call, settled after it: `bot.audit.budget`) and the token and cost
metrics, as the audit role. Nothing is posted in the thread, and the run's outcome stays what the
loop's grader made it. A failing audit grader is recorded as an ``error`` audit and logged; a spent
budget skips the audit (logged and counted); the run is not affected either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage

from bot.audit.budget import AuditBudget, estimated_tokens
from bot.audit.selection import is_audited
from bot.db.audits import AuditResult, AuditStart, AuditVerdict
from bot.db.spend import QuotaExceeded
from bot.db.store import Store
from bot.limits.prices import role_usage
from bot.limits.quota import LimitsOf
from bot.ops import metrics
from bot.vocabulary.thread import ThreadKey
from grading import RubricEvaluation, TranscriptGrader, agrade_answer

logger = logging.getLogger(__name__)

AUDITED_STATUSES = frozenset({"satisfied", "max_iterations_reached"})
"""How a run must have ended to be audited: with a final answer the loop's grader judged."""

VERDICTS: dict[str, AuditVerdict] = {"satisfied": "pass", "needs_revision": "fail"}
"""The audit's verdict by the audit grader's result; any other result (a grader error, a rubric it
could not evaluate) is an ``error`` audit."""


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended with a graded answer: where, how, and what the audit grader is shown."""

    run_id: int
    thread: ThreadKey
    status: str
    evaluations: Sequence[RubricEvaluation]
    rubric: str
    messages: Sequence[AnyMessage]
    answer: str


class Auditor:
    """Audits `share` of finished runs with `model`, whose model string is `model_name` (see `bot.audit`)."""

    def __init__(
        self,
        store: Store,
        model: str | BaseChatModel,
        model_name: str,
        share: float,
        limits: LimitsOf | None = None,
    ) -> None:
        """`limits` gives a workspace's daily limits, whose budgets audits spend from (None: none
        caps them; their spend is counted all the same)."""
        self._store = store
        self._grader = TranscriptGrader(model)
        self._model = model_name
        self._share = share
        self._budget = AuditBudget(store, model_name, limits)

    def wants(self, run_id: int, status: str | None) -> bool:
        """Whether the run, having ended with `status`, is one to audit."""
        return status in AUDITED_STATUSES and is_audited(run_id, self._share)

    async def audit(self, run: FinishedRun) -> AuditVerdict | None:
        """Audit `run` unless it was audited before (None then, when it has no evaluation, or when a
        daily budget it spends from is spent: the audit is skipped)."""
        if not run.evaluations or not self.wants(run.run_id, run.status):
            return None
        shown = [run.rubric, run.answer, *(str(message.content) for message in run.messages)]
        reserved = await self._budget.reserve(
            run.run_id, run.thread.workspace, estimated_tokens(run.evaluations, shown)
        )
        if isinstance(reserved, QuotaExceeded):
            logger.info("audit of run %d skipped: the daily %s limit is reached", run.run_id, reserved.quota)
            metrics.audit_skipped()
            return None
        try:
            result = await self._grade(run)
        except BaseException:  # never made: its reservation is given back, even while cancelled
            await asyncio.shield(self._store.release_audit(run.run_id, reserved))
            raise
        if result is None:
            await self._store.release_audit(run.run_id, reserved)
            return None
        await self._store.finish_audit(run.run_id, result, reserved)
        metrics.audit_finished(
            result.verdict,
            loop_passed=run.status == "satisfied",
            iterations=len(run.evaluations),
            cost=result.cost,
        )
        return result.verdict

    async def _grade(self, run: FinishedRun) -> AuditResult | None:
        """The audit grader's result on `run`; None when it was audited before (a run is audited once)."""
        loop_passed = run.status == "satisfied"
        iterations = len(run.evaluations)
        start = AuditStart(
            run.run_id,
            run.thread.team,
            run.thread.channel,
            run.thread.thread_ts,
            run.evaluations[-1]["grading_run_id"],
            iterations,
            loop_passed,
            self._model,
            run.thread.enterprise,
        )
        if not await self._store.start_audit(start):
            return None
        evaluation = await agrade_answer(self._grader, run.rubric, run.messages, run.answer)
        result = _result(evaluation, self._model)
        if result.verdict == "error":
            logger.warning("audit of run %d: the audit grader failed", run.run_id)
        return result


def _result(evaluation: RubricEvaluation, asked: str) -> AuditResult:
    """The audit's result from the audit grader's evaluation, its tokens priced at the rate of the
    model `asked` for (the ``provider:model`` string the price table knows)."""
    provenance: dict[str, Any] = dict(evaluation.get("provenance") or {})
    verdict: AuditVerdict = VERDICTS.get(evaluation["result"], "error")
    usage = evaluation["usage"]
    return AuditResult(
        verdict=verdict,
        reason=evaluation["explanation"],
        model=provenance.get("grader_model") or asked,
        prompt_hash=provenance.get("grader_prompt_hash"),
        evaluation=dict(evaluation),
        tokens=usage["total_tokens"] if usage else None,
        cost=role_usage(asked, usage) if usage else None,
    )
