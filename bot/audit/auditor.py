"""Auditing a finished run: its final answer graded again, once, by the audit model.

The audit grader sees the request (with the material shared for it) and the final answer only:
none of the loop's drafts, feedback or calibration (`grading.agrade_answer`). Its verdict is stored
with its provenance (the model as it answered, the hash of its instructions) and its tokens count
with the run's, towards the channel's daily budget and the token metrics. Nothing is posted in the
thread, and the run's outcome stays what the loop's grader made it. A failing audit grader is
recorded as an ``error`` audit and logged; the run is not affected.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage

from bot.audit.selection import is_audited
from bot.db.audits import AuditResult, AuditStart, AuditVerdict
from bot.db.store import Store
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

    def __init__(self, store: Store, model: str | BaseChatModel, model_name: str, share: float) -> None:
        self._store = store
        self._grader = TranscriptGrader(model)
        self._model = model_name
        self._share = share

    def wants(self, run_id: int, status: str | None) -> bool:
        """Whether the run, having ended with `status`, is one to audit."""
        return status in AUDITED_STATUSES and is_audited(run_id, self._share)

    async def audit(self, run: FinishedRun) -> AuditVerdict | None:
        """Audit `run` unless it was audited before (None then, or when it has no evaluation)."""
        if not run.evaluations or not self.wants(run.run_id, run.status):
            return None
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
        await self._store.finish_audit(run.run_id, result)
        metrics.audit_finished(
            result.verdict, loop_passed=loop_passed, iterations=iterations, tokens=result.tokens
        )
        return result.verdict


def _result(evaluation: RubricEvaluation, asked: str) -> AuditResult:
    """The audit's result from the audit grader's evaluation."""
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
    )
